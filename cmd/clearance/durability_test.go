package main

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
)

var (
	crashRounds = flag.Int("crash.rounds", 3, "SIGKILL/restart rounds of TestSIGKILLLosesNothingAcknowledged")
	crashSeed   = flag.Uint64("crash.seed", 0, "seed of the kill points; 0 picks one (logged, to replay a failure)")
)

const (
	crashClients = 8   // concurrent load clients, split over the orgs
	crashOrgs    = 2   // orgs under load
	crashKillMin = 20  // acknowledgements before the kill, drawn per round
	crashKillMax = 160 // in [crashKillMin, crashKillMax]
	crashOrgBase = 4   // ledger entries before the load: org, API key, agent key, bundle
)

// crashBundle allows every refund below 10,000 in ENFORCEMENT, so that
// enforce-and-bind issues grants.
const crashBundle = `{"bundle_id":"crash","version":"v1","mode":"ENFORCEMENT","rules":[
 {"id":"big","match":[{"field":"amount","op":"ge","value":10000}],"outcome":"BLOCK","reason_codes":["TOO_BIG"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`

type crashOrg struct {
	id, key string
	agent   grant.Key
}

// crashDecision is a decision acknowledged with 200 (evaluate-decision or
// enforce-and-bind).
type crashDecision struct {
	org               int
	dossierID, digest string
	seq               uint64
}

// crashGrant is a grant acknowledged by enforce-and-bind, with what was
// acknowledged of its claim and finalization.
type crashGrant struct {
	org                            int
	id, token, intentHash, dossier string
	expires                        time.Time
	claimToken                     string // an acknowledged winning claim
	final                          string // an acknowledged finalization's outcome
}

// crashBook is everything the server acknowledged, across all rounds.
type crashBook struct {
	mu        sync.Mutex
	decisions []crashDecision
	grants    []*crashGrant
	winners   map[string]int // grant id -> claims answered should_execute: true
	claims    int
	finals    int
	// Counted by the checks after each restart.
	lateClaims, lateFinals, refused int

	// Set by the fault tests (pgfault_test.go) before any load:
	// exact: every request was repeated until it was answered, so each
	// org's ledger holds exactly the acknowledged decisions and grants,
	// and at most maybe[org] more decisions (sent without an
	// Idempotency-Key and answered 503: repeating one would be another
	// decision, so it stays unknown);
	// lapses: the claim lease is short, so an acknowledged claim may end
	// INDETERMINATE (CLAIM_LEASE_EXPIRED), recorded by the expiry worker
	// (then a late finalization is ledgered too) or by a late finalization.
	exact, lapses bool
	maybe         map[int]int
}

// final reports whether state is one a finalization or a lapse leads to.
func (b *crashBook) final(state string) bool {
	return crashFinal(state) || (b.lapses && state == "INDETERMINATE")
}

