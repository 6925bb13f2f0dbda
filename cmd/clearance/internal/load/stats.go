package load

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram bounds: 1 µs to 60 s, 3 significant digits.
const (
	histMin     = 1
	histMax     = int64(60 * time.Second / time.Microsecond)
	histSigFigs = 3
)

// Operation kinds and request steps.
const (
	kindEvaluate = "evaluate"
	kindCycle    = "cycle"

	stepEvaluate = "evaluate"
	stepBind     = "enforce_and_bind"
	stepClaim    = "claim"
	stepFinalize = "finalize"
)

// Synthetic error codes (see doc.go).
const (
	codeNoToken      = "NO_EXECUTION_TOKEN"
	codeNotExecuted  = "NOT_EXECUTED"
	codeUndecodable  = "UNDECODABLE_RESPONSE"
	codeTimeout      = "TIMEOUT"
	codeTransport    = "TRANSPORT_ERROR"
	codeNone         = "NO_CODE"
	statusTransport  = "transport"
	formatVersion    = 1
	percentileFactor = 1000.0 // µs per ms in the table
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, histSigFigs) }

func record(h *hdrhistogram.Histogram, d time.Duration) {
	us := min(max(d.Microseconds(), histMin), histMax)
	_ = h.RecordValue(us) // in range by construction
}

// Latency summarizes a histogram in integer microseconds.
type Latency struct {
	Count  int64   `json:"count"`
	MeanUS float64 `json:"mean_us"`
	P50US  int64   `json:"p50_us"`
	P90US  int64   `json:"p90_us"`
	P99US  int64   `json:"p99_us"`
	P999US int64   `json:"p999_us"`
	MaxUS  int64   `json:"max_us"`
}

func summarize(h *hdrhistogram.Histogram) Latency {
	if h.TotalCount() == 0 {
		return Latency{}
	}
	return Latency{Count: h.TotalCount(), MeanUS: float64(int64(h.Mean()*10)) / 10,
		P50US: h.ValueAtQuantile(50), P90US: h.ValueAtQuantile(90), P99US: h.ValueAtQuantile(99),
		P999US: h.ValueAtQuantile(99.9), MaxUS: h.Max()}
}

// Errors counts failed requests.
type Errors struct {
	Total    int64            `json:"total"`
	ByStatus map[string]int64 `json:"by_status"`
	ByCode   map[string]int64 `json:"by_code"`
}

// ShouldExecute counts cycles by their claim's should_execute.
type ShouldExecute struct {
	True  int64 `json:"true"`
	False int64 `json:"false"`
}

// Machine describes where the tool ran.
type Machine struct {
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Go         string `json:"go"`
}

// Result is the outcome of a run; its JSON form is documented in doc.go.
type Result struct {
	Format            int                `json:"format"`
	Scenario          Scenario           `json:"scenario"`
	Target            string             `json:"target"`
	SelfHosted        bool               `json:"self_hosted"`
	Peer              Peer               `json:"peer,omitempty"`
	OPAPath           string             `json:"opa_path,omitempty"`
	Concurrency       int                `json:"concurrency"`
	Orgs              int                `json:"orgs,omitempty"`
	Rate              float64            `json:"rate,omitempty"`
	CycleShare        float64            `json:"cycle_share"`
	WarmupSeconds     float64            `json:"warmup_seconds"`
	ElapsedSeconds    float64            `json:"elapsed_seconds"`
	Operations        int64              `json:"operations"`
	Succeeded         int64              `json:"succeeded"`
	Failed            int64              `json:"failed"`
	OpsPerSecond      float64            `json:"ops_per_second"`
	Requests          int64              `json:"requests"`
	RequestsPerSecond float64            `json:"requests_per_second"`
	Latency           Latency            `json:"latency"`
	Kinds             map[string]Latency `json:"operations_by_kind"`
	Steps             map[string]Latency `json:"steps"`
	Errors            Errors             `json:"errors"`
	ShouldExecute     *ShouldExecute     `json:"should_execute,omitempty"`
	Pass              bool               `json:"pass"`
	Failures          []string           `json:"failures"`
	Machine           Machine            `json:"machine"`
	StartedAt         string             `json:"started_at"`
	// Prefill is the fill that ran before the warmup (Config.Prefill).
	Prefill *Prefill `json:"prefill,omitempty"`
}

