package jobstest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clearancehq/clearance/jobs"
	"github.com/clearancehq/clearance/store"
)

// Harness gives the suite a backend on a clock.
type Harness struct {
	// Open returns a fresh, empty backend whose store clock is now, or
	// the backend's own clock when now is nil; the harness closes it.
	Open func(t *testing.T, now func() time.Time) store.Backend
	// Reopen closes b and opens the same data again on clock now: a
	// restart. When nil, the restart test is skipped.
	Reopen func(t *testing.T, b store.Backend, now func() time.Time) store.Backend
}

const (
	orgA = "org_jobs_a"
	orgB = "org_jobs_b"
	kind = "export"

	lease = time.Minute
)

// base is the suite's first instant: whole microseconds.
var base = time.Date(2026, 3, 1, 12, 0, 0, 654321000, time.UTC)

var errBoom = errors.New("jobstest: fn failed on purpose")

var policy = jobs.Policy{Lease: lease, MaxAttempts: 5}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	if h.Open == nil {
		t.Fatal("jobstest: Harness.Open is nil")
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, e *env)
	}{
		{"Lifecycle", testLifecycle},
		{"DueOrder", testDueOrder},
		{"EnqueuedForLater", testEnqueueAt},
		{"OneOwnerPerJob", testOneOwner},
		{"DrainWithClaimNext", testDrain},
		{"ExpiredLeaseTakenOver", testTakeover},
		{"StaleOwnerRefused", testStaleOwner},
		{"RestartResumes", func(t *testing.T, e *env) { testRestart(t, e, h) }},
		{"OrgIsolation", testOrgIsolation},
		{"InvalidRefused", testInvalid},
		{"FailedUpdateWritesNothing", testFailedUpdate},
		{"InsertedAndClaimedAtOnce", testInsert},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{t: base}
			tc.fn(t, &env{b: h.Open(t, c.Now), clk: c})
		})
	}
	t.Run("StoreOwnClock", func(t *testing.T) { testOwnClock(t, h.Open(t, nil)) })
}

// clock is the backend's store clock; the suite moves it.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type env struct {
	b   store.Backend
	clk *clock
}

func updater(b store.Backend) jobs.Updater {
	return func(ctx context.Context, orgID string, fn func(tx jobs.Tx) error) error {
		return b.Update(ctx, orgID, func(tx store.Tx) error { return fn(tx) })
	}
}

// do runs fn in one Update of org and returns the job it leaves.
func do(t *testing.T, b store.Backend, org string, fn func(tx jobs.Tx) (jobs.Job, error)) (jobs.Job, error) {
	t.Helper()
	var out jobs.Job
	err := b.Update(t.Context(), org, func(tx store.Tx) error {
		j, err := fn(tx)
		out = j
		return err
	})
	return out, err
}

func enqueue(t *testing.T, b store.Backend, org, id string) jobs.Job {
	t.Helper()
	j, err := do(t, b, org, func(tx jobs.Tx) (jobs.Job, error) {
		j, _, err := jobs.Enqueue(t.Context(), tx, kind, id, []byte("payload "+id))
		return j, err
	})
	if err != nil {
		t.Fatalf("Enqueue(%s/%s): %v", org, id, err)
	}
	return j
}

func claim(t *testing.T, b store.Backend, org, id, owner string) (jobs.Job, error) {
	t.Helper()
	return do(t, b, org, func(tx jobs.Tx) (jobs.Job, error) { return jobs.Claim(t.Context(), tx, kind, id, owner, policy) })
}

func mustClaim(t *testing.T, b store.Backend, org, id, owner string) jobs.Job {
	t.Helper()
	j, err := claim(t, b, org, id, owner)
	if err != nil || j.State != jobs.Running || j.Owner != owner {
		t.Fatalf("Claim(%s/%s) by %s = %+v, %v", org, id, owner, j, err)
	}
	return j
}

var equalTimes = cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })

func wantJob(t *testing.T, what string, got jobs.Job, err error, want jobs.Job) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if len(got.Payload) == 0 && len(want.Payload) == 0 {
		got.Payload, want.Payload = nil, nil
	}
	if len(got.Result) == 0 && len(want.Result) == 0 {
		got.Result, want.Result = nil, nil
	}
	if d := cmp.Diff(want, got, equalTimes); d != "" {
		t.Fatalf("%s (-want +got):\n%s", what, d)
	}
}