// TestSIGKILLLosesNothingAcknowledged runs the real binary under a mix of
// decisions and full agent cycles (enforce-and-bind, two racing claims,
// finalize) from concurrent clients of two orgs, SIGKILLs it after a random
// number of acknowledgements while requests are in flight, and restarts it
// on the same data directory, -crash.rounds times. After every restart each
// acknowledged decision, grant, claim and finalization is there unchanged,
// no grant has two winning claims, and both ledgers verify and record them.
func TestSIGKILLLosesNothingAcknowledged(t *testing.T) {
	seed := *crashSeed
	if seed == 0 {
		seed = mrand.Uint64()
	}
	t.Logf("seed %d (replay with -crash.seed=%d)", seed, seed)
	rng := mrand.New(mrand.NewPCG(seed, seed))
	start := time.Now()

	dir := t.TempDir()
	// Long grant and lease lifetimes: a grant acknowledged before a kill can
	// still be claimed, and a claim finalized, after the restart.
	flags := []string{"--rate-limit", "-1", "--grant-ttl", "1h", "--claim-lease", "1h"}
	p := startServer(t, dir, flags...)
	httpc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2 * crashClients}}
	defer httpc.CloseIdleConnections()
	orgs := crashSetup(t, p, platformKey(t, dir))

	book := &crashBook{winners: map[string]int{}}
	for round := range *crashRounds {
		if round > 0 {
			p = startServer(t, dir, flags...)
			crashCheck(t, p, httpc, orgs, book)
		}
		run := &crashRun{t: t, p: p, httpc: httpc, orgs: orgs, book: book, round: round,
			killAt: crashKillMin + rng.IntN(crashKillMax-crashKillMin+1)}
		run.load()
		if code := p.wait(); code != -1 {
			t.Fatalf("round %d: the server exited with %d, want death by SIGKILL", round, code)
		}
		if run.acks < run.killAt {
			t.Fatalf("round %d: only %d acknowledgements before the kill at %d", round, run.acks, run.killAt)
		}
		t.Logf("round %d: killed at %d acknowledgements, %d acknowledged in all, %d in flight or refused", round, run.killAt, run.acks, run.failed)
	}
	p = startServer(t, dir, flags...)
	crashCheck(t, p, httpc, orgs, book)

	t.Logf("%d rounds in %v: acknowledged %d decisions, %d grants, %d claims (%d after a restart), %d finalizations (%d after a restart); "+
		"0 lost, 0 double claims, %d replayed claims and finalizations refused",
		*crashRounds, time.Since(start).Round(time.Millisecond), len(book.decisions), len(book.grants),
		book.claims, book.lateClaims, book.finals, book.lateFinals, book.refused)
}

// crashSetup creates the orgs, each with an agent key and the bundle.
func crashSetup(t *testing.T, p *proc, plat string) []crashOrg {
	t.Helper()
	var orgs []crashOrg
	for i := range crashOrgs {
		r := mustCall(t, "POST", p.url+"/v1/platform/orgs", plat, fmt.Sprintf(`{"name":"Durable %d"}`, i), http.StatusCreated)
		o := crashOrg{id: str(r.json, "org_id"), key: str(r.json, "api_key")}
		var err error
		if o.agent, err = grant.NewKey(rand.Reader); err != nil {
			t.Fatal(err)
		}
		reg, err := json.Marshal(map[string]any{"kid": o.agent.KID(), "public_jwk": o.agent.PublicJWK()})
		if err != nil {
			t.Fatal(err)
		}
		mustCall(t, "POST", p.url+"/v1/execution/agent-keys", o.key, string(reg), http.StatusCreated)
		mustCall(t, "POST", p.url+"/v1/protocol/policies/bundles", o.key, crashBundle, http.StatusCreated)
		orgs = append(orgs, o)
	}
	return orgs
}

// crashRun is one round of load, ended by a SIGKILL.
type crashRun struct {
	t      *testing.T
	p      *proc
	httpc  *http.Client
	orgs   []crashOrg
	book   *crashBook
	round  int
	killAt int

	mu     sync.Mutex // guards the fields below; held while the signal is sent
	acks   int
	failed int
	killed bool
}

// load runs the clients until every one of them has seen the server die.
func (r *crashRun) load() {
	var wg sync.WaitGroup
	for c := range crashClients {
		wg.Go(func() {
			for i := 0; ; i++ {
				ok := false
				if i%2 == 0 {
					ok = r.decide(c, i)
				} else {
					ok = r.cycle(c, i)
				}
				if !ok {
					return // after the kill every further request fails
				}
			}
		})
	}
	wg.Wait()
}

// refused records a failed request; before the kill it fails the test.
func (r *crashRun) refused(c int, op string, rep *reply, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed++
	if r.killed {
		return
	}
	if err != nil {
		r.t.Errorf("round %d client %d: %s failed before the kill: %v", r.round, c, op, err)
	} else {
		r.t.Errorf("round %d client %d: %s: status %d before the kill: %s", r.round, c, op, rep.status, rep.raw)
	}
}

// ack records an acknowledgement with rec and kills the server at the
// round's kill point, while the other clients' requests are in flight.
func (r *crashRun) ack(rec func(b *crashBook)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.book.mu.Lock()
	rec(r.book)
	r.book.mu.Unlock()
	r.acks++
	if r.acks == r.killAt && !r.killed {
		r.killed = true
		if err := r.p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			r.t.Errorf("SIGKILL: %v", err)
		}
	}
}

