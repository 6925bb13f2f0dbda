package load

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/policy"
)

// Routes the tool calls.
const (
	pathHealth    = "/v1/health"
	pathOrgs      = "/v1/platform/orgs"
	pathAgentKeys = "/v1/execution/agent-keys"
	pathBundles   = "/v1/protocol/policies/bundles"
	pathEvaluate  = "/v1/protocol/evaluate-decision"
	pathBind      = "/v1/authority/enforce-and-bind"
	pathClaim     = "/v1/execution/claim-token"
	pathFinalize  = "/v1/execution/finalize-token"
)

// maxBody bounds the answers the tool reads.
const maxBody = 1 << 20

// bundleTemplate is the ENFORCEMENT bundle published for cycles: the
// starter policy's amount bands, enforced, with ALLOW as the default.
const bundleTemplate = `{"bundle_id":"clearance-loadtest","version":%q,"mode":"ENFORCEMENT","rules":[
 {"id":"loadtest-escalate","match":[{"field":"amount","op":"ge","value":1000}],"outcome":"ESCALATE","reason_codes":["AMOUNT_IN_ESCALATION_BAND"]},
 {"id":"loadtest-block","match":[{"field":"amount","op":"ge","value":10000}],"outcome":"BLOCK","reason_codes":["AMOUNT_AT_OR_ABOVE_BLOCK_THRESHOLD"]}],
 "default":{"outcome":"ALLOW","reason_codes":["LOADTEST_ALLOW"]}}`

// tenant is one org a run loads and the API keys its workers send. Each
// client is its own credential, as a fleet of agents is, so the server's
// per-credential rate limit meters each of them.
type tenant struct {
	orgID string
	key   string // the org's key (setup calls)
	// clientKeys are the keys workers send, the n-th worker of the org
	// key n mod len; empty means key.
	clientKeys []string
}

// keyOf is the API key the org's n-th worker sends.
func (t *tenant) keyOf(n int) string {
	if len(t.clientKeys) == 0 {
		return t.key
	}
	return t.clientKeys[n%len(t.clientKeys)]
}

// runner is one run in flight.
type runner struct {
	cfg    Config
	client *http.Client
	base   string
	// tenants are the orgs the run loads (Config.Orgs), worker i org
	// i mod len.
	tenants []*tenant
	agent   grant.Key
	runID   string
	share   float64
	// peerPath is the URL path of a peer's decision; "" for Clearance.
	peerPath string

	measureStart time.Time
	deadline     time.Time     // zero: none
	pace         *rate.Limiter // Config.Rate; nil: none
	slots        atomic.Int64
	warm         atomic.Int64
	intents      atomic.Int64
	liveOps      atomic.Int64
	liveErrs     atomic.Int64
	stats        *stats
}

// Run validates cfg, prepares the org (see doc.go), runs the load and
// returns its result. An error means the run could not start; a run whose
// requests failed returns a Result with Pass false.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, client: cfg.Client, base: strings.TrimRight(cfg.Target, "/"), share: cfg.share()}
	if cfg.Peer != "" {
		r.peerPath, _ = opaDataPath(cfg.OPAPath) // checked by Validate
	}
	if r.client == nil {
		r.client = newClient(cfg)
		defer r.client.CloseIdleConnections()
	}
	var idb [4]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return nil, err
	}
	r.runID = time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(idb[:])
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	var fill *Prefill
	if cfg.Prefill > 0 {
		f, err := r.prefill(ctx)
		if err != nil {
			return nil, err
		}
		fill = &f
	}
	start := time.Now()
	r.measureStart = start.Add(cfg.Warmup)
	if cfg.Duration > 0 {
		r.deadline = r.measureStart.Add(cfg.Duration)
	}
	r.stats = newStats(cfg.Scenario)
	if cfg.Rate > 0 {
		// A burst of one: operations start evenly spaced, not in clumps.
		r.pace = rate.NewLimiter(rate.Limit(cfg.Rate), 1)
	}

	done := make(chan struct{})
	var progress sync.WaitGroup
	if cfg.Progress != nil {
		progress.Go(func() { r.progress(ctx, done) })
	}
	var workers sync.WaitGroup
	for id := range cfg.Concurrency {
		workers.Go(func() { r.worker(ctx, id) })
	}
	workers.Wait()
	close(done)
	progress.Wait()
	m := Machine{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version()}
	res := r.stats.result(cfg, start, r.measureStart, m)
	res.Prefill, res.Orgs = fill, len(r.tenants)
	return res, nil
}