func wantStored(t *testing.T, b store.Backend, want jobs.Job) {
	t.Helper()
	got, err := b.Job(t.Context(), want.OrgID, want.Kind, want.ID)
	wantJob(t, "Job("+want.OrgID+"/"+want.ID+")", got, err, want)
}

func due(t *testing.T, b store.Backend, k string, limit int) []string {
	t.Helper()
	js, err := b.DueJobs(t.Context(), k, limit)
	if err != nil {
		t.Fatalf("DueJobs(%s): %v", k, err)
	}
	out := []string{}
	for _, j := range js {
		if j.Kind != k || (j.State != jobs.Queued && j.State != jobs.Running) {
			t.Fatalf("DueJobs(%s) listed %+v", k, j)
		}
		out = append(out, j.OrgID+"/"+j.ID)
	}
	return out
}

func wantDue(t *testing.T, b store.Backend, k string, limit int, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if got := due(t, b, k, limit); !slices.Equal(got, want) {
		t.Fatalf("DueJobs(%s, %d) = %v, want %v", k, limit, got, want)
	}
}

func wantErr(t *testing.T, what string, err, sentinel error) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("%s = %v, want %v", what, err, sentinel)
	}
}

func testLifecycle(t *testing.T, e *env) {
	ctx := t.Context()
	j := enqueue(t, e.b, orgA, "job_1")
	want := jobs.Job{OrgID: orgA, Kind: kind, ID: "job_1", Payload: []byte("payload job_1"), State: jobs.Queued,
		Due: base, CreatedAt: base, UpdatedAt: base}
	wantJob(t, "Enqueue", j, nil, want)
	wantStored(t, e.b, want)

	// Enqueueing the id again returns the job as it stands.
	e.clk.Add(time.Second)
	again, err := do(t, e.b, orgA, func(tx jobs.Tx) (jobs.Job, error) {
		j, created, err := jobs.Enqueue(ctx, tx, kind, "job_1", []byte("other payload"))
		if err == nil && created {
			err = errors.New("created again")
		}
		return j, err
	})
	wantJob(t, "Enqueue again", again, err, want)
	wantDue(t, e.b, kind, 0, orgA+"/job_1")

	held := mustClaim(t, e.b, orgA, "job_1", "worker-1")
	at := base.Add(time.Second)
	want.State, want.Attempts, want.Owner, want.LeaseUntil, want.Due, want.UpdatedAt = jobs.Running, 1, "worker-1", at.Add(lease), at.Add(lease), at
	wantJob(t, "Claim", held, nil, want)
	wantStored(t, e.b, want)
	wantDue(t, e.b, kind, 0)
	_, err = claim(t, e.b, orgA, "job_1", "worker-2")
	wantErr(t, "Claim of a held job", err, jobs.ErrNotDue)

	// A heartbeat moves the lease on; the fence is the claim, not its lease.
	e.clk.Add(lease / 2)
	at = at.Add(lease / 2)
	got, err := do(t, e.b, orgA, func(tx jobs.Tx) (jobs.Job, error) { return jobs.Heartbeat(ctx, tx, held, lease) })
	want.LeaseUntil, want.Due, want.UpdatedAt = at.Add(lease), at.Add(lease), at
	wantJob(t, "Heartbeat", got, err, want)
	e.clk.Add(lease - time.Second) // past the first lease, within the renewed one
	wantDue(t, e.b, kind, 0)

	at = at.Add(lease - time.Second)
	got, err = do(t, e.b, orgA, func(tx jobs.Tx) (jobs.Job, error) { return jobs.Finish(ctx, tx, held, []byte("result")) })
	want.State, want.Owner, want.LeaseUntil, want.Due, want.UpdatedAt, want.Result = jobs.Done, "", time.Time{}, time.Time{}, at, []byte("result")
	wantJob(t, "Finish", got, err, want)
	wantStored(t, e.b, want)
	e.clk.Add(time.Hour)
	wantDue(t, e.b, kind, 0)
	_, err = claim(t, e.b, orgA, "job_1", "worker-2")
	wantErr(t, "Claim of a finished job", err, jobs.ErrNotDue)

	// A job that fails for good is not due either.
	enqueue(t, e.b, orgA, "job_2")
	held = mustClaim(t, e.b, orgA, "job_2", "worker-1")
	got, err = do(t, e.b, orgA, func(tx jobs.Tx) (jobs.Job, error) { return jobs.Fail(ctx, tx, held, "broken\nfor good") })
	if err != nil || got.State != jobs.Failed || got.Failure != "broken\nfor good" {
		t.Fatalf("Fail = %+v, %v", got, err)
	}
	wantStored(t, e.b, got)
	wantDue(t, e.b, kind, 0)
}

