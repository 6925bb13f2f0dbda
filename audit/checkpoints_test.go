package audit_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/clearancehq/clearance/audit"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
)

// TestNoLedgerKey: without a key nothing is signed and nothing is proved;
// the chain and the records are still verified.
func TestNoLedgerKey(t *testing.T) {
	f := newFixture(t, nil)
	f.decide(t, 1)
	ctx := f.ctx
	calls := map[string]func() error{
		"LedgerKey":              func() error { _, err := f.s.LedgerKey(); return err },
		"SealLedger":             func() error { _, err := f.s.SealLedger(ctx, f.org); return err },
		"LedgerCheckpoint":       func() error { _, err := f.s.LedgerCheckpoint(ctx, f.org); return err },
		"LedgerCheckpointAt":     func() error { _, err := f.s.LedgerCheckpointAt(ctx, f.org, 1); return err },
		"LedgerInclusionProof":   func() error { _, err := f.s.LedgerInclusionProof(ctx, f.org, 1, 0); return err },
		"LedgerConsistencyProof": func() error { _, err := f.s.LedgerConsistencyProof(ctx, f.org, 1, 0); return err },
		"LedgerAnchor":           func() error { _, err := f.s.LedgerAnchor(ctx, f.org, 1); return err },
		"VerifyLedgerAgainst":    func() error { _, err := f.s.VerifyLedgerAgainst(ctx, f.org, []byte("kept")); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) { wantCode(t, call(), core.ErrUnavailable, audit.CodeLedgerKeyNotConfigured) })
	}
	if k := f.s.LedgerVerifierKey(); k != "" {
		t.Errorf("verifier key %q without a ledger key", k)
	}
	if rep, err := f.s.VerifyLedger(ctx, f.org); err != nil || !rep.Valid || rep.EntriesChecked != 2 {
		t.Fatalf("VerifyLedger: %+v, %v", rep, err)
	}
	done := make(chan struct{})
	go func() { f.s.RunSealer(context.Background(), time.Millisecond); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("RunSealer without a ledger key did not return")
	}
}

func TestSealRefusesUnknownOrg(t *testing.T) {
	f := newFixture(t, fixedKey())
	_, err := f.s.SealLedger(f.ctx, "01941234-5678-7abc-8def-000000000bad")
	wantCode(t, err, core.ErrNotFound, core.CodeOrgNotFound)
}

// TestSealCoversEveryEntry: a seal signs the whole ledger; with nothing
// new it returns the same checkpoint.
func TestSealCoversEveryEntry(t *testing.T) {
	f := newFixture(t, fixedKey())
	f.decide(t, 3)
	first, err := f.s.SealLedger(f.ctx, f.org)
	if err != nil || first.Size != 4 {
		t.Fatalf("seal: size %d, %v", first.Size, err)
	}
	again, err := f.s.SealLedger(f.ctx, f.org)
	if err != nil || string(again.Note) != string(first.Note) {
		t.Fatalf("a seal with nothing new signed another checkpoint: %v", err)
	}
	if _, err := ledger.VerifyCheckpoint(f.s.LedgerVerifierKey(), first.Note); err != nil {
		t.Fatal(err)
	}
	if first.Origin != f.s.LedgerOrigin(f.org) {
		t.Fatalf("origin %q, want %q", first.Origin, f.s.LedgerOrigin(f.org))
	}
	f.decide(t, 2)
	// Reading the latest checkpoint does not seal what was appended since.
	latest, err := f.s.LedgerCheckpoint(f.ctx, f.org)
	if err != nil || string(latest.Note) != string(first.Note) {
		t.Fatalf("latest before the next seal: size %d, %v", latest.Size, err)
	}
	if _, err := f.s.SealLedger(f.ctx, f.org); err != nil {
		t.Fatal(err)
	}
	latest, err = f.s.LedgerCheckpoint(f.ctx, f.org)
	if err != nil || latest.Size != 6 {
		t.Fatalf("latest: size %d, %v", latest.Size, err)
	}
	at, err := f.s.LedgerCheckpointAt(f.ctx, f.org, 4)
	if err != nil || string(at.Note) != string(first.Note) {
		t.Fatalf("checkpoint at 4: %v", err)
	}
	_, err = f.s.LedgerCheckpointAt(f.ctx, f.org, 5)
	wantCode(t, err, core.ErrNotFound, audit.CodeCheckpointNotFound)
}

