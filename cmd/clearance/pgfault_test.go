package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clearancehq/clearance/internal/acktest"
	"github.com/clearancehq/clearance/internal/faultproxy"
	"github.com/clearancehq/clearance/store/pgstore/pgtest"
)

// The PostgreSQL fault tests run the real binary on PostgreSQL through a
// fault proxy (internal/faultproxy) and break the network between them
// while clients keep sending decisions and full agent cycles (enforce-and-
// bind, two racing claims, finalize). Every answer must be correct, or a
// 503 with a stable code that authorizes nothing; afterwards acktest.Check
// (with the book's Exact switch) finds every acknowledged record, no grant
// claimed twice and verifying ledgers, with exactly the acknowledged
// decisions in them; and the server recovers by itself, timed from the
// fault's end to the first success.

var (
	faultRounds = flag.Int("pgfault.rounds", 1, "faults of each kind injected by each TestPostgresFault test, each followed by recovery")
	faultOutage = flag.Duration("pgfault.outage", 2*time.Second, "how long the database stays unreachable, and how much longer than the claim lease a stall lasts")
)

const (
	faultClients = 6                // concurrent load clients, over faultOrgs orgs
	faultOrgs    = 2                // orgs under load
	faultLease   = 2 * time.Second  // --claim-lease of the stall test
	faultWait    = 90 * time.Second // the longest any condition is waited for
	// faultStoreTimeout is the blackhole test's --store-timeout: no request
	// may wait on the database longer (plus faultSettle for a COMMIT it
	// cuts off, and faultMargin for the rest of the request).
	faultStoreTimeout = time.Second
	faultSettle       = time.Second // min(--store-timeout, 2 s)
	faultMargin       = time.Second
)

// faultCodes are the codes a 503 may carry while the database is out of
// reach: the store's, never one that could be read as a decision.
var faultCodes = map[string]bool{"STORE_UNAVAILABLE": true}

// faultEnv is a `clearance serve` on its own PostgreSQL schema, reached
// through a fault proxy, with acktest's orgs.
type faultEnv struct {
	t     *testing.T
	name  string
	proxy *faultproxy.Proxy
	p     *proc
	httpc *http.Client
	orgs  []acktest.Org
	book  *acktest.Book

	// needle narrows Cut to the COMMITs of transactions that carry it
	// (nil: every COMMIT).
	needle atomic.Pointer[[]byte]

	acks     atomic.Int64  // answers that acknowledged a record
	inflight atomic.Int64  // load requests sent and not answered yet
	abort    chan struct{} // closed when the test ends: load stops at once
	loads    sync.WaitGroup

	mu        sync.Mutex
	status    map[int]int    // every answer, by status
	codes     map[string]int // codes of the 503s
	faults    []string       // faults injected
	down      bool           // a fault lasts
	downSince time.Time
	okDown    int             // 2xx answers to requests sent while a fault lasted
	downAns   int             // answers, while a fault lasts, to requests sent during it
	downWait  time.Duration   // the longest answer to a request sent while a fault lasted
	upSince   time.Time       // the end of the last fault
	recovered bool            // a request sent after upSince succeeded
	recovery  []time.Duration // per fault: from its end to the first success
	targeted  map[string]int  // "op loss status": requests whose own COMMIT was cut
	keyed     []faultKey      // decisions sent with an Idempotency-Key
	lateWins  int             // winning claims answered after their lease ended
	lateRefus int             // claims refused CLAIM_LEASE_EXPIRED: their lease ended before the answer
}

// faultKey is a decision acknowledged under an Idempotency-Key.
type faultKey struct {
	org       int
	key, body string
	dossierID string
}