// prefill records cfg.Prefill decisions with every worker, unmeasured; a
// decision that fails stops it, since the run would not measure the size
// it names.
func (r *runner) prefill(ctx context.Context) (Prefill, error) {
	start := time.Now()
	var next atomic.Int64
	var failed atomic.Pointer[string]
	var workers sync.WaitGroup
	for id := range r.cfg.Concurrency {
		workers.Go(func() {
			rng := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), uint64(id)))
			_, key := r.tenantOf(id)
			var buf []byte
			for next.Add(1) <= r.cfg.Prefill && failed.Load() == nil && ctx.Err() == nil {
				var op opResult
				buf, op, _ = r.evaluate(ctx, key, rng, buf)
				if !op.ok && ctx.Err() == nil {
					why := fmt.Sprintf("prefill: a decision failed (status %d, %s)", op.steps[0].status, op.steps[0].code)
					failed.CompareAndSwap(nil, &why)
				}
			}
		})
	}
	workers.Wait()
	if why := failed.Load(); why != nil {
		return Prefill{}, errors.New(*why)
	}
	if err := ctx.Err(); err != nil {
		return Prefill{}, err
	}
	secs := time.Since(start).Seconds()
	return Prefill{Decisions: r.cfg.Prefill, Seconds: secs, PerSecond: float64(r.cfg.Prefill) / secs}, nil
}

