package clearance

import (
	"context"

	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/core"
)

// Route names the entry point a decision came through (decide.Route).
type Route = decide.Route

// Entry points that evaluate decisions; all share one evaluation path.
const (
	RouteEvaluateDecision = decide.RouteEvaluateDecision
	RouteActionGate       = decide.RouteActionGate
	RouteCRMActionGate    = decide.RouteCRMActionGate
	RouteWorkspaceApp     = decide.RouteWorkspaceApp
	RouteCloudAgentVerify = decide.RouteCloudAgentVerify
	// RouteEnforceAndBind is the entry point of signed execution intents.
	RouteEnforceAndBind = decide.RouteEnforceAndBind
	// RouteUCPCheckout is the authorization of a UCP checkout completion.
	RouteUCPCheckout = decide.RouteUCPCheckout
)

// EvaluateRequest is one decision to make (decide.EvaluateRequest).
type EvaluateRequest = decide.EvaluateRequest

// Decision is the answer to an EvaluateRequest (decide.Decision).
type Decision = decide.Decision

// Dossier is the stored evidence of one decision (its canonical JSON is the
// dossier body; its SHA-256 is the payload_digest of its ledger entry).
type Dossier = dossier.Body

// DossierActor records who asked: the credential, and the acting party the
// request named.
type DossierActor = dossier.Actor

// DossierApproval is the verified approval a decision was evaluated with.
type DossierApproval = dossier.Approval

// MaxKeyLength bounds Idempotency-Key and correlation ids.
const MaxKeyLength = core.MaxKeyLength

// ValidToken is the one rule of the tokens a client names things with:
// Idempotency-Key, correlation and request ids, and an intent's intent_id,
// nonce and concurrency_scope (see core.ValidToken).
func ValidToken(s string) bool { return core.ValidToken(s) }

// Evaluate makes one decision (see decide.Service.Evaluate).
func (e *Engine) Evaluate(ctx context.Context, req EvaluateRequest) (Decision, error) {
	return e.Decide.Evaluate(ctx, req)
}
