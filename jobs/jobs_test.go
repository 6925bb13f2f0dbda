package jobs_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/clearancehq/clearance/jobs"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func queued() jobs.Job {
	return jobs.Job{OrgID: "org_1", Kind: "export", ID: "exp_1", State: jobs.Queued, Due: t0, CreatedAt: t0, UpdatedAt: t0}
}

func TestValidate(t *testing.T) {
	running := queued()
	running.State, running.Owner, running.LeaseUntil, running.Due, running.Attempts = jobs.Running, "w", t0.Add(time.Minute), t0.Add(time.Minute), 1
	done := queued()
	done.State, done.Due = jobs.Done, time.Time{}
	for _, c := range []struct {
		name string
		j    jobs.Job
		ok   bool
	}{
		{"Queued", queued(), true},
		{"Running", running, true},
		{"Done", done, true},
		{"FailureWithLines", func() jobs.Job { j := done; j.Failure = "a\n\tb"; return j }(), true},
		{"QueuedWithoutDue", func() jobs.Job { j := queued(); j.Due = time.Time{}; return j }(), false},
		{"QueuedWithOwner", func() jobs.Job { j := queued(); j.Owner = "w"; return j }(), false},
		{"RunningDueNotLease", func() jobs.Job { j := running; j.Due = t0; return j }(), false},
		{"RunningWithoutOwner", func() jobs.Job { j := running; j.Owner = ""; return j }(), false},
		{"DoneWithDue", func() jobs.Job { j := done; j.Due = t0; return j }(), false},
		{"UnknownState", func() jobs.Job { j := queued(); j.State = "paused"; return j }(), false},
		{"BadKind", func() jobs.Job { j := queued(); j.Kind = "Export"; return j }(), false},
		{"EmptyID", func() jobs.Job { j := queued(); j.ID = ""; return j }(), false},
		{"NULInID", func() jobs.Job { j := queued(); j.ID = "a\x00"; return j }(), false},
		{"NULInFailure", func() jobs.Job { j := done; j.Failure = "a\x00"; return j }(), false},
		{"InvalidUTF8Owner", func() jobs.Job { j := running; j.Owner = "\xff"; return j }(), false},
		{"NegativeAttempts", func() jobs.Job { j := queued(); j.Attempts = -1; return j }(), false},
		{"NoCreatedAt", func() jobs.Job { j := queued(); j.CreatedAt = time.Time{}; return j }(), false},
		{"Year10000", func() jobs.Job { j := queued(); j.Due = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC); return j }(), false},
	} {
		err := c.j.Validate()
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, jobs.ErrInvalid)) {
			t.Errorf("%s: Validate = %v, want ok %v", c.name, err, c.ok)
		}
	}
	if err := queued().ValidateFor("org_2"); !errors.Is(err, jobs.ErrOrgMismatch) {
		t.Errorf("ValidateFor(other org) = %v", err)
	}
}

func TestGiveUpAndRelease(t *testing.T) {
	ctx := t.Context()
	tx := &memTx{org: "org_1", now: t0, jobs: map[string]jobs.Job{}}
	p := jobs.Policy{Lease: time.Minute, MaxAttempts: 2}
	if _, _, err := jobs.Enqueue(ctx, tx, "export", "exp_1", nil); err != nil {
		t.Fatal(err)
	}
	held, err := jobs.Claim(ctx, tx, "export", "exp_1", "w1", p)
	if err != nil {
		t.Fatal(err)
	}
	// Released with a delay: not due until then, attempts kept.
	j, err := jobs.Release(ctx, tx, held, "store busy\x00", time.Second)
	if err != nil || j.State != jobs.Queued || j.Attempts != 1 || j.Failure != "store busy " || !j.Due.Equal(t0.Add(time.Second)) {
		t.Fatalf("Release = %+v, %v", j, err)
	}
	if _, err := jobs.Claim(ctx, tx, "export", "exp_1", "w2", p); !errors.Is(err, jobs.ErrNotDue) {
		t.Fatalf("Claim before due = %v", err)
	}
	tx.now = t0.Add(time.Second)
	held, err = jobs.Claim(ctx, tx, "export", "exp_1", "w2", p)
	if err != nil || held.Attempts != 2 {
		t.Fatalf("second Claim = %+v, %v", held, err)
	}
	// The lease ends exactly at LeaseUntil.
	tx.now = held.LeaseUntil
	if _, err := jobs.Heartbeat(ctx, tx, held, time.Minute); !errors.Is(err, jobs.ErrLeaseExpired) {
		t.Fatalf("Heartbeat at the lease's end = %v", err)
	}
	j, err = jobs.Claim(ctx, tx, "export", "exp_1", "w3", p)
	if err != nil || j.State != jobs.Failed || !strings.HasPrefix(j.Failure, "gave up after 2 attempts; the last: attempt 2 stopped") || !j.Due.IsZero() {
		t.Fatalf("Claim after MaxAttempts = %+v, %v", j, err)
	}
	if _, err := jobs.Claim(ctx, tx, "export", "exp_1", "w3", p); !errors.Is(err, jobs.ErrNotDue) {
		t.Fatalf("Claim of a failed job = %v", err)
	}
	if err := tx.PutJob(ctx, j); err != nil {
		t.Fatal(err)
	}
}

