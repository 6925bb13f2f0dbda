package storetest

import (
	"testing"
	"time"

	"github.com/clearancehq/clearance/artifact/artifacttest"
	"github.com/clearancehq/clearance/claim/claimtest"
	"github.com/clearancehq/clearance/dossier/dossiertest"
	"github.com/clearancehq/clearance/idempotency/idempotencytest"
	"github.com/clearancehq/clearance/jobs/jobstest"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/ledger/ledgertest"
	"github.com/clearancehq/clearance/outbox/outboxtest"
	"github.com/clearancehq/clearance/store"
)

// Harness is what a backend gives All: a way to open a fresh backend and
// the hooks some suites use to tamper with stored records behind the
// backend's back.
type Harness struct {
	// Open returns a fresh, empty backend whose store clock (Tx.Now) is
	// now, or the backend's own clock when now is nil; the harness closes
	// it (for example with t.Cleanup), and Close must be idempotent.
	Open func(t *testing.T, now func() time.Time) store.Backend
	// Reopen closes b and opens the same data again on clock now (nil: the
	// backend's own): a restart. Optional; the jobs suite's restart test
	// needs it.
	Reopen func(t *testing.T, b store.Backend, now func() time.Time) store.Backend
	// Parallel runs the suites in parallel with each other (each suite
	// opens its own backends).
	Parallel bool

	// The ledger suite's hooks (ledgertest.Harness).
	OverwriteEntry   func(t *testing.T, b store.Backend, orgID string, seq uint64, e ledger.Entry)
	DeleteEntry      func(t *testing.T, b store.Backend, orgID string, seq uint64)
	SetHead          func(t *testing.T, b store.Backend, orgID string, h ledger.Head)
	DeleteCheckpoint func(t *testing.T, b store.Backend, orgID string, size uint64)
	// The claim suite's hook (claimtest.Harness).
	DeleteScope func(t *testing.T, b store.Backend, orgID, scope string)
}

// All runs every conformance suite a store.Backend must pass: this
// package's Run, ledgertest, dossiertest, claimtest, artifacttest,
// jobstest and outboxtest. A
// backend's tests call only All, so that a new suite added here reaches
// every backend at once.
func All(t *testing.T, h Harness) {
	if h.Open == nil {
		t.Fatal("storetest: Harness.Open is required")
	}
	open := func(t *testing.T) store.Backend { return h.Open(t, nil) }
	suites := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"Store", func(t *testing.T) { Run(t, open) }},
		{"Ledger", func(t *testing.T) {
			ledgertest.Run(t, ledgertest.Harness{Open: open, OverwriteEntry: h.OverwriteEntry, DeleteEntry: h.DeleteEntry,
				SetHead: h.SetHead, DeleteCheckpoint: h.DeleteCheckpoint})
		}},
		{"Dossier", func(t *testing.T) { dossiertest.Run(t, open) }},
		{"Claim", func(t *testing.T) { claimtest.Run(t, claimtest.Harness{Open: h.Open, DeleteScope: h.DeleteScope}) }},
		{"Artifact", func(t *testing.T) { artifacttest.Run(t, open) }},
		{"Idempotency", func(t *testing.T) { idempotencytest.Run(t, open) }},
		{"Jobs", func(t *testing.T) { jobstest.Run(t, jobstest.Harness{Open: h.Open, Reopen: h.Reopen}) }},
		{"Outbox", func(t *testing.T) { outboxtest.Run(t, open) }},
	}
	for _, s := range suites {
		t.Run(s.name, func(t *testing.T) {
			if h.Parallel {
				t.Parallel()
			}
			s.run(t)
		})
	}
}
