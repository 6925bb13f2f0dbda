package clearance

import (
	"context"

	"github.com/clearancehq/clearance/policies"
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

// PublishBundle forwards to Policies.PublishBundle.
func (e *Engine) PublishBundle(ctx context.Context, orgID string, raw []byte) (Published, error) {
	return e.Policies.PublishBundle(ctx, orgID, raw)
}

// StageBundle forwards to Policies.StageBundle.
func (e *Engine) StageBundle(ctx context.Context, orgID string, raw []byte) (Published, error) {
	return e.Policies.StageBundle(ctx, orgID, raw)
}

// ActivateBundle forwards to Policies.ActivateBundle.
func (e *Engine) ActivateBundle(ctx context.Context, req ActivateRequest) (PolicyActivation, error) {
	return e.Policies.ActivateBundle(ctx, req)
}

// Bundles forwards to Policies.Bundles.
func (e *Engine) Bundles(ctx context.Context, orgID string) ([]BundleInfo, error) {
	return e.Policies.Bundles(ctx, orgID)
}

// Bundle forwards to Policies.Bundle.
func (e *Engine) Bundle(ctx context.Context, orgID, version string) (BundleInfo, error) {
	return e.Policies.Bundle(ctx, orgID, version)
}

// stillActive is policies.StillActive, for the claim's transaction.
func stillActive(ctx context.Context, tx store.Tx, version string) error {
	return policies.StillActive(ctx, tx, version)
}
