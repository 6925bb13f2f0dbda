package sharelink_test

import (
	"bytes"
	"context"
	"fmt"
	"math/bits"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/sharelink"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// countingBackend counts the ledger entries and tree hashes read through
// it: what a verification costs, whatever the machine.
type countingBackend struct {
	store.Backend
	entries, hashes atomic.Int64
}

func (c *countingBackend) LedgerEntries(ctx context.Context, orgID string, afterSeq uint64, limit int) ([]ledger.Entry, error) {
	page, err := c.Backend.LedgerEntries(ctx, orgID, afterSeq, limit)
	c.entries.Add(int64(len(page)))
	return page, err
}

func (c *countingBackend) LedgerHashes(ctx context.Context, orgID string, indexes []int64) ([]tlog.Hash, error) {
	c.hashes.Add(int64(len(indexes)))
	return c.Backend.LedgerHashes(ctx, orgID, indexes)
}

func (c *countingBackend) reset() { c.entries.Store(0); c.hashes.Store(0) }

// longLedger is an org whose ledger holds about n entries before the one
// decision it shares, on an in-memory store.
type longLedger struct {
	engine *clearance.Engine
	counts *countingBackend
	at     time.Time
	orgID  string
	link   sharelink.ShareLink
	seq    uint64
}

func newLongLedger(tb testing.TB, n int) *longLedger { return newLedgerWith(tb, n, true) }

// newLedgerWith is newLongLedger, with or without a ledger key.
func newLedgerWith(tb testing.TB, n int, withKey bool) *longLedger {
	tb.Helper()
	ctx := context.Background()
	backend, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = backend.Close() })
	lk, err := ledger.NewKey("clearance-test-ledger", bytes.Repeat([]byte{9}, 32))
	if err != nil {
		tb.Fatal(err)
	}
	if !withKey {
		lk = nil
	}
	at := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	counts := &countingBackend{Backend: backend}
	engine, err := clearance.Open(counts, clearance.Options{Now: func() time.Time { return at }, LedgerKey: lk,
		ShareSecret: bytes.Repeat([]byte{7}, sharelink.MinShareSecretLen)})
	if err != nil {
		tb.Fatal(err)
	}
	org, err := engine.Admin.CreateOrg(ctx, "Acme")
	if err != nil {
		tb.Fatal(err)
	}
	x := &longLedger{engine: engine, counts: counts, orgID: org.Org.ID, at: at}
	x.fill(tb, n)
	x.decide(tb)
	return x
}

// fill appends n entries to the org's ledger, a thousand per transaction.
func (x *longLedger) fill(tb testing.TB, n int) {
	tb.Helper()
	ctx, backend, at := context.Background(), x.counts.Backend, x.at
	for done := 0; done < n; {
		batch := min(1000, n-done)
		err := backend.Update(ctx, x.orgID, func(tx store.Tx) error {
			for i := range batch {
				rec := ledger.Record{Kind: ledger.KindShareLinksRevoked, SubjectID: fmt.Sprintf("filler/%d", done+i),
					PayloadDigest: canon.Digest([]byte(strconv.Itoa(done + i)))}
				if _, err := ledger.Append(ctx, tx, x.orgID, rec, at); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
		done += batch
	}
}

// decide records a decision and shares it: x.link, x.seq.
func (x *longLedger) decide(tb testing.TB) {
	tb.Helper()
	ctx := context.Background()
	d, err := x.engine.Decide.Evaluate(ctx, decide.EvaluateRequest{OrgID: x.orgID, Route: decide.RouteActionGate,
		Body: []byte(`{"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":120}`)})
	if err != nil {
		tb.Fatal(err)
	}
	x.seq = d.LedgerSeq
	if x.link, err = x.engine.ShareLinks.CreateShareLink(ctx, x.orgID, d.DossierID, sharelink.ShareLinkOptions{}); err != nil {
		tb.Fatal(err)
	}
}

// verify opens the link and verifies its dossier, as the public route does.
func (x *longLedger) verify(tb testing.TB) sharelink.SharedVerification {
	ctx := context.Background()
	l, err := x.engine.ShareLinks.OpenShareLink(ctx, x.link.DossierID, x.link.Sig)
	if err != nil {
		tb.Fatal(err)
	}
	v, err := x.engine.ShareLinks.VerifySharedDossier(ctx, l)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

func (x *longLedger) seal(tb testing.TB) {
	if _, err := x.engine.Audit.SealLedger(context.Background(), x.orgID); err != nil {
		tb.Fatal(err)
	}
}

// TestVerifySharedDossierCostDoesNotGrowWithTheLedger counts what a
// verification reads: a checkpointed entry costs its entry and O(log n)
// tree hashes, however long the ledger before it; an entry appended after
// the checkpoint costs the entries since.
func TestVerifySharedDossierCostDoesNotGrowWithTheLedger(t *testing.T) {
	for _, n := range []int{10, 3000} {
		t.Run(fmt.Sprintf("entries=%d", n), func(t *testing.T) {
			x := newLongLedger(t, n)
			x.seal(t)
			x.counts.reset()
			v := x.verify(t)
			if !v.Verified || !v.Ledger.Checkpointed || v.Ledger.AnchoredCheckpointValid == nil || !*v.Ledger.AnchoredCheckpointValid ||
				v.Ledger.Seq != x.seq || v.Ledger.CheckpointTreeSize != x.seq {
				t.Fatalf("verification %+v", v)
			}
			// The entry itself, and nothing else of the ledger but hashes.
			if got := x.counts.entries.Load(); got != 1 {
				t.Errorf("a checkpointed entry read %d ledger entries, want 1", got)
			}
			if got, most := x.counts.hashes.Load(), int64(2*bits.Len64(x.seq)); got > most {
				t.Errorf("a checkpointed entry read %d tree hashes, want at most %d", got, most)
			}

			// Six entries later and unsealed, a decision is placed by the
			// chain from the checkpoint's last entry: that entry, the six,
			// and the decision's again for its digest.
			sealed := x.seq
			x.fill(t, 5)
			x.decide(t)
			x.counts.reset()
			v = x.verify(t)
			if !v.Verified || v.Ledger.Checkpointed || v.Ledger.AnchoredCheckpointValid != nil || !v.Ledger.ChainValid ||
				v.Ledger.CheckpointTreeSize != sealed {
				t.Fatalf("an unsealed entry: %+v", v)
			}
			if got, want := x.counts.entries.Load(), int64(x.seq-sealed)+2; got != want {
				t.Errorf("an unsealed entry read %d ledger entries, want %d", got, want)
			}
		})
	}
}

// BenchmarkVerifySharedDossier verifies a shared, checkpointed dossier
// recorded after n other entries: the cost stays flat as n grows. The
// "prefix walk" runs beside it are what each verification used to do
// (ledger.VerifyPrefix to the entry), for the ratio in one run.
func BenchmarkVerifySharedDossier(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		x := newLongLedger(b, n)
		x.seal(b)
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if v := x.verify(b); !v.Verified {
					b.Fatal("not verified")
				}
			}
		})
		b.Run(fmt.Sprintf("prefix walk/entries=%d", n), func(b *testing.B) {
			for b.Loop() {
				if rep, err := ledger.VerifyPrefix(context.Background(), x.counts, x.orgID, x.seq); err != nil || !rep.Valid {
					b.Fatal(rep, err)
				}
			}
		})
	}
}
