package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/clearancehq/clearance/store"
)

// Group commit. An org's Updates are serialized by its row lock, held until
// COMMIT returns; one transaction per Update would bound an org to one
// Update per (round trips + WAL flush). So the Updates of an org that wait
// in this process share a transaction: the first to arrive leads, takes
// the lock, runs the waiting functions one after another, and commits them
// together. Each member keeps its own outcome:
//
//   - a member's function sees the earlier members' writes, as it would if
//     they had committed just before it (they are serialized in this order);
//   - a member that fails is taken out of the transaction: its unsent writes
//     are dropped, and what it sent is rolled back to its savepoint (taken
//     lazily, before its first writes reach the server, and only when
//     another member's work is already in the transaction);
//   - no outcome is reported before the COMMIT is acknowledged, failures
//     included (a refusal may rest on an earlier member's writes); when
//     the COMMIT fails, every member gets its error (a retryable one runs
//     them again) and a lost COMMIT is settled once, by its marker;
//   - when a member breaks the transaction in a way its savepoint cannot
//     repair (it sent writes with none, or aborted the transaction without
//     one), the transaction is rolled back; that member then runs alone in
//     a transaction of its own, where its outcome stands, and the others
//     run again after it.
//
// maxGroup caps a group: every member after the first may hold a
// subtransaction, and a PostgreSQL backend caches only 64 of them before
// every snapshot of every session gets slower.
const maxGroup = 32

// member is one Update waiting for, or taking part in, a group.
type member struct {
	ctx context.Context
	fn  func(tx store.Tx) error

	// Set by the leader; read by the member once done (under queue.mu).
	err      error
	panicked any // fn's panic value: re-raised in the member's goroutine
	done     bool
	lead     bool // it leads the next group

	wake chan struct{} // a token when done or lead changes
}

func (m *member) signal() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// queue is one org's waiting Updates in this process.
type queue struct {
	mu      sync.Mutex
	waiting []*member
	busy    bool // a leader is running a group of the org
}

// queue returns the org's queue.
func (s *Store) queue(orgID string) *queue {
	if q, ok := s.queues.Load(orgID); ok {
		return q.(*queue)
	}
	q, _ := s.queues.LoadOrStore(orgID, &queue{})
	return q.(*queue)
}

// attempt runs fn once, as a member of a group of the org's Updates.
func (s *Store) attempt(ctx context.Context, orgID string, fn func(tx store.Tx) error) error {
	q := s.queue(orgID)
	m := &member{ctx: ctx, fn: fn, wake: make(chan struct{}, 1)}
	q.mu.Lock()
	q.waiting = append(q.waiting, m)
	if !q.busy {
		q.busy, m.lead = true, true
	}
	q.mu.Unlock()
	cancelled := ctx.Done()
	for {
		q.mu.Lock()
		done, lead := m.done, m.lead
		q.mu.Unlock()
		if done {
			break
		}
		if lead {
			s.lead(q, orgID)
			continue
		}
		select {
		case <-m.wake:
		case <-cancelled:
			q.mu.Lock()
			if i := slices.Index(q.waiting, m); i >= 0 && !m.lead {
				// Still waiting: it never ran.
				q.waiting = slices.Delete(q.waiting, i, i+1)
				q.mu.Unlock()
				return ctx.Err()
			}
			q.mu.Unlock()
			cancelled = nil // it runs (or leads): wait for the outcome
		}
	}
	if m.panicked != nil {
		panic(m.panicked)
	}
	return m.err
}

// lead runs one group: the members waiting at the front of the queue (the
// leader is the first), then hands the lead to the next waiting member.
func (s *Store) lead(q *queue, orgID string) {
	q.mu.Lock()
	n := min(len(q.waiting), maxGroup)
	group := slices.Clone(q.waiting[:n])
	q.waiting = slices.Delete(q.waiting, 0, n)
	q.mu.Unlock()

	s.runGroup(orgID, group)

	q.mu.Lock()
	for _, m := range group {
		m.done, m.lead = true, false
		m.signal()
	}
	if len(q.waiting) > 0 {
		q.waiting[0].lead = true
		q.waiting[0].signal()
	} else {
		q.busy = false
	}
	q.mu.Unlock()
}

