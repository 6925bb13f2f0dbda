package server

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/clearancehq/clearance/policy"
)

// The operator console's data routes (extensions): an org's decisions
// filtered, and its activity over time.

// limitQuery reads the limit query parameter: 0 when absent, else an
// integer from 1 to most (400 INVALID_QUERY otherwise).
func (c *call) limitQuery(most int) (int, error) {
	q, err := c.query("limit")
	if err != nil || q == "" {
		return 0, err
	}
	n, err := strconv.Atoi(q)
	if err != nil || n < 1 || n > most {
		return 0, badQuery("limit", fmt.Sprintf("limit must be an integer from 1 to %d", most))
	}
	return n, nil
}

// queryWindow reads the from and to query parameters (RFC 3339; absent:
// the engine's default window).
func (c *call) queryWindow() (clearance.Window, error) {
	var w clearance.Window
	for _, end := range []struct {
		name string
		into **time.Time
	}{{"from", &w.From}, {"to", &w.To}} {
		q, err := c.query(end.name)
		if err != nil {
			return w, err
		}
		if q == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, q)
		if err != nil {
			return w, badQuery(end.name, end.name+" must be an RFC 3339 timestamp")
		}
		*end.into = &t
	}
	return w, nil
}

func (s *Server) consoleDecisions(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	w, err := c.queryWindow()
	if err != nil {
		return err
	}
	f := clearance.DecisionFilter{Window: w}
	q := map[string]string{}
	if f.Limit, err = c.limitQuery(clearance.MaxDecisionsPage); err != nil {
		return err
	}
	for _, name := range []string{"outcome", "mode", "workflow"} {
		if q[name], err = c.query(name); err != nil {
			return err
		}
	}
	if v := q["outcome"]; v != "" {
		if f.Outcome = policy.Outcome(v); !f.Outcome.Valid() {
			return badQuery("outcome", "outcome must be ALLOW, ESCALATE, REVIEW_REQUIRED or BLOCK")
		}
	}
	if v := q["mode"]; v != "" {
		if f.Mode = policy.Mode(v); !f.Mode.Valid() {
			return badQuery("mode", "mode must be SHADOW or ENFORCEMENT")
		}
	}
	if v := q["workflow"]; v != "" {
		if !policy.ValidWorkflowKey(v) {
			return badQuery("workflow", "workflow must be a workflow key")
		}
		f.WorkflowKey = v
	}
	list, err := s.engine.Evidence.Decisions(c.r.Context(), org, f)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, list)
}

// consoleActivity is the org's Activity with the server's own request
// latency.
type consoleActivity struct {
	clearance.Activity
	Latency latencySummary `json:"latency"`
}

// latencySummary is the request latency this server process has seen, all
// routes and orgs together, estimated from its histogram.
type latencySummary struct {
	P50Ms    float64 `json:"p50_ms"`
	P95Ms    float64 `json:"p95_ms"`
	P99Ms    float64 `json:"p99_ms"`
	Requests uint64  `json:"requests"`
}

func (s *Server) consoleActivity(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	w, err := c.queryWindow()
	if err != nil {
		return err
	}
	bucket, err := c.query("bucket")
	if err != nil {
		return err
	}
	a, err := s.engine.Evidence.Activity(c.r.Context(), org, w, clearance.ActivityBucket(bucket))
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, consoleActivity{Activity: a, Latency: s.metrics.latencySummary()})
}

// latencySummary estimates p50, p95 and p99 from the request histogram,
// interpolating within a bucket as Prometheus' histogram_quantile does.
func (m *metrics) latencySummary() latencySummary {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		m.latency.Collect(ch)
		close(ch)
	}()
	var bounds []float64
	var counts []uint64 // cumulative, by bound
	var total uint64
	for pm := range ch {
		var d dto.Metric
		if pm.Write(&d) != nil || d.Histogram == nil {
			continue
		}
		h := d.Histogram
		if bounds == nil {
			for _, b := range h.Bucket {
				bounds = append(bounds, b.GetUpperBound())
			}
			counts = make([]uint64, len(bounds))
		}
		for i, b := range h.Bucket {
			if i < len(counts) {
				counts[i] += b.GetCumulativeCount()
			}
		}
		total += h.GetSampleCount()
	}
	out := latencySummary{Requests: total}
	if total == 0 {
		return out
	}
	quantile := func(q float64) float64 {
		rank := q * float64(total)
		lower, below := 0.0, uint64(0)
		for i, upper := range bounds {
			if float64(counts[i]) >= rank {
				inBucket := counts[i] - below
				if inBucket == 0 {
					return upper * 1000
				}
				return (lower + (upper-lower)*(rank-float64(below))/float64(inBucket)) * 1000
			}
			lower, below = upper, counts[i]
		}
		return lower * 1000 // beyond the last bound: the last bound
	}
	round := func(v float64) float64 { return math.Round(v*1000) / 1000 }
	out.P50Ms, out.P95Ms, out.P99Ms = round(quantile(.5)), round(quantile(.95)), round(quantile(.99))
	return out
}

func (s *Server) consoleEscalations(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	limit, err := c.limitQuery(clearance.MaxOpenEscalationsListed)
	if err != nil {
		return err
	}
	open, err := s.engine.Escalations.Open(c.r.Context(), org, limit)
	if err != nil {
		return err
	}
	// Open escalations carry no grant; cleared anyway, as the status route
	// does for a key that may not act.
	for i := range open {
		open[i].ExecutionToken = ""
	}
	return c.writeJSON(http.StatusOK, map[string]any{"org_id": org, "escalations": open})
}