// testInsert: a job written by InsertJob, and one created already held
// (EnqueueClaimed), are stored and indexed like any other, and their
// later writes move their due entries.
func testInsert(t *testing.T, e *env) {
	ctx := t.Context()
	want := jobs.Job{OrgID: orgA, Kind: kind, ID: "ins_1", Payload: []byte("inserted"), State: jobs.Queued,
		Due: base, CreatedAt: base, UpdatedAt: base}
	_, err := do(t, e.b, orgA, func(tx jobs.Tx) (jobs.Job, error) { return want, tx.InsertJob(ctx, want) })
	if err != nil {
		t.Fatalf("InsertJob: %v", err)
	}
	wantStored(t, e.b, want)
	wantDue(t, e.b, kind, 0, orgA+"/ins_1")
	held := mustClaim(t, e.b, orgA, "ins_1", "worker-1")
	wantDue(t, e.b, kind, 0)
	if _, err := do(t, e.b, orgA, func(tx jobs.Tx) (jobs.Job, error) { return jobs.Finish(ctx, tx, held, nil) }); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	wantDue(t, e.b, kind, 0)

	held, err = do(t, e.b, orgA, func(tx jobs.Tx) (jobs.Job, error) {
		j, created, err := jobs.EnqueueClaimed(ctx, tx, kind, "ins_2", []byte("held"), "worker-1", policy)
		if err == nil && !created {
			err = errors.New("not created")
		}
		return j, err
	})
	if err != nil || held.State != jobs.Running || held.Attempts != 1 || !held.Due.Equal(base.Add(lease)) {
		t.Fatalf("EnqueueClaimed = %+v, %v", held, err)
	}
	wantStored(t, e.b, held)
	// Held: not due until its lease passes, then taken over.
	wantDue(t, e.b, kind, 0)
	_, err = claim(t, e.b, orgA, "ins_2", "worker-2")
	wantErr(t, "Claim of a held job", err, jobs.ErrNotDue)
	e.clk.Add(lease)
	wantDue(t, e.b, kind, 0, orgA+"/ins_2")
	if got := mustClaim(t, e.b, orgA, "ins_2", "worker-2"); got.Attempts != 2 {
		t.Fatalf("taken over: %+v", got)
	}
	wantDue(t, e.b, kind, 0)
}

func testDueOrder(t *testing.T, e *env) {
	// Due times: b/2 and a/3 share one instant; a/1 is older; a/4 is
	// released for later; another kind and a kind that extends this one's
	// name are not listed.
	enqueue(t, e.b, orgA, "1")
	e.clk.Add(time.Millisecond)
	enqueue(t, e.b, orgB, "2")
	enqueue(t, e.b, orgA, "3")
	for _, k := range []string{"other", kind + "s"} {
		if _, err := do(t, e.b, orgA, func(tx jobs.Tx) (jobs.Job, error) {
			j, _, err := jobs.Enqueue(t.Context(), tx, k, "x", nil)
			return j, err
		}); err != nil {
			t.Fatal(err)
		}
	}
	enqueue(t, e.b, orgA, "4")
	held := mustClaim(t, e.b, orgA, "4", "w")
	if _, err := do(t, e.b, orgA, func(tx jobs.Tx) (jobs.Job, error) {
		return jobs.Release(t.Context(), tx, held, "retry later", time.Second)
	}); err != nil {
		t.Fatal(err)
	}
	wantDue(t, e.b, kind, 0, orgA+"/1", orgA+"/3", orgB+"/2")
	wantDue(t, e.b, kind, 2, orgA+"/1", orgA+"/3")
	wantDue(t, e.b, "other", 0, orgA+"/x")
	wantDue(t, e.b, "nothing", 0)
	e.clk.Add(time.Second)
	wantDue(t, e.b, kind, 0, orgA+"/1", orgA+"/3", orgB+"/2", orgA+"/4")
	// A running job is listed once its lease has passed, at its lease's end.
	held = mustClaim(t, e.b, orgA, "1", "w")
	wantDue(t, e.b, kind, 0, orgA+"/3", orgB+"/2", orgA+"/4")
	e.clk.Add(lease)
	wantDue(t, e.b, kind, 0, orgA+"/3", orgB+"/2", orgA+"/4", orgA+"/1")
	if !held.LeaseUntil.Equal(e.clk.Now()) {
		t.Fatalf("lease until %v, clock %v", held.LeaseUntil, e.clk.Now())
	}
}

