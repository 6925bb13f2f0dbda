package clearance_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/export"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/pack"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
)

var exportT0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// exportEngine opens an engine with a ledger key, an export secret and a
// clock the test moves, over a fresh Pebble store.
func exportEngine(t testing.TB) (*clearance.Engine, store.Backend, *atomic.Int64) {
	t.Helper()
	now := &atomic.Int64{}
	now.Store(exportT0.UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Add(int64(time.Microsecond))).UTC() }
	// The store shares the clock: build leases are judged by it.
	b, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	k, err := ledger.NewKey("clearance-test-ledger", bytes.Repeat([]byte{0x4c}, 32))
	if err != nil {
		t.Fatal(err)
	}
	e, err := clearance.Open(b, clearance.Options{LedgerKey: k, ExportSecret: []byte("export secret"), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	return e, b, now
}

// The default window is every decision up to the request, to the
// microsecond; explicit bounds are checked.
func TestExportWindow(t *testing.T) {
	ctx := context.Background()
	e, _, now := exportEngine(t)
	o := newOrg(t, e)
	now.Add(int64(1500 * time.Nanosecond)) // a clock off the microsecond
	x, created, err := e.Exports.Create(ctx, export.Request{OrgID: o.Org.ID, Format: "csv"})
	if err != nil || !created {
		t.Fatal(created, err)
	}
	if !x.Window.From.Equal(time.Unix(0, 0)) || x.Window.To != x.Window.To.Truncate(time.Microsecond) ||
		x.Window.To.After(x.CreatedAt) || x.CreatedAt.Sub(x.Window.To) >= time.Microsecond {
		t.Errorf("default window %v for a request at %v", x.Window, x.CreatedAt)
	}
	for _, c := range []struct{ from, to, code string }{
		{"2026-11-01T00:00:00Z", "2026-11-01T00:00:00Z", export.CodeInvalidWindow},
		{"2026-11-01T00:00:00.0000001Z", "2026-11-01T00:00:00.0000009Z", export.CodeInvalidWindow}, // empty at µs
		{"10000-01-01T00:00:00Z", "", export.CodeInvalidWindow},
		{"", "2026-11-01", export.CodeInvalidWindow},
	} {
		_, _, err := e.Exports.Create(ctx, export.Request{OrgID: o.Org.ID, Format: "json", From: c.from, To: c.to})
		if ce, ok := err.(*clearance.Error); !ok || ce.Code != c.code {
			t.Errorf("from %q to %q: %v, want %s", c.from, c.to, err, c.code)
		}
	}
}

// A pack whose builds keep dying is FAILED after MaxExportAttempts, with
// the reason.
func TestExportGivesUpAfterMaxAttempts(t *testing.T) {
	ctx := context.Background()
	e, _, now := exportEngine(t)
	o := newOrg(t, e)
	x, _, err := e.Exports.Create(ctx, export.Request{OrgID: o.Org.ID, Format: "json"})
	if err != nil {
		t.Fatal(err)
	}
	die := export.WorkerOptions{Hook: func(s export.Stage) {
		if s.Stage == "claimed" {
			runtime.Goexit()
		}
	}}
	for i := 1; i <= export.MaxAttempts; i++ {
		done := make(chan struct{})
		go func() { defer close(done); _, _ = e.Exports.Process(ctx, die) }()
		<-done
		got, err := e.Exports.Get(ctx, o.Org.ID, x.ExportID)
		if err != nil || got.Status != export.Running || got.Attempts != i {
			t.Fatalf("after death %d: %+v %v", i, got, err)
		}
		now.Add(int64(export.DefaultLease + time.Second))
	}
	if n, err := e.Exports.Process(ctx, export.WorkerOptions{}); n != 1 || err != nil {
		t.Fatalf("ProcessExports: %d, %v", n, err)
	}
	got, _ := e.Exports.Get(ctx, o.Org.ID, x.ExportID)
	if got.Status != export.Failed || !strings.Contains(got.LastError, "gave up after 5 attempts") || got.CompletedAt.IsZero() {
		t.Fatalf("%+v", got)
	}
	if _, _, err := e.Exports.Open(ctx, o.Org.ID, x.ExportID); err == nil || !strings.Contains(err.Error(), export.CodeFailed) {
		t.Fatalf("download of a FAILED pack: %v", err)
	}
}

// seedDecisions writes n decisions of the org straight into the store, in
// transactions of 1,000: each a dossier and its ledger entry, as
// Evaluate records them (without evaluating a policy).
func seedDecisions(t testing.TB, b store.Backend, orgID string, n int) {
	t.Helper()
	ctx := context.Background()
	outcomes := []string{"ALLOW", "ESCALATE", "REVIEW_REQUIRED", "BLOCK"}
	for start := 0; start < n; start += 1000 {
		err := b.Update(ctx, orgID, func(tx store.Tx) error {
			for i := start; i < min(start+1000, n); i++ {
				at := exportT0.Add(time.Duration(i) * time.Millisecond)
				id := func(kind int) string { return fmt.Sprintf("0190a000-%04x-7000-8000-%012x", kind, i) }
				r := dossier.Stored{OrgID: orgID, DossierID: id(1), DecisionID: id(2), EvaluationID: id(3), CreatedAt: at,
					Outcome: outcomes[i%4], Mode: "SHADOW", WorkflowKey: fmt.Sprintf("workflow-%d", i%20), DecisionType: "REFUND"}
				body, err := canon.Marshal(map[string]any{"dossier_id": r.DossierID, "decision_id": r.DecisionID,
					"outcome": r.Outcome, "mode": r.Mode, "workflow_key": r.WorkflowKey, "amount": i})
				if err != nil {
					return err
				}
				r.Body = body
				if err := tx.PutDossier(ctx, r); err != nil {
					return err
				}
				if _, err := ledger.Append(ctx, tx, orgID, ledger.Record{Kind: ledger.KindDecision, SubjectID: r.DossierID,
					PayloadDigest: canon.Digest(body)}, at); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A pack of decisions seeded straight into the store holds them all and
// verifies.
func TestExportOfSeededDecisions(t *testing.T) {
	ctx := context.Background()
	e, b, now := exportEngine(t)
	o := newOrg(t, e)
	seedDecisions(t, b, o.Org.ID, 2500)
	now.Store(exportT0.Add(time.Hour).UnixNano())
	x, _, err := e.Exports.Create(ctx, export.Request{OrgID: o.Org.ID, Format: "pdf", IncludeEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := e.Exports.Process(ctx, export.WorkerOptions{ChunkBytes: 64 << 10}); n != 1 || err != nil {
		t.Fatalf("ProcessExports: %d, %v", n, err)
	}
	x, rd, err := e.Exports.Open(ctx, o.Org.ID, x.ExportID)
	if err != nil {
		t.Fatal(err)
	}
	var packed bytes.Buffer
	if _, err := packed.ReadFrom(rd); err != nil {
		t.Fatal(err)
	}
	key := e.Exports.Key(o.Org.ID)
	rep, err := pack.Verify(packed.Bytes(), pack.VerifyOptions{ManifestSHA256: x.ManifestSHA256, BundleSHA256: x.BundleSHA256,
		Key: key, Signature: x.BundleSignature, LedgerVerifierKey: e.Audit.LedgerVerifierKey()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Manifest.Counts.Decisions != 2500 || rep.Manifest.Counts.Workflows != 20 || x.Counts.Decisions != 2500 {
		t.Fatalf("counts %+v", rep.Manifest.Counts)
	}
}

// BenchmarkExport100k builds validation packs of an org with 100,000
// decisions (seeded straight into a Pebble store, the ledger sealed
// beforehand) and reports their size.
//
//	go test -run '^$' -bench Export100k -benchtime 1x .
func BenchmarkExport100k(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	e, st, now := exportEngine(b)
	o := newOrg(b, e)
	seedDecisions(b, st, o.Org.ID, n)
	now.Store(exportT0.Add(24 * time.Hour).UnixNano())
	if _, err := e.Audit.LedgerCheckpoint(ctx, o.Org.ID); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name, format string
		events       bool
	}{{"json+events", "json", true}, {"csv+events", "csv", true}, {"pdf+events", "pdf", true}, {"json", "json", false}, {"csv", "csv", false}} {
		b.Run(c.name, func(b *testing.B) {
			var x export.Export
			for b.Loop() {
				var err error
				if x, _, err = e.Exports.Create(ctx, export.Request{OrgID: o.Org.ID, Format: c.format, IncludeEvents: c.events}); err != nil {
					b.Fatal(err)
				}
				if k, err := e.Exports.Process(ctx, export.WorkerOptions{}); k != 1 || err != nil {
					b.Fatalf("ProcessExports: %d, %v", k, err)
				}
			}
			x, err := e.Exports.Get(ctx, o.Org.ID, x.ExportID)
			if err != nil || x.Status != export.Succeeded || x.Counts.Decisions != n {
				b.Fatalf("%+v %v", x, err)
			}
			b.ReportMetric(float64(x.SizeBytes)/1e6, "MB/pack")
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}

// A stored pack whose bytes changed behind the record is never delivered
// whole: the download stops before its last chunk.
func TestExportChangedChunkIsCutShort(t *testing.T) {
	ctx := context.Background()
	e, b, now := exportEngine(t)
	o := newOrg(t, e)
	seedDecisions(t, b, o.Org.ID, 200)
	now.Store(exportT0.Add(time.Hour).UnixNano())
	x, _, err := e.Exports.Create(ctx, export.Request{OrgID: o.Org.ID, Format: "json", IncludeEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := e.Exports.Process(ctx, export.WorkerOptions{ChunkBytes: 16 << 10}); n != 1 || err != nil {
		t.Fatalf("ProcessExports: %d, %v", n, err)
	}
	chunk := x.ExportID + "/000001"
	rec, err := b.Artifact(ctx, o.Org.ID, "export_chunk", chunk)
	if err != nil {
		t.Fatal(err)
	}
	rec.Body[100] ^= 0x01
	if err := b.Update(ctx, o.Org.ID, func(tx store.Tx) error { return tx.PutArtifact(ctx, rec) }); err != nil {
		t.Fatal(err)
	}
	x, rd, err := e.Exports.Open(ctx, o.Org.ID, x.ExportID)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	_, err = got.ReadFrom(rd)
	if err == nil || !strings.Contains(err.Error(), clearance.CodeStoreUnavailable) || int64(got.Len()) >= x.SizeBytes {
		t.Fatalf("read %d of %d bytes, error %v", got.Len(), x.SizeBytes, err)
	}
}

// An Idempotency-Key replays the pack it queued, including one recorded by
// an earlier version (the bare export id, not its JSON string); reused for
// another request it is refused and queues nothing.
func TestExportIdempotency(t *testing.T) {
	ctx := context.Background()
	e, b, _ := exportEngine(t)
	o := newOrg(t, e)
	req := export.Request{OrgID: o.Org.ID, Format: "json", IdempotencyKey: "pack-1"}
	first, created, err := e.Exports.Create(ctx, req)
	if err != nil || !created {
		t.Fatal(created, err)
	}
	again, created, err := e.Exports.Create(ctx, req)
	if err != nil || created || again.ExportID != first.ExportID {
		t.Fatalf("replay: %v %v %v", again.ExportID, created, err)
	}
	other := req
	other.Format = "csv"
	var ce *clearance.Error
	if _, _, err := e.Exports.Create(ctx, other); !errors.As(err, &ce) || ce.Code != clearance.CodeIdempotencyKeyReused {
		t.Fatalf("reused key: %v", err)
	}

	// The earlier encoding of the answer.
	err = b.Update(ctx, o.Org.ID, func(tx store.Tx) error {
		rec, err := tx.Idempotency(ctx, "audit-export", "pack-1")
		if err != nil {
			return err
		}
		rec.Key, rec.Response = "pack-legacy", []byte(first.ExportID)
		return tx.PutIdempotency(ctx, rec)
	})
	if err != nil {
		t.Fatal(err)
	}
	legacy := req
	legacy.IdempotencyKey = "pack-legacy"
	got, created, err := e.Exports.Create(ctx, legacy)
	if err != nil || created || got.ExportID != first.ExportID {
		t.Fatalf("legacy replay: %v %v %v", got.ExportID, created, err)
	}
	list, err := e.Exports.List(ctx, o.Org.ID, 0)
	if err != nil || len(list) != 1 {
		t.Fatalf("queued %d packs, want 1 (%v)", len(list), err)
	}
}
