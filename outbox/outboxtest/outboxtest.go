// Package outboxtest is the conformance suite of the outbox on a
// store.Backend: events emitted in an Update are committed with it or not
// at all, are listed pending across orgs, and are taken exactly once, by
// however many dispatchers race for them. Every backend runs it through
// storetest.All.
package outboxtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clearancehq/clearance/jobs"
	"github.com/clearancehq/clearance/outbox"
	"github.com/clearancehq/clearance/store"
)

const (
	orgA = "org_outbox_a"
	orgB = "org_outbox_b"
)

var errBoom = errors.New("outboxtest: fn failed on purpose")

// Run runs the suite on backends open returns (fresh and empty; the
// caller closes them).
func Run(t *testing.T, open func(t *testing.T) store.Backend) {
	t.Run("CommittedWithTheChange", func(t *testing.T) { committed(t, open(t)) })
	t.Run("RolledBackWithTheChange", func(t *testing.T) { rolledBack(t, open(t)) })
	t.Run("TakenOnce", func(t *testing.T) { takenOnce(t, open(t)) })
	t.Run("RacingDispatchers", func(t *testing.T) { racing(t, open(t)) })
	t.Run("OrgsApart", func(t *testing.T) { orgsApart(t, open(t)) })
	t.Run("InvalidRefused", func(t *testing.T) { invalid(t, open(t)) })
	t.Run("NothingOwedWithoutSubscribers", func(t *testing.T) { withoutSubscribers(t, open(t)) })
	t.Run("SubscribersRolledBack", func(t *testing.T) { subscribersRolledBack(t, open(t)) })
}

// subscriber is the name the suite subscribes with.
const subscriber = "outboxtest"

// emitted emits e in tx and fails unless it was written.
func emitted(ctx context.Context, tx store.Tx, e outbox.Event) error {
	ok, err := outbox.Emit(ctx, tx, e)
	if err == nil && !ok {
		return fmt.Errorf("event %s of a subscribed org was not emitted", e.ID)
	}
	return err
}

func update(t *testing.T, b store.Backend, org string, fn func(ctx context.Context, tx store.Tx) error) {
	t.Helper()
	ctx := context.Background()
	if err := b.Update(ctx, org, func(tx store.Tx) error { return fn(ctx, tx) }); err != nil {
		t.Fatal(err)
	}
}

func subscribe(t *testing.T, b store.Backend, orgs ...string) {
	t.Helper()
	for _, org := range orgs {
		update(t, b, org, func(ctx context.Context, tx store.Tx) error { return outbox.Subscribe(ctx, tx, subscriber) })
	}
}

func subscribed(t *testing.T, b store.Backend, org string) bool {
	t.Helper()
	var ok bool
	update(t, b, org, func(ctx context.Context, tx store.Tx) (err error) {
		ok, err = tx.OutboxSubscribed(ctx)
		return err
	})
	return ok
}

func event(org string, n int) outbox.Event {
	return outbox.Event{OrgID: org, ID: fmt.Sprintf("evt_%03d", n), Name: "decision.resolved",
		OccurredAt: time.Date(2026, 3, 1, 12, 0, n, 0, time.UTC), Body: []byte(fmt.Sprintf(`{"n":%d}`, n))}
}

func emit(t *testing.T, b store.Backend, events ...outbox.Event) {
	t.Helper()
	for _, e := range events {
		subscribe(t, b, e.OrgID)
		if err := b.Update(context.Background(), e.OrgID, func(tx store.Tx) error { return emitted(context.Background(), tx, e) }); err != nil {
			t.Fatalf("emit %s: %v", e.ID, err)
		}
	}
}

func pending(t *testing.T, b store.Backend) map[string]outbox.Event {
	t.Helper()
	list, err := outbox.Pending(context.Background(), b, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]outbox.Event{}
	for _, e := range list {
		out[e.OrgID+"/"+e.ID] = e
	}
	return out
}

func take(b store.Backend, org, id string) (outbox.Event, bool, error) {
	var got outbox.Event
	var ok bool
	err := b.Update(context.Background(), org, func(tx store.Tx) error {
		var err error
		got, ok, err = outbox.Take(context.Background(), tx, id)
		return err
	})
	return got, ok, err
}