func (r *crashRun) post(org int, path, body string) (*reply, error) {
	return call(r.httpc, "POST", r.p.url+path, r.orgs[org].key, body, nil)
}

func (r *crashRun) decide(c, i int) bool {
	org := c % crashOrgs
	body := fmt.Sprintf(`{"decision_type":"PAYMENT","workflow_key":"round-%d","amount":%d,"context":{"client":%d,"i":%d}}`,
		r.round, (c*1000+i*37)%20000, c, i)
	rep, err := r.post(org, "/v1/protocol/evaluate-decision", body)
	if err != nil || rep.status != http.StatusOK {
		r.refused(c, "evaluate-decision", rep, err)
		return false
	}
	d, ok := decisionOfReply(org, rep)
	if !ok {
		r.t.Errorf("evaluate-decision answered 200 without a dossier: %s", rep.raw)
		return false
	}
	r.ack(func(b *crashBook) { b.decisions = append(b.decisions, d) })
	return true
}

func decisionOfReply(org int, rep *reply) (crashDecision, bool) {
	seq, _ := rep.json["ledger_seq"].(float64)
	d := crashDecision{org: org, dossierID: str(rep.json, "dossier_id"), digest: str(rep.json, "dossier_digest"), seq: uint64(seq)}
	return d, d.dossierID != "" && d.digest != "" && d.seq > 0
}

// cycle binds a signed intent, claims the grant twice at once (exactly one
// claim may win) and finalizes the winning claim.
func (r *crashRun) cycle(c, i int) bool {
	org := c % crashOrgs
	id := fmt.Sprintf("r%d-c%d-i%d", r.round, c, i)
	jws, err := crashIntent(r.orgs[org], id)
	if err != nil {
		r.t.Errorf("sign intent: %v", err)
		return false
	}
	body, _ := json.Marshal(map[string]string{"signed_intent": jws})
	rep, err := r.post(org, "/v1/authority/enforce-and-bind", string(body))
	if err != nil || rep.status != http.StatusOK {
		r.refused(c, "enforce-and-bind", rep, err)
		return false
	}
	d, ok := decisionOfReply(org, rep)
	g := &crashGrant{org: org, id: str(rep.json, "grant_id"), token: str(rep.json, "execution_token"),
		intentHash: str(rep.json, "intent_hash"), dossier: d.dossierID}
	g.expires, err = time.Parse(time.RFC3339Nano, str(rep.json, "expires_at"))
	if !ok || err != nil || g.id == "" || g.token == "" || g.intentHash == "" {
		r.t.Errorf("enforce-and-bind answered 200 without a grant: %s", rep.raw)
		return false
	}
	r.ack(func(b *crashBook) {
		b.decisions = append(b.decisions, d)
		b.grants = append(b.grants, g)
	})

	claimBody, _ := json.Marshal(map[string]string{"execution_token": g.token, "intent_hash": g.intentHash})
	var (
		reps [2]*reply
		errs [2]error
		wg   sync.WaitGroup
	)
	for k := range reps {
		wg.Go(func() { reps[k], errs[k] = r.post(org, "/v1/execution/claim-token", string(claimBody)) })
	}
	wg.Wait()
	answered, claimToken := 0, ""
	for k, rep := range reps {
		switch {
		case errs[k] != nil:
			r.refused(c, "claim", nil, errs[k])
		case rep.status == http.StatusOK && rep.json["should_execute"] == true && str(rep.json, "claim_token") != "":
			answered++
			if claimToken != "" {
				r.t.Errorf("grant %s: both racing claims won", g.id)
			}
			claimToken = str(rep.json, "claim_token")
			r.ack(func(b *crashBook) {
				b.winners[g.id]++
				b.claims++
				g.claimToken = claimToken
			})
		case rep.status == http.StatusConflict && rep.json["should_execute"] == false && str(rep.json, "code") == "CLAIM_REPLAY":
			answered++
		default:
			r.refused(c, "claim", rep, nil)
		}
	}
	if answered == len(reps) && claimToken == "" {
		r.t.Errorf("grant %s: both racing claims were refused: %s / %s", g.id, reps[0].raw, reps[1].raw)
	}
	if claimToken == "" {
		return false
	}

	outcome := "COMMITTED"
	if i%4 == 3 {
		outcome = "FAILED"
	}
	fin, _ := json.Marshal(map[string]string{"execution_token": g.token, "claim_token": claimToken, "outcome": outcome})
	rep, err = r.post(org, "/v1/execution/finalize-token", string(fin))
	if err != nil || rep.status != http.StatusOK {
		r.refused(c, "finalize", rep, err)
		return false
	}
	if got := str(rep.json, "outcome"); got != outcome {
		r.t.Errorf("grant %s: finalized %s, answered %s", g.id, outcome, got)
		return false
	}
	r.ack(func(b *crashBook) {
		b.finals++
		g.final = outcome
	})
	return true
}

