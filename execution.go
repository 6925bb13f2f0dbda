package clearance

import (
	"context"
	"time"

	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/execution"
	"github.com/clearancehq/clearance/internal/core"
)

// Defaults of the execution lifecycle.
const (
	DefaultGrantTTL   = 120 * time.Second
	DefaultClaimLease = 30 * time.Second
	DefaultIssuer     = "clearance"
)

// Codes of the execution routes.
const (
	CodeIntentMalformed     = decide.CodeIntentMalformed
	CodeIntentSignature     = decide.CodeIntentSignature
	CodeIntentNotCanonical  = decide.CodeIntentNotCanonical
	CodeIntentIDMismatch    = decide.CodeIntentIDMismatch
	CodeIntentAlreadyBound  = decide.CodeIntentAlreadyBound
	CodeApprovalUnverified  = decide.CodeApprovalUnverified
	CodeGrantInvalid        = execution.CodeGrantInvalid
	CodeGrantExpired        = execution.CodeGrantExpired
	CodeGrantNotBound       = execution.CodeGrantNotBound
	CodeBindingMismatch     = execution.CodeBindingMismatch
	CodeGrantAlreadyClaimed = execution.CodeGrantAlreadyClaimed
	CodeStaleAuthorization  = core.CodeStaleAuthorization
	CodeDossierMismatch     = execution.CodeDossierMismatch
	CodeInvalidFinalization = execution.CodeInvalidFinalization
	CodeInvalidEvidence     = execution.CodeInvalidEvidence
	CodeIntentStale         = decide.CodeIntentStale
	CodeIntentNotYetValid   = decide.CodeIntentNotYetValid
)

// ExecutionIntent is the payload of a signed execution intent (DESIGN §8).
type ExecutionIntent = decide.ExecutionIntent

// Escalation says how an ESCALATE answer is handled.
type Escalation = decide.Escalation

// Escalation modes.
const (
	EscalationNone    = decide.EscalationNone
	EscalationManaged = decide.EscalationManaged
)

// AuthorityRequest is an enforce-and-bind call.
type AuthorityRequest = decide.AuthorityRequest

// AuthorityDecision is the enforce-and-bind answer.
type AuthorityDecision = decide.AuthorityDecision

// EnforceAndBind binds a single-use grant to a signed execution intent
// (see decide.Service.EnforceAndBind).
func (e *Engine) EnforceAndBind(ctx context.Context, req AuthorityRequest) (AuthorityDecision, error) {
	return e.Decide.EnforceAndBind(ctx, req)
}

var grantRecordOf = decide.GrantRecordOf

// Types of the execution lifecycle (package execution).
type (
	GrantStatus      = execution.GrantStatus
	ClaimRequest     = execution.ClaimRequest
	ClaimResult      = execution.ClaimResult
	FinalizeRequest  = execution.FinalizeRequest
	FinalizeResult   = execution.FinalizeResult
	FinalizeRefused  = execution.FinalizeRefused
	EffectEvidence   = execution.EffectEvidence
	EffectReceipt    = execution.EffectReceipt
	ReconcileRequest = execution.ReconcileRequest
	DispatchRequest  = execution.DispatchRequest
	Dispatch         = execution.Dispatch
	DispatchList     = execution.DispatchList
)

// MaxDispatchTarget bounds a dispatch's target, in bytes.
const MaxDispatchTarget = execution.MaxDispatchTarget

// VerifyGrant forwards to Execution.VerifyGrant (the hot path).
func (e *Engine) VerifyGrant(ctx context.Context, orgID, token, intentHash string) (GrantStatus, error) {
	return e.Execution.VerifyGrant(ctx, orgID, token, intentHash)
}

// Claim forwards to Execution.Claim (the hot path).
func (e *Engine) Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error) {
	return e.Execution.Claim(ctx, req)
}

// Finalize forwards to Execution.Finalize (the hot path).
func (e *Engine) Finalize(ctx context.Context, req FinalizeRequest) (FinalizeResult, error) {
	return e.Execution.Finalize(ctx, req)
}
