package server_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/webhook"
)

// fastRetries is the retry schedule of the webhook tests: three waits,
// moved past with the test clock.
var fastRetries = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}

// delivery is one request a receiver got.
type delivery struct {
	id, event, signature string
	body                 []byte
}

// receiver is a webhook endpoint on 127.0.0.1 that answers with the next
// status of its script (then the last one again) and records every
// request.
type receiver struct {
	srv *httptest.Server

	mu        sync.Mutex
	script    []int
	got       []delivery
	processed map[string]int // delivery id -> times processed (2xx answered)
}

func newReceiver(t *testing.T, script ...int) *receiver {
	rv := &receiver{script: script, processed: map[string]int{}}
	rv.srv = httptest.NewServer(rv.handler())
	t.Cleanup(rv.srv.Close)
	return rv
}

// newTLSReceiver is a receiver on https://127.0.0.1.
func newTLSReceiver(t *testing.T) *receiver {
	rv := &receiver{processed: map[string]int{}}
	rv.srv = httptest.NewTLSServer(rv.handler())
	t.Cleanup(rv.srv.Close)
	return rv
}

func (rv *receiver) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rv.mu.Lock()
		defer rv.mu.Unlock()
		d := delivery{id: r.Header.Get(webhook.HeaderDeliveryID), event: r.Header.Get(webhook.HeaderEvent),
			signature: r.Header.Get(webhook.HeaderSignature), body: body}
		rv.got = append(rv.got, d)
		status := http.StatusOK
		if len(rv.script) > 0 {
			status = rv.script[0]
			if len(rv.script) > 1 {
				rv.script = rv.script[1:]
			}
		}
		if status == http.StatusFound {
			w.Header().Set("Location", "http://127.0.0.1:1/elsewhere")
		}
		if status >= 200 && status < 300 {
			if rv.processed[d.id] == 0 { // a receiver processes a delivery id once
				rv.processed[d.id]++
			}
		}
		w.WriteHeader(status)
	})
}

func (rv *receiver) deliveries() []delivery {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return append([]delivery(nil), rv.got...)
}

func (rv *receiver) setScript(script ...int) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	rv.script = script
}

// hmacSignatures checks a signature header with its own HMAC code (not
// webhook.Verify): it returns the secrets whose v1 matches.
func hmacSignatures(t *testing.T, header string, body []byte, secrets ...string) []string {
	t.Helper()
	var ts string
	var v1 []string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			v1 = append(v1, v)
		}
	}
	if _, err := strconv.ParseInt(ts, 10, 64); err != nil || len(v1) == 0 {
		t.Fatalf("signature header %q is not t=…,v1=…", header)
	}
	var ok []string
	for _, s := range secrets {
		m := hmac.New(sha256.New, []byte(s))
		m.Write([]byte(ts + "."))
		m.Write(body)
		want := hex.EncodeToString(m.Sum(nil))
		for _, got := range v1 {
			if hmac.Equal([]byte(got), []byte(want)) {
				ok = append(ok, s)
			}
		}
	}
	return ok
}

const hookSecret = "whsec-test-secret-0123456789"

// newHookEnv is an execEnv whose engine can store signing secrets, reach
// loopback receivers and retries on fastRetries; the test drives the
// worker (Dispatch, Deliver) and its clock.
func newHookEnv(t *testing.T) *execEnv {
	return newExecEnvWith(t, bandsBundle, func(x *execEnv) {
		x.secretsKey = testSecretsKey
		x.tune = func(o *clearance.Options) {
			o.AllowPrivateDestinations = true
			o.Webhooks = webhook.WorkerOptions{Retries: fastRetries}
		}
	})
}

func hooksPath(orgID string) string { return "/v1/orgs/" + orgID + "/integrations/WEBHOOK" }

func connectBody(url, secret, subs string) string {
	b := `{"config":{"endpoint_url":` + strconv.Quote(url) + `,"provider_name":"test receiver"}`
	if secret != "" {
		b += `,"credentials":{"webhook_secret":` + strconv.Quote(secret) + `}`
	}
	if subs != "" {
		b += `,"subscriptions":` + subs
	}
	return b + "}"
}

// work runs the dispatcher (which makes the first attempts) and one pass
// over the due deliveries, as the worker would: it returns the events
// dispatched and the attempts made, as the Service's counters saw them.
func work(t *testing.T, x *execEnv) (dispatched, attempted int) {
	t.Helper()
	before := x.engine.Webhooks.Stats()
	d, err := x.engine.Webhooks.Dispatch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.engine.Webhooks.Deliver(t.Context()); err != nil {
		t.Fatal(err)
	}
	return d, int(attempts(x.engine.Webhooks.Stats()) - attempts(before))
}