// newFaultEnv starts the server with --claim-lease lease and the extra
// serve flags.
func newFaultEnv(t *testing.T, name string, lease time.Duration, extra ...string) *faultEnv {
	t.Helper()
	pgtest.Admin(t)
	schema := pgtest.NewSchema(t, "clearance_fault_") // dropped after the server and the proxy stop
	u, err := url.Parse(pgtest.SchemaURL(t, schema))
	if err != nil {
		t.Fatal(err)
	}
	e := &faultEnv{t: t, name: name, abort: make(chan struct{}),
		status: map[int]int{}, codes: map[string]int{}, targeted: map[string]int{},
		book: acktest.NewBook()}
	// Every request but a keyless decision is repeated until answered.
	e.book.Exact = true
	e.proxy, err = faultproxy.New(u.Host, faultproxy.Options{Match: func() faultproxy.Matcher {
		return &needleCommit{inner: faultproxy.PostgresCommit(), needle: &e.needle}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.proxy.Close() })
	u.Host = e.proxy.Addr()
	dir := t.TempDir()
	e.p = startServer(t, dir, append([]string{"--store", u.String(), "--rate-limit", "-1", "--grant-ttl", "1h", "--claim-lease", lease.String()}, extra...)...)
	e.httpc = &http.Client{Timeout: faultWait, Transport: &http.Transport{MaxIdleConnsPerHost: 4 * faultClients}}
	t.Cleanup(func() {
		// Before the server is killed: stop whatever load a failure left
		// (a stall left in place would hold it up).
		close(e.abort)
		e.proxy.Set(faultproxy.Pass)
		e.loads.Wait()
		e.httpc.CloseIdleConnections()
	})
	e.orgs = acktest.Setup(t, e.httpc, e.p.url, platformKey(t, dir), faultOrgs)
	return e
}

// needleCommit is PostgresCommit narrowed, while a needle is set, to the
// COMMITs of transactions whose client bytes carry it: the bytes a
// connection sent since its previous COMMIT.
type needleCommit struct {
	inner  faultproxy.Matcher
	needle *atomic.Pointer[[]byte]
	tail   []byte // the end of the bytes scanned so far (a needle may straddle chunks)
	seen   bool
}

func (m *needleCommit) Match(p []byte) (start, end int, ok bool) {
	for off := 0; off < len(p); {
		s, e, matched := m.inner.Match(p[off:])
		seg := p[off:]
		if matched {
			seg = p[off : off+e]
		}
		hit := true
		if n := m.needle.Load(); n != nil {
			win := append(m.tail, seg...)
			m.seen = m.seen || bytes.Contains(win, *n)
			m.tail = append(m.tail[:0], win[max(len(win)-len(*n)+1, 0):]...)
			hit = m.seen
		}
		if !matched {
			return 0, 0, false
		}
		m.seen, m.tail = false, m.tail[:0]
		if hit {
			return off + s, off + e, true
		}
		off += e
	}
	return 0, 0, false
}

// waitFor polls cond until it holds, or fails the test after faultWait.
func (e *faultEnv) waitFor(what string, cond func() bool) {
	e.t.Helper()
	for deadline := time.Now().Add(faultWait); !cond(); {
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not within %v", what, faultWait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitAcks waits for n more acknowledgements.
func (e *faultEnv) waitAcks(n int64) {
	e.t.Helper()
	base := e.acks.Load()
	e.waitFor(fmt.Sprintf("%d acknowledgements", n), func() bool { return e.acks.Load() >= base+n })
}

// faultBegins and faultEnds bracket a fault; recovery is timed from its end.
func (e *faultEnv) faultBegins(what string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults = append(e.faults, what)
	e.down, e.downSince = true, time.Now()
}

func (e *faultEnv) faultEnds() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.down, e.upSince, e.recovered = false, time.Now(), false
}

// waitRecovered waits for a success of a request sent after the fault.
func (e *faultEnv) waitRecovered() {
	e.t.Helper()
	e.waitFor("a success after the fault", func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.recovered
	})
}

func (e *faultEnv) count503() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.status[http.StatusServiceUnavailable]
}

// answer records one answer and judges what the caller does not: no
// answer at all, a 5xx other than 503, or a 503 without a store code or
// with anything that could authorize. It reports whether r is a 503.
func (e *faultEnv) answer(op string, sent time.Time, r *acktest.Reply, err error) bool {
	e.t.Helper()
	done := time.Now()
	if err != nil {
		select {
		case <-e.abort:
		default:
			e.t.Errorf("%s: no answer: %v", op, err)
		}
		return false
	}
	code := r.Str("code")
	e.mu.Lock()
	e.status[r.Status]++
	if r.Status == http.StatusServiceUnavailable {
		e.codes[code]++
	}
	if e.down && !sent.Before(e.downSince) {
		e.downAns++
	}
	if !e.downSince.IsZero() && !sent.Before(e.downSince) && (e.down || sent.Before(e.upSince)) {
		e.downWait = max(e.downWait, done.Sub(sent))
	}
	if r.Status/100 == 2 {
		if e.down && !sent.Before(e.downSince) {
			e.okDown++
		}
		if !e.recovered && !e.upSince.IsZero() && !sent.Before(e.upSince) {
			e.recovered = true
			e.recovery = append(e.recovery, done.Sub(e.upSince))
		}
	}
	e.mu.Unlock()
	switch {
	case r.Status == http.StatusServiceUnavailable:
		if !faultCodes[code] || authorizes(r) {
			e.t.Errorf("%s: a 503 that is not a plain refusal: %s", op, r.Raw)
		}
		return true
	case r.Status >= 500:
		e.t.Errorf("%s: status %d: %s", op, r.Status, r.Raw)
	}
	return false
}

// authorizes reports whether a refusal carries anything an agent could act
// on (or is not the JSON it must be).
func authorizes(r *acktest.Reply) bool {
	return r.JSON == nil || r.JSON["should_execute"] == true || r.Str("execution_token") != "" ||
		r.Str("claim_token") != "" || r.Str("claim_attestation") != "" || r.Str("grant_id") != ""
}

// send posts body and, with retry, repeats it after each 503 (as a client
// would, with backoff) until another answer; every answer is judged. It
// returns the last answer (nil when there was none: the test has failed or
// is over) and whether a 503 came before it.
func (e *faultEnv) send(op string, org int, path, body string, hdr map[string]string, retry bool) (*acktest.Reply, bool) {
	e.t.Helper()
	saw503, pause := false, 5*time.Millisecond
	for deadline := time.Now().Add(faultWait); ; {
		sent := time.Now()
		e.inflight.Add(1)
		r, err := acktest.CallWith(e.httpc, "POST", e.p.url+path, e.orgs[org].Key, body, hdr)
		e.inflight.Add(-1)
		if !e.answer(op, sent, r, err) {
			if err != nil {
				return nil, saw503
			}
			return r, saw503
		}
		if !retry {
			return r, saw503
		}
		saw503 = true
		if time.Now().After(deadline) {
			e.t.Errorf("%s: still 503 after %v", op, faultWait)
			return nil, true
		}
		select {
		case <-e.abort:
			return nil, true
		case <-time.After(pause): // a client's backoff
		}
		pause = min(2*pause, 200*time.Millisecond)
	}
}

