package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pgstore"
)

// held starts an Update of org whose fn waits, once it runs, until
// release is called, then runs fn; it returns once that Update runs.
// done delivers its error.
func held(t *testing.T, s *pgstore.Store, org string, fn func(tx store.Tx) error) (release func(), done <-chan error) {
	t.Helper()
	released, running := make(chan struct{}), make(chan struct{})
	out := make(chan error, 1)
	go func() {
		out <- s.Update(t.Context(), org, func(tx store.Tx) error {
			close(running)
			<-released
			return fn(tx)
		})
	}()
	<-running
	return func() { close(released) }, out
}

// waitQueued returns once n Updates of org wait in s's queue.
func waitQueued(s *pgstore.Store, org string, n int) {
	for pgstore.Waiting(s, org) < n {
		runtime.Gosched()
	}
}

// grouped runs fns as Updates of org that all wait behind one held Update,
// so that they run as one group, in order. hold runs first, alone. It
// returns each Update's error (a panic's value as an error "panic: v") and
// how many write commits the store made after hold's.
func grouped(t *testing.T, s *pgstore.Store, org string, hold func(tx store.Tx) error, fns ...func(tx store.Tx) error) ([]error, int64) {
	t.Helper()
	var commits atomic.Int64
	pgstore.SetCommitHooks(s, func(string, *pgx.Conn) { commits.Add(1) }, nil)
	t.Cleanup(func() { pgstore.SetCommitHooks(s, nil, nil) })

	release, holdDone := held(t, s, org, hold)
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() {
			defer func() {
				if p := recover(); p != nil {
					errs[i] = fmt.Errorf("panic: %v", p)
				}
			}()
			errs[i] = s.Update(t.Context(), org, fn)
		})
		waitQueued(s, org, i+1) // queued in this order
	}
	release()
	if err := <-holdDone; err != nil {
		t.Fatalf("held Update: %v", err)
	}
	wg.Wait()
	return errs, commits.Load() - 1
}

func appendEntry(tx store.Tx, subject string) error {
	_, err := ledger.Append(context.Background(), tx, tx.OrgID(), ledger.Record{Kind: ledger.KindDecision, SubjectID: subject}, at)
	return err
}

// TestGroupKeepsEachOutcome runs Updates of one org that share a
// transaction: those that succeed commit together, in order, each seeing
// the earlier ones' writes; one that fails, whether before or after its
// writes reached the server, or panics, or whose write is refused, leaves
// nothing, and the others are not affected.
func TestGroupKeepsEachOutcome(t *testing.T) {
	t.Parallel()
	s, _ := open(t, pgstore.Options{MaxConns: 2})
	const org = "org_group"
	refused := errors.New("refused by fn")
	var seenHead uint64
	var runs [7]atomic.Int64
	errs, commits := grouped(t, s, org,
		func(tx store.Tx) error {
			if err := tx.PutDossier(context.Background(), dossier.Stored{OrgID: org, DossierID: "dos_1", DecisionID: "dec_1", CreatedAt: at}); err != nil {
				return err
			}
			return appendEntry(tx, "held")
		},
		func(tx store.Tx) error { runs[0].Add(1); return appendEntry(tx, "a") },
		func(tx store.Tx) error { // fails before its writes are sent
			runs[1].Add(1)
			if err := appendEntry(tx, "never-b"); err != nil {
				return err
			}
			return refused
		},
		func(tx store.Tx) error { // fails after its writes were sent (a read flushes them)
			runs[2].Add(1)
			if err := appendEntry(tx, "never-c"); err != nil {
				return err
			}
			if _, err := tx.LedgerEntriesInTx(context.Background(), 0, 10); err != nil {
				return err
			}
			return refused
		},
		func(tx store.Tx) error { // sees "held" and "a" only
			runs[3].Add(1)
			h, err := tx.LedgerHead(context.Background())
			if err != nil {
				return err
			}
			seenHead = h.Seq
			return appendEntry(tx, "d")
		},
		func(tx store.Tx) error { // panics after writing
			runs[4].Add(1)
			if err := appendEntry(tx, "never-e"); err != nil {
				return err
			}
			panic("boom")
		},
		func(tx store.Tx) error { // its write (held's dossier again) is refused when sent, after fn returned
			runs[5].Add(1)
			if err := appendEntry(tx, "never-f"); err != nil {
				return err
			}
			return tx.PutDossier(context.Background(), dossier.Stored{OrgID: org, DossierID: "dos_1", DecisionID: "dec_1", CreatedAt: at})
		},
		func(tx store.Tx) error { runs[6].Add(1); return appendEntry(tx, "g") },
	)
	if commits != 1 {
		t.Errorf("the group made %d write commits; want 1 (one transaction)", commits)
	}
	want := []string{"", refused.Error(), refused.Error(), "", "panic: boom", "already exists", ""}
	for i, err := range errs {
		switch {
		case want[i] == "" && err != nil:
			t.Errorf("Update %d = %v; want success", i, err)
		case want[i] != "" && (err == nil || !strings.Contains(err.Error(), want[i])):
			t.Errorf("Update %d = %v; want an error containing %q", i, err, want[i])
		}
		if n := runs[i].Load(); n != 1 {
			t.Errorf("fn %d ran %d times; want once", i, n)
		}
	}
	if seenHead != 2 {
		t.Errorf("fn 3 saw head seq %d; want 2 (held, a)", seenHead)
	}
	wantSubjects(t, s, org, "held", "a", "d", "g")
}

