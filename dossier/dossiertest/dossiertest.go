package dossiertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
		{"Dossiers", testDossiers},
		{"DossiersManyWithTies", testDossiersMany},
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

// dossiers returns what Dossiers yields, stopping after max when max > 0.
// A yielded body is valid only until fn returns (a backend may reuse its
// buffer), so each is copied as fn is called.
func dossiers(t *testing.T, b store.Backend, orgID string, from, to time.Time, max int) []dossier.Stored {
	t.Helper()
	var out []dossier.Stored
	err := b.Dossiers(t.Context(), orgID, from, to, func(r dossier.Stored) bool {
		r.Body = slices.Clone(r.Body)
		out = append(out, r)
		return max == 0 || len(out) < max
	})
	if err != nil {
		t.Fatalf("Dossiers: %v", err)
	}
	return out
}

// wantDossiers checks that Dossiers over [from, to) yields, in order, the
// dossiers DossierSummaries lists there, each equal to what was put.
func wantDossiers(t *testing.T, b store.Backend, orgID string, from, to time.Time, put map[string]dossier.Stored) {
	t.Helper()
	got := dossiers(t, b, orgID, from, to, 0)
	var ids []string
	for _, r := range got {
		ids = append(ids, r.DossierID)
	}
	if diff := cmp.Diff(summaries(t, b, orgID, from, to, 0), ids); diff != "" {
		t.Fatalf("Dossiers ids vs DossierSummaries (-summaries +dossiers):\n%s", diff)
	}
	for _, r := range got {
		wantRecord(t, "Dossiers record "+r.DossierID, r, nil, put[r.DossierID])
	}
}

func testDossiers(t *testing.T, b store.Backend) {
	// testSummaries' data: 1..6 out of order, 7 tied with 3, org B alike.
	put := map[string]dossier.Stored{}
	for _, n := range []int{4, 1, 6, 3, 2, 5, 7} {
		r := newRecord(orgA, n)
		if n == 7 {
			r.CreatedAt = newRecord(orgA, 3).CreatedAt
		}
		mustRecord(t, b, r)
		put[r.DossierID] = r
	}
	putB := map[string]dossier.Stored{}
	for n := 1; n <= 6; n++ {
		r := newRecord(orgB, 100+n)
		r.CreatedAt = newRecord(orgA, n).CreatedAt
		mustRecord(t, b, r)
		putB[r.DossierID] = r
	}
	at := func(n int) time.Time { return base.Add(time.Duration(n) * time.Minute) }

	windows := []struct {
		name     string
		from, to time.Time
		want     int
	}{
		{"All", at(0), at(100), 7},
		{"FromInclusiveToExclusive", at(2), at(5), 4},
		{"JustAfterFrom", at(2).Add(time.Microsecond), at(5).Add(time.Microsecond), 4},
		{"TieOnly", at(3), at(4), 2},
		{"BeforeAll", at(-100), at(1), 0},
	}
	for _, w := range windows {
		t.Run(w.name, func(t *testing.T) {
			if got := dossiers(t, b, orgA, w.from, w.to, 0); len(got) != w.want {
				t.Fatalf("Dossiers yielded %d, want %d", len(got), w.want)
			}
			wantDossiers(t, b, orgA, w.from, w.to, put)
		})
	}

	t.Run("EarlyStop", func(t *testing.T) {
		for _, max := range []int{1, 3, 4} { // 3 and 4 stop inside and just after the tie
			got := dossiers(t, b, orgA, at(0), at(100), max)
			all := summaries(t, b, orgA, at(0), at(100), 0)
			var ids []string
			for _, r := range got {
				ids = append(ids, r.DossierID)
			}
			if diff := cmp.Diff(all[:max], ids); diff != "" {
				t.Fatalf("Dossiers stopping after %d (-want +got):\n%s", max, diff)
			}
		}
	})

	t.Run("OrgIsolation", func(t *testing.T) {
		got := dossiers(t, b, orgB, at(0), at(100), 0)
		if len(got) != 6 {
			t.Fatalf("Dossiers(org B) yielded %d, want 6", len(got))
		}
		for _, r := range got {
			if r.OrgID != orgB {
				t.Fatalf("Dossiers(org B) yielded %s of org %q", r.DossierID, r.OrgID)
			}
		}
		wantDossiers(t, b, orgB, at(0), at(100), putB)
		if got := dossiers(t, b, "org_dossier_none", at(0), at(100), 0); len(got) != 0 {
			t.Fatalf("Dossiers(org without dossiers) yielded %d", len(got))
		}
	})

	t.Run("EmptyWindow", func(t *testing.T) {
		for _, w := range [][2]time.Time{{at(3), at(3)}, {at(5), at(2)}, {at(100), at(0)}} {
			err := b.Dossiers(t.Context(), orgA, w[0], w[1], func(r dossier.Stored) bool {
				t.Fatalf("Dossiers(%v, %v) called fn with %s", w[0], w[1], r.DossierID)
				return false
			})
			if err != nil {
				t.Fatalf("Dossiers(%v, %v): %v", w[0], w[1], err)
			}
		}
	})
}

// testDossiersMany: enough dossiers, most sharing a few instants, that a
// backend reading in pages splits a tie across pages.
func testDossiersMany(t *testing.T, b store.Backend) {
	const total, instants = 700, 3
	put := map[string]dossier.Stored{}
	err := b.Update(t.Context(), orgA, func(tx store.Tx) error {
		for n := range total {
			r := newRecord(orgA, n)
			r.CreatedAt = base.Add(time.Duration(n%instants) * time.Second)
			if err := tx.PutDossier(t.Context(), r); err != nil {
				return err
			}
			if _, err := ledger.Append(t.Context(), tx, orgA, ledger.Record{
				Kind: ledger.KindDecision, SubjectID: r.DossierID, PayloadDigest: canon.Digest(r.Body),
			}, r.CreatedAt); err != nil {
				return err
			}
			put[r.DossierID] = r
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	from, to := base, base.Add(time.Hour)
	if got := dossiers(t, b, orgA, from, to, 0); len(got) != total {
		t.Fatalf("Dossiers yielded %d, want %d", len(got), total)
	}
	wantDossiers(t, b, orgA, from, to, put)
	wantDossiers(t, b, orgA, base.Add(time.Second), to, put) // from inside the order
}