// ack records an acknowledgement in the book.
func (e *faultEnv) ack(rec func(b *acktest.Book)) {
	e.book.Lock()
	rec(e.book)
	e.book.Unlock()
	e.acks.Add(1)
}

// faultLoad is clients sending decisions and agent cycles until finish.
type faultLoad struct {
	stop chan struct{}
	wg   sync.WaitGroup
}

// load starts faultClients clients. Every request is repeated after a 503
// until it is answered, except a decision without an Idempotency-Key
// (repeating it would be another decision), so each one ends known.
func (e *faultEnv) load(round int) *faultLoad {
	l := &faultLoad{stop: make(chan struct{})}
	e.loads.Add(1)
	for c := range faultClients {
		l.wg.Go(func() {
			org := c % faultOrgs
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				case <-e.abort:
					return
				default:
				}
				id := fmt.Sprintf("%s-r%d-c%d-i%d", e.name, round, c, i)
				switch i % 4 {
				case 0:
					e.decide(org, id, true)
				case 2:
					e.decide(org, id, false)
				default:
					e.cycle(org, id, i%8 == 7)
				}
			}
		})
	}
	go func() {
		l.wg.Wait()
		e.loads.Done()
	}()
	return l
}

// finish stops the clients once their requests are answered.
func (l *faultLoad) finish() {
	close(l.stop)
	l.wg.Wait()
}

// decide sends one decision; keyed, with an Idempotency-Key, repeated until
// answered.
func (e *faultEnv) decide(org int, id string, keyed bool) {
	body := decisionBody(id)
	var hdr map[string]string
	if keyed {
		hdr = map[string]string{"Idempotency-Key": id}
	}
	r, _ := e.send("evaluate-decision", org, "/v1/protocol/evaluate-decision", body, hdr, keyed)
	switch {
	case r == nil:
		return
	case r.Status == http.StatusServiceUnavailable: // keyless: recorded or not
		e.book.Lock()
		e.book.Maybe[org]++
		e.book.Unlock()
		return
	}
	d, ok := acktest.DecisionOf(org, r)
	if r.Status != http.StatusOK || !ok {
		e.t.Errorf("evaluate-decision %s: %s", id, acktest.Describe(r, nil))
		return
	}
	e.ack(func(b *acktest.Book) { b.Decisions = append(b.Decisions, d) })
	if keyed {
		e.mu.Lock()
		e.keyed = append(e.keyed, faultKey{org: org, key: id, body: body, dossierID: d.DossierID})
		e.mu.Unlock()
	}
}

// decisionBody is the decision request of id (an amount from it: some
// decisions are BLOCKed).
func decisionBody(id string) string {
	return fmt.Sprintf(`{"decision_type":"PAYMENT","workflow_key":"faults","amount":%d,"context":{"id":%q}}`, len(id)*731%20000, id)
}

// cycle binds a signed intent, claims the grant twice at once and
// finalizes the winning claim.
func (e *faultEnv) cycle(org int, id string, failed bool) {
	g := e.bind(org, id)
	if g == nil {
		return
	}
	token := e.claimRace(org, g, 2)
	if token == "" {
		return
	}
	outcome := "COMMITTED"
	if failed {
		outcome = "FAILED"
	}
	e.finalize(org, g, token, outcome)
}

// bind enforce-and-binds the intent id (its Idempotency-Key is its
// intent_id, so a repeat answers the same grant) and books the grant.
func (e *faultEnv) bind(org int, id string) *acktest.Grant {
	jws, err := acktest.Intent(e.orgs[org], id)
	if err != nil {
		e.t.Errorf("sign intent: %v", err)
		return nil
	}
	return e.bindSigned(org, id, jws)
}

func (e *faultEnv) bindSigned(org int, id, jws string) *acktest.Grant {
	body, _ := json.Marshal(map[string]string{"signed_intent": jws})
	r, _ := e.send("enforce-and-bind", org, "/v1/authority/enforce-and-bind", string(body), nil, true)
	if r == nil {
		return nil
	}
	g, d, ok := acktest.GrantOf(org, r)
	if r.Status != http.StatusOK || !ok {
		e.t.Errorf("enforce-and-bind %s: %s", id, acktest.Describe(r, nil))
		return nil
	}
	e.ack(func(b *acktest.Book) {
		b.Decisions = append(b.Decisions, d)
		b.Grants = append(b.Grants, g)
	})
	return g
}