// crashIntent signs a refund intent whose id, nonce and scope derive from id.
func crashIntent(o crashOrg, id string) (string, error) {
	payload, err := canon.Marshal(map[string]any{
		"intent_id": "intent-" + id, "org_id": o.id, "actor": map[string]any{"id": "agent-7", "type": "agent"},
		"action":       map[string]any{"type": "refund", "amount": 100, "currency": "EUR", "target": "order-" + id},
		"workflow_key": "refunds", "decision_type": "REFUND", "nonce": "nonce-" + id, "concurrency_scope": "scope-" + id,
		"escalation": map[string]any{"mode": "NONE"}, "issued_at": time.Now().UTC().Format(time.RFC3339),
	})
	if err != nil {
		return "", err
	}
	return grant.SignIntent(o.agent, payload)
}

// crashProblems collects lost or changed records from parallel checks.
type crashProblems struct {
	mu   sync.Mutex
	list []string
}

func (p *crashProblems) add(format string, args ...any) {
	p.mu.Lock()
	p.list = append(p.list, fmt.Sprintf(format, args...))
	p.mu.Unlock()
}

// fatal fails the test if anything was added.
func (p *crashProblems) fatal(t *testing.T, what string) {
	t.Helper()
	if n := len(p.list); n > 0 {
		sort.Strings(p.list)
		t.Fatalf("%s: %d problems, first:\n%s", what, n, strings.Join(p.list[:min(n, 10)], "\n"))
	}
}

