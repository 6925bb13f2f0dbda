package clearance

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/clearancehq/clearance/export"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/outbox"
	"github.com/clearancehq/clearance/policies"
	"github.com/clearancehq/clearance/policysource"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/webhook"
)

// commitObservers are the observers of the backend's commits besides the
// engine's own spans: a copy-on-write list, read without a lock on every
// commit.
type commitObservers struct {
	mu        sync.Mutex
	installed bool
	list      atomic.Pointer[[]store.CommitObserver]
}

// ObserveStoreCommits adds o to the observers of the backend's commits (a
// server's commit latency and batch-size metrics); it does nothing when the
// backend is not a store.Observable. o runs on the write path after each
// commit (see store.CommitObserver). A backend reports to one observer, so
// the Engine that traces or is observed last is the one a backend shared
// by several Engines reports to: give each observed Engine its backend.
func (e *Engine) ObserveStoreCommits(o store.CommitObserver) {
	if o == nil {
		return
	}
	e.commits.mu.Lock()
	defer e.commits.mu.Unlock()
	var list []store.CommitObserver
	if old := e.commits.list.Load(); old != nil {
		list = append(list, *old...)
	}
	list = append(list, o)
	e.commits.list.Store(&list)
	if !e.commits.installed {
		e.observeCommitsLocked()
	}
}

// observeCommits makes the backend report its commits to the engine.
func (e *Engine) observeCommits() {
	e.commits.mu.Lock()
	defer e.commits.mu.Unlock()
	e.observeCommitsLocked()
}

func (e *Engine) observeCommitsLocked() {
	if ob, ok := e.store.Backend.(store.Observable); ok && !e.commits.installed {
		ob.ObserveCommits(e.storeCommitted)
		e.commits.installed = true
	}
}

// storeCommitted is the backend's CommitObserver: the commit's span, then
// the observers added.
func (e *Engine) storeCommitted(ctx context.Context, c store.Commit) {
	if t := e.deps.Tracer; t.On() {
		t.Record(ctx, core.SpanStoreCommit, c.Start, c.End,
			attribute.String("db.system.name", c.Backend), attribute.Int("clearance.store.batch_size", c.Batch))
	}
	if list := e.commits.list.Load(); list != nil {
		for _, o := range *list {
			o(ctx, c)
		}
	}
}

// JobQueues names the store's job queues, by jobs kind: the events waiting
// in the outbox, their webhook deliveries, validation packs, policy
// replays and scheduled policy-source pulls.
func JobQueues() []string {
	return []string{outbox.JobKind, webhook.DeliveryJobKind, export.JobKind, policies.ReplayJobKind, policysource.JobKind}
}

// MaxQueueDepth is the most jobs QueueDepth counts.
const MaxQueueDepth = 1000

// QueueDepth counts the jobs of kind (one of JobQueues) due now in every
// org, queued or with a lapsed lease, up to limit (MaxQueueDepth when
// limit is 0 or more): a bounded read for a metrics scrape, never a full
// scan.
func (e *Engine) QueueDepth(ctx context.Context, kind string, limit int) (int, error) {
	if limit <= 0 || limit > MaxQueueDepth {
		limit = MaxQueueDepth
	}
	due, err := e.store.DueJobs(ctx, kind, limit)
	if err != nil {
		return 0, core.Translate("count due jobs", err)
	}
	return len(due), nil
}

// OldestUnsealed returns when the ledger entry that has waited longest for
// a signed checkpoint was appended: the first growth, since its last seal,
// of the ledgers this Engine wrote; false when every one is sealed. Run's
// sealer seals within a DefaultSealInterval, so an old time means it is
// failing (or not running, or the Engine has no LedgerKey).
func (e *Engine) OldestUnsealed() (time.Time, bool) { return e.store.OldestUnsealed() }

// StoreMemory returns the memory the store's caches hold (Pebble's block
// cache and memtables, outside the Go heap when built with cgo); false when
// the backend does not say (PostgreSQL keeps its caches in the database).
func (e *Engine) StoreMemory() (store.Memory, bool) {
	r, ok := e.store.Backend.(store.MemoryReporter)
	if !ok {
		return store.Memory{}, false
	}
	return r.Memory(), true
}
