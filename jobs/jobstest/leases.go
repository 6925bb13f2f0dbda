package jobstest

import (
	"fmt"
	"testing"
	"time"

	"github.com/clearancehq/clearance/jobs"
	"github.com/clearancehq/clearance/store"
)

// The tests of stale owners, restarts, isolation and refusals.

func testTakeover(t *testing.T, e *env) {
	ctx := t.Context()
	enqueue(t, e.b, orgA, "job_1")
	stale := mustClaim(t, e.b, orgA, "job_1", "dead")
	e.clk.Add(lease - time.Microsecond)
	wantDue(t, e.b, kind, 0)
	_, err := claim(t, e.b, orgA, "job_1", "next")
	wantErr(t, "Claim a microsecond before the lease ends", err, jobs.ErrNotDue)
	e.clk.Add(time.Microsecond)
	wantDue(t, e.b, kind, 0, orgA+"/job_1")
	next := mustClaim(t, e.b, orgA, "job_1", "next")
	if next.Attempts != 2 || next.Failure == "" || !next.LeaseUntil.Equal(e.clk.Now().Add(lease)) {
		t.Fatalf("takeover = %+v", next)
	}
	for name, call := range map[string]func(tx jobs.Tx) (jobs.Job, error){
		"Heartbeat": func(tx jobs.Tx) (jobs.Job, error) { return jobs.Heartbeat(ctx, tx, stale, lease) },
		"Finish":    func(tx jobs.Tx) (jobs.Job, error) { return jobs.Finish(ctx, tx, stale, []byte("stale")) },
		"Fail":      func(tx jobs.Tx) (jobs.Job, error) { return jobs.Fail(ctx, tx, stale, "stale") },
		"Release":   func(tx jobs.Tx) (jobs.Job, error) { return jobs.Release(ctx, tx, stale, "stale", 0) },
	} {
		_, err := do(t, e.b, orgA, call)
		wantErr(t, "the stale owner's "+name, err, jobs.ErrNotOwner)
	}
	wantStored(t, e.b, next)
	// The same owner name claiming again is a new claim: the old fence
	// (an earlier attempt) stays refused.
	e.clk.Add(lease)
	again := mustClaim(t, e.b, orgA, "job_1", "next")
	_, err = do(t, e.b, orgA, func(tx jobs.Tx) (jobs.Job, error) { return jobs.Finish(ctx, tx, next, nil) })
	wantErr(t, "Finish of an earlier attempt of the same owner", err, jobs.ErrNotOwner)
	got, err := do(t, e.b, orgA, func(tx jobs.Tx) (jobs.Job, error) { return jobs.Finish(ctx, tx, again, []byte("ok")) })
	if err != nil || got.State != jobs.Done || got.Attempts != 3 {
		t.Fatalf("Finish by the owner = %+v, %v", got, err)
	}
}

func testStaleOwner(t *testing.T, e *env) {
	ctx := t.Context()
	enqueue(t, e.b, orgA, "job_1")
	held := mustClaim(t, e.b, orgA, "job_1", "slow")
	e.clk.Add(lease) // exactly the boundary: no longer held
	for name, call := range map[string]func(tx jobs.Tx) (jobs.Job, error){
		"Heartbeat": func(tx jobs.Tx) (jobs.Job, error) { return jobs.Heartbeat(ctx, tx, held, lease) },
		"Finish":    func(tx jobs.Tx) (jobs.Job, error) { return jobs.Finish(ctx, tx, held, nil) },
		"Fail":      func(tx jobs.Tx) (jobs.Job, error) { return jobs.Fail(ctx, tx, held, "late") },
		"Release":   func(tx jobs.Tx) (jobs.Job, error) { return jobs.Release(ctx, tx, held, "late", 0) },
	} {
		_, err := do(t, e.b, orgA, call)
		wantErr(t, "the late owner's "+name, err, jobs.ErrLeaseExpired)
	}
	wantStored(t, e.b, held)
}

func testRestart(t *testing.T, e *env, h Harness) {
	if h.Reopen == nil {
		t.Skip("the harness cannot reopen a backend")
	}
	ctx := t.Context()
	enqueue(t, e.b, orgA, "handed_back")
	enqueue(t, e.b, orgB, "died")
	held := mustClaim(t, e.b, orgA, "handed_back", "old")
	if _, err := do(t, e.b, orgA, func(tx jobs.Tx) (jobs.Job, error) {
		return jobs.Release(ctx, tx, held, "shutting down", 0)
	}); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, e.b, orgB, "died", "old")
	b := h.Reopen(t, e.b, e.clk.Now)
	update := updater(b)
	j, ok, err := jobs.ClaimNext(ctx, b, update, kind, "new", policy)
	if err != nil || !ok || j.ID != "handed_back" || j.Attempts != 2 || j.Failure != "shutting down" {
		t.Fatalf("ClaimNext after the restart = %+v, %v, %v", j, ok, err)
	}
	if _, ok, err := jobs.ClaimNext(ctx, b, update, kind, "new", policy); ok || err != nil {
		t.Fatalf("ClaimNext while the dead worker's lease lasts = %v, %v", ok, err)
	}
	if err := update(ctx, orgA, func(tx jobs.Tx) error { _, err := jobs.Finish(ctx, tx, j, nil); return err }); err != nil {
		t.Fatal(err)
	}
	e.clk.Add(lease)
	j, ok, err = jobs.ClaimNext(ctx, b, update, kind, "new", policy)
	if err != nil || !ok || j.OrgID != orgB || j.ID != "died" || j.Attempts != 2 {
		t.Fatalf("ClaimNext after the lease = %+v, %v, %v", j, ok, err)
	}
}

