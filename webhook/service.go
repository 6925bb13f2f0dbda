package webhook

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/outbound"
	"github.com/clearancehq/clearance/outbox"
)

// Config is what the webhook feature needs beside the kernel.
type Config struct {
	// Client makes every delivery: TLS, no redirects, bounded bodies and
	// the SSRF guard, at registration (CheckURL) and at dial time.
	Client *outbound.Client
	// Rotation is how long a replaced signing secret keeps signing beside
	// the new one; 0 means DefaultRotation.
	Rotation time.Duration
	// Worker tunes the dispatcher and the delivery worker.
	Worker WorkerOptions
	// Render returns the body delivered for an event, when the outbox
	// holds less than the body (a reference the emitting feature writes
	// out at dispatch, off its request path). nil: the stored body is sent.
	Render func(ctx context.Context, ev outbox.Event) ([]byte, error)
}

// WorkerOptions tune delivery. The zero value is a good default.
type WorkerOptions struct {
	// Poll is how often Run looks for due work when nothing wakes it; 0
	// means DefaultPoll.
	Poll time.Duration
	// Lease is how long a worker holds a delivery before another may take
	// it over (a worker that crashed mid-delivery); 0 means DefaultLease.
	Lease time.Duration
	// Retries is the wait after each failed attempt: after the last one
	// the delivery is dead-lettered. nil means DefaultRetries.
	Retries []time.Duration
	// Timeout bounds one attempt; 0 means DefaultTimeout.
	Timeout time.Duration
	// Concurrency bounds the attempts in flight; 0 means
	// DefaultConcurrency.
	Concurrency int
}

// Defaults of WorkerOptions.
const (
	DefaultPoll        = time.Second
	DefaultLease       = time.Minute
	DefaultTimeout     = 10 * time.Second
	DefaultConcurrency = 8
	// batch is how many events or deliveries one pass takes.
	batch = 128
)

// DefaultRetries is the documented schedule: nine attempts over about ten
// hours, each wait varied by up to a fifth either way.
var DefaultRetries = []time.Duration{10 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute,
	30 * time.Minute, time.Hour, 3 * time.Hour, 6 * time.Hour}

// Service connects WEBHOOK integrations, hands events to them and
// delivers. Create it with New.
type Service struct {
	d     core.Deps
	cfg   Config
	wake  chan struct{}
	stats struct {
		dispatched, delivered, failedAttempts, deadLettered, dropped atomic.Int64
	}
}

// New returns the webhook feature over the kernel d.
func New(d core.Deps, cfg Config) *Service {
	if cfg.Client == nil {
		cfg.Client = outbound.New(outbound.Options{})
	}
	if cfg.Rotation <= 0 {
		cfg.Rotation = DefaultRotation
	}
	w := &cfg.Worker
	if w.Poll <= 0 {
		w.Poll = DefaultPoll
	}
	if w.Lease <= 0 {
		w.Lease = DefaultLease
	}
	if w.Retries == nil {
		w.Retries = DefaultRetries
	}
	if w.Timeout <= 0 {
		w.Timeout = DefaultTimeout
	}
	w.Lease = max(w.Lease, w.Timeout+5*time.Second)
	if w.Concurrency <= 0 {
		w.Concurrency = DefaultConcurrency
	}
	return &Service{d: d, cfg: cfg, wake: make(chan struct{}, 1)}
}

// Wake tells the worker that an event was committed, so that it does not
// wait for its next poll.
func (s *Service) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Stats counts the work of this Service since it was created.
type Stats struct {
	// Dispatched: events handed to the org's destinations.
	Dispatched int64
	// Delivered: deliveries a receiver answered with 2xx.
	Delivered int64
	// FailedAttempts: attempts that did not deliver.
	FailedAttempts int64
	// DeadLettered: deliveries given up after the last attempt.
	DeadLettered int64
	// Dropped: deliveries whose integration was deleted before them.
	Dropped int64
}

// MaxBacklog bounds what Backlog counts, so that a scrape stays cheap.
const MaxBacklog = 1000

// Backlog counts the events waiting for dispatch and the deliveries due
// now, of every org and every worker on the store, up to MaxBacklog: a
// backlog that grows says the workers do not keep up (or receivers fail).
func (s *Service) Backlog(ctx context.Context) (int, error) {
	events, err := s.d.Store.DueJobs(ctx, outbox.JobKind, MaxBacklog)
	if err != nil {
		return 0, core.Translate("count pending events", err)
	}
	due, err := s.d.Store.DueJobs(ctx, deliveryJob, MaxBacklog-len(events)+1)
	if err != nil {
		return 0, core.Translate("count due deliveries", err)
	}
	return min(len(events)+len(due), MaxBacklog), nil
}

// Stats returns the counters.
func (s *Service) Stats() Stats {
	return Stats{Dispatched: s.stats.dispatched.Load(), Delivered: s.stats.delivered.Load(),
		FailedAttempts: s.stats.failedAttempts.Load(), DeadLettered: s.stats.deadLettered.Load(), Dropped: s.stats.dropped.Load()}
}