// crashParallel runs jobs on a few workers.
func crashParallel(jobs []func()) {
	ch := make(chan func())
	var wg sync.WaitGroup
	for range crashClients {
		wg.Go(func() {
			for j := range ch {
				j()
			}
		})
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()
}

// crashCheck runs after a restart. Read only first: every acknowledged
// dossier is served with its digest and seq, every acknowledged grant exists
// in a state its acknowledgements allow, and each org's ledger verifies and
// records all of it (claims and finalizations at most once per grant). Then
// replays: an acknowledged claim or finalization is refused when repeated;
// a grant still ISSUED is claimed and finalized now, which shows its record
// and binding survived, and an acknowledged claim still finalizes with its
// claim token.
func crashCheck(t *testing.T, p *proc, httpc *http.Client, orgs []crashOrg, book *crashBook) {
	t.Helper()
	book.mu.Lock()
	decisions := append([]crashDecision(nil), book.decisions...)
	grants := make([]crashGrant, len(book.grants))
	for i, g := range book.grants {
		grants[i] = *g
	}
	book.mu.Unlock()

	var bad crashProblems
	post := func(org int, path string, body any) (*reply, error) {
		b, _ := json.Marshal(body)
		return call(httpc, "POST", p.url+path, orgs[org].key, string(b), nil)
	}
	var jobs []func()
	for _, d := range decisions {
		jobs = append(jobs, func() {
			r, err := call(httpc, "GET", p.url+"/v1/protocol/dossiers/"+d.dossierID, orgs[d.org].key, "", nil)
			if err != nil || r.status != http.StatusOK {
				bad.add("dossier %s (seq %d) lost: %s", d.dossierID, d.seq, crashDesc(r, err))
				return
			}
			sum := sha256.Sum256(r.raw)
			if got := "sha256:" + hex.EncodeToString(sum[:]); got != d.digest || r.header.Get("X-Clearance-Dossier-Digest") != d.digest {
				bad.add("dossier %s: digest %s (header %s), acknowledged %s", d.dossierID, got, r.header.Get("X-Clearance-Dossier-Digest"), d.digest)
			}
			if seq, _ := r.json["ledger_seq"].(float64); uint64(seq) != d.seq {
				bad.add("dossier %s: ledger_seq %v, acknowledged %d", d.dossierID, seq, d.seq)
			}
		})
	}
	states := make([]string, len(grants))
	for i, g := range grants {
		jobs = append(jobs, func() {
			// The grant's state, as its dossier's dispatch listing reports it.
			r, err := call(httpc, "GET", p.url+"/v1/protocol/dossiers/"+g.dossier+"/dispatches", orgs[g.org].key, "", nil)
			if err != nil || r.status != http.StatusOK || str(r.json, "grant_state") == "" {
				bad.add("grant %s lost: %s", g.id, crashDesc(r, err))
				return
			}
			st := str(r.json, "grant_state")
			states[i] = st
			if str(r.json, "grant_id") != g.id {
				bad.add("grant %s changed: %s", g.id, r.raw)
			}
			// verify-token agrees: valid while ISSUED, spent once claimed.
			v, err := post(g.org, "/v1/execution/verify-token", map[string]string{"execution_token": g.token, "intent_hash": g.intentHash})
			switch {
			case err != nil:
				bad.add("grant %s: verify-token: %v", g.id, err)
			case st == "ISSUED" && (v.status != http.StatusOK || str(v.json, "grant_id") != g.id || str(v.json, "dossier_id") != g.dossier):
				bad.add("grant %s (ISSUED): verify-token %s", g.id, crashDesc(v, nil))
			case st != "ISSUED" && (v.status != http.StatusConflict || str(v.json, "code") != "GRANT_ALREADY_CLAIMED"):
				bad.add("grant %s (%s): verify-token %s", g.id, st, crashDesc(v, nil))
			}
			switch {
			case g.final != "" && st != g.final:
				bad.add("grant %s: finalized %s acknowledged, state %s", g.id, g.final, st)
			case g.final == "" && g.claimToken != "" && st != "CLAIMED" && !book.final(st): // a finalization may have committed unanswered
				bad.add("grant %s: claim acknowledged, state %s", g.id, st)
			case g.claimToken == "" && st != "ISSUED" && st != "CLAIMED": // a claim may have committed unanswered
				bad.add("grant %s: never claimed with an answer, state %s", g.id, st)
			}
		})
	}
	crashParallel(jobs)
	for o := range orgs {
		crashCheckLedger(t, p, httpc, orgs, o, decisions, grants, states, book, &bad)
	}
	bad.fatal(t, "after the restart")

	// Replays and late claims.
	jobs = jobs[:0]
	for i, g := range grants {
		if states[i] != "ISSUED" {
			jobs = append(jobs, func() {
				r, err := post(g.org, "/v1/execution/claim-token", map[string]string{"execution_token": g.token, "intent_hash": g.intentHash})
				if err != nil || r.status != http.StatusConflict || r.json["should_execute"] != false || str(r.json, "code") != "CLAIM_REPLAY" {
					bad.add("grant %s (%s): a replayed claim was not refused: %s", g.id, states[i], crashDesc(r, err))
					return
				}
				book.mu.Lock()
				book.refused++
				book.mu.Unlock()
			})
		}
		switch {
		case book.lapses && g.claimToken == "" && book.final(states[i]):
			// Lapsed with a claim token nobody was told: nothing to replay.
		case g.final != "" || book.final(states[i]):
			jobs = append(jobs, func() {
				r, err := post(g.org, "/v1/execution/finalize-token", map[string]string{"execution_token": g.token, "claim_token": g.claimToken, "outcome": "COMMITTED"})
				code := ""
				if err == nil {
					code = str(r.json, "code")
				}
				// A lapse the executor has not reported yet answers its
				// first report CLAIM_LEASE_EXPIRED, the later ones as a replay.
				lapsed := book.lapses && states[i] == "INDETERMINATE" && code == "CLAIM_LEASE_EXPIRED"
				if err != nil || r.status != http.StatusConflict || (code != "ALREADY_FINALIZED" && !lapsed) {
					bad.add("grant %s (%s): a replayed finalization was not refused: %s", g.id, states[i], crashDesc(r, err))
					return
				}
				book.mu.Lock()
				book.refused++
				book.mu.Unlock()
			})
		case g.claimToken != "":
			jobs = append(jobs, func() { crashFinalizeLate(g, post, book, &bad) })
		case states[i] == "ISSUED" && time.Until(g.expires) > time.Minute:
			jobs = append(jobs, func() {
				r, err := post(g.org, "/v1/execution/claim-token", map[string]string{"execution_token": g.token, "intent_hash": g.intentHash})
				if err != nil || r.status != http.StatusOK || r.json["should_execute"] != true || str(r.json, "claim_token") == "" {
					bad.add("grant %s: ISSUED after the restart but its claim failed: %s", g.id, crashDesc(r, err))
					return
				}
				g.claimToken = str(r.json, "claim_token")
				book.mu.Lock()
				book.winners[g.id]++
				book.claims++
				book.lateClaims++
				book.grantByID(g.id).claimToken = g.claimToken
				book.mu.Unlock()
				crashFinalizeLate(g, post, book, &bad)
			})
		}
	}
	crashParallel(jobs)
	book.mu.Lock()
	for id, n := range book.winners {
		if n > 1 {
			bad.add("grant %s: %d claims answered should_execute", id, n)
		}
	}
	book.mu.Unlock()
	bad.fatal(t, "replays after the restart")
}

// crashFinalizeLate finalizes an acknowledged claim after a restart.
func crashFinalizeLate(g crashGrant, post func(int, string, any) (*reply, error), book *crashBook, bad *crashProblems) {
	r, err := post(g.org, "/v1/execution/finalize-token", map[string]string{"execution_token": g.token, "claim_token": g.claimToken, "outcome": "COMMITTED"})
	outcome := "COMMITTED"
	switch {
	case err == nil && book.lapses && r.status == http.StatusConflict && str(r.json, "code") == "CLAIM_LEASE_EXPIRED" && str(r.json, "outcome") == "INDETERMINATE":
		outcome = "INDETERMINATE" // the lease passed first: refused, and recorded so
	case err != nil || r.status != http.StatusOK || str(r.json, "outcome") != "COMMITTED":
		bad.add("grant %s: finalizing an acknowledged claim after the restart: %s", g.id, crashDesc(r, err))
		return
	}
	book.mu.Lock()
	book.finals++
	book.lateFinals++
	book.grantByID(g.id).final = outcome
	book.mu.Unlock()
}

func crashFinal(state string) bool { return state == "COMMITTED" || state == "FAILED" }

// crashDesc describes an answer or a transport error.
func crashDesc(r *reply, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("status %d: %s", r.status, bytes.TrimSpace(r.raw))
}

// grantByID is called with mu held.
func (b *crashBook) grantByID(id string) *crashGrant {
	for _, g := range b.grants {
		if g.id == id {
			return g
		}
	}
	panic("unknown grant " + id)
}

// crashCheckLedger verifies org o's ledger and reads it whole: each
// acknowledged decision is the entry at its seq, each acknowledged grant,
// claim and finalization has its entry, no grant has two claim or
// finalization entries, and a grant's state agrees with its entries (they
// are written in one transaction).
func crashCheckLedger(t *testing.T, p *proc, httpc *http.Client, orgs []crashOrg, o int, decisions []crashDecision, grants []crashGrant, states []string, book *crashBook, bad *crashProblems) {
	t.Helper()
	key := orgs[o].key
	v := mustCall(t, "GET", p.url+"/v1/protocol/audit/ledger/verify", key, "", http.StatusOK)
	if v.json["valid"] != true {
		bad.add("org %d: ledger does not verify after the crash: %s", o, v.raw)
	}
	head, _ := v.json["head_seq"].(float64)

	type entry struct{ kind, subject, digest string }
	bySeq := map[uint64]entry{}
	count := map[string]int{} // kind + " " + subject
	var after uint64
	for {
		r, err := call(httpc, "GET", fmt.Sprintf("%s/v1/protocol/audit/ledger?after_seq=%d&limit=1000", p.url, after), key, "", nil)
		if err != nil || r.status != http.StatusOK {
			t.Fatalf("org %d: read ledger after %d: %s", o, after, crashDesc(r, err))
		}
		var page struct {
			Entries []struct {
				Seq           uint64 `json:"seq"`
				Kind          string `json:"kind"`
				SubjectID     string `json:"subject_id"`
				PayloadDigest string `json:"payload_digest"`
			} `json:"entries"`
			Next uint64 `json:"next_after_seq"`
		}
		if err := json.Unmarshal(r.raw, &page); err != nil {
			t.Fatalf("org %d: ledger page: %v", o, err)
		}
		for _, e := range page.Entries {
			bySeq[e.Seq] = entry{e.Kind, e.SubjectID, e.PayloadDigest}
			count[e.Kind+" "+e.SubjectID]++
		}
		if page.Next == 0 {
			break
		}
		after = page.Next
	}
	if uint64(len(bySeq)) != uint64(head) {
		bad.add("org %d: %d ledger entries listed, verify reports head %v", o, len(bySeq), head)
	}

	acked := crashOrgBase
	seqs := map[uint64]bool{}
	for _, d := range decisions {
		if d.org != o {
			continue
		}
		acked++
		if seqs[d.seq] {
			bad.add("org %d: two acknowledged decisions share ledger seq %d", o, d.seq)
		}
		seqs[d.seq] = true
		if e := bySeq[d.seq]; e != (entry{"decision.recorded", d.dossierID, d.digest}) {
			bad.add("org %d: seq %d is %+v, acknowledged decision %s %s", o, d.seq, e, d.dossierID, d.digest)
		}
	}
	for i, g := range grants {
		if g.org != o {
			continue
		}
		acked++
		claimed, finalized := count["execution.claimed "+g.id], count["execution.finalized "+g.id]
		if n := count["grant.issued "+g.id]; n != 1 {
			bad.add("org %d: grant %s has %d grant.issued entries", o, g.id, n)
		}
		if g.claimToken != "" {
			acked++
		}
		if g.final != "" {
			acked++
		}
		if want := states[i] != "ISSUED"; claimed > 1 || (claimed == 1) != want {
			bad.add("org %d: grant %s is %s with %d execution.claimed entries", o, g.id, states[i], claimed)
		}
		most := 1
		if book.lapses && states[i] == "INDETERMINATE" {
			most = 2 // the lapse, then the executor's late report
		}
		if want := book.final(states[i]); finalized > most || (finalized >= 1) != want {
			bad.add("org %d: grant %s is %s with %d execution.finalized entries", o, g.id, states[i], finalized)
		}
	}
	if book.exact {
		// Nothing was left unanswered, so nothing but what was
		// acknowledged may be there: a repeated request was applied once.
		kinds := map[string]int{}
		for k, n := range count {
			kinds[k[:strings.IndexByte(k, ' ')]] += n
		}
		orgGrants := 0
		for _, g := range grants {
			if g.org == o {
				orgGrants++
			}
		}
		book.mu.Lock()
		maybe := book.maybe[o]
		book.mu.Unlock()
		if n := kinds["decision.recorded"]; n < len(seqs) || n > len(seqs)+maybe || kinds["grant.issued"] != orgGrants {
			bad.add("org %d: ledger has %d decisions and %d grants; %d (and up to %d unanswered) and %d were acknowledged, each once",
				o, n, kinds["grant.issued"], len(seqs), maybe, orgGrants)
		}
	}
	for k, n := range count {
		if strings.HasPrefix(k, "execution.claimed ") && n > 1 {
			bad.add("org %d: %s recorded %d times", o, k, n)
		}
	}
	if uint64(head) < uint64(acked) {
		bad.add("org %d: ledger head %v < %d acknowledged records", o, head, acked)
	}
}