// claimRace sends n claims of g at once, each repeated after a 503: at most
// one may win. It books the winner and returns its claim token ("" for
// none: every claim was refused, which only a claim that committed
// unanswered explains).
func (e *faultEnv) claimRace(org int, g *acktest.Grant, n int) string {
	reps := make([]*acktest.Reply, n)
	saw := make([]bool, n)
	at := make([]time.Time, n) // when each answer came
	var wg sync.WaitGroup
	for k := range n {
		wg.Go(func() {
			reps[k], saw[k] = e.send("claim", org, "/v1/execution/claim-token", g.ClaimBody(), nil, true)
			at[k] = time.Now()
		})
	}
	wg.Wait()
	wins, late, token := 0, 0, ""
	for k, r := range reps {
		switch {
		case r == nil:
			return ""
		case r.Status == http.StatusOK && r.JSON["should_execute"] == true && r.Str("claim_token") != "":
			wins++
			token = r.Str("claim_token")
			if end, err := time.Parse(time.RFC3339Nano, r.Str("claim_lease_expires_at")); err != nil {
				e.t.Errorf("claim of grant %s: lease end: %s", g.ID, r.Raw)
			} else if !at[k].Before(end) {
				// The server checks the lease just before it answers: an
				// agent must never be told to execute on an ended one.
				e.mu.Lock()
				e.lateWins++
				e.mu.Unlock()
				e.t.Errorf("claim of grant %s answered should_execute true at %s with its lease over: %s", g.ID, at[k].Format(time.RFC3339Nano), r.Raw)
			}
		case r.Status == http.StatusConflict && r.JSON["should_execute"] == false && r.Str("code") == "CLAIM_REPLAY":
		case r.Status == http.StatusConflict && r.Str("code") == "CLAIM_LEASE_EXPIRED" && e.book.Lapses && !authorizes(r):
			// Its COMMIT's answer came after its lease: recorded, refused.
			late++
		default:
			e.t.Errorf("claim of grant %s: %s", g.ID, acktest.Describe(r, nil))
			return ""
		}
	}
	if late > 0 {
		e.mu.Lock()
		e.lateRefus += late
		e.mu.Unlock()
		e.book.Lock()
		g.LateClaim = true
		e.book.LateRefusals += late
		e.book.Unlock()
	}
	switch {
	case wins+late > 1:
		e.t.Errorf("grant %s: %d racing claims won (%d of them answered after their lease)", g.ID, wins+late, late)
	case wins+late == 0 && !slices.Contains(saw, true):
		e.t.Errorf("grant %s: every racing claim was refused, and none was unanswered", g.ID)
	}
	if wins == 0 {
		return ""
	}
	e.ack(func(b *acktest.Book) {
		b.Winners[g.ID] += wins
		b.Claims++
		g.ClaimToken = token
	})
	return token
}

// finalize reports outcome for g's claim, repeated after a 503, and books it.
func (e *faultEnv) finalize(org int, g *acktest.Grant, token, outcome string) {
	body, _ := json.Marshal(map[string]string{"execution_token": g.Token, "claim_token": token, "outcome": outcome})
	r, saw503 := e.send("finalize", org, "/v1/execution/finalize-token", string(body), nil, true)
	if r == nil {
		return
	}
	code := r.Str("code")
	switch {
	case r.Status == http.StatusOK && r.Str("outcome") == outcome:
		e.ack(func(b *acktest.Book) { b.Finals++; g.Final = outcome })
	case r.Status == http.StatusConflict && code == "ALREADY_FINALIZED" && saw503:
		// A repeat: the attempt answered 503 was recorded after all.
	case r.Status == http.StatusConflict && code == "CLAIM_LEASE_EXPIRED" && e.book.Lapses && r.Str("outcome") == "INDETERMINATE":
		e.ack(func(b *acktest.Book) { b.Finals++; g.Final = "INDETERMINATE" })
	default:
		e.t.Errorf("finalize of grant %s: %s", g.ID, acktest.Describe(r, nil))
	}
}

// health returns the status of GET /v1/health.
func (e *faultEnv) health() int {
	r, err := acktest.Call(e.httpc, "GET", e.p.url+"/v1/health", "", "")
	if err != nil {
		e.t.Errorf("health: %v", err)
		return 0
	}
	return r.Status
}

// check runs the crash test's checks, then repeats every decision
// acknowledged under an Idempotency-Key: it must answer the same dossier.
func (e *faultEnv) check() {
	e.t.Helper()
	acktest.Check(e.t, e.httpc, e.p.url, e.orgs, e.book)
	var bad acktest.Problems
	var jobs []func()
	for _, k := range e.keyed {
		jobs = append(jobs, func() {
			r, err := acktest.CallWith(e.httpc, "POST", e.p.url+"/v1/protocol/evaluate-decision", e.orgs[k.org].Key, k.body, map[string]string{"Idempotency-Key": k.key})
			if err != nil || r.Status != http.StatusOK || r.Str("dossier_id") != k.dossierID {
				bad.Add("decision %s (dossier %s) repeated: %s", k.key, k.dossierID, acktest.Describe(r, err))
			}
		})
	}
	acktest.Parallel(jobs)
	bad.Fatal(e.t, "repeated decisions")
}

