package dossiertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
)

const (
	orgA = "org_dossier_a"
	orgB = "org_dossier_b"
)

// base is the creation time of the first dossier (whole microseconds).
var base = time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC)

var errBoom = errors.New("dossiertest: fn failed on purpose")

// equalTimes compares instants, whatever their location.
var equalTimes = cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })

// Run runs the suite; open returns a fresh, empty backend.
func Run(t *testing.T, open func(t *testing.T) store.Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b store.Backend)
	}{
		{"PutGet", testPutGet},
		{"NotFoundAndOrgIsolation", testIsolation},
		{"WriteOnce", testWriteOnce},
		{"Summaries", testSummaries},
		{"FailedUpdateWritesNeither", testAtomic},
		{"ConcurrentWriters", testConcurrent},
		{"RecordWritesDossierEntryAndChainMember", testRecord},
		{"RecordIsAtomic", testRecordAtomic},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

// newRecord returns dossier n of orgID, created at base + n minutes. Its
// body is canonical JSON that a JSON-aware store would rewrite (key order,
// spacing, escapes), so only an opaque store returns it byte for byte.
func newRecord(orgID string, n int) dossier.Stored {
	body := fmt.Sprintf(`{"dossier_id":"dos_%04d","n":%d,"note":"café ☃ <&> \"q\""}`, n, n)
	return dossier.Stored{
		OrgID:        orgID,
		DossierID:    fmt.Sprintf("dos_%04d", n),
		DecisionID:   fmt.Sprintf("dec_%04d", n),
		EvaluationID: fmt.Sprintf("eval_%04d", n),
		CreatedAt:    base.Add(time.Duration(n) * time.Minute),
		Outcome:      []string{"ALLOW", "BLOCK", "REVIEW"}[n%3],
		Mode:         []string{"ENFORCE", "SHADOW"}[n%2],
		WorkflowKey:  "payments.refund",
		DecisionType: "refund",
		Body:         []byte(body),
	}
}

// record writes r and its ledger entry in one Update.
func record(ctx context.Context, b store.Backend, r dossier.Stored) error {
	return b.Update(ctx, r.OrgID, func(tx store.Tx) error {
		if err := tx.PutDossier(ctx, r); err != nil {
			return err
		}
		_, err := ledger.Append(ctx, tx, r.OrgID, ledger.Record{
			Kind: ledger.KindDecision, SubjectID: r.DossierID, PayloadDigest: canon.Digest(r.Body),
		}, r.CreatedAt)
		return err
	})
}

func mustRecord(t *testing.T, b store.Backend, r dossier.Stored) {
	t.Helper()
	if err := record(t.Context(), b, r); err != nil {
		t.Fatalf("record %s/%s: %v", r.OrgID, r.DossierID, err)
	}
}

func wantRecord(t *testing.T, what string, got dossier.Stored, err error, want dossier.Stored) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if diff := cmp.Diff(want, got, equalTimes); diff != "" {
		t.Fatalf("%s (-want +got):\n%s", what, diff)
	}
	if string(got.Body) != string(want.Body) {
		t.Fatalf("%s: body %q, want %q", what, got.Body, want.Body)
	}
}

func wantNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("%s: error %v, want store.ErrNotFound", what, err)
	}
}

func summaries(t *testing.T, b store.Backend, orgID string, from, to time.Time, max int) []string {
	t.Helper()
	var ids []string
	err := b.DossierSummaries(t.Context(), orgID, from, to, func(s dossier.Summary) bool {
		ids = append(ids, s.DossierID)
		return max == 0 || len(ids) < max
	})
	if err != nil {
		t.Fatalf("DossierSummaries: %v", err)
	}
	return ids
}

func testPutGet(t *testing.T, b store.Backend) {
	want := newRecord(orgA, 1)
	mustRecord(t, b, want)
	got, err := b.Dossier(t.Context(), orgA, want.DossierID)
	wantRecord(t, "Dossier", got, err, want)
	got, err = b.DossierByDecision(t.Context(), orgA, want.DecisionID)
	wantRecord(t, "DossierByDecision", got, err, want)

	entries, err := b.LedgerEntries(t.Context(), orgA, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].SubjectID != want.DossierID || entries[0].PayloadDigest != canon.Digest(want.Body) {
		t.Fatalf("ledger = %+v, want one entry for %s", entries, want.DossierID)
	}
}

