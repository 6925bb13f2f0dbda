package evidence_test

import (
	"bytes"
	"context"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/evidence"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// decided is an org with one gate decision recorded: a 12,000 payment,
// which the starter policy BLOCKs in SHADOW.
type decided struct {
	evidence *evidence.Service
	// verifierKey is the ledger verifier key an auditor is handed.
	verifierKey string
	orgID       string
	decision    decide.Decision
	close       func()
}

// newDecided opens an engine over an in-memory Pebble store, with a ledger
// key from a fixed seed and a fixed clock so that the output of the
// examples is the same on every run, and records the decision.
func newDecided(ctx context.Context) (*decided, error) {
	backend, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		return nil, err
	}
	x := &decided{close: func() { _ = backend.Close() }}
	if err := x.record(ctx, backend); err != nil {
		x.close()
		return nil, err
	}
	return x, nil
}

func (x *decided) record(ctx context.Context, backend *pebblestore.Store) error {
	key, err := ledger.GenerateKey(bytes.NewReader(make([]byte, 32)), "clearance.example/ledger")
	if err != nil {
		return err
	}
	now := func() time.Time { return time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC) }
	engine, err := clearance.Open(backend, clearance.Options{Now: now, LedgerKey: key})
	if err != nil {
		return err
	}
	x.evidence, x.verifierKey = engine.Evidence, engine.Audit.LedgerVerifierKey()
	org, err := engine.Admin.CreateOrg(ctx, "Acme")
	if err != nil {
		return err
	}
	x.orgID = org.Org.ID
	x.decision, err = engine.Decide.Evaluate(ctx, decide.EvaluateRequest{OrgID: x.orgID, Route: decide.RouteActionGate,
		Body: []byte(`{"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":12000}`)})
	if err != nil {
		return err
	}
	// A proof packet anchors the entry in a stored checkpoint: the sealer
	// of Engine.Run signs one within a second; here it is signed at once.
	_, err = engine.Audit.SealLedger(ctx, x.orgID)
	return err
}
