package audit

import (
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
)

// Service answers for the ledgers of every org of one engine.
type Service struct {
	d core.Deps
}

// New returns the Service over d; d.LedgerKey signs the checkpoints.
func New(d core.Deps) *Service { return &Service{d: d} }

// LedgerVerifierKey is the C2SP note verifier key of the org checkpoints
// ("" when no ledger key is configured). Auditors verify checkpoints with it.
func (s *Service) LedgerVerifierKey() string {
	if s.d.LedgerKey == nil {
		return ""
	}
	return s.d.LedgerKey.VerifierKey()
}

// LedgerOrigin is the origin line of the org's checkpoints.
func (s *Service) LedgerOrigin(orgID string) string { return ledger.Origin(s.d.Issuer, orgID) }

// LedgerKey returns the key that signs checkpoints, or
// LEDGER_KEY_NOT_CONFIGURED (503) when there is none: what else signs with
// it (a proof packet) refuses the same way.
func (s *Service) LedgerKey() (*ledger.Key, error) {
	if s.d.LedgerKey == nil {
		return nil, core.New(core.ErrUnavailable, CodeLedgerKeyNotConfigured, "no ledger key is configured, so checkpoints cannot be signed")
	}
	return s.d.LedgerKey, nil
}