// Prefill is how the store was filled before a run.
type Prefill struct {
	Decisions int64   `json:"decisions"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
}

// stepResult is one request of an operation.
type stepResult struct {
	step    string
	status  int // 0: transport failure
	code    string
	latency time.Duration
	ok      bool
}

// opResult is one operation.
type opResult struct {
	kind     string
	steps    [3]stepResult
	n        int
	latency  time.Duration
	ok       bool
	executed bool // cycles: the claim said should_execute true
}

// stats accumulates measured operations; safe for concurrent use.
type stats struct {
	mu        sync.Mutex
	overall   *hdrhistogram.Histogram
	kinds     map[string]*hdrhistogram.Histogram
	steps     map[string]*hdrhistogram.Histogram
	ops, okOp int64
	requests  int64
	errs      Errors
	fivexx    int64
	fourxx    int64
	transport int64
	mismatch  int64 // peer answers without the starter policy's decision
	cycles    bool
	exec      ShouldExecute
	last      time.Time
}

func newStats(s Scenario) *stats {
	st := &stats{overall: newHist(), kinds: map[string]*hdrhistogram.Histogram{}, steps: map[string]*hdrhistogram.Histogram{},
		errs: Errors{ByStatus: map[string]int64{}, ByCode: map[string]int64{}}}
	if s != Cycle {
		st.kinds[kindEvaluate], st.steps[stepEvaluate] = newHist(), newHist()
	}
	if s != Evaluate {
		st.cycles = true
		st.kinds[kindCycle] = newHist()
		for _, k := range []string{stepBind, stepClaim, stepFinalize} {
			st.steps[k] = newHist()
		}
	}
	return st
}

func (st *stats) add(op *opResult, end time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.ops++
	if end.After(st.last) {
		st.last = end
	}
	if op.ok {
		st.okOp++
		record(st.overall, op.latency)
		record(st.kinds[op.kind], op.latency)
	}
	if op.kind == kindCycle {
		if op.executed {
			st.exec.True++
		} else {
			st.exec.False++
		}
	}
	for _, s := range op.steps[:op.n] {
		st.requests++
		if s.ok {
			record(st.steps[s.step], s.latency)
			continue
		}
		st.errs.Total++
		key := statusTransport
		if s.status != 0 {
			key = strconv.Itoa(s.status)
		} else {
			st.transport++
		}
		switch {
		case s.status >= 500:
			st.fivexx++
		case s.status >= 400:
			st.fourxx++
		}
		switch s.code {
		case codeNoResult, codeWrongOutcome, codeWrongRules:
			st.mismatch++
		}
		st.errs.ByStatus[key]++
		st.errs.ByCode[s.code]++
	}
}

func (st *stats) result(cfg Config, start, measureStart time.Time, m Machine) *Result {
	st.mu.Lock()
	defer st.mu.Unlock()
	elapsed := 0.0
	if st.last.After(measureStart) {
		elapsed = st.last.Sub(measureStart).Seconds()
	}
	r := &Result{Format: formatVersion, Scenario: cfg.Scenario, Target: cfg.Target, SelfHosted: cfg.SelfHosted, Peer: cfg.Peer,
		Concurrency: cfg.Concurrency, Rate: cfg.Rate, CycleShare: cfg.share(), WarmupSeconds: cfg.Warmup.Seconds(),
		ElapsedSeconds: round3(elapsed), Operations: st.ops, Succeeded: st.okOp, Failed: st.ops - st.okOp,
		Requests: st.requests, Latency: summarize(st.overall), Kinds: map[string]Latency{}, Steps: map[string]Latency{},
		Errors:  Errors{Total: st.errs.Total, ByStatus: maps.Clone(st.errs.ByStatus), ByCode: maps.Clone(st.errs.ByCode)},
		Machine: m, StartedAt: start.UTC().Format(time.RFC3339), Failures: []string{}}
	if cfg.Peer == PeerOPA {
		r.OPAPath = strings.Trim(cfg.OPAPath, "/")
		if r.OPAPath == "" {
			r.OPAPath = DefaultOPAPath
		}
	}
	if elapsed > 0 {
		r.OpsPerSecond = round1(float64(st.okOp) / elapsed)
		r.RequestsPerSecond = round1(float64(st.requests) / elapsed)
	}
	for k, h := range st.kinds {
		r.Kinds[k] = summarize(h)
	}
	for k, h := range st.steps {
		r.Steps[k] = summarize(h)
	}
	if st.cycles {
		e := st.exec
		r.ShouldExecute = &e
	}
	if st.ops == 0 {
		r.Failures = append(r.Failures, "no operation was measured")
	}
	if st.fivexx > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("%d requests answered 5xx", st.fivexx))
	}
	// Every request the tool sends is one the server should accept: a
	// refused one means the run measured something else (a rate limit, a
	// missing scope), so it cannot pass.
	if st.fourxx > 0 {
		msg := fmt.Sprintf("%d requests were refused (4xx)", st.fourxx)
		if n := st.errs.ByStatus["429"]; n > 0 {
			msg += fmt.Sprintf(", %d of them by the server's rate limit (429): it is per API key, so give each client its own key"+
				" (the tool does when it creates the org), or start the server with --rate-limit -1 to measure the engine alone", n)
		}
		r.Failures = append(r.Failures, msg)
	}
	if st.transport > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("%d requests failed in transport", st.transport))
	}
	if st.mismatch > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("%d peer answers did not carry the starter policy's decision", st.mismatch))
	}
	if st.exec.False > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("%d cycles did not get should_execute true", st.exec.False))
	}
	r.Pass = len(r.Failures) == 0
	return r
}

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }
func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

// WriteJSON writes the result as one indented JSON document.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// WriteTable writes the result as a human-readable table.
func (r *Result) WriteTable(w io.Writer) error {
	var b strings.Builder
	self := ""
	if r.SelfHosted {
		self = " (self-hosted: the server shares this machine's CPUs)"
	}
	if r.Peer == PeerOPA {
		self = " (peer: OPA server, decision " + r.OPAPath + ", no evidence)"
	}
	fmt.Fprintf(&b, "scenario    %s", r.Scenario)
	if r.Scenario == Mixed {
		fmt.Fprintf(&b, " (cycle share %.2f)", r.CycleShare)
	}
	fmt.Fprintf(&b, ", %d workers, %.2fs measured after %.2gs warmup\n", r.Concurrency, r.ElapsedSeconds, r.WarmupSeconds)
	fmt.Fprintf(&b, "target      %s%s\n", r.Target, self)
	if r.Orgs > 1 {
		fmt.Fprintf(&b, "orgs        %d, workers spread over them\n", r.Orgs)
	}
	fmt.Fprintf(&b, "machine     %s/%s, %d CPUs, GOMAXPROCS %d, %s\n", r.Machine.GOOS, r.Machine.GOARCH, r.Machine.CPUs, r.Machine.GOMAXPROCS, r.Machine.Go)
	if r.Prefill != nil {
		fmt.Fprintf(&b, "prefill     %d decisions recorded first, in %.1fs (%.0f/s)\n", r.Prefill.Decisions, r.Prefill.Seconds, r.Prefill.PerSecond)
	}
	fmt.Fprintf(&b, "operations  %d (%d ok, %d failed)\n", r.Operations, r.Succeeded, r.Failed)
	fmt.Fprintf(&b, "throughput  %.1f ops/s, %.1f requests/s (%d requests)\n\n", r.OpsPerSecond, r.RequestsPerSecond, r.Requests)
	fmt.Fprintf(&b, "%-18s %9s %9s %9s %9s %9s %9s %9s\n", "latency (ms)", "count", "mean", "p50", "p90", "p99", "p99.9", "max")
	ms := func(us float64) string { return strconv.FormatFloat(us/percentileFactor, 'f', 3, 64) }
	row := func(name string, l Latency) {
		fmt.Fprintf(&b, "%-18s %9d %9s %9s %9s %9s %9s %9s\n", name, l.Count, ms(l.MeanUS), ms(float64(l.P50US)),
			ms(float64(l.P90US)), ms(float64(l.P99US)), ms(float64(l.P999US)), ms(float64(l.MaxUS)))
	}
	if len(r.Kinds) > 1 {
		row("all operations", r.Latency)
	}
	if l, ok := r.Kinds[kindEvaluate]; ok {
		row("evaluate", l)
	}
	if l, ok := r.Kinds[kindCycle]; ok {
		row("cycle", l)
		for _, s := range []string{stepBind, stepClaim, stepFinalize} {
			row("  "+s, r.Steps[s])
		}
	}
	b.WriteString("\n")
	if r.Errors.Total == 0 {
		b.WriteString("errors      none\n")
	} else {
		fmt.Fprintf(&b, "errors      %d: by status %s; by code %s\n", r.Errors.Total, counts(r.Errors.ByStatus), counts(r.Errors.ByCode))
	}
	if r.ShouldExecute != nil {
		fmt.Fprintf(&b, "should_execute  true %d, false %d\n", r.ShouldExecute.True, r.ShouldExecute.False)
	}
	if r.Pass {
		b.WriteString("result      PASS\n")
	} else {
		fmt.Fprintf(&b, "result      FAIL: %s\n", strings.Join(r.Failures, "; "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// counts renders a map as "k×n, …", largest first.
func counts(m map[string]int64) string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s×%d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
