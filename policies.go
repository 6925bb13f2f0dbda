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

// stillActive is policies.StillActive, for the claim's transaction.
func stillActive(ctx context.Context, tx store.Tx, version string) error {
	return policies.StillActive(ctx, tx, version)
}
