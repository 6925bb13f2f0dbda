// Package acktest books what a Clearance server acknowledged under load,
// over real HTTP, and checks afterwards that nothing acknowledged was lost
// and no grant was claimed twice. The tests that crash the binary, break
// its Pebble storage, break the network to PostgreSQL or fail PostgreSQL
// over share it: they differ in what they do to the server while the load
// runs, in which failed answers they accept, and in the switches they set
// on the Book (Exact, Maybe, Lapses) for what their faults may leave.
//
// Load is a load generator that mixes decisions (evaluate-decision) and
// full agent cycles (enforce-and-bind, two racing claims of the grant,
// finalize of the winner); a test with its own clients books their
// acknowledgements itself (DecisionOf, GrantOf). An answer is acknowledged
// when it is a 2xx that carries what it promises (a dossier with its digest
// and ledger seq, a grant, a winning claim, a finalization); the Book keeps
// every acknowledgement. Check, once the server has recovered (restarted
// after a crash, or back after a fault), reads every acknowledged record
// back through the API, verifies each org's ledger, then replays claims and
// finalizations (refused) and completes the cycles left open.
//
// It is test support: only tests import it.
package acktest

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
)

// Bundle allows every refund below 10,000 in ENFORCEMENT, so that
// enforce-and-bind issues grants.
const Bundle = `{"bundle_id":"crash","version":"v1","mode":"ENFORCEMENT","rules":[
 {"id":"big","match":[{"field":"amount","op":"ge","value":10000}],"outcome":"BLOCK","reason_codes":["TOO_BIG"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`

// OrgBase is the number of ledger entries an org made by Setup has before
// the load: the org, its API key, its agent key and its bundle.
const OrgBase = 4

// Org is an org under load: its key and the agent key that signs its
// intents.
type Org struct {
	ID, Key string
	Agent   grant.Key
}

// Decision is a decision acknowledged with 200 (evaluate-decision or
// enforce-and-bind).
type Decision struct {
	Org               int
	DossierID, Digest string
	Seq               uint64
}

// Grant is a grant acknowledged by enforce-and-bind, with what was
// acknowledged of its claim and finalization.
type Grant struct {
	Org                            int
	ID, Token, IntentHash, Dossier string
	Expires                        time.Time
	ClaimToken                     string // an acknowledged winning claim
	Final                          string // an acknowledged finalization's outcome
	// LateClaim: a claim of it was recorded but refused CLAIM_LEASE_EXPIRED,
	// its lease over before it could be answered; nobody knows its claim
	// token, and it lapses (INDETERMINATE) once its lease passed.
	LateClaim bool
}

// Book is everything a server acknowledged, across restarts and faults.
type Book struct {
	mu        sync.Mutex
	Decisions []Decision
	Grants    []*Grant
	Winners   map[string]int // grant id -> claims answered should_execute: true
	Claims    int
	Finals    int
	// Counted by Check.
	LateClaims, LateFinals, Refused int
	// LateRefusals counts the claims refused CLAIM_LEASE_EXPIRED because
	// their lease ended before they were answered (Grant.LateClaim).
	LateRefusals int

	// Set by a test before any load, for what its faults may leave:
	//
	// Exact: every request was repeated until it was answered, so each
	// org's ledger holds exactly the acknowledged decisions and grants,
	// and at most Maybe[org] more decisions (sent without an
	// Idempotency-Key and answered 503: repeating one would be another
	// decision, so it stays unknown).
	//
	// Lapses: the claim lease is short, so an acknowledged claim may end
	// INDETERMINATE (CLAIM_LEASE_EXPIRED), recorded by the expiry worker
	// (then a late finalization is ledgered too) or by a late
	// finalization.
	Exact, Lapses bool
	Maybe         map[int]int // org -> decisions answered 503, recorded or not
}

// NewBook returns an empty book.
func NewBook() *Book { return &Book{Winners: map[string]int{}, Maybe: map[int]int{}} }

// Lock and Unlock guard the book's fields while a test reads them.
func (b *Book) Lock()   { b.mu.Lock() }
func (b *Book) Unlock() { b.mu.Unlock() }

// Reply is one HTTP answer.
type Reply struct {
	Status int
	Header http.Header
	Raw    []byte
	JSON   map[string]any
}

