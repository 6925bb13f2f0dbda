package pgstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pgstore"
)

// TestObserveGroupCommit: the Updates that share a COMMIT each report it,
// with the number of them whose functions succeeded as its batch, and
// exactly one of them as its lead; one whose function failed reports
// nothing, and neither does the held Update's own commit more than once.
func TestObserveGroupCommit(t *testing.T) {
	t.Parallel()
	s, _ := open(t, pgstore.Options{MaxConns: 2})
	const org = "org_observe"
	var mu sync.Mutex
	var seen []store.Commit
	s.ObserveCommits(func(_ context.Context, c store.Commit) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, c)
	})
	refused := errors.New("refused by fn")
	errs, commits := grouped(t, s, org,
		func(tx store.Tx) error { return appendEntry(tx, "held") },
		func(tx store.Tx) error { return appendEntry(tx, "a") },
		func(tx store.Tx) error {
			if err := appendEntry(tx, "never"); err != nil {
				return err
			}
			return refused
		},
		func(tx store.Tx) error { return appendEntry(tx, "c") },
	)
	if errs[0] != nil || !errors.Is(errs[1], refused) || errs[2] != nil || commits != 1 {
		t.Fatalf("outcomes %v, %d commits after the held one", errs, commits)
	}
	if len(seen) != 3 {
		t.Fatalf("%d commits observed, want 3 (held alone, then two Updates of one group): %+v", len(seen), seen)
	}
	leads, grouped := 0, 0
	for _, c := range seen {
		if c.Backend != store.BackendPostgreSQL || c.Start.IsZero() || c.End.Before(c.Start) {
			t.Errorf("commit %+v", c)
		}
		if c.Lead {
			leads++
		}
		if c.Batch == 2 {
			grouped++
		} else if c.Batch != 1 || !c.Lead {
			t.Errorf("commit %+v: want the held Update's own (batch 1, lead) or the group's (batch 2)", c)
		}
	}
	if leads != 2 || grouped != 2 {
		t.Fatalf("%d leads and %d grouped reports, want 2 and 2: %+v", leads, grouped, seen)
	}
}