// TestGroupMemberThatBreaksTheTransaction: a member whose statement error
// aborts the shared transaction with no savepoint to return to runs again
// alone, where its own error stands; the members before it run again, and
// every success lands once.
func TestGroupMemberThatBreaksTheTransaction(t *testing.T) {
	t.Parallel()
	s, _ := open(t, pgstore.Options{MaxConns: 2})
	const org = "org_group_abort"
	var runs [3]atomic.Int64
	errs, _ := grouped(t, s, org,
		func(tx store.Tx) error { return appendEntry(tx, "held") },
		func(tx store.Tx) error { runs[0].Add(1); return appendEntry(tx, "a") },
		func(tx store.Tx) error {
			runs[1].Add(1)
			// A NUL byte is not valid text: the server refuses the
			// statement, which aborts the transaction.
			_, err := tx.Idempotency(context.Background(), "scope", "bad\x00key")
			return err
		},
		func(tx store.Tx) error { runs[2].Add(1); return appendEntry(tx, "b") },
	)
	if errs[0] != nil || errs[2] != nil {
		t.Fatalf("Updates = %v; want 0 and 2 to succeed", errs)
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "0x00") {
		t.Fatalf("Update 1 = %v; want the server's refusal of the NUL byte", errs[1])
	}
	// 1 ran in the group, then alone; 0 ran in the group, then again after
	// 1; 2 ran once, after 1 ran alone.
	if r0, r1, r2 := runs[0].Load(), runs[1].Load(), runs[2].Load(); r0 != 2 || r1 != 2 || r2 != 1 {
		t.Errorf("runs = %d, %d, %d; want 2, 2, 1", r0, r1, r2)
	}
	wantSubjects(t, s, org, "held", "a", "b")
}

// TestGroupWaiterGivesUp: an Update whose context ends while it waits for
// its group returns at once and never runs.
func TestGroupWaiterGivesUp(t *testing.T) {
	t.Parallel()
	s, _ := open(t, pgstore.Options{MaxConns: 2})
	const org = "org_group_cancel"
	release, holdDone := held(t, s, org, func(tx store.Tx) error { return appendEntry(tx, "held") })
	ctx, cancel := context.WithCancel(t.Context())
	var ran atomic.Bool
	done := make(chan error, 1)
	go func() {
		done <- s.Update(ctx, org, func(tx store.Tx) error { ran.Store(true); return appendEntry(tx, "never") })
	}()
	waitQueued(s, org, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Update = %v; want context.Canceled while the org is held", err)
	}
	release()
	if err := <-holdDone; err != nil {
		t.Fatal(err)
	}
	if ran.Load() {
		t.Fatal("the cancelled Update ran")
	}
	wantSubjects(t, s, org, "held")
}

// TestGroupManyUpdates: many concurrent Updates of one org, some failing
// before or after their writes reach the server: exactly the successes
// land, as one gap-free ledger.
func TestGroupManyUpdates(t *testing.T) {
	t.Parallel()
	s, _ := open(t, pgstore.Options{MaxConns: 4})
	const org, workers, each = "org_group_many", 16, 25
	refused := errors.New("refused by fn")
	var ok atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				n := w*each + i
				err := s.Update(t.Context(), org, func(tx store.Tx) error {
					if err := appendEntry(tx, fmt.Sprint("e", n)); err != nil {
						return err
					}
					switch n % 5 {
					case 1:
						return refused
					case 2:
						if _, err := tx.LedgerEntriesInTx(context.Background(), 0, 1); err != nil {
							return err
						}
						return refused
					}
					return nil
				})
				switch {
				case err == nil:
					ok.Add(1)
				case !errors.Is(err, refused):
					t.Errorf("Update %d: %v", n, err)
				}
			}
		})
	}
	wg.Wait()
	if want := int64(workers * each * 3 / 5); ok.Load() != want {
		t.Fatalf("%d Updates succeeded; want %d", ok.Load(), want)
	}
	wantValid(t, s, org, uint64(ok.Load()))
}