// groupContext is the context of a group's connection I/O: it ends when
// every member's context has ended (nobody is left to answer), not before,
// so that one caller going away does not fail the others.
func groupContext(group []*member) (context.Context, func()) {
	if len(group) == 1 {
		// A lone Update's own context, as it ends (AfterFunc runs later).
		return group[0].ctx, func() {}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(group[0].ctx))
	var live atomic.Int64
	live.Store(int64(len(group)))
	stops := make([]func() bool, len(group))
	for i, m := range group {
		stops[i] = context.AfterFunc(m.ctx, func() {
			if live.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// runGroup runs the group's members and sets each one's outcome.
func (s *Store) runGroup(orgID string, group []*member) {
	ctx, stop := groupContext(group)
	defer stop()
	batches := [][]*member{group}
	for len(batches) > 0 {
		next := s.runTx(ctx, orgID, batches[0])
		batches = append(next, batches[1:]...)
	}
}

// runTx runs ms in one transaction and sets their outcomes, except for the
// members it returns, in the batches they must run in next (in order).
func (s *Store) runTx(ctx context.Context, orgID string, ms []*member) [][]*member {
	next, ran, err := s.runOnConn(ctx, orgID, ms)
	var lost *lostCommitError
	if errors.As(err, &lost) {
		// Settled once the connection is back in the pool: resolve needs
		// one, and the pool may have no other.
		err = s.resolve(ctx, orgID, lost.marker, lost.cause)
	}
	if err != nil {
		for _, m := range ran {
			m.err, m.panicked = err, nil
		}
	}
	return next
}

// runOnConn is runTx on a connection of its own: it returns the batches to
// run next, the members whose outcome rests on the transaction's COMMIT,
// and that COMMIT's error.
func (s *Store) runOnConn(ctx context.Context, orgID string, ms []*member) (next [][]*member, ran []*member, err error) {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		setAll(ms, fmt.Errorf("pgstore: acquire connection: %w", err))
		return nil, nil, nil
	}
	// Released when runOnConn returns, panics included (fn's are
	// recovered, but not ours): the pool destroys a connection that is not
	// idle, and the server then rolls back.
	defer pc.Release()
	conn := pc.Conn()
	st, err := lockOrg(ctx, conn, orgID)
	if err != nil {
		rollback(ctx, conn)
		setAll(ms, err)
		return nil, nil, nil
	}
	t := &tx{ctx: ctx, conn: conn, org: orgID, now: s.now, head: st.head, headOK: true, orgNow: st}
	defer t.finish()
	for i, m := range ms {
		if err := m.ctx.Err(); err != nil {
			m.err = err // it gave up before running
			continue
		}
		t.begin(len(ran) > 0)
		m.err, m.panicked = call(m.fn, t)
		if m.err == nil {
			m.err = t.end()
		}
		if m.err == nil || t.undo() {
			ran = append(ran, m)
			continue
		}
		// m broke the transaction beyond its savepoint.
		rollback(ctx, conn)
		if len(ran) == 0 {
			// It ran first, so its transaction was its own: its outcome
			// stands, and the rest run in a new transaction.
			if rest := ms[i+1:]; len(rest) > 0 {
				return [][]*member{rest}, nil, nil
			}
			return nil, nil, nil
		}
		// Its outcome rests on the earlier members' uncommitted work: it
		// runs alone first, then they (and the rest) run again.
		m.err, m.panicked = nil, nil
		for _, r := range ran {
			r.err, r.panicked = nil, nil
		}
		return [][]*member{{m}, append(ran, ms[i+1:]...)}, nil, nil
	}
	if len(ran) == 0 {
		rollback(ctx, conn)
		return nil, nil, nil
	}
	if !t.wrote {
		// Nothing to make durable: everything read was committed, so
		// already durable (synchronous_commit on). Release the lock.
		if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
			rollback(ctx, conn)
			return nil, ran, &notCommittedError{fmt.Errorf("pgstore: end read-only transaction: %w", err)}
		}
		return nil, ran, nil
	}
	return nil, ran, s.commit(ctx, conn, orgID)
}

// errPanicked is the outcome of a member whose fn panicked; the panic
// itself is re-raised in the member's goroutine.
var errPanicked = errors.New("pgstore: update function panicked")

// call runs fn, turning a panic into errPanicked and its value.
func call(fn func(tx store.Tx) error, t *tx) (err error, panicked any) {
	defer func() {
		if p := recover(); p != nil {
			err, panicked = errPanicked, p
		}
	}()
	return fn(t), nil
}

func setAll(ms []*member, err error) {
	for _, m := range ms {
		m.err = err
	}
}