// figures logs the test's figures line.
func (e *faultEnv) figures() {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.book.Lock()
	defer e.book.Unlock()
	var statuses []string
	for _, s := range slices.Sorted(maps.Keys(e.status)) {
		statuses = append(statuses, fmt.Sprintf("%d:%d", s, e.status[s]))
	}
	doubles := 0
	for _, n := range e.book.Winners {
		if n > 1 {
			doubles++
		}
	}
	rec := "none timed"
	if n := len(e.recovery); n > 0 {
		sorted := slices.Sorted(slices.Values(e.recovery))
		rec = fmt.Sprintf("median %v, max %v over %d faults", sorted[n/2].Round(time.Millisecond), sorted[n-1].Round(time.Millisecond), n)
	}
	ps := e.proxy.Stats()
	targeted := ""
	if len(e.targeted) > 0 {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(e.targeted)) {
			parts = append(parts, fmt.Sprintf("%s:%d", k, e.targeted[k]))
		}
		targeted = "; own COMMIT cut: " + strings.Join(parts, " ")
	}
	var kinds []string // the faults, each kind once with its count, in order
	seen := map[string]int{}
	for _, f := range e.faults {
		if seen[f]++; seen[f] == 1 {
			kinds = append(kinds, f)
		}
	}
	for i, k := range kinds {
		if seen[k] > 1 {
			kinds[i] = fmt.Sprintf("%d× %s", seen[k], k)
		}
	}
	e.t.Logf("figures %s: %d faults injected (%s); proxy reset %d connections, refused %d, cut %d COMMITs; "+
		"answers by status %s (503 codes %v)%s; acknowledged %d decisions, %d grants, %d claims, %d finalizations; "+
		"%d winning claims answered after their lease, %d claims refused CLAIM_LEASE_EXPIRED (lease over before the answer); "+
		"longest answer to a request sent during a fault %v; lost 0, double claims %d; recovery (fault end to first success) %s",
		e.name, len(e.faults), strings.Join(kinds, ", "), ps.Reset, ps.Refused, ps.Cut,
		strings.Join(statuses, " "), e.codes, targeted, len(e.book.Decisions), len(e.book.Grants), e.book.Claims, e.book.Finals,
		e.lateWins, e.lateRefus, e.downWait.Round(time.Millisecond), doubles, rec)
}

// TestPostgresFaultConnectionsReset resets every database connection under
// load, four times a round: twice wherever the traffic is, twice after
// stalling it first, so that requests are surely mid-transaction when
// their connections go.
func TestPostgresFaultConnectionsReset(t *testing.T) {
	e := newFaultEnv(t, "reset", time.Hour)
	for round := range *faultRounds {
		l := e.load(round)
		e.waitAcks(30)
		for k := range 4 {
			e.waitFor("a live database connection", func() bool { return e.proxy.Stats().Live > 0 })
			what := "reset"
			if k%2 == 1 {
				e.proxy.Set(faultproxy.Stall)
				e.waitFor("requests waiting on the database", func() bool { return e.inflight.Load() >= 2 })
				what = "reset mid-transaction"
			}
			e.faultBegins(what)
			n := e.proxy.Reset()
			e.proxy.Set(faultproxy.Pass)
			e.faultEnds()
			if n == 0 {
				e.t.Fatalf("round %d: the reset found no connection", round)
			}
			e.waitRecovered()
			e.waitAcks(10)
		}
		l.finish()
	}
	e.check()
	e.figures()
}

// TestPostgresFaultDatabaseUnreachable makes the database unreachable under
// load for -pgfault.outage (every connection reset, new ones refused): the
// stand-in for a database restart. While it lasts every answer is a 503 and
// /v1/health says degraded; then the server recovers by itself.
func TestPostgresFaultDatabaseUnreachable(t *testing.T) {
	e := newFaultEnv(t, "unreachable", time.Hour)
	for round := range *faultRounds {
		l := e.load(round)
		e.waitAcks(30)
		e.proxy.Set(faultproxy.Refuse)
		e.proxy.Reset()
		e.faultBegins(fmt.Sprintf("unreachable for %v", *faultOutage))
		end := time.Now().Add(*faultOutage)
		base := e.count503()
		e.waitFor("503 answers during the outage", func() bool { return e.count503() >= base+faultClients })
		if s := e.health(); s != http.StatusServiceUnavailable {
			e.t.Fatalf("health during the outage: %d; want 503", s)
		}
		<-time.After(time.Until(end)) // the outage's length
		e.proxy.Set(faultproxy.Pass)
		e.faultEnds()
		up := time.Now()
		e.waitRecovered()
		e.waitFor("health again", func() bool { return e.health() == http.StatusOK })
		t.Logf("round %d: health answered 200 %v after the outage", round, time.Since(up).Round(time.Millisecond))
		e.waitAcks(30)
		l.finish()
	}
	e.mu.Lock()
	okDown := e.okDown
	e.mu.Unlock()
	if okDown > 0 {
		t.Fatalf("%d requests sent during the outage were answered 2xx", okDown)
	}
	e.check()
	e.figures()
}

// TestPostgresFaultBlackhole drops every byte between the server and the
// database under load for longer than the server's --store-timeout (and
// at least -pgfault.outage). Nothing but the server's own deadlines can end
// a request then: every request sent during the blackhole must be answered
// (a 503 STORE_UNAVAILABLE that authorizes nothing) within the timeout, the
// settlement of a COMMIT it cut off and a margin, while the blackhole
// still lasts, before the proxy resets anything; and /v1/health says 503
// as quickly. When the network comes back the connections that lost bytes
// are reset (as TCP would end them after its timeouts), and the server
// recovers by itself; every answer is correct or a 503.
func TestPostgresFaultBlackhole(t *testing.T) {
	e := newFaultEnv(t, "blackhole", time.Hour, "--store-timeout", faultStoreTimeout.String())
	bound := faultStoreTimeout + faultSettle + faultMargin
	hole := max(*faultOutage, 2*bound)
	for round := range *faultRounds {
		l := e.load(round)
		e.waitAcks(30)
		e.mu.Lock()
		base := e.downAns
		e.mu.Unlock()
		e.proxy.Set(faultproxy.Blackhole)
		e.faultBegins(fmt.Sprintf("blackhole for %v", hole))
		end := time.Now().Add(hole)
		// Answered by the server's deadlines while the proxy still drops
		// every byte and has reset nothing.
		for {
			e.mu.Lock()
			n := e.downAns - base
			e.mu.Unlock()
			if n >= 2*faultClients {
				break
			}
			if time.Now().After(end) {
				e.t.Fatalf("round %d: %d answers to requests sent during the %v blackhole while it lasted; want %d", round, n, hole, 2*faultClients)
			}
			time.Sleep(5 * time.Millisecond) // polling the count
		}
		sent := time.Now()
		if s := e.health(); s != http.StatusServiceUnavailable || time.Since(sent) > bound {
			e.t.Fatalf("round %d: health during the blackhole: %d after %v; want 503 within %v", round, s, time.Since(sent), bound)
		}
		if time.Now().After(end) {
			e.t.Fatalf("round %d: the blackhole of %v ended before its answers could be checked; raise -pgfault.outage", round, hole)
		}
		<-time.After(time.Until(end)) // the blackhole's length
		e.proxy.Set(faultproxy.Pass)
		e.faultEnds()
		e.waitRecovered()
		e.waitAcks(30)
		l.finish()
	}
	e.mu.Lock()
	wait := e.downWait
	e.mu.Unlock()
	if wait > bound {
		t.Fatalf("a request sent during the blackhole was answered after %v; want at most %v (--store-timeout %v, its settlement %v, margin %v)",
			wait, bound, faultStoreTimeout, faultSettle, faultMargin)
	}
	e.check()
	e.figures()
}

