package server

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/webhook"
)

type metrics struct {
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	decisions *prometheus.CounterVec

	commitSeconds *prometheus.HistogramVec // by backend
	commitObs     atomic.Pointer[commitObservers]
	commitBatch   *prometheus.HistogramVec // by backend
	claims        *prometheus.CounterVec   // outcome, code
	claimsWon     prometheus.Counter
	finalizations *prometheus.CounterVec // outcome, code
	grantFailures *prometheus.CounterVec // code
}

// scrapeTimeout bounds the store reads of one scrape (queue depths).
const scrapeTimeout = 5 * time.Second

func newMetrics(reg prometheus.Registerer, e *clearance.Engine) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clearance_http_requests_total",
			Help: "HTTP requests by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "clearance_http_request_duration_seconds",
			Help:    "HTTP request latency by route pattern.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clearance_decisions_total",
			Help: "Decisions recorded, by outcome, mode and entry route.",
		}, []string{"outcome", "mode", "route"}),
		commitSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "clearance_store_commit_duration_seconds",
			Help:    "Store commits by backend: from handing the writes over to their being durable (Pebble: apply and WAL sync; PostgreSQL: the COMMIT round trip).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}, []string{"backend"}),
		commitBatch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "clearance_store_commit_batch_size",
			Help:    "Updates one store commit made durable together (group commit), by backend.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
		}, []string{"backend"}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clearance_claims_total",
			Help: "Grant claims by outcome (won, refused) and the refusal's code.",
		}, []string{"outcome", "code"}),
		finalizations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clearance_finalizations_total",
			Help: "Finalizations by the outcome recorded (committed, failed, indeterminate) or refused, with the refusal's code.",
		}, []string{"outcome", "code"}),
		grantFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clearance_grant_verification_failures_total",
			Help: "Execution grants refused by verification (signature, lifetime, tenant, binding) on the verify, claim, finalize and dispatch routes, by code.",
		}, []string{"code"}),
	}
	m.claimsWon = m.claims.WithLabelValues("won", "")
	reg.MustRegister(m.requests, m.latency, m.decisions, m.commitSeconds, m.commitBatch, m.claims, m.finalizations,
		m.grantFailures, queueCollector{e}, unsealedAge(e))
	if _, ok := e.StoreMemory(); ok {
		reg.MustRegister(storeMemoryCollector{e})
	}
	if e.Webhooks != nil {
		reg.MustRegister(webhookCollectors(e.Webhooks)...)
	}
	e.ObserveStoreCommits(m.storeCommit)
	return m
}

// storeCommit observes one Update's commit: once per commit (its Lead).
func (m *metrics) storeCommit(_ context.Context, c store.Commit) {
	if !c.Lead {
		return
	}
	o := m.commitObs.Load()
	if o == nil || o.backend != c.Backend { // one backend per engine: resolved once
		o = &commitObservers{backend: c.Backend, seconds: m.commitSeconds.WithLabelValues(c.Backend),
			batch: m.commitBatch.WithLabelValues(c.Backend)}
		m.commitObs.Store(o)
	}
	o.seconds.Observe(c.End.Sub(c.Start).Seconds())
	o.batch.Observe(float64(c.Batch))
}

// commitObservers are the commit histograms' series of one backend.
type commitObservers struct {
	backend        string
	seconds, batch prometheus.Observer
}

// grantVerificationCodes are the codes of a grant token refused by its
// verification.
var grantVerificationCodes = map[string]bool{
	clearance.CodeGrantInvalid: true, clearance.CodeGrantExpired: true,
	clearance.CodeGrantNotBound: true, clearance.CodeBindingMismatch: true,
}

// grantChecked counts a refusal of the grant route's call when its code
// is a grant verification failure.
func (m *metrics) grantChecked(err error) {
	if err == nil {
		return
	}
	if code := codeOf(err); grantVerificationCodes[code] {
		m.grantFailures.WithLabelValues(code).Inc()
	}
}

// claimed counts a claim's outcome.
func (m *metrics) claimed(err error) {
	if err == nil {
		m.claimsWon.Inc()
		return
	}
	m.claims.WithLabelValues("refused", codeOf(err)).Inc()
	m.grantChecked(err)
}

// finalized counts a finalization's outcome: the state recorded, with the
// code of one recorded as INDETERMINATE instead of as asked.
func (m *metrics) finalized(res clearance.FinalizeResult, err error) {
	var refused *clearance.FinalizeRefused
	switch {
	case err == nil:
		m.finalizations.WithLabelValues(strings.ToLower(string(res.Outcome)), res.Code).Inc()
	case errors.As(err, &refused):
		m.finalizations.WithLabelValues(strings.ToLower(string(refused.Result.Outcome)), refused.Err.Code).Inc()
	default:
		m.finalizations.WithLabelValues("refused", codeOf(err)).Inc()
		m.grantChecked(err)
	}
}

