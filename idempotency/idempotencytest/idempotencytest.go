// Package idempotencytest is the conformance suite of the idempotency rule
// over a storage backend: a backend passes when Replay and Remember keep
// their contract through its transactions (store/storetest.All runs it).
package idempotencytest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance/idempotency"
	"github.com/clearancehq/clearance/store"
)

const (
	orgA  = "org_idem_a"
	orgB  = "org_idem_b"
	scope = "evaluate-decision"
)

var (
	at      = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	errBoom = errors.New("idempotencytest: fn failed on purpose")
)

type answer struct {
	ID string `json:"id"`
	N  int    `json:"n"`
}

// Run runs the suite; open returns a fresh, empty backend.
func Run(t *testing.T, open func(t *testing.T) store.Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b store.Backend)
	}{
		{"NothingToReplay", testNothing},
		{"RememberThenReplay", testReplay},
		{"KeyReusedForAnotherRequest", testReused},
		{"EmptyKeyNeverRecorded", testEmptyKey},
		{"ScopeAndOrgIsolation", testIsolation},
		{"FailedUpdateRemembersNothing", testAtomic},
		{"ConcurrentRetriesAnswerOnce", testConcurrent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

// once replays key or, when there is nothing to replay, remembers fresh;
// it returns the answer and whether it was replayed.
func once(ctx context.Context, b store.Backend, org, scope, key, digest string, fresh answer) (answer, bool, error) {
	var got answer
	var replayed bool
	err := b.Update(ctx, org, func(tx store.Tx) error {
		got, replayed = answer{}, false
		ok, err := idempotency.Replay(ctx, tx, scope, key, digest, &got)
		if err != nil || ok {
			replayed = ok
			return err
		}
		got = fresh
		return idempotency.Remember(ctx, tx, scope, key, digest, fresh, at)
	})
	return got, replayed, err
}

func testNothing(t *testing.T, b store.Backend) {
	ctx := context.Background()
	err := b.Update(ctx, orgA, func(tx store.Tx) error {
		var out answer
		ok, err := idempotency.Replay(ctx, tx, scope, "k1", "d1", &out)
		if ok || err != nil {
			t.Errorf("Replay on an empty store = %v, %v; want false, nil", ok, err)
		}
		_, err = tx.Idempotency(ctx, scope, "k1")
		if !errors.Is(err, idempotency.ErrNotFound) || !errors.Is(err, store.ErrNotFound) {
			t.Errorf("lookup of a missing key: %v; want idempotency.ErrNotFound and store.ErrNotFound", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func testReplay(t *testing.T, b store.Backend) {
	ctx := context.Background()
	first, replayed, err := once(ctx, b, orgA, scope, "k1", "d1", answer{"a1", 1})
	if err != nil || replayed || first != (answer{"a1", 1}) {
		t.Fatalf("first = %+v, %v, %v", first, replayed, err)
	}
	again, replayed, err := once(ctx, b, orgA, scope, "k1", "d1", answer{"a2", 2})
	if err != nil || !replayed || again != first {
		t.Fatalf("retry = %+v, replayed %v, %v; want the first answer replayed", again, replayed, err)
	}
	rec, err := lookup(ctx, b, orgA, "k1")
	if err != nil || rec.OrgID != orgA || rec.RequestDigest != "d1" || !rec.CreatedAt.Equal(at) {
		t.Fatalf("stored record %+v, %v", rec, err)
	}
}

func testReused(t *testing.T, b store.Backend) {
	ctx := context.Background()
	if _, _, err := once(ctx, b, orgA, scope, "k1", "d1", answer{"a1", 1}); err != nil {
		t.Fatal(err)
	}
	_, _, err := once(ctx, b, orgA, scope, "k1", "d2", answer{"a2", 2})
	if !errors.Is(err, idempotency.ErrKeyReused) {
		t.Fatalf("another request under the key: %v; want ErrKeyReused", err)
	}
}

func testEmptyKey(t *testing.T, b store.Backend) {
	ctx := context.Background()
	for i := range 2 {
		got, replayed, err := once(ctx, b, orgA, scope, "", "d1", answer{"a", i})
		if err != nil || replayed || got.N != i {
			t.Fatalf("call %d without a key = %+v, %v, %v; want a fresh answer", i, got, replayed, err)
		}
	}
	if _, err := lookup(ctx, b, orgA, ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an empty key was recorded: %v", err)
	}
}

func testIsolation(t *testing.T, b store.Backend) {
	ctx := context.Background()
	if _, _, err := once(ctx, b, orgA, scope, "k1", "d1", answer{"a1", 1}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ org, scope string }{{orgA, "action-gate"}, {orgB, scope}} {
		got, replayed, err := once(ctx, b, c.org, c.scope, "k1", "d2", answer{"b", 2})
		if err != nil || replayed || got.ID != "b" {
			t.Fatalf("org %s scope %s: %+v, %v, %v; want a fresh answer (keys are per org and scope)", c.org, c.scope, got, replayed, err)
		}
	}
}

func testAtomic(t *testing.T, b store.Backend) {
	ctx := context.Background()
	err := b.Update(ctx, orgA, func(tx store.Tx) error {
		if err := idempotency.Remember(ctx, tx, scope, "k1", "d1", answer{"a1", 1}, at); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Update = %v, want errBoom", err)
	}
	got, replayed, err := once(ctx, b, orgA, scope, "k1", "d1", answer{"a2", 2})
	if err != nil || replayed || got.ID != "a2" {
		t.Fatalf("after a failed Update: %+v, %v, %v; want nothing remembered", got, replayed, err)
	}
}

// testConcurrent: retries of one request racing each other get one answer,
// made once.
func testConcurrent(t *testing.T, b store.Backend) {
	ctx := context.Background()
	const n = 8
	var wg sync.WaitGroup
	answers := make([]answer, n)
	fresh := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var replayed bool
			answers[i], replayed, errs[i] = once(ctx, b, orgA, scope, "k1", "d1", answer{"a", i})
			fresh[i] = !replayed
		}()
	}
	wg.Wait()
	made := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("retry %d: %v", i, errs[i])
		}
		if answers[i] != answers[0] {
			t.Fatalf("retry %d got %+v, retry 0 %+v: one key, two answers", i, answers[i], answers[0])
		}
		if fresh[i] {
			made++
		}
	}
	if made != 1 {
		t.Fatalf("%d retries made a fresh answer; want exactly 1", made)
	}
}

// lookup reads key's record in scope through a transaction of org.
func lookup(ctx context.Context, b store.Backend, org, key string) (idempotency.Record, error) {
	var rec idempotency.Record
	err := b.Update(ctx, org, func(tx store.Tx) error {
		var err error
		rec, err = tx.Idempotency(ctx, scope, key)
		return err
	})
	return rec, err
}
