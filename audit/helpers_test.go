package audit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance/audit"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
	"github.com/clearancehq/clearance/tenant"
)

// t0 is the fixtures' clock: every record is written at it.
var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// fixedKey is a ledger key from a zero seed: its checkpoints are the same
// on every run.
func fixedKey() *ledger.Key {
	k, err := ledger.GenerateKey(bytes.NewReader(make([]byte, 32)), "clearance.example/ledger")
	if err != nil {
		panic(err)
	}
	return k
}

// openDeps returns the kernel services over an in-memory Pebble store; the
// caller closes the backend.
func openDeps(key *ledger.Key) (core.Deps, store.Backend) {
	b, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem(), Now: func() time.Time { return t0 }})
	if err != nil {
		panic(err)
	}
	return core.Deps{
		Store: core.NewStore(b), Clock: func() time.Time { return t0 }, IDs: core.IDs{Rand: bytes.NewReader(make([]byte, 1<<16))},
		Logger: slog.New(slog.DiscardHandler), Issuer: "clearance.example", LedgerKey: key,
	}, b
}

// createOrg writes an org with its ledger entry, as the admin feature does.
func createOrg(ctx context.Context, d core.Deps, orgID string) error {
	err := d.Store.UpdateNew(ctx, orgID, func(tx store.Tx) error {
		o := tenant.Org{ID: orgID, Name: "Acme", CreatedAt: t0}
		if err := tx.PutOrg(ctx, o); err != nil {
			return err
		}
		return core.AppendRecord(ctx, tx, ledger.KindOrgCreated, orgID, o, t0)
	})
	if err == nil {
		d.Store.KnowOrg(orgID)
	}
	return err
}

// recordDossier stores a dossier and the decision entry binding its digest
// in one transaction, as the decide feature does; it returns the entry's seq.
func recordDossier(ctx context.Context, d core.Deps, orgID, dossierID string, body []byte) (uint64, error) {
	var seq uint64
	err := d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		r := dossier.Stored{OrgID: orgID, DossierID: dossierID, DecisionID: dossierID, CreatedAt: t0,
			Outcome: "ALLOW", Mode: "SHADOW", WorkflowKey: "ap.invoice", DecisionType: "PAYMENT", Body: body}
		if err := tx.PutDossier(ctx, r); err != nil {
			return err
		}
		e, err := ledger.Append(ctx, tx, orgID, ledger.Record{Kind: ledger.KindDecision, SubjectID: dossierID, PayloadDigest: canon.Digest(body)}, t0)
		seq = e.Seq
		return err
	})
	return seq, err
}

// fixture is a Service over a fresh store holding one org.
type fixture struct {
	ctx context.Context
	d   core.Deps
	s   *audit.Service
	org string
}

const testOrg = "01941234-5678-7abc-8def-0123456789ab"

func newFixture(t *testing.T, key *ledger.Key) *fixture {
	t.Helper()
	d, b := openDeps(key)
	t.Cleanup(func() { b.Close() })
	f := &fixture{ctx: context.Background(), d: d, s: audit.New(d), org: testOrg}
	if err := createOrg(f.ctx, d, f.org); err != nil {
		t.Fatal(err)
	}
	return f
}

// decide records n dossiers and returns the seq of the last one's entry.
func (f *fixture) decide(t *testing.T, n int) uint64 {
	t.Helper()
	var seq uint64
	for i := 0; i < n; i++ {
		id, err := f.d.IDs.New()
		if err != nil {
			t.Fatal(err)
		}
		if seq, err = recordDossier(f.ctx, f.d, f.org, id, []byte(fmt.Sprintf(`{"n":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	return seq
}

// wantCode fails unless err is an *core.Error of kind with code.
func wantCode(t *testing.T, err error, kind error, code string) {
	t.Helper()
	var ce *core.Error
	if !errors.As(err, &ce) || !errors.Is(err, kind) || ce.Code != code {
		t.Fatalf("got %v, want %s (%v)", err, code, kind)
	}
}
