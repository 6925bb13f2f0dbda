package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/clearancehq/clearance/jobs"
)

// memTx is one org's jobs in memory, on a clock the example moves: the
// part of a backend transaction the package needs.
type memTx struct {
	org  string
	now  time.Time
	jobs map[string]jobs.Job
}

func (m *memTx) OrgID() string  { return m.org }
func (m *memTx) Now() time.Time { return m.now }

func (m *memTx) PutJob(_ context.Context, j jobs.Job) error {
	if err := j.ValidateFor(m.org); err != nil {
		return err
	}
	m.jobs[j.Kind+"/"+j.ID] = j
	return nil
}

func (m *memTx) InsertJob(ctx context.Context, j jobs.Job) error {
	if _, ok := m.jobs[j.Kind+"/"+j.ID]; ok {
		return errors.New("job exists")
	}
	return m.PutJob(ctx, j)
}

func (m *memTx) JobInTx(_ context.Context, kind, id string) (jobs.Job, error) {
	j, ok := m.jobs[kind+"/"+id]
	if !ok {
		return jobs.Job{}, jobs.ErrNotFound
	}
	return j, nil
}

// A worker that stops renewing its lease loses the job to the next one;
// the first worker's late Finish is refused.
func ExampleClaim() {
	ctx := context.Background()
	tx := &memTx{org: "org_1", now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), jobs: map[string]jobs.Job{}}
	p := jobs.Policy{Lease: time.Minute, MaxAttempts: 3}

	_, created, _ := jobs.Enqueue(ctx, tx, "export", "exp_1", []byte(`{"format":"csv"}`))
	first, _ := jobs.Claim(ctx, tx, "export", "exp_1", "worker-a", p)
	fmt.Println(created, first.State, first.Attempts, first.Owner)

	_, err := jobs.Claim(ctx, tx, "export", "exp_1", "worker-b", p)
	fmt.Println(errors.Is(err, jobs.ErrNotDue))

	tx.now = tx.now.Add(time.Minute) // the store's clock reaches the lease's end
	second, _ := jobs.Claim(ctx, tx, "export", "exp_1", "worker-b", p)
	fmt.Println(second.State, second.Attempts, second.Owner)

	_, err = jobs.Finish(ctx, tx, first, nil)
	fmt.Println(errors.Is(err, jobs.ErrNotOwner))
	done, _ := jobs.Finish(ctx, tx, second, []byte("ok"))
	fmt.Println(done.State, string(done.Result))
	// Output:
	// true running 1 worker-a
	// true
	// running 2 worker-b
	// true
	// done ok
}
