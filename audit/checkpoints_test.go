package audit_test

import (
	"context"
	"testing"
	"time"

	"github.com/clearancehq/clearance/audit"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
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
	// Reading the latest checkpoint seals what was appended since.
	latest, err := f.s.LedgerCheckpoint(f.ctx, f.org)
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

// TestLedgerAnchor: an anchor verifies with the verifier key alone; a seq
// outside the sealed tree is the caller's mistake.
func TestLedgerAnchor(t *testing.T) {
	f := newFixture(t, fixedKey())
	f.decide(t, 2)
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