func TestRequeue(t *testing.T) {
	ctx := t.Context()
	tx := &memTx{org: "org_1", now: t0, jobs: map[string]jobs.Job{}}
	p := jobs.Policy{Lease: time.Minute, MaxAttempts: 1}
	if _, _, err := jobs.Enqueue(ctx, tx, "delivery", "d1", []byte("body")); err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.Requeue(ctx, tx, "delivery", "d1"); !errors.Is(err, jobs.ErrNotDue) {
		t.Fatalf("Requeue of a queued job = %v, want ErrNotDue", err)
	}
	held, err := jobs.Claim(ctx, tx, "delivery", "d1", "w1", p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.Requeue(ctx, tx, "delivery", "d1"); !errors.Is(err, jobs.ErrNotDue) {
		t.Fatalf("Requeue of a running job = %v, want ErrNotDue", err)
	}
	if _, err := jobs.Fail(ctx, tx, held, "receiver down"); err != nil {
		t.Fatal(err)
	}
	tx.now = t0.Add(time.Hour)
	j, err := jobs.Requeue(ctx, tx, "delivery", "d1")
	if err != nil || j.State != jobs.Queued || j.Attempts != 0 || j.Failure != "" || string(j.Payload) != "body" || !j.Due.Equal(tx.now) {
		t.Fatalf("Requeue = %+v, %v", j, err)
	}
	// A new series: MaxAttempts counts from the requeue.
	if held, err = jobs.Claim(ctx, tx, "delivery", "d1", "w2", p); err != nil || held.State != jobs.Running || held.Attempts != 1 {
		t.Fatalf("Claim after Requeue = %+v, %v", held, err)
	}
	if _, err := jobs.Requeue(ctx, tx, "delivery", "missing"); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("Requeue of no job = %v, want ErrNotFound", err)
	}
}

func TestFailureIsClipped(t *testing.T) {
	ctx := t.Context()
	tx := &memTx{org: "org_1", now: t0, jobs: map[string]jobs.Job{}}
	if _, _, err := jobs.Enqueue(ctx, tx, "export", "exp_1", nil); err != nil {
		t.Fatal(err)
	}
	held, err := jobs.Claim(ctx, tx, "export", "exp_1", "w", jobs.Policy{Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	j, err := jobs.Fail(ctx, tx, held, strings.Repeat("é", jobs.MaxFailureLen)+"\xff")
	if err != nil || j.State != jobs.Failed || len(j.Failure) > jobs.MaxFailureLen || j.Validate() != nil {
		t.Fatalf("Fail = %d bytes, %v", len(j.Failure), err)
	}
}

func TestEnqueueClaimed(t *testing.T) {
	ctx := t.Context()
	tx := &memTx{org: "org_1", now: t0, jobs: map[string]jobs.Job{}}
	p := jobs.Policy{Lease: time.Minute}
	held, created, err := jobs.EnqueueClaimed(ctx, tx, "delivery", "d1", []byte("body"), "w1", p)
	if err != nil || !created || held.State != jobs.Running || held.Attempts != 1 || held.Owner != "w1" ||
		!held.LeaseUntil.Equal(t0.Add(time.Minute)) || !held.Due.Equal(held.LeaseUntil) {
		t.Fatalf("EnqueueClaimed = %+v, %v, %v", held, created, err)
	}
	if err := held.Validate(); err != nil {
		t.Fatalf("the claimed job does not validate: %v", err)
	}
	// Another worker cannot claim it while the lease runs.
	if _, err := jobs.Claim(ctx, tx, "delivery", "d1", "w2", p); !errors.Is(err, jobs.ErrNotDue) {
		t.Fatalf("Claim of a held job = %v, want ErrNotDue", err)
	}
	// Existing: returned unchanged, not claimed again.
	again, created, err := jobs.EnqueueClaimed(ctx, tx, "delivery", "d1", []byte("other"), "w2", p)
	if err != nil || created || again.Owner != "w1" || string(again.Payload) != "body" {
		t.Fatalf("EnqueueClaimed of an existing job = %+v, %v, %v", again, created, err)
	}
	if _, err := jobs.Finish(ctx, tx, held, nil); err != nil {
		t.Fatalf("Finish of the claimed job: %v", err)
	}
	// A crashed holder's job is taken over once its lease passes.
	if _, _, err := jobs.EnqueueClaimed(ctx, tx, "delivery", "d2", nil, "w1", p); err != nil {
		t.Fatal(err)
	}
	tx.now = t0.Add(2 * time.Minute)
	if got, err := jobs.Claim(ctx, tx, "delivery", "d2", "w2", p); err != nil || got.Attempts != 2 || got.Owner != "w2" {
		t.Fatalf("take over after the lease = %+v, %v", got, err)
	}
	if _, _, err := jobs.EnqueueClaimed(ctx, tx, "delivery", "d3", nil, "", p); !errors.Is(err, jobs.ErrInvalid) {
		t.Fatalf("EnqueueClaimed without owner = %v, want ErrInvalid", err)
	}
}