func TestInclusionProof(t *testing.T) {
	f := newFixture(t, fixedKey())
	f.decide(t, 3)
	if _, err := f.s.SealLedger(f.ctx, f.org); err != nil {
		t.Fatal(err)
	}
	for _, size := range []uint64{0, 4} {
		p, err := f.s.LedgerInclusionProof(f.ctx, f.org, 2, size)
		if err != nil {
			t.Fatal(err)
		}
		c, err := ledger.VerifyCheckpoint(f.s.LedgerVerifierKey(), []byte(p.Checkpoint))
		if err != nil || c.Size != 4 || p.TreeSize != 4 || p.OrgID != f.org {
			t.Fatalf("size %d: checkpoint of %d (proof says %d), %v", size, c.Size, p.TreeSize, err)
		}
		if err := ledger.VerifyInclusion(c, p.LeafHash, p.Seq, p.Proof); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
	}
	for _, seq := range []uint64{0, 5} {
		_, err := f.s.LedgerInclusionProof(f.ctx, f.org, seq, 4)
		wantCode(t, err, core.ErrInvalidRequest, audit.CodeProofRange)
	}
	_, err := f.s.LedgerInclusionProof(f.ctx, f.org, 1, 3)
	wantCode(t, err, core.ErrNotFound, audit.CodeCheckpointNotFound)
}

