package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
)

// Harness gives the suite a backend and raw access to its stored entries.
type Harness struct {
	// Open returns a fresh, empty backend; the harness closes it (for
	// example with t.Cleanup).
	Open func(t *testing.T) store.Backend
	// OverwriteEntry stores e as the entry at position seq of orgID's
	// ledger, bypassing every check and leaving the head alone. A backend
	// that keeps the position in its own column may ignore e.Seq.
	OverwriteEntry func(t *testing.T, b store.Backend, orgID string, seq uint64, e ledger.Entry)
	// DeleteEntry removes the entry at position seq of orgID's ledger,
	// leaving the head alone.
	DeleteEntry func(t *testing.T, b store.Backend, orgID string, seq uint64)
	// SetHead overwrites orgID's stored head, bypassing every check
	// (optional: the cases that rewrite history consistently skip without).
	SetHead func(t *testing.T, b store.Backend, orgID string, h ledger.Head)
	// DeleteCheckpoint removes orgID's stored checkpoint of tree size size
	// (optional).
	DeleteCheckpoint func(t *testing.T, b store.Backend, orgID string, size uint64)
}

const (
	orgA = "org_ledger_a"
	orgB = "org_ledger_b"
)

// base is the first recorded_at; whole seconds, exact in every backend.
var base = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var errBoom = errors.New("ledgertest: fn failed on purpose")

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	if h.Open == nil {
		t.Fatal("ledgertest: Harness.Open is nil")
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"Empty", testEmpty},
		{"AppendChain", testAppendChain},
		{"SeveralAppendsInOneUpdate", testSeveralAppendsInOneUpdate},
		{"IndependentOrgs", testIndependentOrgs},
		{"FailedUpdateWritesNothing", testFailedUpdate},
		{"PutLedgerEntryRefusesWrongEntry", testWrongEntry},
		{"ConcurrentAppendsOneOrg", testConcurrent},
		{"Paging", testPaging},
		{"TamperChangedEntry", testTamperChanged},
		{"TamperDeletedEntry", testTamperDeleted},
		{"TamperSwappedEntries", testTamperSwapped},
		{"TamperTruncatedTail", testTamperTruncated},
	}
	tests = append(tests, treeTests...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

func record(i int) ledger.Record {
	subject := fmt.Sprintf("dec_%04d", i)
	return ledger.Record{Kind: ledger.KindDecision, SubjectID: subject, PayloadDigest: canon.Digest([]byte(subject))}
}

// appendOne appends one entry in its own Update.
func appendOne(t *testing.T, b store.Backend, orgID string, i int) ledger.Entry {
	t.Helper()
	var e ledger.Entry
	err := b.Update(t.Context(), orgID, func(tx store.Tx) error {
		var err error
		e, err = ledger.Append(t.Context(), tx, orgID, record(i), base.Add(time.Duration(i)*time.Second))
		return err
	})
	if err != nil {
		t.Fatalf("Update(append %d to %s): %v", i, orgID, err)
	}
	return e
}

func appendN(t *testing.T, b store.Backend, orgID string, n int) []ledger.Entry {
	t.Helper()
	out := make([]ledger.Entry, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, appendOne(t, b, orgID, i))
	}
	return out
}

// all reads every entry of the org, in pages of 7.
func all(t *testing.T, b store.Backend, orgID string) []ledger.Entry {
	t.Helper()
	var out []ledger.Entry
	var after uint64
	for {
		page, err := b.LedgerEntries(t.Context(), orgID, after, 7)
		if err != nil {
			t.Fatalf("LedgerEntries(%s, %d): %v", orgID, after, err)
		}
		out = append(out, page...)
		if len(page) < 7 {
			return out
		}
		after = page[len(page)-1].Seq
	}
}

func head(t *testing.T, b store.Backend, orgID string) ledger.Head {
	t.Helper()
	h, err := b.LedgerHeadOf(t.Context(), orgID)
	if err != nil {
		t.Fatalf("LedgerHeadOf(%s): %v", orgID, err)
	}
	return h
}

func verify(t *testing.T, b store.Backend, orgID string) ledger.Report {
	t.Helper()
	rep, err := ledger.Verify(t.Context(), b, orgID)
	if err != nil {
		t.Fatalf("Verify(%s): %v", orgID, err)
	}
	return rep
}

func wantValid(t *testing.T, b store.Backend, orgID string, n uint64) {
	t.Helper()
	rep := verify(t, b, orgID)
	if !rep.Valid || rep.EntriesChecked != n || rep.HeadSeq != n {
		t.Fatalf("Verify(%s) = %+v, want valid with %d entries", orgID, rep, n)
	}
}