// Str returns the string member k of the answer's JSON object.
func (r *Reply) Str(k string) string {
	s, _ := r.JSON[k].(string)
	return s
}

// Describe describes an answer or a transport error.
func Describe(r *Reply, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("status %d: %s", r.Status, bytes.TrimSpace(r.Raw))
}

// Call sends one request; transport errors are returned, not fatal, so
// that it may run on any goroutine and while the server fails or dies.
func Call(client *http.Client, method, url, key, body string) (*Reply, error) {
	return CallWith(client, method, url, key, body, nil)
}

// CallWith is Call with more request headers (an Idempotency-Key).
func CallWith(client *http.Client, method, url, key, body string, header map[string]string) (*Reply, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	r := &Reply{Status: res.StatusCode, Header: res.Header, Raw: raw}
	_ = json.Unmarshal(raw, &r.JSON)
	return r, nil
}

// Setup creates n orgs with the platform key plat, each with an agent key
// and Bundle.
func Setup(t testing.TB, client *http.Client, url, plat string, n int) []Org {
	t.Helper()
	must := func(method, path, key, body string, want int) *Reply {
		t.Helper()
		r, err := Call(client, method, url+path, key, body)
		if err != nil || r.Status != want {
			t.Fatalf("%s %s: %s, want %d", method, path, Describe(r, err), want)
		}
		return r
	}
	var orgs []Org
	for i := range n {
		r := must("POST", "/v1/platform/orgs", plat, fmt.Sprintf(`{"name":"Durable %d"}`, i), http.StatusCreated)
		o := Org{ID: r.Str("org_id"), Key: r.Str("api_key")}
		var err error
		if o.Agent, err = grant.NewKey(rand.Reader); err != nil {
			t.Fatal(err)
		}
		reg, err := json.Marshal(map[string]any{"kid": o.Agent.KID(), "public_jwk": o.Agent.PublicJWK()})
		if err != nil {
			t.Fatal(err)
		}
		must("POST", "/v1/execution/agent-keys", o.Key, string(reg), http.StatusCreated)
		must("POST", "/v1/protocol/policies/bundles", o.Key, Bundle, http.StatusCreated)
		orgs = append(orgs, o)
	}
	return orgs
}

// Load runs clients against a server and books what it acknowledges.
type Load struct {
	T      testing.TB
	URL    string
	Client *http.Client
	Orgs   []Org
	Book   *Book
	// Tag makes the intents of this load unique (a round, a case).
	Tag string
	// OnAck is called after each acknowledgement is booked, with the count
	// of this load's acknowledgements, while no other is booked: a test
	// kills the server or breaks its storage there, with work in flight.
	// It runs under the load's lock: Stop must be called from another
	// goroutine.
	OnAck func(acks int)
	// OnFailure is called with every answer that is neither an
	// acknowledgement nor the CLAIM_REPLAY of a claim that lost the race
	// (rep nil with a transport error); the client goes on when it
	// returns true.
	OnFailure func(client int, op string, rep *Reply, err error) bool

	mu   sync.Mutex
	acks int
	stop chan struct{}
}

// Run runs clients until each of them stops (OnFailure returned false) or
// Stop is called, and returns the number of acknowledgements.
func (l *Load) Run(clients int) int {
	l.mu.Lock()
	if l.stop == nil {
		l.stop = make(chan struct{})
	}
	stop := l.stop
	l.mu.Unlock()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ok := false
				if i%2 == 0 {
					ok = l.decide(c, i)
				} else {
					ok = l.cycle(c, i)
				}
				if !ok {
					return
				}
			}
		})
	}
	wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acks
}

// Stop ends Run after the requests in flight.
func (l *Load) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stop == nil {
		l.stop = make(chan struct{})
	}
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
}

func (l *Load) ack(rec func(b *Book)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.Book.mu.Lock()
	rec(l.Book)
	l.Book.mu.Unlock()
	l.acks++
	if l.OnAck != nil {
		l.OnAck(l.acks)
	}
}

func (l *Load) post(org int, path, body string) (*Reply, error) {
	return Call(l.Client, "POST", l.URL+path, l.Orgs[org].Key, body)
}

