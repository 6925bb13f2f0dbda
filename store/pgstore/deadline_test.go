package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/faultproxy"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pgstore"
	"github.com/clearancehq/clearance/store/pgstore/pgtest"
)

// Options.Timeout under a network blackhole: a fault proxy between the
// store and the database drops every byte, so nothing but the store's own
// deadline can end a call (TCP would take about 15 minutes).

const (
	bhTimeout = time.Second // Options.Timeout of these tests; the settlement's is the same (min(Timeout, 2 s))
	bhMargin  = 2 * time.Second
)

// throughProxy opens a store on a fresh schema whose connections go
// through a fault proxy.
func throughProxy(t *testing.T, opts pgstore.Options) (*pgstore.Store, *faultproxy.Proxy) {
	t.Helper()
	needDB(t)
	schema := newSchema(t)
	u, err := url.Parse(pgtest.SchemaURL(t, schema))
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.New(u.Host, faultproxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	u.Host = proxy.Addr()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := pgstore.Open(ctx, u.String(), opts)
	if err != nil {
		_ = proxy.Close()
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	// First (cleanups run last-registered first): the proxy resets what a
	// blackhole left, so that neither the store nor the schema's drop waits.
	t.Cleanup(func() { _ = proxy.Close() })
	return s, proxy
}

// wantStoreUnavailable requires err to be what the server answers 503
// STORE_UNAVAILABLE: a store failure, not a refusal.
func wantStoreUnavailable(t *testing.T, what string, err error) {
	t.Helper()
	var ce *core.Error
	if e := core.Translate(what, err); !errors.As(e, &ce) || !errors.Is(e, core.ErrUnavailable) || ce.Code != core.CodeStoreUnavailable {
		t.Fatalf("%s: %v translates to %v; want a 503 STORE_UNAVAILABLE", what, err, e)
	}
}

// recovered waits until an Update of org succeeds again after a fault, as
// a client retrying would, and returns how long that took.
func recovered(t *testing.T, s *pgstore.Store, org string) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		err := s.Update(t.Context(), org, func(tx store.Tx) error { return appendEntry(tx, "after") })
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("no Update succeeded within 30 s of the fault's end: %v", err)
		}
	}
}

// TestTimeoutInBlackhole: while every byte to the database is dropped, an
// Update, a read, a listing and a ping each fail once Options.Timeout has
// passed, not before and not much after, with an error the server answers
// 503; the Update wrote nothing; once the network is back the store
// recovers by itself.
func TestTimeoutInBlackhole(t *testing.T) {
	t.Parallel()
	s, proxy := throughProxy(t, pgstore.Options{Timeout: bhTimeout, MaxConns: 4})
	const org = "org_blackhole"
	ctx := t.Context()
	if err := s.Update(ctx, org, func(tx store.Tx) error { return appendEntry(tx, "before") }); err != nil {
		t.Fatal(err)
	}

	proxy.Set(faultproxy.Blackhole)
	var ran atomic.Int64
	for _, op := range []struct {
		name string
		run  func() error
	}{
		{"update", func() error {
			return s.Update(ctx, org, func(tx store.Tx) error { ran.Add(1); return appendEntry(tx, "during") })
		}},
		{"read", func() error { _, err := s.LedgerHeadOf(ctx, org); return err }},
		{"listing", func() error {
			return s.GrantsInState(ctx, org, claim.StateIssued, func(claim.Grant) bool { return true })
		}},
		{"ping", func() error { return s.Ping(ctx) }},
	} {
		start := time.Now()
		err := op.run()
		took := time.Since(start)
		if err == nil {
			t.Fatalf("%s succeeded in a blackhole", op.name)
		}
		if took < bhTimeout || took > bhTimeout+bhMargin {
			t.Fatalf("%s failed after %v (%v); want the timeout, %v (at most %v more)", op.name, took, err, bhTimeout, bhMargin)
		}
		wantStoreUnavailable(t, op.name, err)
		t.Logf("%s: %v after %v", op.name, err, took.Round(time.Millisecond))
	}
	if ran.Load() != 0 {
		t.Fatalf("the Update's function ran %d times without the org's lock", ran.Load())
	}

	proxy.Set(faultproxy.Pass)
	t.Logf("recovered %v after the blackhole", recovered(t, s, org).Round(time.Millisecond))
	wantSubjects(t, s, org, "before", "after")
}