func attempts(s webhook.Stats) int64 { return s.Delivered + s.FailedAttempts + s.Dropped }

func (x *execEnv) deliveryLog(t *testing.T, key string) []webhook.Delivery {
	t.Helper()
	r := x.req(t, "GET", hooksPath(x.o.ID)+"/deliveries", key, nil, nil).want(t, http.StatusOK)
	var out struct{ Deliveries []webhook.Delivery }
	if err := json.Unmarshal(r.Raw, &out); err != nil {
		t.Fatal(err)
	}
	return out.Deliveries
}

func TestWebhookDeliversSignedDecisionResolved(t *testing.T) {
	t.Parallel()
	x := newHookEnv(t)
	rv := newReceiver(t)
	in := x.req(t, "POST", hooksPath(x.o.ID)+"/connect", x.o.Key, connectBody(rv.srv.URL+"/hook", hookSecret, ""), nil).want(t, http.StatusCreated)
	if strings.Contains(string(in.Raw), hookSecret) || in.num("signing.active_secrets") != 1 || in.str("subscriptions.0.event_name") != "decision.resolved" {
		t.Fatalf("connect answer: %s", in)
	}
	dec := x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":20000,"workflow_key":"payouts","decision_type":"PAYOUT"}`,
		map[string]string{"Idempotency-Key": "evt-1"}).want(t, http.StatusOK)
	// A replay commits nothing, so it owes no event; nor does enforce-and-bind.
	x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":20000,"workflow_key":"payouts","decision_type":"PAYOUT"}`,
		map[string]string{"Idempotency-Key": "evt-1"}).want(t, http.StatusOK)
	x.grantFor(t, intentSpec{})
	if d, a := work(t, x); d != 1 || a != 1 {
		t.Fatalf("dispatched %d events and attempted %d deliveries, want 1 and 1", d, a)
	}
	got := rv.deliveries()
	if len(got) != 1 {
		t.Fatalf("receiver got %d requests, want 1", len(got))
	}
	d := got[0]
	if d.event != "decision.resolved" || d.id == "" {
		t.Fatalf("headers: event %q, delivery id %q", d.event, d.id)
	}
	if ok := hmacSignatures(t, d.signature, d.body, hookSecret); len(ok) != 1 {
		t.Fatalf("the signature %q does not verify with an independent HMAC", d.signature)
	}
	if err := webhook.Verify(d.signature, d.body, []byte(hookSecret), x.clock(), 0); err != nil {
		t.Fatalf("webhook.Verify: %v", err)
	}
	if err := webhook.Verify(d.signature, append(d.body, ' '), []byte(hookSecret), x.clock(), 0); err == nil {
		t.Fatal("webhook.Verify accepted a changed body")
	}
	if err := webhook.Verify(d.signature, d.body, []byte(hookSecret), x.clock().Add(6*time.Minute), 0); err == nil {
		t.Fatal("webhook.Verify accepted a signature 6 minutes old")
	}
	var body map[string]any
	if err := json.Unmarshal(d.body, &body); err != nil {
		t.Fatal(err)
	}
	for member, want := range map[string]any{"type": "decision.resolved", "org_id": x.o.ID, "dossier_id": dec.str("dossier_id"),
		"decision_id": dec.str("decision_id"), "evaluation_id": dec.str("evaluation_id"), "event_id": dec.str("evaluation_id"),
		"idempotency_key": "evt-1", "protocol_outcome": "BLOCK", "mode": "ENFORCEMENT", "workflow_key": "payouts",
		"decision_type": "PAYOUT", "reconciliation_status": "NOT_REQUIRED", "occurred_at": dec.str("created_at"),
		"dossier_digest": dec.str("dossier_digest"), "ledger_seq": dec.num("ledger_seq"), "dossier_url": dec.str("dossier_url"),
		"policy_version": dec.str("policy_snapshot.policy_version")} {
		if body[member] != want {
			t.Errorf("body %s = %v, want %v", member, body[member], want)
		}
	}
	log := x.deliveryLog(t, x.o.Key)
	if len(log) != 1 || log[0].DeliveryID != d.id || log[0].State != webhook.StateDelivered || len(log[0].Attempts) != 1 ||
		log[0].Attempts[0].StatusCode != 200 {
		t.Fatalf("delivery log: %+v", log)
	}
	// Nothing more is owed.
	if d, a := work(t, x); d != 0 || a != 0 || len(rv.deliveries()) != 1 {
		t.Fatalf("a second pass dispatched %d and attempted %d", d, a)
	}
}