func TestConsistencyProof(t *testing.T) {
	f := newFixture(t, fixedKey())
	f.decide(t, 3)
	older, err := f.s.SealLedger(f.ctx, f.org)
	if err != nil {
		t.Fatal(err)
	}
	f.decide(t, 2)
	if _, err := f.s.SealLedger(f.ctx, f.org); err != nil {
		t.Fatal(err)
	}
	p, err := f.s.LedgerConsistencyProof(f.ctx, f.org, older.Size, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.OldSize != 4 || p.NewSize != 6 || p.OldCheckpoint != string(older.Note) {
		t.Fatalf("proof of %d -> %d", p.OldSize, p.NewSize)
	}
	o, err := ledger.VerifyCheckpoint(f.s.LedgerVerifierKey(), []byte(p.OldCheckpoint))
	if err != nil {
		t.Fatal(err)
	}
	n, err := ledger.VerifyCheckpoint(f.s.LedgerVerifierKey(), []byte(p.NewCheckpoint))
	if err != nil {
		t.Fatal(err)
	}
	if err := ledger.VerifyConsistency(o, n, p.Proof); err != nil {
		t.Fatal(err)
	}
	for _, old := range []uint64{0, 7} {
		_, err := f.s.LedgerConsistencyProof(f.ctx, f.org, old, 6)
		wantCode(t, err, core.ErrInvalidRequest, audit.CodeProofRange)
	}
	_, err = f.s.LedgerConsistencyProof(f.ctx, f.org, 5, 6)
	wantCode(t, err, core.ErrNotFound, audit.CodeCheckpointNotFound)
}

// TestLedgerAnchor: an anchor verifies with the verifier key alone; an
// entry the latest checkpoint does not cover yet is a wait, not the
// caller's mistake; a seq outside the ledger is.
func TestLedgerAnchor(t *testing.T) {
	f := newFixture(t, fixedKey())
	f.decide(t, 2)
	_, err := f.s.LedgerAnchor(f.ctx, f.org, 3)
	wantCode(t, err, core.ErrConflict, audit.CodeEntryNotYetSealed)
	if _, err := f.s.SealLedger(f.ctx, f.org); err != nil {
		t.Fatal(err)
	}
	a, err := f.s.LedgerAnchor(f.ctx, f.org, 3)
	if err != nil {
		t.Fatal(err)
	}
	page, err := f.s.Ledger(f.ctx, f.org, 2, 1)
	if err != nil || len(page.Entries) != 1 {
		t.Fatalf("entry 3: %v", err)
	}
	if _, err := ledger.VerifyAnchor(f.s.LedgerVerifierKey(), f.s.LedgerOrigin(f.org), page.Entries[0], a); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{0, 4} {
		_, err := f.s.LedgerAnchor(f.ctx, f.org, seq)
		wantCode(t, err, core.ErrInvalidRequest, audit.CodeProofRange)
	}
	f.decide(t, 1)
	_, err = f.s.LedgerAnchor(f.ctx, f.org, 4)
	wantCode(t, err, core.ErrConflict, audit.CodeEntryNotYetSealed)
}

// TestNoCheckpointBeforeTheFirstSeal: the latest checkpoint of a ledger
// never sealed is not found, and proofs against it are refused the same way.
func TestNoCheckpointBeforeTheFirstSeal(t *testing.T) {
	f := newFixture(t, fixedKey())
	f.decide(t, 1)
	_, err := f.s.LedgerCheckpoint(f.ctx, f.org)
	wantCode(t, err, core.ErrNotFound, audit.CodeCheckpointNotFound)
	_, err = f.s.LedgerInclusionProof(f.ctx, f.org, 1, 0)
	wantCode(t, err, core.ErrNotFound, audit.CodeCheckpointNotFound)
	_, err = f.s.LedgerConsistencyProof(f.ctx, f.org, 1, 0)
	wantCode(t, err, core.ErrNotFound, audit.CodeCheckpointNotFound)
	_, err = f.s.LedgerCheckpoint(f.ctx, "01941234-5678-7abc-8def-000000000bad")
	wantCode(t, err, core.ErrNotFound, core.CodeOrgNotFound)
}

// TestReadsDoNotSeal: with entries appended since the last seal, reading
// the latest checkpoint, proofs against it and anchors write nothing: no
// transaction, the same latest checkpoint, no tree hash of the new leaves.
func TestReadsDoNotSeal(t *testing.T) {
	f := newFixture(t, fixedKey())
	f.decide(t, 2)
	sealed, err := f.s.SealLedger(f.ctx, f.org)
	if err != nil {
		t.Fatal(err)
	}
	last := f.decide(t, 2)
	writes := &countingBackend{Backend: f.d.Store.Backend}
	d := f.d
	d.Store = core.NewStore(writes)
	s := audit.New(d)

	reads := map[string]func() error{
		"LedgerCheckpoint":       func() error { _, err := s.LedgerCheckpoint(f.ctx, f.org); return err },
		"LedgerInclusionProof":   func() error { _, err := s.LedgerInclusionProof(f.ctx, f.org, 1, 0); return err },
		"LedgerConsistencyProof": func() error { _, err := s.LedgerConsistencyProof(f.ctx, f.org, sealed.Size, 0); return err },
		"LedgerAnchor sealed":    func() error { _, err := s.LedgerAnchor(f.ctx, f.org, 1); return err },
	}
	for name, read := range reads {
		if err := read(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	_, err = s.LedgerAnchor(f.ctx, f.org, last)
	wantCode(t, err, core.ErrConflict, audit.CodeEntryNotYetSealed)

	if n := writes.updates.Load(); n != 0 {
		t.Errorf("the reads ran %d transactions", n)
	}
	latest, err := f.d.Store.LatestCheckpoint(f.ctx, f.org)
	if err != nil || string(latest.Note) != string(sealed.Note) {
		t.Errorf("the latest checkpoint moved from size %d to %d (%v)", sealed.Size, latest.Size, err)
	}
	leaf := tlog.StoredHashIndex(0, int64(last-1))
	if _, err := f.d.Store.LedgerHashes(f.ctx, f.org, []int64{leaf}); err == nil {
		t.Error("the tree holds the hash of an entry appended after the seal")
	}
}

// countingBackend counts the transactions run through it.
type countingBackend struct {
	store.Backend
	updates atomic.Int64
}

func (b *countingBackend) Update(ctx context.Context, orgID string, fn func(tx store.Tx) error) error {
	b.updates.Add(1)
	return b.Backend.Update(ctx, orgID, fn)
}

// TestRunSealer: the sealer signs the ledgers that grew, without a read.
func TestRunSealer(t *testing.T) {
	f := newFixture(t, fixedKey())
	f.decide(t, 2) // through core.Store.Update: the org is marked grown
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.s.RunSealer(ctx, time.Millisecond); close(done) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := f.s.LedgerCheckpointAt(f.ctx, f.org, 3); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the sealer did not sign the grown ledger")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