// TestTimeoutCutsGroupCommit: the network drops every byte just as a group
// of Updates sends its COMMIT. Each member returns within its timeout plus
// the settlement's (which cannot read the commit marker either) with
// ErrCommitUnknown, answered 503; the connection that was cut off is closed,
// not pooled; nothing of the group was written (its COMMIT never reached
// the database), and the store recovers by itself.
func TestTimeoutCutsGroupCommit(t *testing.T) {
	t.Parallel()
	s, proxy := throughProxy(t, pgstore.Options{Timeout: bhTimeout, MaxConns: 4})
	const org, members = "org_blackhole_group", 4
	var commits atomic.Int64
	var cut atomic.Pointer[pgx.Conn]
	pgstore.SetCommitHooks(s, func(_ string, conn *pgx.Conn) {
		// The first COMMIT is the held Update's; the second the group's.
		if commits.Add(1) == 2 {
			cut.Store(conn)
			proxy.Set(faultproxy.Blackhole)
		}
	}, nil)

	release, heldDone := held(t, s, org, func(tx store.Tx) error { return appendEntry(tx, "held") })
	type outcome struct {
		err  error
		took time.Duration
	}
	outcomes := make([]outcome, members)
	var ran atomic.Int64
	var wg sync.WaitGroup
	for i := range members {
		wg.Go(func() {
			start := time.Now()
			err := s.Update(t.Context(), org, func(tx store.Tx) error { ran.Add(1); return appendEntry(tx, fmt.Sprint("member-", i)) })
			outcomes[i] = outcome{err, time.Since(start)}
		})
	}
	waitQueued(s, org, members)
	release()
	if err := <-heldDone; err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	if ran.Load() != members || cut.Load() == nil {
		t.Fatalf("%d of %d members ran, COMMIT cut: %v; want them all in the cut group", ran.Load(), members, cut.Load() != nil)
	}
	settle := min(bhTimeout, 2*time.Second)
	for i, o := range outcomes {
		if !errors.Is(o.err, pgstore.ErrCommitUnknown) {
			t.Fatalf("member %d: %v; want ErrCommitUnknown", i, o.err)
		}
		if o.took > bhTimeout+settle+bhMargin {
			t.Fatalf("member %d answered after %v; want at most the timeout and the settlement's, %v + %v (and %v)", i, o.took, bhTimeout, settle, bhMargin)
		}
		wantStoreUnavailable(t, "group member", o.err)
	}
	t.Logf("members: %v after %v", outcomes[0].err, outcomes[0].took.Round(time.Millisecond))
	if !cut.Load().IsClosed() {
		t.Fatal("the connection whose COMMIT was cut off is still open: the pool could hand it out again")
	}

	proxy.Set(faultproxy.Pass)
	t.Logf("recovered %v after the blackhole", recovered(t, s, org).Round(time.Millisecond))
	wantSubjects(t, s, org, "held", "after")
}

// TestAmbiguousCommitSettlementTimesOut loses a COMMIT's answer (the
// COMMIT happened) while another session holds the org's lock, so the
// settlement cannot read the commit marker within its own deadline: Update
// says the outcome is unknown rather than guessing, in about that deadline.
func TestAmbiguousCommitSettlementTimesOut(t *testing.T) {
	t.Parallel()
	s, schema := open(t, pgstore.Options{Timeout: bhTimeout})
	ctx := t.Context()
	locker, err := needDB(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = locker.Rollback(context.Background()) }()
	pgstore.SetCommitHooks(s, nil, func(org string, err error) error {
		if err != nil {
			return err
		}
		if _, err := locker.Exec(ctx, "SELECT org_id FROM "+pgx.Identifier{schema, "org_locks"}.Sanitize()+" WHERE org_id = $1 FOR UPDATE", org); err != nil {
			t.Errorf("lock the org: %v", err)
		}
		return errors.New("read tcp 127.0.0.1:5432: i/o timeout")
	})
	var runs atomic.Int64
	start := time.Now()
	err = appendCounting(ctx, s, "org_amb", &runs)
	took := time.Since(start)
	if !errors.Is(err, pgstore.ErrCommitUnknown) || runs.Load() != 1 {
		t.Fatalf("Update = %v after %d runs; want ErrCommitUnknown after 1", err, runs.Load())
	}
	if settle := min(bhTimeout, 2*time.Second); took < settle || took > bhTimeout+settle+bhMargin {
		t.Fatalf("Update answered after %v; want the settlement's deadline, %v, and at most %v", took, settle, bhTimeout+settle+bhMargin)
	}
	if err := locker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wantValid(t, s, "org_amb", 1)
}

