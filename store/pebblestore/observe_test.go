package pebblestore

import (
	"context"
	"sync"
	"testing"

	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
)

// TestObserveCommits: every Update that writes reports its commit once, in
// its own goroutine with its own context, timed and with a batch of at
// least itself; one that writes nothing reports none.
func TestObserveCommits(t *testing.T) {
	s := openMem(t)
	type key struct{}
	var mu sync.Mutex
	var seen []store.Commit
	var tags []any
	s.ObserveCommits(func(ctx context.Context, c store.Commit) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, c)
		tags = append(tags, ctx.Value(key{}))
	})
	const org = "org_observe"
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			ctx := context.WithValue(context.Background(), key{}, i)
			if err := s.Update(ctx, org, func(tx store.Tx) error {
				_, err := ledger.Append(ctx, tx, org, ledger.Record{Kind: ledger.KindDecision, SubjectID: "d"}, s.now())
				return err
			}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := s.Update(context.Background(), org, func(tx store.Tx) error {
		_, err := tx.LedgerHead(context.Background())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 8 {
		t.Fatalf("%d commits observed, want 8 (one per writing Update): %+v", len(seen), seen)
	}
	got := map[any]bool{}
	for i, c := range seen {
		if c.Backend != store.BackendPebble || !c.Lead || c.Batch < 1 || c.Batch > 8 || c.Start.IsZero() || c.End.Before(c.Start) {
			t.Errorf("commit %d: %+v", i, c)
		}
		got[tags[i]] = true
	}
	if len(got) != 8 {
		t.Errorf("commits were reported with %d distinct Update contexts, want 8", len(got))
	}
	s.ObserveCommits(nil)
	if err := s.Update(context.Background(), org, func(tx store.Tx) error {
		_, err := ledger.Append(context.Background(), tx, org, ledger.Record{Kind: ledger.KindDecision, SubjectID: "e"}, s.now())
		return err
	}); err != nil || len(seen) != 8 {
		t.Fatalf("after ObserveCommits(nil): %v, %d observed", err, len(seen))
	}
}