// TestPostgresFaultStallLongerThanLease stalls the network to the database
// (bytes held, none lost) for longer than the claim lease, under load, and
// shorter than --store-timeout, so that requests complete late rather than
// time out. The lease is judged by the database's clock: a claim won before
// the stall and finalized during it is refused (INDETERMINATE,
// CLAIM_LEASE_EXPIRED), and a claim sent during the stall gets a lease that
// starts when the database ran it, after the stall. A claim whose COMMIT
// the stall held past its lease is refused CLAIM_LEASE_EXPIRED: no claim
// is answered should_execute true with its lease over (claimRace).
func TestPostgresFaultStallLongerThanLease(t *testing.T) {
	stall := faultLease + max(*faultOutage, 1500*time.Millisecond) // the lease ends on a whole second
	e := newFaultEnv(t, "stall", faultLease, "--store-timeout", (stall + 5*time.Second).String())
	e.book.Lapses = true
	for round := range *faultRounds {
		before := e.bind(0, fmt.Sprintf("%s-r%d-before", e.name, round))
		during := e.bind(0, fmt.Sprintf("%s-r%d-during", e.name, round))
		if before == nil || during == nil {
			e.t.Fatalf("round %d: probes not bound", round)
		}
		token := e.claimRace(0, before, 1)
		if token == "" {
			e.t.Fatalf("round %d: the probe's claim did not win", round)
		}
		l := e.load(round)
		e.waitAcks(30)

		e.faultBegins(fmt.Sprintf("stall of %v (lease %v)", stall, faultLease))
		stalled := time.Now()
		e.proxy.Set(faultproxy.Stall)
		var fin, cl *acktest.Reply
		done := make(chan struct{})
		e.loads.Add(1)
		go func() {
			defer e.loads.Done()
			defer close(done)
			var wg sync.WaitGroup
			wg.Go(func() {
				body, _ := json.Marshal(map[string]string{"execution_token": before.Token, "claim_token": token, "outcome": "COMMITTED"})
				fin, _ = e.send("finalize", 0, "/v1/execution/finalize-token", string(body), nil, true)
			})
			wg.Go(func() { cl, _ = e.send("claim", 0, "/v1/execution/claim-token", during.ClaimBody(), nil, true) })
			wg.Wait()
		}()
		select {
		case <-done:
			e.t.Fatalf("round %d: the probes were answered during the stall: %s / %s", round, acktest.Describe(fin, nil), acktest.Describe(cl, nil))
		case <-time.After(time.Until(stalled.Add(stall))): // the stall's length
		}
		resumed := time.Now()
		e.proxy.Set(faultproxy.Pass)
		e.faultEnds()
		<-done

		// The finalization ran after the lease, by the database's clock.
		if fin == nil || fin.Status != http.StatusConflict || fin.Str("code") != "CLAIM_LEASE_EXPIRED" || fin.Str("outcome") != "INDETERMINATE" {
			e.t.Fatalf("round %d: finalize sent within the lease, run after it: %s", round, acktest.Describe(fin, nil))
		}
		e.ack(func(b *acktest.Book) { b.Finals++; before.Final = "INDETERMINATE" })
		// The claim's lease starts when the database ran it.
		if cl == nil || cl.Status != http.StatusOK || cl.JSON["should_execute"] != true {
			e.t.Fatalf("round %d: claim during the stall: %s", round, acktest.Describe(cl, nil))
		}
		leaseEnd, err := time.Parse(time.RFC3339Nano, cl.Str("claim_lease_expires_at"))
		if err != nil || leaseEnd.Before(resumed.Add(faultLease-time.Second)) {
			e.t.Fatalf("round %d: claim sent at %s, stall over at %s: lease ends %s (%v); want a lease from after the stall",
				round, stalled.Format(time.RFC3339Nano), resumed.Format(time.RFC3339Nano), cl.Str("claim_lease_expires_at"), err)
		}
		e.ack(func(b *acktest.Book) {
			b.Winners[during.ID]++
			b.Claims++
			during.ClaimToken = cl.Str("claim_token")
		})
		e.finalize(0, during, during.ClaimToken, "COMMITTED")

		e.waitRecovered()
		e.waitAcks(30)
		l.finish()
	}
	e.mu.Lock()
	lateWins := e.lateWins
	e.mu.Unlock()
	if lateWins > 0 {
		t.Fatalf("%d claims were answered should_execute true with their lease over", lateWins)
	}
	e.check()
	e.figures()
}