func testIsolation(t *testing.T, b store.Backend) {
	a := newRecord(orgA, 1)
	mustRecord(t, b, a)
	_, err := b.Dossier(t.Context(), orgA, "dos_missing")
	wantNotFound(t, "Dossier(missing)", err)
	_, err = b.DossierByDecision(t.Context(), orgA, "dec_missing")
	wantNotFound(t, "DossierByDecision(missing)", err)
	_, err = b.Dossier(t.Context(), orgB, a.DossierID)
	wantNotFound(t, "Dossier(other org's id)", err)
	_, err = b.DossierByDecision(t.Context(), orgB, a.DecisionID)
	wantNotFound(t, "DossierByDecision(other org's id)", err)
	if ids := summaries(t, b, orgB, base.Add(-time.Hour), base.Add(time.Hour), 0); len(ids) != 0 {
		t.Fatalf("DossierSummaries(other org) = %v, want none", ids)
	}

	// The same decision id in another org is another dossier.
	other := newRecord(orgB, 2)
	other.DecisionID = a.DecisionID
	mustRecord(t, b, other)
	got, err := b.DossierByDecision(t.Context(), orgB, a.DecisionID)
	wantRecord(t, "DossierByDecision(org B)", got, err, other)
	got, err = b.DossierByDecision(t.Context(), orgA, a.DecisionID)
	wantRecord(t, "DossierByDecision(org A)", got, err, a)

	// A transaction may not write another org's dossier.
	err = b.Update(t.Context(), orgA, func(tx store.Tx) error {
		return tx.PutDossier(t.Context(), newRecord(orgB, 3))
	})
	if err == nil {
		t.Fatal("PutDossier of org B in a transaction of org A succeeded")
	}
	_, err = b.Dossier(t.Context(), orgB, newRecord(orgB, 3).DossierID)
	wantNotFound(t, "Dossier(refused write)", err)
}

func testWriteOnce(t *testing.T, b store.Backend) {
	first := newRecord(orgA, 1)
	mustRecord(t, b, first)

	sameID := newRecord(orgA, 2)
	sameID.DossierID = first.DossierID
	sameDecision := newRecord(orgA, 3)
	sameDecision.DecisionID = first.DecisionID
	for _, r := range []dossier.Stored{sameID, sameDecision} {
		if err := record(t.Context(), b, r); err == nil {
			t.Fatalf("second put of dossier %s / decision %s succeeded", r.DossierID, r.DecisionID)
		}
	}
	got, err := b.Dossier(t.Context(), orgA, first.DossierID)
	wantRecord(t, "Dossier after refused puts", got, err, first)
	got, err = b.DossierByDecision(t.Context(), orgA, first.DecisionID)
	wantRecord(t, "DossierByDecision after refused puts", got, err, first)
	if ids := summaries(t, b, orgA, base.Add(-time.Hour), base.Add(time.Hour), 0); len(ids) != 1 {
		t.Fatalf("summaries after refused puts = %v, want one", ids)
	}
	if h, err := b.LedgerHeadOf(t.Context(), orgA); err != nil || h.Seq != 1 {
		t.Fatalf("ledger head = %+v, %v; want seq 1", h, err)
	}
}

