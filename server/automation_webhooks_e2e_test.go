package server_test

// The automation connector's callback URLs end to end, over real HTTP on
// Pebble or PostgreSQL (see openBackend): an automation credential obtained
// through the real OAuth flow (automation_e2e_test.go's helpers) registers
// callback URLs on loopback receivers, decides with the same credential,
// and the server's own background worker (Engine.Run, as `clearance serve`
// runs it) delivers decision.resolved to each callback, signed with its own
// secret. Nothing sleeps: each wait is on a receiver's channel, under a
// deadline, and "nothing was sent there" is read from the delivery log once
// a delivery of the same dispatch has arrived elsewhere (one dispatching
// transaction queues an event's deliveries to every destination, so when
// one of them is received, the others are queued or never will be).

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/server"
	"github.com/clearancehq/clearance/webhook"
)

// acPathWebhooks is the callback URLs' route.
const acPathWebhooks = "/v1/automation/webhooks"

// acHookWait bounds every wait for a delivery.
const acHookWait = 20 * time.Second

// acHookReceiver is a callback endpoint on 127.0.0.1: it answers 200 and
// hands every request it gets to the test through a channel.
type acHookReceiver struct {
	srv *httptest.Server
	ch  chan delivery // what await reads
	mu  sync.Mutex
	got []delivery // every request, in order
}

func newACHookReceiver(t *testing.T) *acHookReceiver {
	t.Helper()
	rv := &acHookReceiver{ch: make(chan delivery, 256)}
	rv.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		d := delivery{id: r.Header.Get(webhook.HeaderDeliveryID), event: r.Header.Get(webhook.HeaderEvent),
			signature: r.Header.Get(webhook.HeaderSignature), body: body}
		rv.mu.Lock()
		rv.got = append(rv.got, d)
		rv.mu.Unlock()
		select {
		case rv.ch <- d:
		default: // never holds a delivery up: await would report it missing
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rv.srv.Close)
	return rv
}

// received is every request the receiver got so far.
func (rv *acHookReceiver) received() []delivery {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return append([]delivery(nil), rv.got...)
}

// await waits, under acHookWait, for the delivery of the decision whose
// dossier is dossierID, and fails on any other delivery arriving first.
func (rv *acHookReceiver) await(t *testing.T, what, dossierID string) delivery {
	t.Helper()
	deadline := time.NewTimer(acHookWait)
	defer deadline.Stop()
	for {
		select {
		case d := <-rv.ch:
			if got := acHookDossier(t, d); got != dossierID {
				t.Fatalf("%s: got the delivery of dossier %s, want %s first", what, got, dossierID)
			}
			return d
		case <-deadline.C:
			t.Fatalf("%s: no delivery of dossier %s within %s (the receiver got %d requests)", what, dossierID, acHookWait,
				len(rv.received()))
			return delivery{}
		}
	}
}

// acHookDossier is the dossier id of a delivered decision.resolved body.
func acHookDossier(t *testing.T, d delivery) string {
	t.Helper()
	var b struct {
		DossierID string `json:"dossier_id"`
	}
	if err := json.Unmarshal(d.body, &b); err != nil {
		t.Fatalf("a delivery body is not JSON: %v: %s", err, d.body)
	}
	return b.DossierID
}

// newACHookEnv is the connector's env (sign-up, sign-in and the OAuth flow
// through the SMTP recorder; a secrets key; the settable clock), reopened on
// its data by an engine that may call loopback receivers
// (--allow-private-destinations), with the engine's background workers
// running as a server runs them. They stop before the store closes.
func newACHookEnv(t *testing.T) *acEnv {
	t.Helper()
	x := newACEnv(t)
	x.stop() // a cleanup of newSignUpEnv's; it closes what opens below too
	x.engineOpts.AllowPrivateDestinations = true
	st := openBackend(t, x.dbDir, x.clock)
	eng, err := clearance.Open(st, x.engineOpts)
	if err != nil {
		st.Close()
		t.Fatalf("open engine: %v", err)
	}
	x.store, x.engine = st, eng
	x.server = server.New(eng, x.opts)
	x.srv = httptest.NewServer(x.server)
	x.client = x.srv.Client()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); eng.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done }) // before the store closes: cleanups run last first
	return x
}

