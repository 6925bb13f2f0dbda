package evidence

import (
	"context"
	"github.com/clearancehq/clearance/capsule"

	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
)

// Audit is what the evidence needs of the org's ledger (the audit
// feature): the signing key of checkpoints and the anchor of an entry in a
// signed checkpoint.
type Audit interface {
	LedgerKey() (*ledger.Key, error)
	LedgerAnchor(ctx context.Context, orgID string, seq uint64) (ledger.Anchor, error)
	LedgerOrigin(orgID string) string
}

// Config is what the evidence feature needs beside the kernel.
type Config struct {
	Audit Audit
	// ProducerKey signs the COSE producer envelopes of capsules; the zero
	// Key means the active grant key.
	ProducerKey grant.Key
	// Escalation reads the managed escalation a decision opened, as its
	// capsules show it (the escalation feature); nil: capsules show none.
	Escalation func(ctx context.Context, orgID, escalationID string) (capsule.Escalation, error)
}

// Service reads and extends the evidence of decisions. Create it with New.
type Service struct {
	d   core.Deps
	cfg Config
}

// New returns the evidence feature over the kernel d.
func New(d core.Deps, cfg Config) *Service { return &Service{d: d, cfg: cfg} }