func testSummaries(t *testing.T, b store.Backend) {
	// Dossiers 1..6 at base + n minutes, written out of order; dossier 7
	// shares dossier 3's instant; org B has its own at the same times.
	var recs []dossier.Stored
	for _, n := range []int{4, 1, 6, 3, 2, 5} {
		recs = append(recs, newRecord(orgA, n))
	}
	tie := newRecord(orgA, 7)
	tie.CreatedAt = newRecord(orgA, 3).CreatedAt
	recs = append(recs, tie)
	for _, r := range recs {
		mustRecord(t, b, r)
	}
	for n := 1; n <= 6; n++ {
		mustRecord(t, b, newRecord(orgB, 100+n))
	}
	at := func(n int) time.Time { return base.Add(time.Duration(n) * time.Minute) }

	cases := []struct {
		name     string
		from, to time.Time
		max      int
		want     []string
	}{
		{"All", at(0), at(100), 0, []string{"dos_0001", "dos_0002", "dos_0003", "dos_0007", "dos_0004", "dos_0005", "dos_0006"}},
		{"FromInclusiveToExclusive", at(2), at(5), 0, []string{"dos_0002", "dos_0003", "dos_0007", "dos_0004"}},
		{"JustAfterFrom", at(2).Add(time.Microsecond), at(5).Add(time.Microsecond), 0, []string{"dos_0003", "dos_0007", "dos_0004", "dos_0005"}},
		{"EarlyStop", at(0), at(100), 2, []string{"dos_0001", "dos_0002"}},
		{"EmptyRange", at(3), at(3), 0, nil},
		{"Inverted", at(5), at(2), 0, nil},
		{"BeforeAll", at(-100), at(1), 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := summaries(t, b, orgA, c.from, c.to, c.max)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Fatalf("DossierSummaries (-want +got):\n%s", diff)
			}
		})
	}

	// The summary carries the record's indexed fields.
	want := newRecord(orgA, 2)
	var got []dossier.Summary
	err := b.DossierSummaries(t.Context(), orgA, at(2), at(3), func(s dossier.Summary) bool {
		got = append(got, s)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]dossier.Summary{want.Summary()}, got, equalTimes); diff != "" {
		t.Fatalf("summary (-want +got):\n%s", diff)
	}
}

func testAtomic(t *testing.T, b store.Backend) {
	r := newRecord(orgA, 1)
	err := b.Update(t.Context(), orgA, func(tx store.Tx) error {
		if err := tx.PutDossier(t.Context(), r); err != nil {
			return err
		}
		if _, err := ledger.Append(t.Context(), tx, orgA, ledger.Record{
			Kind: ledger.KindDecision, SubjectID: r.DossierID, PayloadDigest: canon.Digest(r.Body),
		}, r.CreatedAt); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Update = %v, want the fn's error", err)
	}
	_, err = b.Dossier(t.Context(), orgA, r.DossierID)
	wantNotFound(t, "Dossier", err)
	_, err = b.DossierByDecision(t.Context(), orgA, r.DecisionID)
	wantNotFound(t, "DossierByDecision", err)
	if ids := summaries(t, b, orgA, base.Add(-time.Hour), base.Add(time.Hour), 0); len(ids) != 0 {
		t.Fatalf("summaries = %v, want none", ids)
	}
	if h, err := b.LedgerHeadOf(t.Context(), orgA); err != nil || h != (ledger.Head{}) {
		t.Fatalf("ledger head = %+v, %v; want empty", h, err)
	}
	if es, err := b.LedgerEntries(t.Context(), orgA, 0, 10); err != nil || len(es) != 0 {
		t.Fatalf("ledger entries = %v, %v; want none", es, err)
	}
	// The same dossier can then be recorded.
	mustRecord(t, b, r)
}

func testConcurrent(t *testing.T, b store.Backend) {
	const workers, each = 8, 25
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				if err := record(context.Background(), b, newRecord(orgA, w*each+i)); err != nil {
					t.Errorf("worker %d record %d: %v", w, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for n := range workers * each {
		want := newRecord(orgA, n)
		got, err := b.DossierByDecision(t.Context(), orgA, want.DecisionID)
		wantRecord(t, "DossierByDecision", got, err, want)
	}
	if ids := summaries(t, b, orgA, base.Add(-time.Hour), base.Add(24*time.Hour), 0); len(ids) != workers*each {
		t.Fatalf("%d summaries, want %d", len(ids), workers*each)
	}
	rep, err := ledger.Verify(t.Context(), b, orgA)
	if err != nil || !rep.Valid || rep.HeadSeq != workers*each {
		t.Fatalf("Verify = %+v, %v; want valid with %d entries", rep, err, workers*each)
	}
}
