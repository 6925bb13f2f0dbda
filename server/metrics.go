package server

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clearancehq/clearance/webhook"
)

type metrics struct {
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	decisions *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, hooks *webhook.Service) *metrics {
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
	}
	reg.MustRegister(m.requests, m.latency, m.decisions)
	if hooks != nil {
		reg.MustRegister(webhookCollectors(hooks)...)
	}
	return m
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
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
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