func wantBroken(t *testing.T, b store.Backend, orgID string, seq uint64, reasons ...string) {
	t.Helper()
	rep := verify(t, b, orgID)
	if rep.Valid || rep.FirstBrokenSeq != seq {
		t.Fatalf("Verify(%s) = %+v, want broken at seq %d", orgID, rep, seq)
	}
	for _, r := range reasons {
		if rep.Reason == r {
			return
		}
	}
	t.Fatalf("Verify(%s) reason = %s (%s), want one of %v", orgID, rep.Reason, rep.Detail, reasons)
}

func testEmpty(t *testing.T, h Harness) {
	b := h.Open(t)
	if got := head(t, b, orgA); got != (ledger.Head{}) {
		t.Errorf("LedgerHeadOf(empty) = %+v, want zero", got)
	}
	if got := all(t, b, orgA); len(got) != 0 {
		t.Errorf("LedgerEntries(empty) = %d entries, want 0", len(got))
	}
	wantValid(t, b, orgA, 0)
}

func testAppendChain(t *testing.T, h Harness) {
	b := h.Open(t)
	want := appendN(t, b, orgA, 10)
	got := all(t, b, orgA)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("stored entries differ from appended (-want +got):\n%s", diff)
	}
	prev := ledger.Genesis
	for i, e := range got {
		if e.Seq != uint64(i+1) || e.OrgID != orgA || e.PrevEntryHash != prev {
			t.Fatalf("entry %d = %+v, want seq %d of %s after %s", i, e, i+1, orgA, prev)
		}
		prev = e.EntryHash
	}
	if h := head(t, b, orgA); h != (ledger.Head{Seq: 10, EntryHash: prev}) {
		t.Fatalf("head = %+v, want seq 10 hash %s", h, prev)
	}
	wantValid(t, b, orgA, 10)
}

