package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clearancehq/clearance/store"
)

// Group commit. An org's Updates are serialized by its row lock, held until
// COMMIT returns; one transaction per Update would bound an org to one
// Update per (round trips + WAL flush). So the Updates of an org that wait
// in this process share a transaction: the org's runner goroutine (one
// while any Update of the org waits) takes the lock, runs the waiting
// functions one after another, and commits them together. Each member
// keeps its own outcome:
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
//     run again after it;
//   - a member whose context ends before its function starts returns at
//     once; one whose function started waits for its outcome (it may have
//     committed). The connection's context ends only when every member's
//     has;
//   - a function that panics has its panic re-raised in its own caller's
//     goroutine; one that calls runtime.Goexit fails its own Update, and
//     the others of its group run again.
//
// maxGroup caps a group: every member after the first may hold a
// subtransaction, and a PostgreSQL backend caches only 64 of them before
// every snapshot of every session gets slower.
const maxGroup = 32

// member is one Update waiting for, or taking part in, a group.
type member struct {
	ctx context.Context
	fn  func(tx store.Tx) error

	// Set by the org's runner; read by the member once done is closed.
	err      error
	panicked any // fn's panic value: re-raised in the member's goroutine

	// Under queue.mu: started once the runner calls fn (the member then
	// waits for its outcome); left when the member gave up before that.
	started, left bool
	// settled: the outcome is final (its transaction ended); only the
	// runner reads and writes it.
	settled bool
	// commit is the COMMIT that made the member's writes durable (Batch 0:
	// none), for the store's CommitObserver; set by the runner when the
	// store is observed.
	commit store.Commit

	done chan struct{} // closed when err (or panicked) is the outcome

	// alone: a long call (store.WithLongCall) runs in a group of its own,
	// so that it neither holds the others past their bound nor is cut off
	// at theirs.
	alone bool
}

// groupSize is how many of the waiting members, from the first, the next
// group takes: up to maxGroup, a long call alone.
func groupSize(waiting []*member) int {
	n := min(len(waiting), maxGroup)
	for i, m := range waiting[:n] {
		if m.alone {
			return max(i, 1)
		}
	}
	return n
}

// queue is one org's waiting Updates in this process.
type queue struct {
	mu      sync.Mutex
	waiting []*member
	busy    bool // a runner goroutine is draining the queue

	running *member // whose fn the runner is in (the runner's own)
}

// queue returns the org's queue.
func (s *Store) queue(orgID string) *queue {
	if q, ok := s.queues.Load(orgID); ok {
		return q.(*queue)
	}
	q, _ := s.queues.LoadOrStore(orgID, &queue{})
	return q.(*queue)
}

// attempt runs fn once, as a member of a group of the org's Updates, and
// waits for its outcome. A member whose context ends before its fn starts
// returns at once; once fn started, its outcome is awaited (it may commit).
func (s *Store) attempt(ctx context.Context, orgID string, fn func(tx store.Tx) error) error {
	q := s.queue(orgID)
	_, long := store.LongCall(ctx)
	m := &member{ctx: ctx, fn: fn, alone: long, done: make(chan struct{})}
	q.mu.Lock()
	q.waiting = append(q.waiting, m)
	if !q.busy {
		q.busy = true
		go s.drain(q, orgID)
	}
	q.mu.Unlock()
	select {
	case <-m.done:
	case <-ctx.Done():
		q.mu.Lock()
		if !m.started {
			m.left = true
			if i := slices.Index(q.waiting, m); i >= 0 {
				q.waiting = slices.Delete(q.waiting, i, i+1)
			}
			q.mu.Unlock()
			return ctx.Err()
		}
		q.mu.Unlock()
		<-m.done
	}
	if m.panicked != nil {
		panic(m.panicked)
	}
	if m.err == nil && m.commit.Batch > 0 {
		if observe := s.observer.Load(); observe != nil {
			(*observe)(ctx, m.commit)
		}
	}
	return m.err
}

// drain is the org's runner: it runs the waiting Updates in groups, the
// oldest first, until none waits. It runs on a goroutine of its own, so
// that an fn that ends its goroutine (runtime.Goexit, as t.FailNow does)
// ends only the runner, whose deferred cleanup fails its group and starts
// a new runner for the rest.
func (s *Store) drain(q *queue, orgID string) {
	var group []*member
	finished := false
	defer func() {
		if finished {
			return
		}
		// The running fn ended this goroutine: nothing of the group's
		// transaction committed. That member fails; the others whose
		// outcome was not final wait again, first in line.
		q.mu.Lock()
		var again []*member
		for _, m := range group {
			switch {
			case m.settled:
				close(m.done)
			case m == q.running:
				m.err, m.panicked = errGoexit, nil
				close(m.done)
			default:
				m.err, m.panicked = nil, nil
				again = append(again, m)
			}
		}
		q.waiting = append(again, q.waiting...)
		if len(q.waiting) > 0 {
			go s.drain(q, orgID)
		} else {
			q.busy = false
		}
		q.mu.Unlock()
	}()
	for {
		q.mu.Lock()
		n := groupSize(q.waiting)
		if n == 0 {
			q.busy = false
			q.mu.Unlock()
			finished = true
			return
		}
		group = slices.Clone(q.waiting[:n])
		q.waiting = slices.Delete(q.waiting, 0, n)
		q.mu.Unlock()

		s.runGroup(q, orgID, group)

		q.mu.Lock()
		for _, m := range group {
			close(m.done)
		}
		q.mu.Unlock()
	}
}