func (l *Load) decide(c, i int) bool {
	org := c % len(l.Orgs)
	body := fmt.Sprintf(`{"decision_type":"PAYMENT","workflow_key":"load-%s","amount":%d,"context":{"client":%d,"i":%d}}`,
		l.Tag, (c*1000+i*37)%20000, c, i)
	rep, err := l.post(org, "/v1/protocol/evaluate-decision", body)
	if err != nil || rep.Status != http.StatusOK {
		return l.OnFailure(c, "evaluate-decision", rep, err)
	}
	d, ok := DecisionOf(org, rep)
	if !ok {
		l.T.Errorf("evaluate-decision answered 200 without a dossier: %s", rep.Raw)
		return false
	}
	l.ack(func(b *Book) { b.Decisions = append(b.Decisions, d) })
	return true
}

// DecisionOf is the decision an answer of org's evaluate-decision or
// enforce-and-bind acknowledges; false when it lacks a dossier id, digest
// or ledger seq.
func DecisionOf(org int, rep *Reply) (Decision, bool) {
	seq, _ := rep.JSON["ledger_seq"].(float64)
	d := Decision{Org: org, DossierID: rep.Str("dossier_id"), Digest: rep.Str("dossier_digest"), Seq: uint64(seq)}
	return d, d.DossierID != "" && d.Digest != "" && d.Seq > 0
}

// GrantOf is the grant, and its decision, an answer of org's
// enforce-and-bind acknowledges; false when it lacks any of them.
func GrantOf(org int, rep *Reply) (*Grant, Decision, bool) {
	d, ok := DecisionOf(org, rep)
	g := &Grant{Org: org, ID: rep.Str("grant_id"), Token: rep.Str("execution_token"),
		IntentHash: rep.Str("intent_hash"), Dossier: d.DossierID}
	var err error
	g.Expires, err = time.Parse(time.RFC3339Nano, rep.Str("expires_at"))
	return g, d, ok && err == nil && g.ID != "" && g.Token != "" && g.IntentHash != ""
}

// ClaimBody is the body of a claim of g.
func (g *Grant) ClaimBody() string {
	b, _ := json.Marshal(map[string]string{"execution_token": g.Token, "intent_hash": g.IntentHash})
	return string(b)
}

// cycle binds a signed intent, claims the grant twice at once (exactly one
// claim may win) and finalizes the winning claim.
func (l *Load) cycle(c, i int) bool {
	org := c % len(l.Orgs)
	id := fmt.Sprintf("%s-c%d-i%d", l.Tag, c, i)
	jws, err := Intent(l.Orgs[org], id)
	if err != nil {
		l.T.Errorf("sign intent: %v", err)
		return false
	}
	body, _ := json.Marshal(map[string]string{"signed_intent": jws})
	rep, err := l.post(org, "/v1/authority/enforce-and-bind", string(body))
	if err != nil || rep.Status != http.StatusOK {
		return l.OnFailure(c, "enforce-and-bind", rep, err)
	}
	g, d, ok := GrantOf(org, rep)
	if !ok {
		l.T.Errorf("enforce-and-bind answered 200 without a grant: %s", rep.Raw)
		return false
	}
	l.ack(func(b *Book) {
		b.Decisions = append(b.Decisions, d)
		b.Grants = append(b.Grants, g)
	})

	claimBody := g.ClaimBody()
	var (
		reps [2]*Reply
		errs [2]error
		wg   sync.WaitGroup
	)
	for k := range reps {
		wg.Go(func() { reps[k], errs[k] = l.post(org, "/v1/execution/claim-token", claimBody) })
	}
	wg.Wait()
	goOn, answered, claimToken := true, 0, ""
	for k, rep := range reps {
		switch {
		case errs[k] == nil && rep.Status == http.StatusOK && rep.JSON["should_execute"] == true && rep.Str("claim_token") != "":
			answered++
			if claimToken != "" {
				l.T.Errorf("grant %s: both racing claims won", g.ID)
			}
			claimToken = rep.Str("claim_token")
			l.ack(func(b *Book) {
				b.Winners[g.ID]++
				b.Claims++
				g.ClaimToken = claimToken
			})
		case errs[k] == nil && rep.Status == http.StatusConflict && rep.JSON["should_execute"] == false && rep.Str("code") == "CLAIM_REPLAY":
			answered++
		default:
			goOn = l.OnFailure(c, "claim", rep, errs[k]) && goOn
		}
	}
	if answered == len(reps) && claimToken == "" {
		l.T.Errorf("grant %s: both racing claims were refused: %s / %s", g.ID, reps[0].Raw, reps[1].Raw)
	}
	if claimToken == "" {
		return goOn && answered < len(reps)
	}

	outcome := "COMMITTED"
	if i%4 == 3 {
		outcome = "FAILED"
	}
	fin, _ := json.Marshal(map[string]string{"execution_token": g.Token, "claim_token": claimToken, "outcome": outcome})
	rep, err = l.post(org, "/v1/execution/finalize-token", string(fin))
	if err != nil || rep.Status != http.StatusOK {
		return l.OnFailure(c, "finalize", rep, err)
	}
	if got := rep.Str("outcome"); got != outcome {
		l.T.Errorf("grant %s: finalized %s, answered %s", g.ID, outcome, got)
		return false
	}
	l.ack(func(b *Book) {
		b.Finals++
		g.Final = outcome
	})
	return goOn
}