// connect signs owner up for a workspace named orgName, signs in on a
// browser, consents for a registered platform and exchanges the code: it
// returns the workspace and its automation credential.
func (x *acEnv) connect(owner, orgName string) (string, string) {
	x.t.Helper()
	w := x.signUpNamed(owner, orgName)
	clientID := x.register("Flows", acRedirect)
	b := x.browser()
	x.login(b, owner)
	p := newACPKCE(x.t)
	code := x.code(b, clientID, acRedirect, "hooks", p, w.orgID)
	tok, _ := acWantToken(x.t, x.exchange(acTokenForm(code, acRedirect, clientID, p.verifier)), w.orgID)
	return w.orgID, tok
}

// acHook is a registration's answer.
type acHook struct {
	id, url, secret string
}

// addHook registers body with key and checks the 201.
func (x *acEnv) addHook(key, body string) acHook {
	x.t.Helper()
	r := x.do("POST", acPathWebhooks, key, body, nil).want(x.t, http.StatusCreated)
	signinWantMembers(x.t, r, "subscription_id", "url", "event", "filter", "created_at", "active", "signing_secret")
	if r.JSON["active"] != true {
		x.t.Fatalf("a new callback is not active: %s", r)
	}
	h := acHook{id: r.str("subscription_id"), url: r.str("url"), secret: r.str("signing_secret")}
	var sent struct{ URL string }
	_ = json.Unmarshal([]byte(body), &sent)
	if !acUUID.MatchString(h.id) || h.url != sent.URL || r.str("event") != webhook.EventDecisionResolved ||
		!strings.HasPrefix(h.secret, webhook.PrefixCallbackSecret) || len(h.secret) < len(webhook.PrefixCallbackSecret)+40 {
		x.t.Fatalf("registration of %s: %s", body, r)
	}
	if at, err := time.Parse(time.RFC3339Nano, r.str("created_at")); err != nil || !at.Equal(x.clock()) {
		x.t.Fatalf("created_at %q, want %s: %v", r.str("created_at"), x.clock(), err)
	}
	if r.Header.Get("Cache-Control") != "no-store" {
		x.t.Fatalf("the answer with the signing secret may be cached: Cache-Control %q", r.Header.Get("Cache-Control"))
	}
	return h
}

var acUUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// hooks lists key's callbacks: their subscription ids in order, and the
// answer, which never holds a secret.
func (x *acEnv) hooks(key string, secrets ...string) ([]string, *result) {
	x.t.Helper()
	r := x.do("GET", acPathWebhooks, key, nil, nil).want(x.t, http.StatusOK)
	signinWantMembers(x.t, r, "webhooks")
	list, ok := r.JSON["webhooks"].([]any)
	if !ok {
		x.t.Fatalf("webhooks is not a list: %s", r)
	}
	if strings.Contains(string(r.Raw), webhook.PrefixCallbackSecret) || strings.Contains(string(r.Raw), "signing_secret") {
		x.t.Fatalf("the list shows a signing secret: %s", r)
	}
	for _, s := range secrets {
		if strings.Contains(string(r.Raw), s) {
			x.t.Fatalf("the list shows a signing secret: %s", r)
		}
	}
	ids := []string{}
	for _, v := range list {
		m, _ := v.(map[string]any)
		if len(m) != 6 || m["active"] != true || m["event"] != webhook.EventDecisionResolved || m["url"] == "" || m["created_at"] == "" {
			x.t.Fatalf("a listed callback: %v", v)
		}
		id, _ := m["subscription_id"].(string)
		ids = append(ids, id)
	}
	return ids, r
}