func testOrgIsolation(t *testing.T, e *env) {
	ctx := t.Context()
	a := enqueue(t, e.b, orgA, "same")
	_, err := e.b.Job(ctx, orgB, kind, "same")
	wantErr(t, "Job of another org", err, jobs.ErrNotFound)
	wantErr(t, "Job of another org", err, store.ErrNotFound)
	_, err = claim(t, e.b, orgB, "same", "w")
	wantErr(t, "Claim in another org", err, jobs.ErrNotFound)
	b := enqueue(t, e.b, orgB, "same")
	mustClaim(t, e.b, orgB, "same", "w")
	wantStored(t, e.b, a)
	if b.OrgID != orgB {
		t.Fatalf("enqueued %+v", b)
	}
	other := a
	other.OrgID = orgB
	err = e.b.Update(ctx, orgA, func(tx store.Tx) error { return tx.PutJob(ctx, other) })
	wantErr(t, "PutJob of another org", err, jobs.ErrOrgMismatch)
}

func testInvalid(t *testing.T, e *env) {
	ctx := t.Context()
	err := e.b.Update(ctx, orgA, func(tx store.Tx) error {
		bad := jobs.Job{OrgID: orgA, Kind: "Bad Kind", ID: "x", State: jobs.Queued, Due: base, CreatedAt: base, UpdatedAt: base}
		wantErr(t, "PutJob(bad kind)", tx.PutJob(ctx, bad), jobs.ErrInvalid)
		bad.Kind, bad.ID = kind, "nul\x00"
		wantErr(t, "PutJob(NUL id)", tx.PutJob(ctx, bad), jobs.ErrInvalid)
		bad.ID, bad.Due = "x", time.Time{}
		wantErr(t, "PutJob(queued without due)", tx.PutJob(ctx, bad), jobs.ErrInvalid)
		_, err := tx.JobInTx(ctx, "Bad", "x")
		wantErr(t, "JobInTx(bad kind)", err, jobs.ErrInvalid)
		_, _, err = jobs.Enqueue(ctx, tx, kind, "ok", nil) // the transaction is still usable
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	wantDue(t, e.b, kind, 0, orgA+"/ok")
	_, err = e.b.DueJobs(ctx, "Bad", 0)
	wantErr(t, "DueJobs(bad kind)", err, jobs.ErrInvalid)
	_, err = e.b.Job(ctx, orgA, kind, "")
	wantErr(t, "Job(empty id)", err, jobs.ErrInvalid)
}

func testFailedUpdate(t *testing.T, e *env) {
	ctx := t.Context()
	enqueue(t, e.b, orgA, "kept")
	err := e.b.Update(ctx, orgA, func(tx store.Tx) error {
		if _, _, err := jobs.Enqueue(ctx, tx, kind, "dropped", nil); err != nil {
			return err
		}
		if _, err := jobs.Claim(ctx, tx, kind, "kept", "w", policy); err != nil {
			return err
		}
		j, err := tx.JobInTx(ctx, kind, "kept")
		if err != nil || j.State != jobs.Running {
			return fmt.Errorf("JobInTx does not see the claim: %+v, %v", j, err)
		}
		return errBoom
	})
	wantErr(t, "Update", err, errBoom)
	_, err = e.b.Job(ctx, orgA, kind, "dropped")
	wantErr(t, "Job(dropped)", err, jobs.ErrNotFound)
	wantDue(t, e.b, kind, 0, orgA+"/kept")
}

// testOwnClock runs a lease on the backend's own clock (the database's
// for PostgreSQL): it is not due before it passes, and is after.
func testOwnClock(t *testing.T, b store.Backend) {
	const short = 400 * time.Millisecond
	enqueue(t, b, orgA, "job_1")
	held, err := do(t, b, orgA, func(tx jobs.Tx) (jobs.Job, error) {
		return jobs.Claim(t.Context(), tx, kind, "job_1", "w1", jobs.Policy{Lease: short})
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := due(t, b, kind, 0); len(got) != 0 {
		t.Fatalf("due while leased: %v", got)
	}
	time.Sleep(held.LeaseUntil.Sub(held.UpdatedAt) + 100*time.Millisecond)
	wantDue(t, b, kind, 0, orgA+"/job_1")
	j, err := do(t, b, orgA, func(tx jobs.Tx) (jobs.Job, error) {
		return jobs.Claim(t.Context(), tx, kind, "job_1", "w2", jobs.Policy{Lease: short})
	})
	if err != nil || j.Attempts != 2 {
		t.Fatalf("takeover on the store's clock = %+v, %v", j, err)
	}
}
