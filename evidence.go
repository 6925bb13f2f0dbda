package clearance

import (
	"context"

	"github.com/clearancehq/clearance/capsule"
	"github.com/clearancehq/clearance/evidence"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/proof"
)

// Types of the evidence of decisions (package evidence).
type (
	DossierRecord      = evidence.DossierRecord
	ShadowReport       = evidence.ShadowReport
	WorkflowShadow     = evidence.WorkflowShadow
	Window             = evidence.Window
	DecisionChain      = evidence.DecisionChain
	Capsules           = evidence.Capsules
	ProducerEnvelope   = evidence.ProducerEnvelope
	OverrideResolution = evidence.OverrideResolution
	OverrideActor      = evidence.OverrideActor
	OverrideRequest    = evidence.OverrideRequest
	Override           = evidence.Override
	OverrideTrail      = evidence.OverrideTrail
)

// Override resolutions.
const (
	OverrideApproved = evidence.OverrideApproved
	OverrideRejected = evidence.OverrideRejected
)

// Limits of the evidence.
const (
	MaxOverrideNote     = evidence.MaxOverrideNote
	MaxEvidenceItems    = evidence.MaxEvidenceItems
	DefaultShadowWindow = evidence.DefaultShadowWindow
	// CapsuleProfile names the capsule draft every export is pinned to.
	CapsuleProfile = evidence.CapsuleProfile
)

// Between is the window [from, to).
var Between = evidence.Between

// ReasonCodes lists the reason codes policies may use.
func ReasonCodes() []policy.ReasonCode { return policy.ReasonCodes() }

// Dossier forwards to Evidence.Dossier.
func (e *Engine) Dossier(ctx context.Context, orgID, dossierID string) (DossierRecord, error) {
	return e.Evidence.Dossier(ctx, orgID, dossierID)
}

// DossierByDecision forwards to Evidence.DossierByDecision.
func (e *Engine) DossierByDecision(ctx context.Context, orgID, decisionID string) (DossierRecord, error) {
	return e.Evidence.DossierByDecision(ctx, orgID, decisionID)
}

// ShadowReport forwards to Evidence.ShadowReport.
func (e *Engine) ShadowReport(ctx context.Context, orgID string, w Window) (ShadowReport, error) {
	return e.Evidence.ShadowReport(ctx, orgID, w)
}

// Chain forwards to Evidence.Chain.
func (e *Engine) Chain(ctx context.Context, orgID, chainID string) (DecisionChain, error) {
	return e.Evidence.Chain(ctx, orgID, chainID)
}

// ChainByEvaluation forwards to Evidence.ChainByEvaluation.
func (e *Engine) ChainByEvaluation(ctx context.Context, orgID, evaluationID string) (DecisionChain, error) {
	return e.Evidence.ChainByEvaluation(ctx, orgID, evaluationID)
}

// Capsules forwards to Evidence.Capsules.
func (e *Engine) Capsules(ctx context.Context, orgID, dossierID string) (Capsules, error) {
	return e.Evidence.Capsules(ctx, orgID, dossierID)
}

// ProducerEnvelopes forwards to Evidence.ProducerEnvelopes.
func (e *Engine) ProducerEnvelopes(ctx context.Context, orgID, dossierID string) (capsule.ID, []ProducerEnvelope, error) {
	return e.Evidence.ProducerEnvelopes(ctx, orgID, dossierID)
}

// ProofPacket forwards to Evidence.ProofPacket.
func (e *Engine) ProofPacket(ctx context.Context, orgID, dossierID string) (proof.Packet, error) {
	return e.Evidence.ProofPacket(ctx, orgID, dossierID)
}

// RecordOverride forwards to Evidence.RecordOverride.
func (e *Engine) RecordOverride(ctx context.Context, req OverrideRequest) (Override, error) {
	return e.Evidence.RecordOverride(ctx, req)
}

// Overrides forwards to Evidence.Overrides.
func (e *Engine) Overrides(ctx context.Context, orgID, dossierID string) (OverrideTrail, error) {
	return e.Evidence.Overrides(ctx, orgID, dossierID)
}
