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
	org         string
	jobs        map[string]jobs.Job
	subscribers map[string]bool
}

func (m *memTx) OutboxSubscribed(context.Context) (bool, error) { return len(m.subscribers) > 0, nil }
func (m *memTx) SetOutboxSubscriber(_ context.Context, name string, on bool) error {
	if on {
		m.subscribers[name] = true
	} else {
		delete(m.subscribers, name)
	}
	return nil
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

// An event is emitted with the change that caused it, when the org has a
// subscriber, and handed to its destinations once.
func ExampleTake() {
	ctx := context.Background()
	tx := &memTx{org: "org_1", jobs: map[string]jobs.Job{}, subscribers: map[string]bool{}}
	ev := outbox.Event{OrgID: "org_1", ID: "evt_1", Name: "decision.resolved",
		OccurredAt: tx.Now(), Body: []byte(`{"protocol_outcome":"ALLOW"}`)}
	owed, _ := outbox.Emit(ctx, tx, ev)
	fmt.Println("owed without a subscriber:", owed)

	_ = outbox.Subscribe(ctx, tx, "webhook")
	owed, _ = outbox.Emit(ctx, tx, ev)
	fmt.Println("owed with one:", owed)

	e, ok, _ := outbox.Take(ctx, tx, "evt_1")
	fmt.Println(ok, e.Name, string(e.Body))
	_, again, _ := outbox.Take(ctx, tx, "evt_1")
	fmt.Println(again)
	// Output:
	// owed without a subscriber: false
	// owed with one: true
	// true decision.resolved {"protocol_outcome":"ALLOW"}
	// false
}

// A change that runs under a lock prepares its event first: the
// transaction then only writes it.
func ExamplePrepare() {
	ctx := context.Background()
	tx := &memTx{org: "org_1", jobs: map[string]jobs.Job{}, subscribers: map[string]bool{"webhook": true}}
	p, err := outbox.Prepare(outbox.Event{OrgID: "org_1", ID: "evt_2", Name: "decision.resolved",
		OccurredAt: tx.Now(), Body: []byte(`{"dossier_id":"dos_1"}`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	owed, err := p.Emit(ctx, tx) // inside the change's transaction
	fmt.Println(owed, err)
	_, err = outbox.Prepare(outbox.Event{OrgID: "org_1", ID: "evt_3", Name: "Decision"})
	fmt.Println(errors.Is(err, outbox.ErrInvalid))
	// Output:
	// true <nil>
	// true
}