// setup finds or creates the orgs and, for cycles, registers the agent key
// and publishes the enforcing bundle in each; a peer gets its own checks.
func (r *runner) setup(ctx context.Context) error {
	if r.peerPath != "" {
		return r.setupPeer(ctx)
	}
	if err := r.setupCall(ctx, http.MethodGet, pathHealth, "", nil, nil, "reach the target"); err != nil {
		return err
	}
	if r.cfg.APIKey != "" {
		r.tenants = []*tenant{{key: r.cfg.APIKey}}
	} else {
		for i := range max(r.cfg.Orgs, 1) {
			t, err := r.createOrg(ctx, i)
			if err != nil {
				return err
			}
			r.tenants = append(r.tenants, t)
		}
	}
	if r.share == 0 {
		return nil
	}
	agent, err := grant.NewKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("agent key: %w", err)
	}
	r.agent = agent
	for _, t := range r.tenants {
		if err := r.prepareCycles(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// createOrg creates the run's i-th org and its workers' keys.
func (r *runner) createOrg(ctx context.Context, i int) (*tenant, error) {
	var org struct {
		OrgID  string `json:"org_id"`
		APIKey string `json:"api_key"`
	}
	name := "loadtest-" + r.runID
	if r.cfg.Orgs > 1 {
		name += "-" + strconv.Itoa(i+1)
	}
	body, _ := json.Marshal(map[string]string{"name": name})
	if err := r.setupCall(ctx, http.MethodPost, pathOrgs, r.cfg.PlatformKey, body, &org, "create org"); err != nil {
		return nil, err
	}
	if org.APIKey == "" || org.OrgID == "" {
		return nil, errors.New("create org: the answer has no api_key or org_id")
	}
	t := &tenant{orgID: org.OrgID, key: org.APIKey}
	orgs := max(r.cfg.Orgs, 1)
	workers := (r.cfg.Concurrency - i + orgs - 1) / orgs // the workers i, i+orgs, …
	return t, r.createClientKeys(ctx, t, workers)
}

// prepareCycles finds the org of a given key, registers the run's agent key
// in it and publishes the enforcing bundle.
func (r *runner) prepareCycles(ctx context.Context, t *tenant) error {
	if t.orgID == "" {
		var list struct {
			OrgID string `json:"org_id"`
		}
		if err := r.setupCall(ctx, http.MethodGet, pathAgentKeys, t.key, nil, &list, "find the key's org"); err != nil {
			return err
		}
		if list.OrgID == "" {
			return errors.New("find the key's org: the answer has no org_id")
		}
		t.orgID = list.OrgID
	}
	reg, err := json.Marshal(map[string]any{"kid": r.agent.KID(), "public_jwk": r.agent.PublicJWK()})
	if err != nil {
		return fmt.Errorf("agent key: %w", err)
	}
	if err := r.setupCall(ctx, http.MethodPost, pathAgentKeys, t.key, reg, nil, "register the agent key"); err != nil {
		return err
	}
	bundle := fmt.Appendf(nil, bundleTemplate, "loadtest-"+r.runID)
	return r.setupCall(ctx, http.MethodPost, pathBundles, t.key, bundle, nil, "publish the loadtest bundle")
}

// MaxClientKeys bounds the API keys a run creates for its workers.
const MaxClientKeys = 64

// createClientKeys gives the workers of an org the run created their own
// API keys (up to MaxClientKeys; the org's first key is one of them).
func (r *runner) createClientKeys(ctx context.Context, t *tenant, workers int) error {
	t.clientKeys = []string{t.key}
	body := []byte(`{"scopes":["decision:write"]}`)
	for len(t.clientKeys) < min(workers, MaxClientKeys) {
		var k struct {
			Secret string `json:"api_key"`
		}
		if err := r.setupCall(ctx, http.MethodPost, pathOrgs+"/"+t.orgID+"/api-keys", r.cfg.PlatformKey, body, &k, "create a client key"); err != nil {
			return err
		}
		if k.Secret == "" {
			return errors.New("create a client key: the answer has no api_key")
		}
		t.clientKeys = append(t.clientKeys, k.Secret)
	}
	return nil
}

// tenantOf is the org worker id loads and the key it sends.
func (r *runner) tenantOf(id int) (*tenant, string) {
	if len(r.tenants) == 0 { // a peer
		return nil, ""
	}
	t := r.tenants[id%len(r.tenants)]
	return t, t.keyOf(id / len(r.tenants))
}

func (r *runner) setupCall(ctx context.Context, method, path, key string, body []byte, out any, what string) error {
	status, raw, err := r.do(ctx, method, path, key, body)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if status < 200 || status > 299 {
		return fmt.Errorf("%s: %s %s answered %d: %s", what, method, path, status, snippet(raw))
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s: undecodable answer: %v", what, err)
		}
	}
	return nil
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// do sends one request and reads its answer (at most maxBody bytes).
func (r *runner) do(ctx context.Context, method, path, key string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("User-Agent", "clearance-loadtest")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := r.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxBody))
	if err != nil {
		return 0, nil, err
	}
	return res.StatusCode, raw, nil
}

// answer holds the members any step reads.
type answer struct {
	Code           string `json:"code"`
	ExecutionToken string `json:"execution_token"`
	IntentHash     string `json:"intent_hash"`
	ShouldExecute  bool   `json:"should_execute"`
	ClaimToken     string `json:"claim_token"`
	// Result is a peer's answer (OPA wraps its decision in "result").
	Result *peerDecision `json:"result"`
}