func TestWebhookRetriesWithTheSameDeliveryID(t *testing.T) {
	t.Parallel()
	x := newHookEnv(t)
	rv := newReceiver(t, 500, 503, 404, 200)
	x.req(t, "POST", hooksPath(x.o.ID)+"/connect", x.o.Key, connectBody(rv.srv.URL, hookSecret, ""), nil).want(t, http.StatusCreated)
	x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":5}`, nil).want(t, http.StatusOK)
	work(t, x)
	for i, wait := range fastRetries {
		if n := len(rv.deliveries()); n != i+1 {
			t.Fatalf("after attempt %d the receiver got %d requests", i+1, n)
		}
		log := x.deliveryLog(t, x.o.Key)
		if log[0].State != webhook.StateRetrying || log[0].NextAttemptAt == "" {
			t.Fatalf("after a failed attempt: %+v", log[0])
		}
		// Not due before the schedule's wait (less its jitter).
		x.advance(wait * 3 / 4)
		if _, a := work(t, x); a != 0 {
			t.Fatalf("attempt %d came before its wait", i+2)
		}
		x.advance(wait/2 + time.Millisecond)
		work(t, x)
	}
	got := rv.deliveries()
	if len(got) != 4 {
		t.Fatalf("receiver got %d requests, want 4", len(got))
	}
	for _, d := range got {
		if d.id != got[0].id {
			t.Fatalf("delivery ids differ across retries: %q, %q", got[0].id, d.id)
		}
		if string(d.body) != string(got[0].body) {
			t.Fatal("the body changed across retries")
		}
	}
	if rv.processed[got[0].id] != 1 {
		t.Fatalf("processed %d times", rv.processed[got[0].id])
	}
	log := x.deliveryLog(t, x.o.Key)
	if log[0].State != webhook.StateDelivered || len(log[0].Attempts) != 4 || log[0].Attempts[2].StatusCode != 404 {
		t.Fatalf("delivery log: %+v", log[0])
	}
}

func TestWebhookDeadLetterAndRedelivery(t *testing.T) {
	t.Parallel()
	x := newHookEnv(t)
	rv := newReceiver(t, http.StatusFound) // a redirect is a failure, never followed
	x.req(t, "POST", hooksPath(x.o.ID)+"/connect", x.o.Key, connectBody(rv.srv.URL, hookSecret, ""), nil).want(t, http.StatusCreated)
	x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":5}`, nil).want(t, http.StatusOK)
	work(t, x)
	for _, wait := range fastRetries {
		x.advance(wait * 2)
		work(t, x)
	}
	if n := len(rv.deliveries()); n != len(fastRetries)+1 {
		t.Fatalf("receiver got %d requests, want %d", n, len(fastRetries)+1)
	}
	log := x.deliveryLog(t, x.o.Key)
	if log[0].State != webhook.StateDeadLettered || len(log[0].Attempts) != 4 || !strings.Contains(log[0].Attempts[3].Error, "redirect not followed") {
		t.Fatalf("delivery log: %+v", log[0])
	}
	x.advance(time.Hour)
	if _, a := work(t, x); a != 0 {
		t.Fatal("a dead-lettered delivery was attempted again")
	}
	dead := x.req(t, "GET", hooksPath(x.o.ID)+"/deliveries?state=dead_lettered", x.o.Key, nil, nil).want(t, http.StatusOK)
	if dead.str("deliveries.0.delivery_id") != log[0].DeliveryID {
		t.Fatalf("state filter: %s", dead)
	}
	id := log[0].DeliveryID
	// Redelivery: the same id, a new series of attempts.
	rv.setScript(200)
	x.req(t, "POST", hooksPath(x.o.ID)+"/deliveries/"+id+"/redeliver", x.o.Key, `{}`, nil).want(t, http.StatusAccepted)
	x.req(t, "POST", hooksPath(x.o.ID)+"/deliveries/"+id+"/redeliver", x.o.Key, `{}`, nil).wantProblem(t, http.StatusConflict, "DELIVERY_IN_PROGRESS")
	work(t, x)
	got := rv.deliveries()
	if last := got[len(got)-1]; last.id != id || rv.processed[id] != 1 {
		t.Fatalf("redelivery: id %q, processed %d", last.id, rv.processed[id])
	}
	log = x.deliveryLog(t, x.o.Key)
	if log[0].State != webhook.StateDelivered || log[0].Redeliveries != 1 || len(log[0].Attempts) != 5 {
		t.Fatalf("after redelivery: %+v", log[0])
	}
}

