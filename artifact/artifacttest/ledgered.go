package artifacttest

import (
	"context"
	"testing"
	"time"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/store"
)

type note struct {
	ID        string `json:"id"`
	Text      string `json:"text"`
	LedgerSeq uint64 `json:"ledger_seq"`
}

// testLedgered: RecordLedgered binds the stored body and its ledger entry to
// each other (the body names the entry's seq, the entry carries the body's
// digest), and List reads the records back by ref, oldest first, bounded.
func testLedgered(t *testing.T, e env) {
	ctx := context.Background()
	const org = "org_ledgered"
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i, id := range []string{"n1", "n2", "n3"} {
		n := note{ID: id, Text: "note " + id}
		err := e.b.Update(ctx, org, func(tx store.Tx) error {
			return artifact.RecordLedgered(ctx, tx, "note", id, "thread-1", "note.recorded", at.Add(time.Duration(i)*time.Second), &n.LedgerSeq, &n)
		})
		if err != nil {
			t.Fatal(err)
		}
		if n.LedgerSeq != uint64(i+1) {
			t.Fatalf("%s: seq %d, want %d", id, n.LedgerSeq, i+1)
		}
		rec, err := e.r.Artifact(ctx, org, "note", id)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := e.b.LedgerEntries(ctx, org, uint64(i), 1)
		if err != nil || len(entries) != 1 || entries[0].PayloadDigest != canon.Digest(rec.Body) || entries[0].Kind != "note.recorded" {
			t.Fatalf("%s: entry %+v, %v; want the body's digest", id, entries, err)
		}
	}
	var got []note
	truncated, err := artifact.List(ctx, e.r, org, "note", "thread-1", 2, &got)
	if err != nil || !truncated || len(got) != 2 || got[0].ID != "n1" || got[1].LedgerSeq != 2 {
		t.Fatalf("List(max 2) = %+v, truncated %v, %v", got, truncated, err)
	}
	var none []note
	if truncated, err := artifact.List(ctx, e.r, "org_other", "note", "thread-1", 2, &none); err != nil || truncated || none == nil || len(none) != 0 {
		t.Fatalf("another org's List = %#v, %v, %v; want an empty, non-nil list", none, truncated, err)
	}
}