// TestPostgresFaultCommitAckLost loses COMMITs under load, 4 whose answers
// and 4 that never reach the database per round; then, with the load
// stopped, the COMMIT of one request of each kind, alone: its answer is
// correct (the store settles the outcome by its commit marker) or a 503,
// never a refusal of the request's own effect (a claim refused as a replay
// of itself, a finalization as already done), and repeating it applies
// nothing twice.
func TestPostgresFaultCommitAckLost(t *testing.T) {
	e := newFaultEnv(t, "lostcommit", time.Hour)
	for round := range *faultRounds {
		l := e.load(round)
		e.waitAcks(30)
		for _, loss := range []faultproxy.Loss{faultproxy.LoseReply, faultproxy.LoseRequest} {
			e.faultBegins(fmt.Sprintf("4 COMMITs cut, %s", lossName(loss)))
			base := e.proxy.Stats().Cut
			e.proxy.Cut(4, loss)
			e.waitFor("4 COMMITs cut", func() bool { return e.proxy.Stats().Cut >= base+4 })
			e.faultEnds()
			e.waitRecovered()
			e.waitAcks(10)
		}
		l.finish()
		for _, loss := range []faultproxy.Loss{faultproxy.LoseReply, faultproxy.LoseRequest} {
			e.cutOwnCommits(fmt.Sprintf("%s-r%d-%s", e.name, round, strings.ReplaceAll(lossName(loss), " ", "-")), loss)
		}
	}
	e.check()
	e.figures()
}

func lossName(l faultproxy.Loss) string {
	if l == faultproxy.LoseReply {
		return "reply lost"
	}
	return "request lost"
}

// cutOwnCommits sends one request of each kind with the COMMIT of its own
// transaction cut (the proxy matches only a transaction carrying the
// request's own value).
func (e *faultEnv) cutOwnCommits(id string, loss faultproxy.Loss) {
	e.t.Helper()
	// own arms a cut for the transaction carrying needle, runs op and
	// requires that the cut happened; it returns op's first answer.
	own := func(op, needle string, send func() (*acktest.Reply, bool)) *acktest.Reply {
		e.t.Helper()
		n := []byte(needle)
		e.needle.Store(&n)
		defer e.needle.Store(nil)
		base := e.proxy.Stats().Cut
		e.mu.Lock()
		e.faults = append(e.faults, "a request's own COMMIT cut")
		e.mu.Unlock()
		e.proxy.Cut(1, loss)
		r, _ := send() // the request is its own recovery: not timed
		e.proxy.Cut(0, loss)
		if got := e.proxy.Stats().Cut - base; got != 1 {
			e.t.Fatalf("%s: %d COMMITs cut; want its own", op, got)
		}
		if r == nil {
			e.t.Fatalf("%s: no answer", op)
		}
		e.mu.Lock()
		e.targeted[fmt.Sprintf("%s/%s/%d", op, strings.ReplaceAll(lossName(loss), " ", "-"), r.Status)]++
		e.mu.Unlock()
		if r.Status != http.StatusOK && r.Status != http.StatusServiceUnavailable {
			e.t.Fatalf("%s with its COMMIT cut (%s): %s; want the answer, or 503", op, lossName(loss), acktest.Describe(r, nil))
		}
		return r
	}
	post := func(op string, org int, path, body string, hdr map[string]string) func() (*acktest.Reply, bool) {
		return func() (*acktest.Reply, bool) { return e.send(op, org, path, body, hdr, false) }
	}

	// A decision without an Idempotency-Key: recorded once, or (503) at
	// most once.
	body := decisionBody(id + "-keyless")
	if r := own("keyless decision", id+"-keyless", post("evaluate-decision", 0, "/v1/protocol/evaluate-decision", body, nil)); r.Status == http.StatusOK {
		d, ok := acktest.DecisionOf(0, r)
		if !ok {
			e.t.Fatalf("keyless decision: %s", r.Raw)
		}
		e.ack(func(b *acktest.Book) { b.Decisions = append(b.Decisions, d) })
	} else {
		e.book.Lock()
		e.book.Maybe[0]++
		e.book.Unlock()
	}

	// A decision with one: then repeated until answered (check repeats it
	// once more).
	key := id + "-keyed"
	body = decisionBody(key)
	own("keyed decision", key, post("evaluate-decision", 0, "/v1/protocol/evaluate-decision", body, map[string]string{"Idempotency-Key": key}))
	e.decide(0, key, true)

	// enforce-and-bind: its repeat answers the same grant.
	jws, err := acktest.Intent(e.orgs[0], id+"-cycle")
	if err != nil {
		e.t.Fatalf("sign intent: %v", err)
	}
	b, _ := json.Marshal(map[string]string{"signed_intent": jws})
	own("enforce-and-bind", "nonce-"+id+"-cycle", post("enforce-and-bind", 0, "/v1/authority/enforce-and-bind", string(b), nil))
	g := e.bindSigned(0, id+"-cycle", jws)
	if g == nil {
		e.t.Fatalf("the grant of %s is not answered again", id)
	}

	// A claim, alone: it wins, or (503) its repeat wins or finds the
	// claim that committed unanswered; it is never refused as a replay of
	// itself.
	scope := "scope-" + id + "-cycle"
	r := own("claim", scope, post("claim", 0, "/v1/execution/claim-token", g.ClaimBody(), nil))
	if r.Status == http.StatusOK && (r.JSON["should_execute"] != true || r.Str("claim_token") == "") {
		e.t.Fatalf("claim with its COMMIT cut: %s", r.Raw)
	}
	token := ""
	if r.Status == http.StatusOK {
		token = r.Str("claim_token")
		e.ack(func(b *acktest.Book) { b.Winners[g.ID]++; b.Claims++; g.ClaimToken = token })
		// Repeated, it is a replay.
		again, _ := e.send("claim", 0, "/v1/execution/claim-token", g.ClaimBody(), nil, true)
		if again == nil || again.Status != http.StatusConflict || again.JSON["should_execute"] != false || again.Str("code") != "CLAIM_REPLAY" {
			e.t.Fatalf("claim repeated after it won: %s", acktest.Describe(again, nil))
		}
	} else {
		again, _ := e.send("claim", 0, "/v1/execution/claim-token", g.ClaimBody(), nil, true)
		switch {
		case again != nil && again.Status == http.StatusOK && again.JSON["should_execute"] == true && again.Str("claim_token") != "":
			token = again.Str("claim_token")
			e.ack(func(b *acktest.Book) { b.Winners[g.ID]++; b.Claims++; g.ClaimToken = token })
		case again != nil && again.Status == http.StatusConflict && again.Str("code") == "CLAIM_REPLAY":
			e.t.Logf("%s: the claim answered 503 had committed: the grant stays claimed by nobody who knows it", id)
			return
		default:
			e.t.Fatalf("claim repeated after a 503: %s", acktest.Describe(again, nil))
		}
	}

	// Its finalization: recorded once, never refused as already done.
	fin, _ := json.Marshal(map[string]string{"execution_token": g.Token, "claim_token": token, "outcome": "COMMITTED"})
	if r := own("finalize", scope, post("finalize", 0, "/v1/execution/finalize-token", string(fin), nil)); r.Status == http.StatusOK {
		if r.Str("outcome") != "COMMITTED" {
			e.t.Fatalf("finalize with its COMMIT cut: %s", r.Raw)
		}
		e.ack(func(b *acktest.Book) { b.Finals++; g.Final = "COMMITTED" })
		return
	}
	again, _ := e.send("finalize", 0, "/v1/execution/finalize-token", string(fin), nil, true)
	switch {
	case again != nil && again.Status == http.StatusOK && again.Str("outcome") == "COMMITTED":
		e.ack(func(b *acktest.Book) { b.Finals++; g.Final = "COMMITTED" })
	case again != nil && again.Status == http.StatusConflict && again.Str("code") == "ALREADY_FINALIZED":
		// The finalization answered 503 had been recorded.
	default:
		e.t.Fatalf("finalize repeated after a 503: %s", acktest.Describe(again, nil))
	}
}