// wantSubjects checks the org's ledger: valid, and these subjects in order.
func wantSubjects(t *testing.T, s *pgstore.Store, org string, subjects ...string) {
	t.Helper()
	wantValid(t, s, org, uint64(len(subjects)))
	entries, err := s.LedgerEntries(t.Context(), org, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(entries))
	for i, e := range entries {
		got[i] = e.SubjectID
	}
	if strings.Join(got, ",") != strings.Join(subjects, ",") {
		t.Fatalf("ledger subjects = %v; want %v", got, subjects)
	}
}

// TestGroupSavepointRepairsAbort: a member whose statement error aborts the
// shared transaction after its writes were sent is rolled back to its
// savepoint; the member before it keeps its work and runs once.
func TestGroupSavepointRepairsAbort(t *testing.T) {
	t.Parallel()
	s, _ := open(t, pgstore.Options{MaxConns: 2})
	const org = "org_group_savepoint"
	var runs [2]atomic.Int64
	errs, commits := grouped(t, s, org,
		func(tx store.Tx) error { return appendEntry(tx, "held") },
		func(tx store.Tx) error { runs[0].Add(1); return appendEntry(tx, "a") },
		func(tx store.Tx) error {
			runs[1].Add(1)
			if err := appendEntry(tx, "never"); err != nil {
				return err
			}
			if _, err := tx.LedgerEntriesInTx(context.Background(), 0, 1); err != nil { // sends the append
				return err
			}
			_, err := tx.Idempotency(context.Background(), "scope", "bad\x00key") // aborts the transaction
			return err
		},
	)
	if errs[0] != nil || errs[1] == nil {
		t.Fatalf("Updates = %v; want the first to succeed and the second to fail", errs)
	}
	if r0, r1 := runs[0].Load(), runs[1].Load(); r0 != 1 || r1 != 1 || commits != 1 {
		t.Errorf("runs %d, %d, write commits %d; want 1, 1 and 1 (repaired in place)", r0, r1, commits)
	}
	wantSubjects(t, s, org, "held", "a")
}

// TestGroupFnThatEndsItsGoroutine: an fn calling runtime.Goexit (as
// t.FailNow does) fails its own Update only; the members of its group run
// again, and the org keeps serving.
func TestGroupFnThatEndsItsGoroutine(t *testing.T) {
	t.Parallel()
	s, _ := open(t, pgstore.Options{MaxConns: 2})
	const org = "org_group_goexit"
	errs, _ := grouped(t, s, org,
		func(tx store.Tx) error { return appendEntry(tx, "held") },
		func(tx store.Tx) error { return appendEntry(tx, "a") },
		func(tx store.Tx) error {
			if err := appendEntry(tx, "never"); err != nil {
				return err
			}
			runtime.Goexit()
			return nil
		},
		func(tx store.Tx) error { return appendEntry(tx, "b") },
	)
	if errs[0] != nil || errs[2] != nil || errs[1] == nil || !strings.Contains(errs[1].Error(), "Goexit") {
		t.Fatalf("Updates = %v; want only the second to fail, naming Goexit", errs)
	}
	if err := s.Update(t.Context(), org, func(tx store.Tx) error { return appendEntry(tx, "c") }); err != nil {
		t.Fatalf("a later Update: %v", err)
	}
	wantSubjects(t, s, org, "held", "a", "b", "c")
}

// TestGroupMemberLeavesBeforeItRuns: a member whose context ends while an
// earlier member of its own group runs returns at once, and never runs.
func TestGroupMemberLeavesBeforeItRuns(t *testing.T) {
	t.Parallel()
	s, _ := open(t, pgstore.Options{MaxConns: 2})
	const org = "org_group_leaves"
	releaseHold, holdDone := held(t, s, org, func(tx store.Tx) error { return appendEntry(tx, "held") })
	releaseSlow, slowRunning := make(chan struct{}), make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		errs <- s.Update(t.Context(), org, func(tx store.Tx) error {
			close(slowRunning)
			<-releaseSlow
			return appendEntry(tx, "slow")
		})
	}()
	waitQueued(s, org, 1)
	ctx, cancel := context.WithCancel(t.Context())
	var ran atomic.Bool
	done := make(chan error, 1)
	go func() {
		done <- s.Update(ctx, org, func(tx store.Tx) error { ran.Store(true); return appendEntry(tx, "never") })
	}()
	waitQueued(s, org, 2)
	releaseHold() // the runner takes slow and the next one as one group
	<-slowRunning
	if n := pgstore.Waiting(s, org); n != 0 {
		t.Fatalf("%d Updates still wait; want both taken into the group", n)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Update = %v; want context.Canceled while slow still runs", err)
	}
	close(releaseSlow)
	for _, c := range []<-chan error{holdDone, errs} {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	if ran.Load() {
		t.Fatal("the member that left ran")
	}
	wantSubjects(t, s, org, "held", "slow")
}
