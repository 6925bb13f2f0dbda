package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/clearancehq/clearance/jobs"
	"github.com/clearancehq/clearance/outbox"
)

// memTx is one org's jobs in memory: the part of a backend transaction
// the outbox needs.
type memTx struct {
	org  string
	jobs map[string]jobs.Job
}

func (m *memTx) OrgID() string  { return m.org }
func (m *memTx) Now() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }
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

// An event is emitted with the change that caused it and handed to its
// destinations once.
func ExampleTake() {
	ctx := context.Background()
	tx := &memTx{org: "org_1", jobs: map[string]jobs.Job{}}
	_ = outbox.Emit(ctx, tx, outbox.Event{OrgID: "org_1", ID: "evt_1", Name: "decision.resolved",
		OccurredAt: tx.Now(), Body: []byte(`{"protocol_outcome":"ALLOW"}`)})

	e, ok, _ := outbox.Take(ctx, tx, "evt_1")
	fmt.Println(ok, e.Name, string(e.Body))
	_, again, _ := outbox.Take(ctx, tx, "evt_1")
	fmt.Println(again)
	// Output:
	// true decision.resolved {"protocol_outcome":"ALLOW"}
	// false
}