func TestWebhookFiltersAndSecretRotation(t *testing.T) {
	t.Parallel()
	x := newHookEnv(t)
	rv := newReceiver(t)
	subs := `[{"event_name":"decisioning.v2.ran","is_enabled":true,"filter":{"outcomes":["BLOCK","ESCALATE"]}},
		{"event_name":"decision.resolved","is_enabled":false,"filter":{}}]`
	x.req(t, "POST", hooksPath(x.o.ID)+"/connect", x.o.Key, connectBody(rv.srv.URL, hookSecret, subs), nil).want(t, http.StatusCreated)
	x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":5}`, nil).want(t, http.StatusOK)     // ALLOW: filtered out
	x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":2000}`, nil).want(t, http.StatusOK)  // ESCALATE
	x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":20000}`, nil).want(t, http.StatusOK) // BLOCK
	if d, a := work(t, x); d != 3 || a != 2 {
		t.Fatalf("dispatched %d, attempted %d; want 3 and 2", d, a)
	}
	for _, d := range rv.deliveries() {
		var b struct {
			Outcome string `json:"protocol_outcome"`
		}
		_ = json.Unmarshal(d.body, &b)
		if b.Outcome == "ALLOW" {
			t.Fatal("an ALLOW decision passed a BLOCK/ESCALATE filter")
		}
	}
	// A new secret: both sign while the old one is honoured, then the new one alone.
	const next = "whsec-the-next-secret-abcdefgh"
	up := x.req(t, "POST", hooksPath(x.o.ID)+"/connect", x.o.Key, connectBody(rv.srv.URL, next, ""), nil).want(t, http.StatusOK)
	if up.num("signing.active_secrets") != 2 || up.str("signing.previous_secret_expires_at") == "" || up.str("subscriptions.0.event_name") != "decisioning.v2.ran" {
		t.Fatalf("rotation answer: %s", up)
	}
	x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":20000}`, nil).want(t, http.StatusOK)
	work(t, x)
	got := rv.deliveries()
	if ok := hmacSignatures(t, got[len(got)-1].signature, got[len(got)-1].body, hookSecret, next); len(ok) != 2 {
		t.Fatalf("during rotation the signatures verify with %v, want both secrets", ok)
	}
	x.advance(webhook.DefaultRotation + time.Second)
	x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":20000}`, nil).want(t, http.StatusOK)
	work(t, x)
	got = rv.deliveries()
	if ok := hmacSignatures(t, got[len(got)-1].signature, got[len(got)-1].body, hookSecret, next); len(ok) != 1 || ok[0] != next {
		t.Fatalf("after rotation the signatures verify with %v, want the new secret only", ok)
	}
	// Every subscription disabled: decisions owe nothing, and write no
	// event; enabled again, they do.
	off := `[{"event_name":"decision.resolved","is_enabled":false,"filter":{}}]`
	x.req(t, "POST", hooksPath(x.o.ID)+"/connect", x.o.Key, connectBody(rv.srv.URL, "", off), nil).want(t, http.StatusOK)
	x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":20000}`, nil).want(t, http.StatusOK)
	if d, a := work(t, x); d != 0 || a != 0 {
		t.Fatalf("with every subscription disabled: dispatched %d, attempted %d; want nothing", d, a)
	}
	on := `[{"event_name":"decision.resolved","is_enabled":true,"filter":{}}]`
	x.req(t, "POST", hooksPath(x.o.ID)+"/connect", x.o.Key, connectBody(rv.srv.URL, "", on), nil).want(t, http.StatusOK)
	x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":20000}`, nil).want(t, http.StatusOK)
	if d, a := work(t, x); d != 1 || a != 1 {
		t.Fatalf("enabled again: dispatched %d, attempted %d; want 1 and 1", d, a)
	}
	// Deleted: the org's decisions write no event any more, nothing more is
	// delivered, and the integration is gone.
	x.req(t, "DELETE", hooksPath(x.o.ID), x.o.Key, nil, nil).want(t, http.StatusNoContent)
	x.req(t, "GET", hooksPath(x.o.ID), x.o.Key, nil, nil).wantProblem(t, http.StatusNotFound, "INTEGRATION_NOT_FOUND")
	before := len(rv.deliveries())
	x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":20000}`, nil).want(t, http.StatusOK)
	if d, a := work(t, x); d != 0 || a != 0 || len(rv.deliveries()) != before {
		t.Fatalf("after delete: dispatched %d, attempted %d; want nothing", d, a)
	}
}