// hookLog is the delivery log of one callback, today by the env's clock.
func (x *acEnv) hookLog(orgID, id string) []webhook.Delivery {
	x.t.Helper()
	log, err := x.engine.Webhooks.Deliveries(x.t.Context(), orgID,
		webhook.DeliveryFilter{Destination: webhook.CallbackPrefix + id, Day: x.clock().Format(time.DateOnly)})
	if err != nil {
		x.t.Fatalf("delivery log of %s: %v", id, err)
	}
	return log
}

// hookLogOf is the delivery log of one callback read over HTTP with key,
// today by the env's clock.
func (x *acEnv) hookLogOf(key, id string) []webhook.Delivery {
	x.t.Helper()
	r := x.do("GET", acPathWebhooks+"/"+id+"/deliveries?day="+x.clock().Format(time.DateOnly), key, nil, nil).want(x.t, http.StatusOK)
	var out struct {
		Deliveries []webhook.Delivery `json:"deliveries"`
	}
	if err := json.Unmarshal(r.Raw, &out); err != nil || out.Deliveries == nil {
		x.t.Fatalf("delivery log of %s: %s (%v)", id, r, err)
	}
	for _, d := range out.Deliveries {
		if d.Destination != webhook.CallbackPrefix+id {
			x.t.Fatalf("the log of %s holds a delivery to %s", id, d.Destination)
		}
	}
	return out.Deliveries
}

// verifies reports whether d's signature verifies with secret now.
func (x *acEnv) verifies(d delivery, secret string) bool {
	return webhook.Verify(d.signature, d.body, []byte(secret), x.clock(), 0) == nil
}

// ---------------------------------------------------------------------------