func testSeveralAppendsInOneUpdate(t *testing.T, h Harness) {
	b := h.Open(t)
	appendN(t, b, orgA, 2)
	err := b.Update(t.Context(), orgA, func(tx store.Tx) error {
		for i := 3; i <= 5; i++ {
			e, err := ledger.Append(t.Context(), tx, orgA, record(i), base)
			if err != nil {
				return err
			}
			hd, err := tx.LedgerHead(t.Context())
			if err != nil {
				return err
			}
			if hd.Seq != uint64(i) || hd.EntryHash != e.EntryHash {
				return fmt.Errorf("head inside the tx = %+v after appending seq %d", hd, e.Seq)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if got := len(all(t, b, orgA)); got != 5 {
		t.Fatalf("%d entries, want 5", got)
	}
	wantValid(t, b, orgA, 5)
}

func testIndependentOrgs(t *testing.T, h Harness) {
	b := h.Open(t)
	for i := 1; i <= 5; i++ {
		appendOne(t, b, orgA, i)
		if i <= 3 {
			appendOne(t, b, orgB, i)
		}
	}
	for org, n := range map[string]int{orgA: 5, orgB: 3} {
		got := all(t, b, org)
		if len(got) != n {
			t.Fatalf("%s: %d entries, want %d", org, len(got), n)
		}
		for i, e := range got {
			if e.Seq != uint64(i+1) || e.OrgID != org {
				t.Fatalf("%s entry %d = seq %d org %s", org, i, e.Seq, e.OrgID)
			}
		}
		if got[0].PrevEntryHash != ledger.Genesis {
			t.Fatalf("%s: first entry does not start from Genesis", org)
		}
		wantValid(t, b, org, uint64(n))
	}
	if got := head(t, b, "org_ledger_none"); got != (ledger.Head{}) {
		t.Fatalf("head of an org without entries = %+v", got)
	}
}

func testFailedUpdate(t *testing.T, h Harness) {
	b := h.Open(t)
	appendN(t, b, orgA, 2)
	before := head(t, b, orgA)
	err := b.Update(t.Context(), orgA, func(tx store.Tx) error {
		for i := 3; i <= 4; i++ {
			if _, err := ledger.Append(t.Context(), tx, orgA, record(i), base); err != nil {
				return err
			}
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Update = %v, want the fn's error", err)
	}
	if got := head(t, b, orgA); got != before {
		t.Fatalf("head after failed Update = %+v, want %+v", got, before)
	}
	if got := len(all(t, b, orgA)); got != 2 {
		t.Fatalf("%d entries after failed Update, want 2", got)
	}
	if e := appendOne(t, b, orgA, 3); e.Seq != 3 {
		t.Fatalf("next append got seq %d, want 3", e.Seq)
	}
	wantValid(t, b, orgA, 3)
}

func testWrongEntry(t *testing.T, h Harness) {
	b := h.Open(t)
	appendN(t, b, orgA, 3)
	before := head(t, b, orgA)
	cases := []struct {
		name  string
		head  ledger.Head // the head the bad entry is built on
		orgID string
	}{
		{"SkipsASeq", ledger.Head{Seq: before.Seq + 1, EntryHash: before.EntryHash}, orgA},
		{"ReplaysTheHead", ledger.Head{Seq: before.Seq - 1, EntryHash: before.EntryHash}, orgA},
		{"OtherOrg", before, orgB},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := ledger.Next(c.head, c.orgID, record(99), base)
			if err != nil {
				t.Fatal(err)
			}
			err = b.Update(t.Context(), orgA, func(tx store.Tx) error {
				return tx.PutLedgerEntry(t.Context(), e)
			})
			if err == nil {
				t.Fatalf("PutLedgerEntry(seq %d, org %s) after head %d succeeded", e.Seq, e.OrgID, before.Seq)
			}
			if got := head(t, b, orgA); got != before {
				t.Fatalf("head = %+v, want %+v", got, before)
			}
			if got := head(t, b, orgB); got != (ledger.Head{}) {
				t.Fatalf("head of %s = %+v, want zero", orgB, got)
			}
			wantValid(t, b, orgA, 3)
		})
	}
}

func testConcurrent(t *testing.T, h Harness) {
	const workers, each = 8, 50
	b := h.Open(t)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				n := w*each + i
				err := b.Update(context.Background(), orgA, func(tx store.Tx) error {
					_, err := ledger.Append(context.Background(), tx, orgA, record(n), base.Add(time.Duration(n)*time.Millisecond))
					return err
				})
				if err != nil {
					t.Errorf("worker %d append %d: %v", w, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	got := all(t, b, orgA)
	if len(got) != workers*each {
		t.Fatalf("%d entries, want %d", len(got), workers*each)
	}
	seen := make(map[string]bool)
	for i, e := range got {
		if e.Seq != uint64(i+1) {
			t.Fatalf("entry %d has seq %d", i, e.Seq)
		}
		if seen[e.SubjectID] {
			t.Fatalf("subject %s appended twice", e.SubjectID)
		}
		seen[e.SubjectID] = true
	}
	wantValid(t, b, orgA, workers*each)
}

func testPaging(t *testing.T, h Harness) {
	b := h.Open(t)
	want := appendN(t, b, orgA, 25)
	appendN(t, b, orgB, 4)
	cases := []struct {
		after      uint64
		limit      int
		first, num int // want want[first:first+num]
	}{
		{0, 10, 0, 10},
		{10, 10, 10, 10},
		{20, 10, 20, 5},
		{25, 10, 25, 0},
		{100, 10, 25, 0},
		{3, 1, 3, 1},
		{0, 1000, 0, 25},
	}
	for _, c := range cases {
		got, err := b.LedgerEntries(t.Context(), orgA, c.after, c.limit)
		if err != nil {
			t.Fatalf("LedgerEntries(after %d, limit %d): %v", c.after, c.limit, err)
		}
		if diff := cmp.Diff(want[c.first:c.first+c.num], got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("LedgerEntries(after %d, limit %d) (-want +got):\n%s", c.after, c.limit, diff)
		}
	}
}

// tamperSetup appends 8 entries to orgA and 3 to orgB.
func tamperSetup(t *testing.T, h Harness) (store.Backend, []ledger.Entry) {
	t.Helper()
	if h.OverwriteEntry == nil || h.DeleteEntry == nil {
		t.Skip("the harness has no raw entry access")
	}
	b := h.Open(t)
	entries := appendN(t, b, orgA, 8)
	appendN(t, b, orgB, 3)
	wantValid(t, b, orgA, 8)
	return b, entries
}

func testTamperChanged(t *testing.T, h Harness) {
	b, entries := tamperSetup(t, h)
	e := entries[4]
	e.SubjectID = "dec_forged"
	h.OverwriteEntry(t, b, orgA, 5, e)
	wantBroken(t, b, orgA, 5, ledger.ReasonHashMismatch)
	wantValid(t, b, orgB, 3)
}

func testTamperDeleted(t *testing.T, h Harness) {
	b, _ := tamperSetup(t, h)
	h.DeleteEntry(t, b, orgA, 5)
	wantBroken(t, b, orgA, 5, ledger.ReasonSeqGap)
	wantValid(t, b, orgB, 3)
}

func testTamperSwapped(t *testing.T, h Harness) {
	b, entries := tamperSetup(t, h)
	h.OverwriteEntry(t, b, orgA, 4, entries[4])
	h.OverwriteEntry(t, b, orgA, 5, entries[3])
	// A backend storing entries by position reports the seq gap; one that
	// keeps the seq in its own column reports the recomputed hash.
	wantBroken(t, b, orgA, 4, ledger.ReasonSeqGap, ledger.ReasonHashMismatch)
}

func testTamperTruncated(t *testing.T, h Harness) {
	b, _ := tamperSetup(t, h)
	h.DeleteEntry(t, b, orgA, 8)
	wantBroken(t, b, orgA, 8, ledger.ReasonHeadMismatch)
}