func testEnqueueAt(t *testing.T, e *env) {
	ctx := t.Context()
	at := func(id string, due time.Time) jobs.Job {
		t.Helper()
		j, err := do(t, e.b, orgA, func(tx jobs.Tx) (jobs.Job, error) {
			j, _, err := jobs.EnqueueAt(ctx, tx, kind, id, nil, due)
			return j, err
		})
		if err != nil {
			t.Fatalf("EnqueueAt(%s): %v", id, err)
		}
		return j
	}
	later := at("later", base.Add(time.Minute))
	if !later.Due.Equal(base.Add(time.Minute)) || later.State != jobs.Queued {
		t.Fatalf("EnqueueAt for later: %+v", later)
	}
	// A due time already passed, or none, is now.
	if j := at("past", base.Add(-time.Hour)); !j.Due.Equal(base) {
		t.Fatalf("EnqueueAt in the past: due %v, want %v", j.Due, base)
	}
	if j := at("zero", time.Time{}); !j.Due.Equal(base) {
		t.Fatalf("EnqueueAt without a time: due %v, want %v", j.Due, base)
	}
	wantDue(t, e.b, kind, 0, orgA+"/past", orgA+"/zero")
	_, err := claim(t, e.b, orgA, "later", "w")
	wantErr(t, "Claim before the due time", err, jobs.ErrNotDue)
	// Enqueueing it again (at another time) leaves it as it stands.
	if j := at("later", base); !j.Due.Equal(base.Add(time.Minute)) {
		t.Fatalf("EnqueueAt again moved the job: %+v", j)
	}
	e.clk.Add(time.Minute)
	wantDue(t, e.b, kind, 0, orgA+"/past", orgA+"/zero", orgA+"/later")
	mustClaim(t, e.b, orgA, "later", "w")
}

func testOneOwner(t *testing.T, e *env) {
	enqueue(t, e.b, orgA, "contended")
	const workers = 32
	var wins atomic.Int32
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var got jobs.Job
			err := e.b.Update(context.Background(), orgA, func(tx store.Tx) error {
				j, err := jobs.Claim(context.Background(), tx, kind, "contended", fmt.Sprintf("w%02d", w), policy)
				got = j
				return err
			})
			switch {
			case err == nil:
				wins.Add(1)
				if got.Attempts != 1 {
					t.Errorf("winner's attempts = %d", got.Attempts)
				}
			case !errors.Is(err, jobs.ErrNotDue):
				t.Errorf("worker %d: %v", w, err)
			}
		})
	}
	wg.Wait()
	if n := wins.Load(); n != 1 {
		t.Fatalf("%d workers own the job, want 1", n)
	}
}

func testDrain(t *testing.T, e *env) {
	const n, workers = 40, 8
	for i := range n {
		enqueue(t, e.b, []string{orgA, orgB}[i%2], fmt.Sprintf("job_%02d", i))
	}
	var mu sync.Mutex
	claimed := map[string]string{}
	var wg sync.WaitGroup
	update := updater(e.b)
	for w := range workers {
		wg.Go(func() {
			owner := fmt.Sprintf("w%d", w)
			for idle := 0; idle < 3; {
				ctx := context.Background()
				j, ok, err := jobs.ClaimNext(ctx, e.b, update, kind, owner, policy)
				if err != nil {
					t.Errorf("%s: ClaimNext: %v", owner, err)
					return
				}
				if !ok {
					idle++
					continue
				}
				idle = 0
				mu.Lock()
				if prev, dup := claimed[j.OrgID+"/"+j.ID]; dup {
					t.Errorf("%s/%s claimed by %s and %s", j.OrgID, j.ID, prev, owner)
				}
				claimed[j.OrgID+"/"+j.ID] = owner
				mu.Unlock()
				if err := update(ctx, j.OrgID, func(tx jobs.Tx) error {
					_, err := jobs.Finish(ctx, tx, j, nil)
					return err
				}); err != nil {
					t.Errorf("%s: Finish: %v", owner, err)
				}
			}
		})
	}
	wg.Wait()
	if len(claimed) != n {
		t.Fatalf("%d of %d jobs claimed", len(claimed), n)
	}
	wantDue(t, e.b, kind, 0)
}