// Two callbacks and the WEBHOOK integration of one workspace: a decision
// made with the automation credential is delivered by the server's worker
// to each, the same body under a delivery id of its own, each signed with
// its own secret only; a callback's filter is applied; a removed callback
// gets nothing more, while the one still registered does.
func TestAutomationWebhooksDeliverSignedDecisions(t *testing.T) {
	t.Parallel()
	x := newACHookEnv(t)
	orgID, tok := x.connect("hooks@example.com", "Hooked")
	rvA, rvB, rvI := newACHookReceiver(t), newACHookReceiver(t), newACHookReceiver(t)

	// Nothing registered yet; a key of the org without the automation
	// scope neither registers, lists nor removes.
	if ids, _ := x.hooks(tok); len(ids) != 0 {
		t.Fatalf("a new workspace has callbacks %v", ids)
	}
	plain, _ := x.platformKey(orgID, "decision:write", "decision:read", "integration:write", "policy:write", "audit:read")
	x.do("POST", acPathWebhooks, plain, `{"url":`+lit(rvA.srv.URL+"/a")+`}`, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	x.do("GET", acPathWebhooks, plain, nil, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	x.do("POST", acPathWebhooks, "", `{"url":`+lit(rvA.srv.URL+"/a")+`}`, nil).wantProblem(t, http.StatusUnauthorized, "UNAUTHENTICATED")

	// Registered: A for every decision, B for ap.invoice only.
	a := x.addHook(tok, `{"url":`+lit(rvA.srv.URL+"/a")+`}`)
	b := x.addHook(tok, `{"url":`+lit(rvB.srv.URL+"/b?k=1")+`,"filter":{"workflow_keys":["ap.invoice"],"modes":["SHADOW","ENFORCEMENT"]}}`)
	if a.secret == b.secret || a.id == b.id {
		t.Fatalf("two callbacks share a secret or an id: %+v %+v", a, b)
	}
	x.do("POST", acPathWebhooks, plain, nil, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	x.do("DELETE", acPathWebhooks+"/"+a.id, plain, nil, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	// Refusals register nothing.
	x.do("POST", acPathWebhooks, tok, `{"url":`+lit(a.url)+`}`, nil).wantProblem(t, http.StatusConflict, "CALLBACK_EXISTS")
	x.do("POST", acPathWebhooks, tok, `{"url":`+lit(a.url)+`,"filter":{"outcomes":["BLOCK"]}}`, nil).
		wantProblem(t, http.StatusConflict, "CALLBACK_EXISTS")
	bad := x.do("POST", acPathWebhooks, tok, `{"filter":{"outcomes":["MAYBE"]}}`, nil).wantProblem(t, http.StatusBadRequest, "INVALID_CALLBACK")
	if f, _ := bad.JSON["errors"].([]any); len(f) != 2 || lookup(f[0], "field") != "url" || lookup(f[1], "field") != "filter.outcomes[0]" {
		t.Fatalf("errors[] of a callback without url and with a bad outcome: %s", bad)
	}
	x.do("POST", acPathWebhooks, tok, `{"url":"ftp://127.0.0.1/x"}`, nil).wantProblem(t, http.StatusBadRequest, "DESTINATION_FORBIDDEN")
	x.do("POST", acPathWebhooks, tok, `{"url":`+lit(rvA.srv.URL+"/c")+`,"secret":"mine-0123456789abcdef"}`, nil).
		wantProblem(t, http.StatusBadRequest, "UNKNOWN_MEMBER")
	ids, listed := x.hooks(tok, a.secret, b.secret)
	if len(ids) != 2 || ids[0] != a.id || ids[1] != b.id || listed.str("webhooks.1.url") != b.url ||
		!strings.Contains(string(listed.Raw), `"filter":{}`) || listed.str("webhooks.1.filter.workflow_keys.0") != "ap.invoice" {
		t.Fatalf("the list after two registrations: %s", listed)
	}

	// The WEBHOOK integration beside them, with a key that may connect it.
	x.do("POST", hooksPath(orgID)+"/connect", plain, connectBody(rvI.srv.URL+"/i", hookSecret, ""), nil).want(t, http.StatusCreated)

	// A decision of ap.invoice, made with the automation credential: to A,
	// B and the integration.
	d1 := x.decide(tok, signinDecision)
	dossier1 := d1.str("dossier_id")
	gotA := rvA.await(t, "callback A, decision 1", dossier1)
	gotB := rvB.await(t, "callback B, decision 1", dossier1)
	gotI := rvI.await(t, "the integration, decision 1", dossier1)
	for name, d := range map[string]delivery{"A": gotA, "B": gotB} {
		if d.event != webhook.EventDecisionResolved || !acUUID.MatchString(d.id) {
			t.Fatalf("callback %s: event %q, delivery id %q", name, d.event, d.id)
		}
		if string(d.body) != string(gotI.body) {
			t.Fatalf("callback %s was sent another body than the integration:\n%s\n%s", name, d.body, gotI.body)
		}
	}
	if gotA.id == gotB.id || gotA.id == gotI.id || gotB.id == gotI.id {
		t.Fatalf("delivery ids are not distinct per destination: A %s, B %s, integration %s", gotA.id, gotB.id, gotI.id)
	}
	if !x.verifies(gotA, a.secret) || x.verifies(gotA, b.secret) || x.verifies(gotA, hookSecret) {
		t.Fatalf("callback A's delivery must verify with its secret only: %s", gotA.signature)
	}
	if !x.verifies(gotB, b.secret) || x.verifies(gotB, a.secret) || x.verifies(gotB, hookSecret) {
		t.Fatalf("callback B's delivery must verify with its secret only: %s", gotB.signature)
	}
	if !x.verifies(gotI, hookSecret) || x.verifies(gotI, a.secret) {
		t.Fatalf("the integration's delivery must verify with its secret only: %s", gotI.signature)
	}
	if err := webhook.Verify(gotA.signature, append(append([]byte(nil), gotA.body...), ' '), []byte(a.secret), x.clock(), 0); err == nil {
		t.Fatal("webhook.Verify accepted a changed body")
	}
	var body map[string]any
	if err := json.Unmarshal(gotA.body, &body); err != nil {
		t.Fatal(err)
	}
	for member, want := range map[string]any{"type": webhook.EventDecisionResolved, "org_id": orgID, "dossier_id": dossier1,
		"decision_id": d1.str("decision_id"), "evaluation_id": d1.str("evaluation_id"), "workflow_key": "ap.invoice",
		"decision_type": "PAYMENT", "mode": d1.str("mode"), "protocol_outcome": d1.str("outcome")} {
		if body[member] != want {
			t.Errorf("body %s = %v, want %v", member, body[member], want)
		}
	}

	// A decision of another workflow: to A and the integration, not to B.
	// Once A has it, its dispatch has committed: B's delivery would be in
	// B's log by now.
	d2 := x.decide(tok, `{"decision_type":"PAYMENT","workflow_key":"ap.other","amount":250}`)
	rvA.await(t, "callback A, decision 2", d2.str("dossier_id"))
	rvI.await(t, "the integration, decision 2", d2.str("dossier_id"))
	// The worker records a pass before it dispatches the next, so decision
	// 1's deliveries are recorded once decision 2's arrived.
	for name, c := range map[string]struct {
		id, delivery string
		n            int
	}{"A": {a.id, gotA.id, 2}, "B": {b.id, gotB.id, 1}} {
		log := x.hookLogOf(tok, c.id)
		i := slices.IndexFunc(log, func(d webhook.Delivery) bool { return d.DeliveryID == c.delivery })
		if len(log) != c.n || i < 0 || log[i].State != webhook.StateDelivered || log[i].Destination != webhook.CallbackPrefix+c.id ||
			len(log[i].Attempts) != 1 || log[i].Attempts[0].StatusCode != http.StatusOK {
			t.Fatalf("callback %s's delivery log: %+v; want %d deliveries, decision 1's delivered", name, log, c.n)
		}
	}
	if n := len(rvB.received()); n != 1 {
		t.Fatalf("callback B (ap.invoice only) got %d requests, want 1", n)
	}

	// A removed: 204 and gone; again, 404.
	del := x.do("DELETE", acPathWebhooks+"/"+a.id, tok, nil, nil).want(t, http.StatusNoContent)
	if len(del.Raw) != 0 {
		t.Fatalf("204 with a body: %s", del)
	}
	x.do("DELETE", acPathWebhooks+"/"+a.id, tok, nil, nil).wantProblem(t, http.StatusNotFound, "CALLBACK_NOT_FOUND")
	if ids, _ := x.hooks(tok); len(ids) != 1 || ids[0] != b.id {
		t.Fatalf("after removing A: %v", ids)
	}

	// The next ap.invoice decision: B and the integration get it; A's log
	// (its dispatch committed before B received it) has nothing new, and
	// neither has A's receiver.
	d3 := x.decide(tok, signinDecision)
	got3 := rvB.await(t, "callback B, decision 3", d3.str("dossier_id"))
	rvI.await(t, "the integration, decision 3", d3.str("dossier_id"))
	if !x.verifies(got3, b.secret) {
		t.Fatal("callback B's second delivery does not verify with its secret")
	}
	if log := x.hookLog(orgID, a.id); len(log) != 2 { // removed: only the engine reads its log
		t.Fatalf("the removed callback's log has %d deliveries, want its 2 from before the removal: %+v", len(log), log)
	}
	for _, d := range rvA.received() {
		if acHookDossier(t, d) == d3.str("dossier_id") {
			t.Fatal("the removed callback was sent a later decision")
		}
	}
	if n := len(rvA.received()); n != 2 {
		t.Fatalf("the removed callback got %d requests, want 2", n)
	}
	// Registered again (same URL): a new subscription with a new secret,
	// which gets only decisions made from now on.
	a2 := x.addHook(tok, `{"url":`+lit(a.url)+`}`)
	if a2.id == a.id || a2.secret == a.secret {
		t.Fatalf("re-registration reuses the removed callback's id or secret")
	}
	d4 := x.decide(tok, signinDecision)
	got4 := rvA.await(t, "callback A again, decision 4", d4.str("dossier_id"))
	if !x.verifies(got4, a2.secret) || x.verifies(got4, a.secret) {
		t.Fatal("the re-registered callback's delivery must verify with its new secret only")
	}
	rvB.await(t, "callback B, decision 4", d4.str("dossier_id"))
}

// Another workspace's automation credential neither sees nor removes the
// first one's callbacks (404, and they stay), registers the same URL as a
// callback of its own, and its decisions go to its own callbacks only. The
// limit is per workspace.
func TestAutomationWebhookTenantIsolation(t *testing.T) {
	t.Parallel()
	x := newACHookEnv(t)
	org1, tok1 := x.connect("first@example.com", "First")
	org2, tok2 := x.connect("second@example.com", "Second")
	rv1, rv2 := newACHookReceiver(t), newACHookReceiver(t)
	h1 := x.addHook(tok1, `{"url":`+lit(rv1.srv.URL+"/one")+`}`)

	if ids, _ := x.hooks(tok2, h1.secret); len(ids) != 0 {
		t.Fatalf("another workspace lists %v", ids)
	}
	x.do("DELETE", acPathWebhooks+"/"+h1.id, tok2, nil, nil).wantProblem(t, http.StatusNotFound, "CALLBACK_NOT_FOUND")
	x.do("DELETE", acPathWebhooks+"/"+strings.ToUpper(h1.id), tok1, nil, nil).wantProblem(t, http.StatusNotFound, "CALLBACK_NOT_FOUND")
	x.do("DELETE", acPathWebhooks+"/not-a-uuid", tok1, nil, nil).wantProblem(t, http.StatusNotFound, "CALLBACK_NOT_FOUND")
	if ids, _ := x.hooks(tok1); len(ids) != 1 || ids[0] != h1.id {
		t.Fatalf("after another workspace's delete: %v", ids)
	}
	// org1's plain keys: 403, the callback stays.
	plain1, _ := x.platformKey(org1, "decision:write", "decision:read")
	x.do("DELETE", acPathWebhooks+"/"+h1.id, plain1, nil, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	x.do("GET", acPathWebhooks, plain1, nil, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	if ids, _ := x.hooks(tok1); len(ids) != 1 || ids[0] != h1.id {
		t.Fatalf("after a plain key's delete: %v", ids)
	}

	// The same URL is org2's to register too, and org2 fills its limit.
	h2 := x.addHook(tok2, `{"url":`+lit(rv1.srv.URL+"/one")+`,"filter":{"workflow_keys":["nothing"]}}`)
	own := x.addHook(tok2, `{"url":`+lit(rv2.srv.URL+"/two")+`}`)
	for i := 2; i < webhook.MaxCallbacks; i++ {
		x.addHook(tok2, `{"url":`+lit(rv2.srv.URL+"/spare/"+string(rune('a'+i)))+`,"filter":{"workflow_keys":["nothing"]}}`)
	}
	x.do("POST", acPathWebhooks, tok2, `{"url":`+lit(rv2.srv.URL+"/one-more")+`}`, nil).
		wantProblem(t, http.StatusConflict, "CALLBACK_LIMIT_REACHED")
	if ids, _ := x.hooks(tok2); len(ids) != webhook.MaxCallbacks || ids[0] != h2.id || ids[1] != own.id {
		t.Fatalf("org2's callbacks: %v", ids)
	}
	// org1 is not limited by org2's callbacks.
	extra := x.addHook(tok1, `{"url":`+lit(rv1.srv.URL+"/extra")+`,"filter":{"workflow_keys":["nothing"]}}`)

	// org2's decision goes to its own callback; once it is there, the
	// dispatch has committed: nothing was queued for org1's callbacks.
	d := x.decide(tok2, signinDecision)
	got := rv2.await(t, "org2's callback", d.str("dossier_id"))
	if !x.verifies(got, own.secret) || x.verifies(got, h1.secret) {
		t.Fatal("org2's delivery must verify with its callback's secret only")
	}
	var body struct {
		OrgID string `json:"org_id"`
	}
	if err := json.Unmarshal(got.body, &body); err != nil || body.OrgID != org2 {
		t.Fatalf("org2's delivery names org %q: %v", body.OrgID, err)
	}
	for _, id := range []string{h1.id, extra.id} {
		if log := x.hookLog(org1, id); len(log) != 0 {
			t.Fatalf("org1's callback %s has deliveries of org2's decision: %+v", id, log)
		}
	}
	// org2's callback at org1's URL filters the decision out; org2's log
	// is not org1's to read.
	if log := x.hookLog(org2, h2.id); len(log) != 0 {
		t.Fatalf("org2's filtered callback has deliveries: %+v", log)
	}
	if log := x.hookLog(org1, own.id); len(log) != 0 {
		t.Fatalf("org2's callback's log read as org1's: %+v", log)
	}
	x.do("GET", acPathWebhooks+"/"+own.id+"/deliveries", tok1, nil, nil).wantProblem(t, http.StatusNotFound, "CALLBACK_NOT_FOUND")
	// org1's decision goes to org1's callback.
	d1 := x.decide(tok1, signinDecision)
	rv1.await(t, "org1's callback", d1.str("dossier_id"))
}

// Without --allow-private-destinations a callback URL is https to a public
// name or address: loopback, private, link-local, metadata and other
// forbidden addresses, local names and plain http are refused when it is
// registered, and nothing is registered.
func TestAutomationWebhookDestinationGuard(t *testing.T) {
	t.Parallel()
	x := newACEnv(t) // private destinations not allowed
	_, tok := x.connect("guard@example.com", "Guarded")
	for _, u := range []string{"http://example.com/hook", "https://127.0.0.1/hook", "https://[::1]/hook", "https://10.1.2.3/",
		"https://172.16.0.1/", "https://192.168.1.1/", "https://169.254.169.254/latest/meta-data", "https://100.64.0.1/",
		"https://0.0.0.0/", "https://[::ffff:127.0.0.1]/", "https://[fd00::1]/", "https://[fe80::1]/", "https://localhost/",
		"https://metadata.internal/", "https://intranet/", "https://printer.local/", "https://0x7f000001/", "https://2130706433/",
		"https://u:p@example.com/", "https://example.com@127.0.0.1/", "ftp://example.com/", "file:///etc/passwd",
		"https://example.com/#f", "//example.com/", "/relative", "example.com", ""} {
		r := x.do("POST", acPathWebhooks, tok, `{"url":`+lit(u)+`}`, nil).wantProblem(t, http.StatusBadRequest, "DESTINATION_FORBIDDEN")
		if f, _ := r.JSON["errors"].([]any); len(f) != 1 || lookup(f[0], "field") != "url" {
			t.Fatalf("%q: errors[] %s", u, r)
		}
	}
	x.do("POST", acPathWebhooks, tok, `{"url":`+lit("https://example.com/"+strings.Repeat("p", 2048))+`}`, nil).
		wantProblem(t, http.StatusBadRequest, "INVALID_CALLBACK")
	if ids, _ := x.hooks(tok); len(ids) != 0 {
		t.Fatalf("refused URLs were registered: %v", ids)
	}
	// A public https URL is good.
	x.addHook(tok, `{"url":"https://hooks.example.com/clearance"}`)
}

// Without a secrets key no signing secret can be kept: 503
// SECRETS_NOT_CONFIGURED, after the body is checked, and nothing is
// registered. Any org key with the automation scope takes the routes.
func TestAutomationWebhookWithoutSecretsKey(t *testing.T) {
	t.Parallel()
	x := newEnv(t, server.Options{})
	o := x.createOrg("Keyless")
	k := x.createKey(o, "automation")
	x.do("POST", acPathWebhooks, k, `{"url":"https://hooks.example.com/x"}`, nil).wantProblem(t, http.StatusServiceUnavailable, "SECRETS_NOT_CONFIGURED")
	x.do("POST", acPathWebhooks, k, `{"url":"https://hooks.example.com/x","filter":{"modes":["LIVE"]}}`, nil).
		wantProblem(t, http.StatusBadRequest, "INVALID_CALLBACK")
	r := x.do("GET", acPathWebhooks, k, nil, nil).want(t, http.StatusOK)
	if string(r.Raw) != "{\"webhooks\":[]}\n" {
		t.Fatalf("list: %s", r)
	}
}