func TestWebhookTenantIsolation(t *testing.T) {
	t.Parallel()
	x := newHookEnv(t)
	rv := newReceiver(t)
	x.req(t, "POST", hooksPath(x.o.ID)+"/connect", x.o.Key, connectBody(rv.srv.URL, hookSecret, ""), nil).want(t, http.StatusCreated)
	x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":5}`, nil).want(t, http.StatusOK)
	work(t, x)
	id := x.deliveryLog(t, x.o.Key)[0].DeliveryID
	b := x.createOrg("Other")
	// Org b's key cannot reach org a's integration, and has none of its own.
	x.req(t, "GET", hooksPath(x.o.ID), b.Key, nil, nil).wantProblem(t, http.StatusForbidden, "ORG_MISMATCH")
	x.req(t, "DELETE", hooksPath(x.o.ID), b.Key, nil, nil).wantProblem(t, http.StatusForbidden, "ORG_MISMATCH")
	x.req(t, "GET", hooksPath(b.ID), b.Key, nil, nil).wantProblem(t, http.StatusNotFound, "INTEGRATION_NOT_FOUND")
	x.req(t, "POST", hooksPath(b.ID)+"/connect", b.Key, connectBody(rv.srv.URL, hookSecret, ""), nil).want(t, http.StatusCreated)
	x.req(t, "POST", hooksPath(b.ID)+"/deliveries/"+id+"/redeliver", b.Key, `{}`, nil).wantProblem(t, http.StatusNotFound, "DELIVERY_NOT_FOUND")
	// Org b's decisions go to org b's integration only.
	before := len(rv.deliveries())
	x.req(t, "POST", pathEvaluate, b.Key, `{"amount":5}`, nil).want(t, http.StatusOK)
	work(t, x)
	got := rv.deliveries()
	if len(got) != before+1 || !strings.Contains(string(got[len(got)-1].body), b.ID) {
		t.Fatalf("org b's event: %d deliveries", len(got)-before)
	}
	// A key without integration:write is refused.
	reader := x.createKey(x.o, "decision:read")
	x.req(t, "GET", hooksPath(x.o.ID), reader, nil, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
}

// Without --allow-private-destinations every forbidden class of
// destination is refused when it is registered, and when a delivery dials
// (an endpoint registered while private destinations were allowed).
func TestWebhookDestinationGuard(t *testing.T) {
	t.Parallel()
	// Private destinations not allowed.
	x := newExecEnvWith(t, bandsBundle, func(x *execEnv) { x.secretsKey = testSecretsKey })
	for _, u := range []string{"http://example.com/hook", "https://127.0.0.1/hook", "https://[::1]/hook", "https://10.1.2.3/",
		"https://172.16.0.1/", "https://192.168.1.1/", "https://169.254.169.254/latest/meta-data", "https://100.64.0.1/",
		"https://224.0.0.1/", "https://0.0.0.0/", "https://[::ffff:127.0.0.1]/", "https://[64:ff9b::a00:1]/", "https://[2002:7f00:1::]/",
		"https://[fd00::1]/", "https://[fe80::1]/", "https://localhost/", "https://metadata.internal/", "https://intranet/",
		"https://user:pw@example.com/", "ftp://example.com/", "file:///etc/passwd", "https://0x7f000001/", "https://2130706433/"} {
		x.req(t, "POST", hooksPath(x.o.ID)+"/connect", x.o.Key, connectBody(u, hookSecret, ""), nil).
			wantProblem(t, http.StatusBadRequest, "DESTINATION_FORBIDDEN")
	}
	x.req(t, "GET", hooksPath(x.o.ID), x.o.Key, nil, nil).wantProblem(t, http.StatusNotFound, "INTEGRATION_NOT_FOUND")

	// Registered by an engine that allows loopback; delivered by one that
	// does not: the dial is refused and the receiver never reached.
	rv := newTLSReceiver(t)
	permissive, err := clearance.Open(x.store, clearance.Options{Now: x.clock, SecretsKey: testSecretsKey, AllowPrivateDestinations: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := permissive.Webhooks.Connect(t.Context(), x.o.ID, []byte(connectBody(rv.srv.URL, hookSecret, ""))); err != nil {
		t.Fatal(err)
	}
	x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":5}`, nil).want(t, http.StatusOK)
	work(t, x)
	if n := len(rv.deliveries()); n != 0 {
		t.Fatalf("a loopback receiver was reached %d times without --allow-private-destinations", n)
	}
	log := x.deliveryLog(t, x.o.Key)
	if len(log) != 1 || log[0].State != webhook.StateRetrying || !strings.Contains(log[0].Attempts[0].Error, "blocked") {
		t.Fatalf("delivery log: %+v", log)
	}
}

// A delivery waiting for its retry when the integration is deleted ends
// dropped at its next attempt, and nothing more is sent.
func TestWebhookDeletedIntegrationDropsItsRetries(t *testing.T) {
	t.Parallel()
	x := newHookEnv(t)
	rv := newReceiver(t, 500)
	x.req(t, "POST", hooksPath(x.o.ID)+"/connect", x.o.Key, connectBody(rv.srv.URL, hookSecret, ""), nil).want(t, http.StatusCreated)
	x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":5}`, nil).want(t, http.StatusOK)
	if d, a := work(t, x); d != 1 || a != 1 || x.deliveryLog(t, x.o.Key)[0].State != webhook.StateRetrying {
		t.Fatalf("first attempt: dispatched %d, attempted %d", d, a)
	}
	day := x.deliveryLog(t, x.o.Key)[0].OccurredAt[:10]
	x.req(t, "DELETE", hooksPath(x.o.ID), x.o.Key, nil, nil).want(t, http.StatusNoContent)
	before := x.engine.Webhooks.Stats().Dropped
	x.advance(fastRetries[0] * 2)
	if _, a := work(t, x); a != 1 || x.engine.Webhooks.Stats().Dropped != before+1 {
		t.Fatalf("the retry after the delete: %d attempts, %d dropped", a, x.engine.Webhooks.Stats().Dropped-before)
	}
	if n := len(rv.deliveries()); n != 1 {
		t.Fatalf("the receiver got %d requests, want only the first", n)
	}
	// Reconnected: the log shows the delivery dropped, and it is not retried.
	x.req(t, "POST", hooksPath(x.o.ID)+"/connect", x.o.Key, connectBody(rv.srv.URL, hookSecret, ""), nil).want(t, http.StatusCreated)
	r := x.req(t, "GET", hooksPath(x.o.ID)+"/deliveries?day="+day, x.o.Key, nil, nil).want(t, http.StatusOK)
	if r.str("deliveries.0.state") != webhook.StateDropped {
		t.Fatalf("log after the delete: %s", r)
	}
	x.advance(time.Hour)
	if _, a := work(t, x); a != 0 {
		t.Fatalf("a dropped delivery was attempted again (%d)", a)
	}
}

// metricValue reads an unlabelled metric of a /metrics page; -2 when
// the page has none.
func metricValue(page, name string) float64 {
	for _, line := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return -2
}

// The delivery worker's counters and the backlog are on /metrics.
func TestWebhookMetrics(t *testing.T) {
	t.Parallel()
	x := newHookEnv(t)
	rv := newReceiver(t, 503, 200)
	x.req(t, "POST", hooksPath(x.o.ID)+"/connect", x.o.Key, connectBody(rv.srv.URL, hookSecret, ""), nil).want(t, http.StatusCreated)
	x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":5}`, nil).want(t, http.StatusOK)
	want := func(stage string, values map[string]float64) {
		t.Helper()
		page := x.metrics()
		for name, v := range values {
			if got := metricValue(page, name); got != v {
				t.Errorf("%s: %s = %v, want %v", stage, name, got, v)
			}
		}
	}
	want("before dispatch", map[string]float64{"clearance_webhook_backlog": 1, "clearance_webhook_events_dispatched_total": 0})
	work(t, x)
	want("after a failed attempt", map[string]float64{"clearance_webhook_backlog": 0,
		"clearance_webhook_events_dispatched_total": 1, "clearance_webhook_attempts_failed_total": 1,
		"clearance_webhook_deliveries_delivered_total": 0})
	x.advance(fastRetries[0] * 2)
	want("retry due", map[string]float64{"clearance_webhook_backlog": 1})
	work(t, x)
	want("delivered", map[string]float64{"clearance_webhook_backlog": 0, "clearance_webhook_deliveries_delivered_total": 1,
		"clearance_webhook_attempts_failed_total": 1, "clearance_webhook_deliveries_dead_lettered_total": 0,
		"clearance_webhook_deliveries_dropped_total": 0})
}