// TestConnectTimeout: a connection attempt into a blackhole (the TCP
// connection is accepted, the startup handshake never answered) gives up
// after Options.Timeout when the URL sets no connect_timeout, and after
// the URL's when it does, though Open's own context would wait 30 s: the
// pool dials on a context Acquire's deadline does not end.
func TestConnectTimeout(t *testing.T) {
	t.Parallel()
	needDB(t)
	u, err := url.Parse(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.New(u.Host, faultproxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	proxy.Set(faultproxy.Blackhole)
	u.Host = proxy.Addr()
	for _, c := range []struct {
		connectTimeout string // in the URL; "" for none
		want           time.Duration
	}{{"", bhTimeout}, {"2", 2 * time.Second}} {
		v := *u
		q := v.Query()
		if c.connectTimeout != "" {
			q.Set("connect_timeout", c.connectTimeout)
		}
		v.RawQuery = q.Encode()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		start := time.Now()
		s, err := pgstore.Open(ctx, v.String(), pgstore.Options{Timeout: bhTimeout})
		took := time.Since(start)
		cancel()
		if err == nil {
			s.Close()
			t.Fatalf("connect_timeout %q: Open through a blackhole succeeded", c.connectTimeout)
		}
		if took < c.want || took > c.want+bhMargin {
			t.Fatalf("connect_timeout %q: Open failed after %v (%v); want %v", c.connectTimeout, took, err, c.want)
		}
		t.Logf("connect_timeout %q: %v after %v", c.connectTimeout, err, took.Round(time.Millisecond))
	}
}

// TestLongCall: a transaction long by nature (an org-wide erasure: a round
// trip per subject key) outlives Options.Timeout only when its caller asks
// (store.WithLongCall), and then runs alone, not in a group whose members
// it would hold past their bound.
func TestLongCall(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	s, _ := throughProxy(t, pgstore.Options{Timeout: timeout})
	const org = "org_long_call"
	// Round trips, each quick, for three times the timeout.
	long := func(subject string) func(tx store.Tx) error {
		return func(tx store.Tx) error {
			for start := time.Now(); time.Since(start) < 3*timeout; {
				if _, err := tx.LedgerHead(context.Background()); err != nil {
					return err
				}
			}
			return appendEntry(tx, subject)
		}
	}
	err := s.Update(t.Context(), org, long("bounded"))
	if err == nil {
		t.Fatal("a transaction three times the timeout committed without asking for a longer bound")
	}
	wantStoreUnavailable(t, "long update", err)
	if err := s.Update(store.WithLongCall(t.Context(), time.Minute), org, long("long")); err != nil {
		t.Fatalf("with a long bound: %v", err)
	}

	// Queued behind a held Update, in order: two ordinary, then two long
	// ones: three commits (the two together, each long one alone). (An
	// ordinary Update queued behind a long one waits for it within its own
	// bound, and fails 503 past it.)
	var commits atomic.Int64
	pgstore.SetCommitHooks(s, func(string, *pgx.Conn) { commits.Add(1) }, nil)
	t.Cleanup(func() { pgstore.SetCommitHooks(s, nil, nil) })
	release, heldDone := held(t, s, org, func(tx store.Tx) error { return appendEntry(tx, "held") })
	commits.Store(0)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i, name := range []string{"a", "b", "long-1", "long-2"} {
		ctx, fn := t.Context(), func(tx store.Tx) error { return appendEntry(tx, name) }
		if strings.HasPrefix(name, "long-") {
			ctx, fn = store.WithLongCall(ctx, time.Minute), long(name)
		}
		wg.Go(func() { errs[i] = s.Update(ctx, org, fn) })
		waitQueued(s, org, i+1) // in this order
	}
	release()
	if err := <-heldDone; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
	}
	if got := commits.Load(); got != 4 { // held's, then three
		t.Fatalf("%d commits after the held one's; want 3: a and b together, each long call alone", got-1)
	}
	wantSubjects(t, s, org, "long", "held", "a", "b", "long-1", "long-2")
}

// TestGroupEndsAtEarliestDeadline: a group's I/O ends at its earliest
// member's deadline, so a member that joined early does not wait for a
// later member's bound when the COMMIT gets no answer.
func TestGroupEndsAtEarliestDeadline(t *testing.T) {
	t.Parallel()
	const timeout = 4 * time.Second
	s, proxy := throughProxy(t, pgstore.Options{Timeout: timeout, MaxConns: 4})
	const org = "org_blackhole_earliest"
	var commits atomic.Int64
	pgstore.SetCommitHooks(s, func(string, *pgx.Conn) {
		if commits.Add(1) == 2 { // the group's COMMIT
			proxy.Set(faultproxy.Blackhole)
		}
	}, nil)
	release, heldDone := held(t, s, org, func(tx store.Tx) error { return appendEntry(tx, "held") })
	// The first member's own deadline is 1 s, the second's the store's 4 s.
	early, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	var took time.Duration
	var earlyErr, lateErr error
	var wg sync.WaitGroup
	start := time.Now()
	wg.Go(func() {
		earlyErr = s.Update(early, org, func(tx store.Tx) error { return appendEntry(tx, "early") })
		took = time.Since(start)
	})
	waitQueued(s, org, 1)
	wg.Go(func() {
		lateErr = s.Update(t.Context(), org, func(tx store.Tx) error { return appendEntry(tx, "late") })
	})
	waitQueued(s, org, 2)
	release()
	if err := <-heldDone; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if earlyErr == nil || lateErr == nil {
		t.Fatalf("a blackholed COMMIT succeeded: %v, %v", earlyErr, lateErr)
	}
	// Its deadline and the settlement's (min(timeout, 2 s)), well before the
	// later member's 4 s bound would have ended the group.
	if took >= timeout {
		t.Fatalf("the early member answered after %v: it waited for the later member's bound (%v)", took, timeout)
	}
	t.Logf("early member: %v after %v; late member: %v", earlyErr, took.Round(time.Millisecond), lateErr)
	proxy.Set(faultproxy.Pass)
	recovered(t, s, org)
}
