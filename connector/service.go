package connector

import (
	"context"

	"github.com/clearancehq/clearance/admin"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/onboarding"
	"github.com/clearancehq/clearance/policies"
	"github.com/clearancehq/clearance/webhook"
)

// Config is the features the connector orchestrates.
type Config struct {
	// Accounts resolves the owner's account session and its workspaces.
	Accounts *onboarding.Service
	// Admin issues and revokes the automation credentials.
	Admin *admin.Service
	// InstallStarter installs the starter policy (SHADOW) for an org with
	// no policy of its own, and does nothing otherwise.
	InstallStarter func(ctx context.Context, orgID string) (policies.InstalledStarter, error)
	// Webhooks delivers decision.resolved to the callback URLs.
	Webhooks *webhook.Service
}

// Service is the automation connector. Create it with New.
type Service struct {
	d   core.Deps
	cfg Config
}

// New returns the connector over d.
func New(d core.Deps, cfg Config) *Service { return &Service{d: d, cfg: cfg} }
