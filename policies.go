package clearance

import (
	"context"

	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/policies"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
)

// BundleInfo describes a published bundle version.
type BundleInfo = policies.BundleInfo

// Published is the result of PublishBundle and StageBundle.
type Published = policies.Published

// PolicyActivation is the org's active policy version as ActivateBundle
// left it.
type PolicyActivation = policies.PolicyActivation

// ActivateRequest asks ActivateBundle to make a version the org's active
// policy.
type ActivateRequest = policies.ActivateRequest

// stillActive is policies.StillActive, for the claim's transaction.
func stillActive(ctx context.Context, tx store.Tx, version string) error {
	return policies.StillActive(ctx, tx, version)
}

// Draft is a policy bundle being written, never evaluated in production.
type Draft = policies.Draft

// DraftRequest creates or replaces a draft (Policies.PutDraft).
type DraftRequest = policies.DraftRequest

// DraftValidation is a draft that compiles (Policies.ValidateDraft).
type DraftValidation = policies.DraftValidation

// PromoteRequest publishes a draft as a version (Policies.PromoteDraft).
type PromoteRequest = policies.PromoteRequest

// Promotion is what Policies.PromoteDraft did.
type Promotion = policies.Promotion

// PolicyComparison is a diff of two bundles (Policies.Diff).
type PolicyComparison = policies.Comparison

// PolicyCandidate names a draft or a version to evaluate instead of the
// active policy (dry runs, replays, explanations).
type PolicyCandidate = policies.Candidate

// Replay is a replay of a candidate over recorded decisions
// (Policies.StartReplay).
type Replay = policies.Replay

// ReplayResult is what a replay found.
type ReplayResult = policies.ReplayResult

// Replay states.
const (
	ReplayQueued  = policies.ReplayQueued
	ReplayRunning = policies.ReplayRunning
	ReplayDone    = policies.ReplayDone
	ReplayFailed  = policies.ReplayFailed
)

// Reproduction is a dossier's decision evaluated again under its recorded
// policy (Policies.Reproduce).
type Reproduction = policies.Reproduction

// DossierExplanation explains a recorded decision (Policies.ExplainDossier).
type DossierExplanation = policies.DossierExplanation

// DryRunRequest is an evaluation that records nothing (Engine.DryRun).
type DryRunRequest = decide.DryRunRequest

// DryRun is the answer of a dry run: marked, never authorizing.
type DryRun = decide.DryRun

// DryRun evaluates a decision request without recording anything, under
// the org's policy resolution or, with cand, under one of its drafts or
// versions (then always SHADOW). It never authorizes.
func (e *Engine) DryRun(ctx context.Context, req DryRunRequest, cand *PolicyCandidate) (DryRun, error) {
	if cand != nil {
		c := *cand
		req.Policy = func(ctx context.Context, orgID string) (*policy.Compiled, error) {
			return e.Policies.Compile(ctx, orgID, c)
		}
	}
	return e.Decide.DryRun(ctx, req)
}