func committed(t *testing.T, b store.Backend) {
	e := event(orgA, 1)
	emit(t, b, e)
	got, ok := pending(t, b)[orgA+"/"+e.ID]
	if !ok {
		t.Fatal("an emitted event is not pending")
	}
	if got.Name != e.Name || !got.OccurredAt.Equal(e.OccurredAt) || string(got.Body) != string(e.Body) {
		t.Fatalf("pending event = %+v, want %+v", got, e)
	}
}

func rolledBack(t *testing.T, b store.Backend) {
	subscribe(t, b, orgA)
	err := b.Update(context.Background(), orgA, func(tx store.Tx) error {
		if err := emitted(context.Background(), tx, event(orgA, 1)); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Update = %v, want the fn's error", err)
	}
	if p := pending(t, b); len(p) != 0 {
		t.Fatalf("a refused change left events: %v", p)
	}
}

func takenOnce(t *testing.T, b store.Backend) {
	e := event(orgA, 1)
	emit(t, b, e)
	got, ok, err := take(b, orgA, e.ID)
	if err != nil || !ok || string(got.Body) != string(e.Body) {
		t.Fatalf("first Take = %+v, %v, %v", got, ok, err)
	}
	if _, ok, err := take(b, orgA, e.ID); err != nil || ok {
		t.Fatalf("second Take = %v, %v; want not ok", ok, err)
	}
	if p := pending(t, b); len(p) != 0 {
		t.Fatalf("a taken event is still pending: %v", p)
	}
	// A take whose transaction fails leaves the event pending.
	e2 := event(orgA, 2)
	emit(t, b, e2)
	err = b.Update(context.Background(), orgA, func(tx store.Tx) error {
		if _, _, err := outbox.Take(context.Background(), tx, e2.ID); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatal(err)
	}
	if _, ok := pending(t, b)[orgA+"/"+e2.ID]; !ok {
		t.Fatal("a take that rolled back lost the event")
	}
}

func racing(t *testing.T, b store.Backend) {
	const events, dispatchers = 24, 6
	for n := range events {
		emit(t, b, event([]string{orgA, orgB}[n%2], n))
	}
	var taken atomic.Int64
	seen := sync.Map{}
	var wg sync.WaitGroup
	errs := make(chan error, dispatchers)
	for range dispatchers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				list, err := outbox.Pending(context.Background(), b, 5)
				if err != nil {
					errs <- err
					return
				}
				if len(list) == 0 {
					return
				}
				for _, e := range list {
					_, ok, err := take(b, e.OrgID, e.ID)
					if err != nil {
						errs <- err
						return
					}
					if ok {
						taken.Add(1)
						if _, dup := seen.LoadOrStore(e.OrgID+"/"+e.ID, true); dup {
							errs <- fmt.Errorf("event %s/%s taken twice", e.OrgID, e.ID)
							return
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if taken.Load() != events {
		t.Fatalf("%d events taken, want %d", taken.Load(), events)
	}
}

func orgsApart(t *testing.T, b store.Backend) {
	e := event(orgA, 1)
	emit(t, b, e)
	if _, _, err := take(b, orgB, e.ID); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("another org's Take = %v, want jobs.ErrNotFound", err)
	}
	subscribe(t, b, orgB)
	err := b.Update(context.Background(), orgB, func(tx store.Tx) error { return emitted(context.Background(), tx, e) })
	if !errors.Is(err, outbox.ErrInvalid) {
		t.Fatalf("emitting org A's event in org B = %v, want ErrInvalid", err)
	}
}

func invalid(t *testing.T, b store.Backend) {
	bad := []outbox.Event{
		{OrgID: orgA, ID: "", Name: "x", OccurredAt: time.Now(), Body: []byte(`{}`)},
		{OrgID: orgA, ID: "e1", Name: "", OccurredAt: time.Now(), Body: []byte(`{}`)},
		{OrgID: orgA, ID: "e1", Name: "Decision", OccurredAt: time.Now(), Body: []byte(`{}`)},
		{OrgID: orgA, ID: "e1", Name: "x", Body: []byte(`{}`)},
		{OrgID: orgA, ID: "e1", Name: "x", OccurredAt: time.Now(), Body: []byte(`[1]`)},
		{OrgID: orgA, ID: "e1", Name: "x", OccurredAt: time.Now(), Body: []byte(`{`)},
	}
	subscribe(t, b, orgA)
	for i, e := range bad {
		err := b.Update(context.Background(), orgA, func(tx store.Tx) error { return emitted(context.Background(), tx, e) })
		if !errors.Is(err, outbox.ErrInvalid) {
			t.Errorf("case %d: Emit = %v, want ErrInvalid", i, err)
		}
	}
	// A Prepared is emitted only in its org's transactions, and only once
	// prepared.
	subscribe(t, b, orgB)
	p, err := outbox.Prepare(event(orgA, 1))
	if err != nil {
		t.Fatal(err)
	}
	for name, emit := range map[string]func(tx store.Tx) (bool, error){
		"another org's transaction": func(tx store.Tx) (bool, error) { return p.Emit(context.Background(), tx) },
		"not prepared":              func(tx store.Tx) (bool, error) { return outbox.Prepared{}.Emit(context.Background(), tx) },
	} {
		err := b.Update(context.Background(), orgB, func(tx store.Tx) error { _, err := emit(tx); return err })
		if !errors.Is(err, outbox.ErrInvalid) {
			t.Errorf("%s: Emit = %v, want ErrInvalid", name, err)
		}
	}
	if p := pending(t, b); len(p) != 0 {
		t.Fatalf("refused events were written: %v", p)
	}
}

// An org without subscribers owes nothing: Emit writes nothing and says
// so. Subscribers are a set: the org owes events while any is left.
func withoutSubscribers(t *testing.T, b store.Backend) {
	try := func(n int) bool {
		t.Helper()
		var ok bool
		update(t, b, orgA, func(ctx context.Context, tx store.Tx) (err error) {
			ok, err = outbox.Emit(ctx, tx, event(orgA, n))
			return err
		})
		return ok
	}
	if subscribed(t, b, orgA) || try(1) {
		t.Fatal("an org that never subscribed owes an event")
	}
	update(t, b, orgA, func(ctx context.Context, tx store.Tx) error {
		for _, name := range []string{"one", "two", "two"} {
			if err := outbox.Subscribe(ctx, tx, name); err != nil {
				return err
			}
		}
		return nil
	})
	if !subscribed(t, b, orgA) || !try(2) {
		t.Fatal("a subscribed org owes no event")
	}
	if subscribed(t, b, orgB) {
		t.Fatal("org A's subscribers count for org B")
	}
	update(t, b, orgA, func(ctx context.Context, tx store.Tx) error { return outbox.Unsubscribe(ctx, tx, "one") })
	if !try(3) {
		t.Fatal("the org lost every subscriber with one of two")
	}
	update(t, b, orgA, func(ctx context.Context, tx store.Tx) error {
		if err := outbox.Unsubscribe(ctx, tx, "two"); err != nil {
			return err
		}
		return outbox.Unsubscribe(ctx, tx, "never")
	})
	if subscribed(t, b, orgA) || try(4) {
		t.Fatal("an org with no subscriber left owes an event")
	}
	p := pending(t, b)
	if len(p) != 2 || p[orgA+"/evt_002"].ID == "" || p[orgA+"/evt_003"].ID == "" {
		t.Fatalf("pending = %v, want events 2 and 3 only", p)
	}
	for _, name := range []string{"", "Webhook", "a b", string(make([]byte, outbox.MaxNameLen+1))} {
		err := b.Update(context.Background(), orgA, func(tx store.Tx) error { return outbox.Subscribe(context.Background(), tx, name) })
		if !errors.Is(err, outbox.ErrInvalid) {
			t.Errorf("Subscribe(%q) = %v, want ErrInvalid", name, err)
		}
	}
}

// A subscription is the transaction's: seen by its own later writes, gone
// with its rollback.
func subscribersRolledBack(t *testing.T, b store.Backend) {
	err := b.Update(context.Background(), orgA, func(tx store.Tx) error {
		ctx := context.Background()
		if err := outbox.Subscribe(ctx, tx, subscriber); err != nil {
			return err
		}
		if err := emitted(ctx, tx, event(orgA, 1)); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Update = %v, want the fn's error", err)
	}
	if subscribed(t, b, orgA) || len(pending(t, b)) != 0 {
		t.Fatal("a rolled back subscription stayed")
	}
	subscribe(t, b, orgA)
	err = b.Update(context.Background(), orgA, func(tx store.Tx) error {
		if err := outbox.Unsubscribe(context.Background(), tx, subscriber); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) || !subscribed(t, b, orgA) {
		t.Fatalf("Update = %v; a rolled back unsubscription took effect", err)
	}
}