// step sends one request of an operation. canceled reports that ctx ended
// the request: the operation is then discarded.
func (r *runner) step(ctx context.Context, key, name, path string, body []byte, a *answer) (s stepResult, canceled bool) {
	t0 := time.Now()
	status, raw, err := r.do(ctx, http.MethodPost, path, key, body)
	s = stepResult{step: name, status: status, latency: time.Since(t0)}
	if err != nil {
		if ctx.Err() != nil {
			return s, true
		}
		s.status, s.code = 0, codeTransport
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			s.code = codeTimeout
		}
		return s, false
	}
	*a = answer{}
	decodeErr := json.Unmarshal(raw, a)
	switch {
	case status < 200 || status > 299:
		s.code = a.Code
		if s.code == "" {
			s.code = codeNone
		}
	case decodeErr != nil:
		s.code = codeUndecodable
	default:
		s.ok = true
	}
	return s, false
}

// kindOf says whether operation n (1-based) is a cycle.
func (r *runner) kindOf(n int64) string {
	switch {
	case r.share >= 1:
		return kindCycle
	case r.share <= 0:
		return kindEvaluate
	}
	if math.Floor(float64(n)*r.share) > math.Floor(float64(n-1)*r.share) {
		return kindCycle
	}
	return kindEvaluate
}

func (r *runner) worker(ctx context.Context, id int) {
	rng := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), uint64(id)))
	t, key := r.tenantOf(id)
	var buf []byte
	for {
		if r.pace != nil && r.pace.Wait(ctx) != nil {
			return
		}
		now := time.Now()
		if ctx.Err() != nil || (!r.deadline.IsZero() && !now.Before(r.deadline)) {
			return
		}
		measured := !now.Before(r.measureStart)
		var n int64
		if measured {
			n = r.slots.Add(1)
			if r.cfg.Count > 0 && n > r.cfg.Count {
				return
			}
		} else {
			n = r.warm.Add(1)
		}
		var op opResult
		var canceled bool
		if r.kindOf(n) == kindCycle {
			op, canceled = r.cycle(ctx, t, key, rng)
		} else {
			buf, op, canceled = r.evaluate(ctx, key, rng, buf)
		}
		if canceled {
			return
		}
		if measured {
			r.stats.add(&op, time.Now())
			r.liveOps.Add(1)
			if !op.ok {
				r.liveErrs.Add(1)
			}
		}
	}
}

// amount is a decision amount in cents: about 70 % below 1,000, 20 % in
// the escalation band, 10 % from 10,000.
func amount(rng *mrand.Rand) int64 {
	switch p := rng.IntN(10); {
	case p < 7:
		return 100 + rng.Int64N(99_900)
	case p < 9:
		return 100_000 + rng.Int64N(900_000)
	default:
		return 1_000_000 + rng.Int64N(4_000_000)
	}
}

// evaluateBody appends the evaluate scenario's request body with amount
// cents/100 to buf: the decision document for Clearance, the same document
// as {"input": …} for a peer.
func (r *runner) evaluateBody(buf []byte, cents int64) []byte {
	if r.peerPath != "" {
		buf = append(buf, `{"input":`...)
	}
	buf = fmt.Appendf(buf, `{"decision_type":"PAYMENT","workflow_key":"loadtest","amount":%d.%02d}`, cents/100, cents%100)
	if r.peerPath != "" {
		buf = append(buf, '}')
	}
	return buf
}

func (r *runner) evaluate(ctx context.Context, key string, rng *mrand.Rand, buf []byte) ([]byte, opResult, bool) {
	c := amount(rng)
	buf = r.evaluateBody(buf[:0], c)
	path := pathEvaluate
	var want policy.Decision
	if r.peerPath != "" {
		path, want = r.peerPath, starterDecision(c)
	}
	var a answer
	s, canceled := r.step(ctx, key, stepEvaluate, path, buf, &a)
	if s.ok && r.peerPath != "" {
		if code := checkPeer(&a, want); code != "" {
			s.ok, s.code = false, code
		}
	}
	op := opResult{kind: kindEvaluate, n: 1, latency: s.latency, ok: s.ok}
	op.steps[0] = s
	return buf, op, canceled
}