// codeOf is the code a refusal answers with.
func codeOf(err error) string { return problemOf(err, "").Code }

// queueCollector reports the store's job queues at scrape time: a bounded
// count of each queue's due jobs.
type queueCollector struct{ e *clearance.Engine }

var queueDepthDesc = prometheus.NewDesc("clearance_job_queue_depth",
	"Jobs due now (queued, or leased with the lease passed) by queue, in every org, counted up to "+
		strconv.Itoa(clearance.MaxQueueDepth)+"; outbox is events waiting for dispatch. Absent when the store cannot say.",
	[]string{"queue"}, nil)

func (q queueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- queueDepthDesc }

func (q queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	for _, kind := range clearance.JobQueues() {
		n, err := q.e.QueueDepth(ctx, kind, clearance.MaxQueueDepth)
		if err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(n), kind)
	}
}

// storeMemoryCollector reports the memory of the store's caches, which the
// process's resident memory includes and Go's statistics do not (Pebble
// built with cgo allocates them with malloc): a soak tells a cache filling
// up to its size from a leak by them.
type storeMemoryCollector struct{ e *clearance.Engine }

var (
	storeMemoryDesc = prometheus.NewDesc("clearance_store_cache_bytes",
		"Memory the store's caches hold, by cache: block_cache (table blocks) and memtables (the size allocated to memtables not yet flushed, including those readers still keep; pages not yet written to may not be resident).",
		[]string{"cache"}, nil)
	storeMemoryLimitDesc = prometheus.NewDesc("clearance_store_cache_limit_bytes",
		"The size the store's caches share by its configuration: memtables take their room in the block cache while they live.",
		nil, nil)
)

func (c storeMemoryCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- storeMemoryDesc
	ch <- storeMemoryLimitDesc
}

func (c storeMemoryCollector) Collect(ch chan<- prometheus.Metric) {
	m, ok := c.e.StoreMemory()
	if !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(storeMemoryDesc, prometheus.GaugeValue, float64(m.BlockCache), "block_cache")
	ch <- prometheus.MustNewConstMetric(storeMemoryDesc, prometheus.GaugeValue, float64(m.Memtables), "memtables")
	ch <- prometheus.MustNewConstMetric(storeMemoryLimitDesc, prometheus.GaugeValue, float64(m.Limit))
}

// unsealedAge reports how long the ledger entry waiting longest for a
// signed checkpoint has waited, across the orgs this server wrote: one
// number (the maximum), since one per org would be a series per tenant.
func unsealedAge(e *clearance.Engine) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "clearance_ledger_unsealed_age_seconds",
		Help: "Age of the oldest ledger entry this server appended that no signed checkpoint covers yet (the maximum across orgs); 0 when every ledger it wrote is sealed.",
	}, func() float64 {
		at, ok := e.OldestUnsealed()
		if !ok {
			return 0
		}
		return time.Since(at).Seconds()
	})
}

// webhookCollectors report this server's delivery worker: its counters,
// and the backlog the store holds for every worker on it.
func webhookCollectors(hooks *webhook.Service) []prometheus.Collector {
	counter := func(name, help string, v func(webhook.Stats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(v(hooks.Stats())) })
	}
	return []prometheus.Collector{
		counter("clearance_webhook_events_dispatched_total", "Events this server handed to their destinations.",
			func(s webhook.Stats) int64 { return s.Dispatched }),
		counter("clearance_webhook_deliveries_delivered_total", "Deliveries a receiver answered with 2xx.",
			func(s webhook.Stats) int64 { return s.Delivered }),
		counter("clearance_webhook_attempts_failed_total", "Delivery attempts that did not deliver.",
			func(s webhook.Stats) int64 { return s.FailedAttempts }),
		counter("clearance_webhook_deliveries_dead_lettered_total", "Deliveries given up after the last attempt.",
			func(s webhook.Stats) int64 { return s.DeadLettered }),
		counter("clearance_webhook_deliveries_dropped_total", "Deliveries whose integration was deleted before them.",
			func(s webhook.Stats) int64 { return s.Dropped }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "clearance_webhook_backlog",
			Help: "Events waiting for dispatch plus deliveries due now, counted up to " + strconv.Itoa(webhook.MaxBacklog) +
				"; -1 when the store cannot say."},
			func() float64 {
				ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
				defer cancel()
				n, err := hooks.Backlog(ctx)
				if err != nil {
					return -1
				}
				return float64(n)
			}),
	}
}

func (m *metrics) observe(route, method string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(route).Observe(d.Seconds())
}