// Intent signs a refund intent of o whose id, nonce and scope derive from
// id.
func Intent(o Org, id string) (string, error) {
	payload, err := canon.Marshal(map[string]any{
		"intent_id": "intent-" + id, "org_id": o.ID, "actor": map[string]any{"id": "agent-7", "type": "agent"},
		"action":       map[string]any{"type": "refund", "amount": 100, "currency": "EUR", "target": "order-" + id},
		"workflow_key": "refunds", "decision_type": "REFUND", "nonce": "nonce-" + id, "concurrency_scope": "scope-" + id,
		"escalation": map[string]any{"mode": "NONE"}, "issued_at": time.Now().UTC().Format(time.RFC3339),
	})
	if err != nil {
		return "", err
	}
	return grant.SignIntent(o.Agent, payload)
}

// Problems collects wrong answers and lost or changed records from
// parallel checks. The zero value is ready to use.
type Problems struct {
	mu   sync.Mutex
	list []string
}

// Add records one problem.
func (p *Problems) Add(format string, args ...any) {
	p.mu.Lock()
	p.list = append(p.list, fmt.Sprintf(format, args...))
	p.mu.Unlock()
}

// List returns a copy of the problems recorded so far.
func (p *Problems) List() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.list...)
}

// Fatal fails the test, with the first ten sorted, if anything was added.
func (p *Problems) Fatal(t testing.TB, what string) {
	t.Helper()
	if list := p.List(); len(list) > 0 {
		sort.Strings(list)
		t.Fatalf("%s: %d problems, first:\n%s", what, len(list), strings.Join(list[:min(len(list), 10)], "\n"))
	}
}