// intent signs a fresh intent below the escalation band.
func (r *runner) intent(t *tenant, rng *mrand.Rand) (string, error) {
	n := r.intents.Add(1)
	id := r.runID + "-" + strconv.FormatInt(n, 10)
	c := 100 + rng.Int64N(99_900)
	m := map[string]any{
		"intent_id": "lt-" + id, "org_id": t.orgID,
		"actor":        map[string]any{"id": "loadtest-agent", "type": "agent"},
		"action":       map[string]any{"type": "payment", "amount": float64(c) / 100, "currency": "EUR", "target": "acct-" + strconv.FormatInt(n%1000, 10)},
		"workflow_key": "loadtest", "decision_type": "PAYMENT", "nonce": "nonce-" + id, "concurrency_scope": "scope-" + id,
		"escalation": map[string]any{"mode": "NONE"}, "issued_at": time.Now().UTC().Format(time.RFC3339),
	}
	payload, err := canon.Marshal(m)
	if err != nil {
		return "", err
	}
	return grant.SignIntent(r.agent, payload)
}

func (r *runner) cycle(ctx context.Context, t *tenant, key string, rng *mrand.Rand) (opResult, bool) {
	op := opResult{kind: kindCycle}
	jws, err := r.intent(t, rng)
	if err != nil { // cannot happen with a valid key; count it, do not spin
		op.steps[0] = stepResult{step: stepBind, code: "INTENT_SIGNING_FAILED"}
		op.n = 1
		return op, false
	}
	t0 := time.Now()
	var a answer
	body, _ := json.Marshal(map[string]string{"signed_intent": jws})
	s, canceled := r.step(ctx, key, stepBind, pathBind, body, &a)
	if s.ok && a.ExecutionToken == "" {
		s.ok, s.code = false, codeNoToken
	}
	op.steps[0], op.n = s, 1
	if canceled || !s.ok {
		op.latency = time.Since(t0)
		return op, canceled
	}
	token, hash := a.ExecutionToken, a.IntentHash
	body, _ = json.Marshal(map[string]string{"execution_token": token, "intent_hash": hash})
	s, canceled = r.step(ctx, key, stepClaim, pathClaim, body, &a)
	if s.ok && (!a.ShouldExecute || a.ClaimToken == "") {
		s.ok, s.code = false, codeNotExecuted
	}
	op.steps[1], op.n = s, 2
	if canceled || !s.ok {
		op.latency = time.Since(t0)
		return op, canceled
	}
	op.executed = true
	body, _ = json.Marshal(map[string]string{"execution_token": token, "claim_token": a.ClaimToken, "outcome": "COMMITTED"})
	s, canceled = r.step(ctx, key, stepFinalize, pathFinalize, body, &a)
	op.steps[2], op.n = s, 3
	op.latency = time.Since(t0)
	op.ok = s.ok
	return op, canceled
}

// progress prints a line per second while the run measures.
func (r *runner) progress(ctx context.Context, done <-chan struct{}) {
	w := r.cfg.Progress
	if r.cfg.Warmup > 0 {
		fmt.Fprintf(w, "loadtest: %s, %d workers, warming up for %v\n", r.cfg.Scenario, r.cfg.Concurrency, r.cfg.Warmup)
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var lastOps int64
	lastAt := r.measureStart
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if now.Sub(r.measureStart) < 500*time.Millisecond {
				continue
			}
			ops := r.liveOps.Load()
			rate := float64(ops-lastOps) / now.Sub(lastAt).Seconds()
			fmt.Fprintf(w, "loadtest: %5.0fs  ops %9d  ops/s %9.1f  errors %d\n",
				now.Sub(r.measureStart).Seconds(), ops, rate, r.liveErrs.Load())
			lastOps, lastAt = ops, now
		}
	}
}