// TestPostgresFaultClaimStoreDown makes the database unreachable exactly
// when claims arrive: 8 racing claims of each of 4 grants bound before are
// all answered 503 and authorize nothing; once the database is back, 8
// racing claims of each grant have exactly one winner.
func TestPostgresFaultClaimStoreDown(t *testing.T) {
	e := newFaultEnv(t, "claimdown", time.Hour)
	const grants, racers = 4, 8
	for round := range *faultRounds {
		var gs []*acktest.Grant
		for i := range grants {
			g := e.bind(i%faultOrgs, fmt.Sprintf("%s-r%d-g%d", e.name, round, i))
			if g == nil {
				e.t.Fatalf("round %d: grant %d not bound", round, i)
			}
			gs = append(gs, g)
		}
		e.proxy.Set(faultproxy.Refuse)
		e.proxy.Reset()
		e.faultBegins("unreachable at claim time")
		var wg sync.WaitGroup
		for _, g := range gs {
			for range racers {
				wg.Go(func() {
					r, _ := e.send("claim while down", g.Org, "/v1/execution/claim-token", g.ClaimBody(), nil, false)
					if r != nil && r.Status != http.StatusServiceUnavailable {
						e.t.Errorf("grant %s: claim while the database is unreachable: %s", g.ID, acktest.Describe(r, nil))
					}
				})
			}
		}
		wg.Wait()
		if s := e.health(); s != http.StatusServiceUnavailable {
			e.t.Fatalf("health while the database is unreachable: %d; want 503", s)
		}
		e.proxy.Set(faultproxy.Pass)
		e.faultEnds()
		for _, g := range gs {
			wg.Go(func() {
				if token := e.claimRace(g.Org, g, racers); token != "" {
					e.finalize(g.Org, g, token, "COMMITTED")
				}
			})
		}
		wg.Wait()
		e.mu.Lock()
		okDown := e.okDown
		e.mu.Unlock()
		if okDown > 0 {
			t.Fatalf("round %d: %d claims sent while the database was unreachable were answered 2xx", round, okDown)
		}
		e.book.Lock()
		for _, g := range gs {
			if n := e.book.Winners[g.ID]; n != 1 {
				t.Errorf("round %d: grant %s has %d winning claims once the database is back; want 1", round, g.ID, n)
			}
		}
		e.book.Unlock()
	}
	e.check()
	e.figures()
}
