package policies

import (
	"context"

	"github.com/clearancehq/clearance/policy"
)

// InstalledStarter is the answer to InstallStarter.
type InstalledStarter struct {
	// Installed is true when this call published the starter policy.
	Installed bool `json:"installed"`
	// PolicyVersion is the org's active version afterwards.
	PolicyVersion string `json:"policy_version"`
}

// InstallStarter publishes and activates the starter policy (SHADOW mode)
// for an org that has published no version of its own, and does nothing
// otherwise: it never replaces an org's policy, and calling it again (or
// twice at once) installs it once.
func (s *Service) InstallStarter(ctx context.Context, orgID string) (InstalledStarter, error) {
	// The "no version yet" check and the publication are one transaction:
	// an org that publishes its own meanwhile keeps it.
	p, err := s.publish(ctx, orgID, policy.StarterJSON(), true, true)
	if err != nil {
		return InstalledStarter{}, err
	}
	if p.Created {
		return InstalledStarter{Installed: true, PolicyVersion: p.Version}, nil
	}
	r, err := s.Resolve(ctx, orgID, "")
	if err != nil {
		return InstalledStarter{}, err
	}
	return InstalledStarter{PolicyVersion: r.Active.Snapshot().PolicyVersion}, nil
}