// Parallel runs jobs on a few workers and returns when all are done.
func Parallel(jobs []func()) {
	ch := make(chan func())
	var wg sync.WaitGroup
	for range 8 {
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

// Check runs against the server at url once it has recovered: restarted
// after a crash, or back after a fault; with several servers on one store,
// against each. Read only first: every acknowledged dossier is served with
// its digest and seq, every acknowledged grant exists in a state its
// acknowledgements allow (a claim or a finalization answered with a
// failure may have committed), and each org's ledger verifies and records
// all of it (claims and finalizations at most once per grant; with Exact,
// nothing but the acknowledged decisions and grants). Then replays: an
// acknowledged claim or finalization is refused when repeated; a grant
// still ISSUED is claimed and finalized now, which shows its record and
// binding survived, and an acknowledged claim still finalizes with its
// claim token (with Lapses, or is refused as lapsed). The book is brought
// up to date with what Check acknowledged itself.
func Check(t testing.TB, client *http.Client, url string, orgs []Org, book *Book) {
	t.Helper()
	book.mu.Lock()
	decisions := append([]Decision(nil), book.Decisions...)
	grants := make([]Grant, len(book.Grants))
	for i, g := range book.Grants {
		grants[i] = *g
	}
	book.mu.Unlock()

	var bad Problems
	post := func(org int, path string, body any) (*Reply, error) {
		b, _ := json.Marshal(body)
		return Call(client, "POST", url+path, orgs[org].Key, string(b))
	}
	var jobs []func()
	for _, d := range decisions {
		jobs = append(jobs, func() {
			r, err := Call(client, "GET", url+"/v1/protocol/dossiers/"+d.DossierID, orgs[d.Org].Key, "")
			if err != nil || r.Status != http.StatusOK {
				bad.Add("dossier %s (seq %d) lost: %s", d.DossierID, d.Seq, Describe(r, err))
				return
			}
			sum := sha256.Sum256(r.Raw)
			if got := "sha256:" + hex.EncodeToString(sum[:]); got != d.Digest || r.Header.Get("X-Clearance-Dossier-Digest") != d.Digest {
				bad.Add("dossier %s: digest %s (header %s), acknowledged %s", d.DossierID, got, r.Header.Get("X-Clearance-Dossier-Digest"), d.Digest)
			}
			if seq, _ := r.JSON["ledger_seq"].(float64); uint64(seq) != d.Seq {
				bad.Add("dossier %s: ledger_seq %v, acknowledged %d", d.DossierID, seq, d.Seq)
			}
		})
	}
	states := make([]string, len(grants))
	for i, g := range grants {
		jobs = append(jobs, func() {
			// The grant's state, as its dossier's dispatch listing reports it.
			r, err := Call(client, "GET", url+"/v1/protocol/dossiers/"+g.Dossier+"/dispatches", orgs[g.Org].Key, "")
			if err != nil || r.Status != http.StatusOK || r.Str("grant_state") == "" {
				bad.Add("grant %s lost: %s", g.ID, Describe(r, err))
				return
			}
			st := r.Str("grant_state")
			states[i] = st
			if r.Str("grant_id") != g.ID {
				bad.Add("grant %s changed: %s", g.ID, r.Raw)
			}
			// verify-token agrees: valid while ISSUED, spent once claimed.
			v, err := post(g.Org, "/v1/execution/verify-token", map[string]string{"execution_token": g.Token, "intent_hash": g.IntentHash})
			switch {
			case err != nil:
				bad.Add("grant %s: verify-token: %v", g.ID, err)
			case st == "ISSUED" && (v.Status != http.StatusOK || v.Str("grant_id") != g.ID || v.Str("dossier_id") != g.Dossier):
				bad.Add("grant %s (ISSUED): verify-token %s", g.ID, Describe(v, nil))
			case st != "ISSUED" && (v.Status != http.StatusConflict || v.Str("code") != "GRANT_ALREADY_CLAIMED"):
				bad.Add("grant %s (%s): verify-token %s", g.ID, st, Describe(v, nil))
			}
			switch {
			case g.Final != "" && st != g.Final:
				bad.Add("grant %s: finalized %s acknowledged, state %s", g.ID, g.Final, st)
			case g.Final == "" && g.ClaimToken != "" && st != "CLAIMED" && !book.final(st): // a finalization may have committed unanswered
				bad.Add("grant %s: claim acknowledged, state %s", g.ID, st)
			case g.ClaimToken == "" && st != "ISSUED" && st != "CLAIMED" && !(g.LateClaim && st == "INDETERMINATE"): // a claim may have committed unanswered
				bad.Add("grant %s: never claimed with an answer, state %s", g.ID, st)
			}
		})
	}
	Parallel(jobs)
	for o := range orgs {
		checkLedger(t, client, url, orgs, o, decisions, grants, states, book, &bad)
	}
	bad.Fatal(t, "after recovery")

	// Replays and late claims.
	jobs = jobs[:0]
	for i, g := range grants {
		if states[i] != "ISSUED" {
			jobs = append(jobs, func() {
				r, err := post(g.Org, "/v1/execution/claim-token", map[string]string{"execution_token": g.Token, "intent_hash": g.IntentHash})
				if err != nil || r.Status != http.StatusConflict || r.JSON["should_execute"] != false || r.Str("code") != "CLAIM_REPLAY" {
					bad.Add("grant %s (%s): a replayed claim was not refused: %s", g.ID, states[i], Describe(r, err))
					return
				}
				book.mu.Lock()
				book.Refused++
				book.mu.Unlock()
			})
		}
		switch {
		case book.Lapses && g.ClaimToken == "" && book.final(states[i]):
			// Lapsed with a claim token nobody was told: nothing to replay.
		case g.Final != "" || book.final(states[i]):
			jobs = append(jobs, func() {
				r, err := post(g.Org, "/v1/execution/finalize-token", map[string]string{"execution_token": g.Token, "claim_token": g.ClaimToken, "outcome": "COMMITTED"})
				code := ""
				if err == nil {
					code = r.Str("code")
				}
				// A lapse the executor has not reported yet answers its
				// first report CLAIM_LEASE_EXPIRED, the later ones as a replay.
				lapsed := book.Lapses && states[i] == "INDETERMINATE" && code == "CLAIM_LEASE_EXPIRED"
				if err != nil || r.Status != http.StatusConflict || (code != "ALREADY_FINALIZED" && !lapsed) {
					bad.Add("grant %s (%s): a replayed finalization was not refused: %s", g.ID, states[i], Describe(r, err))
					return
				}
				book.mu.Lock()
				book.Refused++
				book.mu.Unlock()
			})
		case g.ClaimToken != "":
			jobs = append(jobs, func() { finalizeLate(g, post, book, &bad) })
		case states[i] == "ISSUED" && time.Until(g.Expires) > time.Minute:
			jobs = append(jobs, func() {
				r, err := post(g.Org, "/v1/execution/claim-token", map[string]string{"execution_token": g.Token, "intent_hash": g.IntentHash})
				if err != nil || r.Status != http.StatusOK || r.JSON["should_execute"] != true || r.Str("claim_token") == "" {
					bad.Add("grant %s: ISSUED after recovery but its claim failed: %s", g.ID, Describe(r, err))
					return
				}
				g.ClaimToken = r.Str("claim_token")
				book.mu.Lock()
				book.Winners[g.ID]++
				book.Claims++
				book.LateClaims++
				book.grantByID(g.ID).ClaimToken = g.ClaimToken
				book.mu.Unlock()
				finalizeLate(g, post, book, &bad)
			})
		}
	}
	Parallel(jobs)
	book.mu.Lock()
	for id, n := range book.Winners {
		if n > 1 {
			bad.Add("grant %s: %d claims answered should_execute", id, n)
		}
	}
	book.mu.Unlock()
	bad.Fatal(t, "replays after recovery")
}

// finalizeLate finalizes an acknowledged claim after recovery. With
// Lapses its lease may have passed first: then it is refused, and
// recorded, as INDETERMINATE.
func finalizeLate(g Grant, post func(int, string, any) (*Reply, error), book *Book, bad *Problems) {
	r, err := post(g.Org, "/v1/execution/finalize-token", map[string]string{"execution_token": g.Token, "claim_token": g.ClaimToken, "outcome": "COMMITTED"})
	outcome := "COMMITTED"
	switch {
	case err == nil && book.Lapses && r.Status == http.StatusConflict && r.Str("code") == "CLAIM_LEASE_EXPIRED" && r.Str("outcome") == "INDETERMINATE":
		outcome = "INDETERMINATE"
	case err != nil || r.Status != http.StatusOK || r.Str("outcome") != "COMMITTED":
		bad.Add("grant %s: finalizing an acknowledged claim after recovery: %s", g.ID, Describe(r, err))
		return
	}
	book.mu.Lock()
	book.Finals++
	book.LateFinals++
	book.grantByID(g.ID).Final = outcome
	book.mu.Unlock()
}

func final(state string) bool { return state == "COMMITTED" || state == "FAILED" }

// final reports whether state is one a finalization, or with Lapses a
// lapse, leads to. Lapses is set before any load: no lock.
func (b *Book) final(state string) bool {
	return final(state) || (b.Lapses && state == "INDETERMINATE")
}

// grantByID is called with mu held.
func (b *Book) grantByID(id string) *Grant {
	for _, g := range b.Grants {
		if g.ID == id {
			return g
		}
	}
	panic("unknown grant " + id)
}

// checkLedger verifies org o's ledger and reads it whole: each
// acknowledged decision is the entry at its seq, each acknowledged grant,
// claim and finalization has its entry, no grant has two claim or
// finalization entries (with Lapses, an INDETERMINATE grant may have two:
// the lapse, then the executor's late report), and a grant's state agrees
// with its entries (they are written in one transaction). With Exact, the
// ledger holds no decision or grant that was not acknowledged, beyond
// Maybe.
func checkLedger(t testing.TB, client *http.Client, url string, orgs []Org, o int, decisions []Decision, grants []Grant, states []string, book *Book, bad *Problems) {
	t.Helper()
	key := orgs[o].Key
	v, err := Call(client, "GET", url+"/v1/protocol/audit/ledger/verify", key, "")
	if err != nil || v.Status != http.StatusOK {
		t.Fatalf("org %d: verify the ledger: %s", o, Describe(v, err))
	}
	if v.JSON["valid"] != true {
		bad.Add("org %d: ledger does not verify after recovery: %s", o, v.Raw)
	}
	head, _ := v.JSON["head_seq"].(float64)

	type entry struct{ kind, subject, digest string }
	bySeq := map[uint64]entry{}
	count := map[string]int{} // kind + " " + subject
	var after uint64
	for {
		r, err := Call(client, "GET", fmt.Sprintf("%s/v1/protocol/audit/ledger?after_seq=%d&limit=1000", url, after), key, "")
		if err != nil || r.Status != http.StatusOK {
			t.Fatalf("org %d: read ledger after %d: %s", o, after, Describe(r, err))
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
		if err := json.Unmarshal(r.Raw, &page); err != nil {
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
		bad.Add("org %d: %d ledger entries listed, verify reports head %v", o, len(bySeq), head)
	}

	acked := OrgBase
	seqs := map[uint64]bool{}
	for _, d := range decisions {
		if d.Org != o {
			continue
		}
		acked++
		if seqs[d.Seq] {
			bad.Add("org %d: two acknowledged decisions share ledger seq %d", o, d.Seq)
		}
		seqs[d.Seq] = true
		if e := bySeq[d.Seq]; e != (entry{"decision.recorded", d.DossierID, d.Digest}) {
			bad.Add("org %d: seq %d is %+v, acknowledged decision %s %s", o, d.Seq, e, d.DossierID, d.Digest)
		}
	}
	orgGrants := 0
	for i, g := range grants {
		if g.Org != o {
			continue
		}
		acked++
		orgGrants++
		claimed, finalized := count["execution.claimed "+g.ID], count["execution.finalized "+g.ID]
		if n := count["grant.issued "+g.ID]; n != 1 {
			bad.Add("org %d: grant %s has %d grant.issued entries", o, g.ID, n)
		}
		if g.ClaimToken != "" {
			acked++
		}
		if g.Final != "" {
			acked++
		}
		if want := states[i] != "ISSUED"; claimed > 1 || (claimed == 1) != want {
			bad.Add("org %d: grant %s is %s with %d execution.claimed entries", o, g.ID, states[i], claimed)
		}
		most := 1
		if book.Lapses && states[i] == "INDETERMINATE" {
			most = 2 // the lapse, then the executor's late report
		}
		if want := book.final(states[i]); finalized > most || (finalized >= 1) != want {
			bad.Add("org %d: grant %s is %s with %d execution.finalized entries", o, g.ID, states[i], finalized)
		}
	}
	if book.Exact {
		// Nothing was left unanswered, so nothing but what was
		// acknowledged may be there: a repeated request was applied once.
		kinds := map[string]int{}
		for k, n := range count {
			kinds[k[:strings.IndexByte(k, ' ')]] += n
		}
		book.mu.Lock()
		maybe := book.Maybe[o]
		book.mu.Unlock()
		if n := kinds["decision.recorded"]; n < len(seqs) || n > len(seqs)+maybe || kinds["grant.issued"] != orgGrants {
			bad.Add("org %d: ledger has %d decisions and %d grants; %d (and up to %d unanswered) and %d were acknowledged, each once",
				o, n, kinds["grant.issued"], len(seqs), maybe, orgGrants)
		}
	}
	for k, n := range count {
		if strings.HasPrefix(k, "execution.claimed ") && n > 1 {
			bad.Add("org %d: %s recorded %d times", o, k, n)
		}
	}
	if uint64(head) < uint64(acked) {
		bad.Add("org %d: ledger head %v < %d acknowledged records", o, head, acked)
	}
}