// errGoexit is the outcome of an Update whose fn called runtime.Goexit:
// nothing of it was committed.
var errGoexit = errors.New("pgstore: the update function ended its goroutine (runtime.Goexit); nothing was committed")

// start marks m as started unless it left; it reports whether fn may run.
func (q *queue) start(m *member) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if m.left {
		return false
	}
	m.started = true
	return true
}

// groupContext is the context of a group's connection I/O: it ends when
// every member's context has ended (nobody is left to answer), not before,
// so that one caller going away does not fail the others. Its deadline is
// the earliest of the members' (Update bounds each by Options.Timeout), set
// as a deadline so that the I/O it cuts off fails as timed out.
func groupContext(group []*member) (context.Context, func()) {
	if len(group) == 1 {
		// A lone Update's own context, as it ends (AfterFunc runs later).
		return group[0].ctx, func() {}
	}
	base, stopDeadline := context.WithoutCancel(group[0].ctx), context.CancelFunc(func() {})
	if d, ok := earliestDeadline(group); ok {
		base, stopDeadline = context.WithDeadline(base, d)
	}
	ctx, cancel := context.WithCancel(base)
	var live atomic.Int64
	live.Store(int64(len(group)))
	stops := make([]func() bool, len(group))
	for i, m := range group {
		stops[i] = context.AfterFunc(m.ctx, func() {
			// At the group's deadline its own timer ends ctx, so that what
			// it cuts off fails as timed out rather than canceled.
			if d, ok := base.Deadline(); live.Add(-1) == 0 && (!ok || time.Now().Before(d)) {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
		stopDeadline()
	}
}

// runGroup runs the group's members and sets each one's outcome.
func (s *Store) runGroup(q *queue, orgID string, group []*member) {
	ctx, stop := groupContext(group)
	defer stop()
	batches := [][]*member{group}
	for len(batches) > 0 {
		next := s.runTx(ctx, q, orgID, batches[0])
		for _, m := range batches[0] {
			m.settled = true
		}
		for _, b := range next {
			for _, m := range b {
				m.settled = false // it runs again
			}
		}
		batches = append(next, batches[1:]...)
	}
}

// runTx runs ms in one transaction and sets their outcomes, except for the
// members it returns, in the batches they must run in next (in order).
func (s *Store) runTx(ctx context.Context, q *queue, orgID string, ms []*member) [][]*member {
	next, ran, err := s.runOnConn(ctx, q, orgID, ms)
	var lost *lostCommitError
	if errors.As(err, &lost) {
		// Settled once the connection is back in the pool (closed, when
		// it was cut off): resolve needs one, and the pool may have no
		// other. In a context of its own: ctx may be what ended.
		sctx, cancel := s.settleContext(ctx)
		err = s.resolve(sctx, orgID, lost.marker, lost.cause)
		cancel()
	}
	if err != nil {
		for _, m := range ran {
			if m.panicked == nil { // a panic stays the outcome of its member
				m.err = err
			}
		}
	}
	return next
}

// runOnConn is runTx on a connection of its own: it returns the batches to
// run next, the members whose outcome rests on the transaction's COMMIT,
// and that COMMIT's error.
func (s *Store) runOnConn(ctx context.Context, q *queue, orgID string, ms []*member) (next [][]*member, ran []*member, err error) {
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
		if err := m.ctx.Err(); err != nil || !q.start(m) {
			m.err = err // it gave up before running
			continue
		}
		t.begin(len(ran) > 0)
		q.running = m
		m.err, m.panicked = call(m.fn, t)
		q.running = nil
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
	observed := s.observer.Load() != nil
	var start time.Time
	if observed {
		start = time.Now()
	}
	err = s.commit(ctx, conn, orgID)
	if observed && err == nil {
		// A member whose fn failed was rolled back to its savepoint: it
		// rode in the transaction but committed nothing.
		c := store.Commit{Backend: store.BackendPostgreSQL, Start: start, End: time.Now()}
		for _, m := range ran {
			if m.err == nil {
				c.Batch++
			}
		}
		lead := true
		for _, m := range ran {
			if m.err == nil {
				m.commit = c
				m.commit.Lead, lead = lead, false
			}
		}
	}
	return nil, ran, err
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
