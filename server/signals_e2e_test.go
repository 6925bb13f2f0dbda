package server_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance/signals"
)

const (
	pathSignalConnectors = "/v1/signals/connectors"
	pathSignalWebhooks   = "/v1/signals/webhooks/"
)

// testSecretsKey seals the secrets of signing connectors in tests.
var testSecretsKey = []byte("signals-test-secrets-key-32-bytes!!")

// fraudBundle blocks while the latest fraud.alert says high, and allows
// otherwise.
const fraudBundle = `{"bundle_id":"sig","version":"v1","mode":"ENFORCEMENT","rules":[
 {"id":"fraud","match":[{"field":"signals.fraud.alert.data.level","op":"eq","value":"high"}],"outcome":"BLOCK","reason_codes":["FRAUD_ALERT"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`

func newSignalEnv(t testing.TB, bundle string) *execEnv {
	t.Helper()
	return newExecEnvWith(t, bundle, func(x *execEnv) { x.secretsKey = testSecretsKey })
}

// connector makes a connector of key's org and returns its id and secret.
func (x *execEnv) connector(t testing.TB, key string, signed bool) (id, secret string) {
	t.Helper()
	r := x.req(t, "POST", pathSignalConnectors, key, map[string]any{"name": "fraud feed", "require_signature": signed}, nil).
		want(t, http.StatusCreated)
	id, secret = r.str("connector_id"), r.str("webhook_secret")
	if !strings.HasPrefix(secret, "whsec_") || r.str("webhook_path") != pathSignalWebhooks+id || r.str("status") != "ACTIVE" {
		t.Fatalf("connector: %s", r)
	}
	return id, secret
}

// deliver posts events to a connector with its secret (and more headers).
func (x *execEnv) deliver(t testing.TB, id, secret, body string, headers map[string]string) *result {
	t.Helper()
	h := map[string]string{"X-Webhook-Secret": secret}
	for k, v := range headers {
		h[k] = v
	}
	return x.req(t, "POST", pathSignalWebhooks+id, "", body, h)
}

func fraudEvent(level string, at time.Time) string {
	return fmt.Sprintf(`{"events":[{"type":"fraud.alert","timestamp":%q,"data":{"level":%q}}]}`, at.Format(time.RFC3339), level)
}

// sign returns the Standard Webhooks headers of body.
func sign(secret, id string, at time.Time, body string) map[string]string {
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "." + body))
	return map[string]string{"Webhook-Id": id, "Webhook-Timestamp": ts,
		"Webhook-Signature": "v1,bm90IGl0 v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))}
}

func TestSignalChangesDecisionAndStalesClaim(t *testing.T) {
	t.Parallel()
	x := newSignalEnv(t, fraudBundle)
	id, secret := x.connector(t, x.o.Key, false)

	before := x.decide(x.o.Key, `{"amount":5}`)
	if before.str("outcome") != "ALLOW" {
		t.Fatalf("without signals: %s", before)
	}
	dossier := x.req(t, "GET", before.str("dossier_url"), x.o.Key, nil, nil).want(t, http.StatusOK)
	if strings.Contains(string(dossier.Raw), `"signals"`) {
		t.Fatalf("a decision without signals records some: %s", dossier)
	}
	g := x.grantFor(t, intentSpec{amount: 5}) // bound while no alert stands

	now := x.clock()
	r := x.deliver(t, id, secret, fraudEvent("high", now.Add(-time.Minute)), nil).want(t, http.StatusAccepted)
	if r.str("status") != "accepted" || r.num("events") != 1 {
		t.Fatalf("delivery: %s", r)
	}
	after := x.decide(x.o.Key, `{"amount":5}`)
	if after.str("outcome") != "BLOCK" || !strings.Contains(strings.Join(after.strs("reason_codes"), ","), "FRAUD_ALERT") {
		t.Fatalf("with a high alert: %s", after)
	}
	dossier = x.req(t, "GET", after.str("dossier_url"), x.o.Key, nil, nil).want(t, http.StatusOK)
	used, _ := lookup(dossier.JSON, "body.signals").([]any)
	if used == nil {
		used, _ = lookup(dossier.JSON, "signals").([]any)
	}
	if len(used) != 1 {
		t.Fatalf("the dossier records %d signals: %s", len(used), dossier)
	}
	sg := used[0].(map[string]any)
	if sg["type"] != "fraud.alert" || !strings.HasPrefix(fmt.Sprint(sg["data_digest"]), "sha256:") || sg["event_id"] == "" {
		t.Fatalf("recorded signal: %v", sg)
	}

	// The grant bound before the alert: its claim resolves the signals again.
	c := x.claim(t, pathClaim, g.token, g.hash).want(t, http.StatusConflict)
	if c.str("code") != "STALE_AUTHORIZATION" || lookup(c.JSON, "should_execute") != false {
		t.Fatalf("a stale claim authorizes: %s", c)
	}

	// A newer low alert replaces it; an older high one arriving late does not.
	x.deliver(t, id, secret, fraudEvent("low", now), nil).want(t, http.StatusAccepted)
	x.deliver(t, id, secret, fraudEvent("high", now.Add(-30*time.Second)), nil).want(t, http.StatusAccepted)
	if r := x.decide(x.o.Key, `{"amount":5}`); r.str("outcome") != "ALLOW" {
		t.Fatalf("after a newer low alert and a late high one: %s", r)
	}
	g2 := x.grantFor(t, intentSpec{amount: 5})
	x.claimed(t, g2)
	x.ledgerOK(t)
}

func TestSignalSecretFailuresAreAlike(t *testing.T) {
	t.Parallel()
	x := newSignalEnv(t, fraudBundle)
	id, secret := x.connector(t, x.o.Key, false)
	revoked, revokedSecret := x.connector(t, x.o.Key, false)
	x.req(t, "DELETE", pathSignalConnectors+"/"+revoked, x.o.Key, nil, nil).want(t, http.StatusOK)
	body := fraudEvent("high", x.clock())
	head := x.head(x.o.Key)

	cases := map[string]*result{
		"unknown connector": x.deliver(t, unknownID, secret, body, nil),
		"malformed id":      x.deliver(t, "not-a-uuid", secret, body, nil),
		"revoked connector": x.deliver(t, revoked, revokedSecret, body, nil),
		"missing header":    x.deliver(t, id, "", body, map[string]string{"X-Webhook-Secret": ""}),
		"wrong secret":      x.deliver(t, id, secret+"x", body, nil),
		"other's secret":    x.deliver(t, id, revokedSecret, body, nil),
		"empty body too":    x.deliver(t, id, "wrong", "", nil),
	}
	dup, err := http.NewRequest("POST", x.srv.URL+pathSignalWebhooks+id, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	dup.Header["X-Webhook-Secret"] = []string{secret, secret}
	dup.Header.Set("Content-Type", "application/json")
	cases["repeated header"] = x.roundTrip(t, dup)

	var first string
	for name, r := range cases {
		r.wantProblem(t, http.StatusUnauthorized, signals.CodeWebhookSecretInvalid)
		if d := r.str("code") + "|" + r.str("detail") + "|" + r.str("title"); first == "" {
			first = d
		} else if d != first {
			t.Errorf("%s: answered %q, another case %q", name, d, first)
		}
	}
	if h := x.head(x.o.Key); h != head {
		t.Fatalf("refused deliveries wrote to the ledger: %d -> %d", head, h)
	}
	if r := x.decide(x.o.Key, `{"amount":5}`); r.str("outcome") != "ALLOW" {
		t.Fatalf("a refused delivery changed the decision: %s", r)
	}
}

func TestSignalSignedDeliveriesOnceAndFresh(t *testing.T) {
	t.Parallel()
	x := newSignalEnv(t, fraudBundle)
	id, secret := x.connector(t, x.o.Key, true)
	now := x.clock()
	body := fraudEvent("low", now)

	x.deliver(t, id, secret, body, nil).wantProblem(t, http.StatusUnauthorized, signals.CodeSignatureInvalid)
	bad := sign(secret, "msg_1", now, body)
	bad["Webhook-Signature"] = "v1," + base64.StdEncoding.EncodeToString(make([]byte, 32))
	x.deliver(t, id, secret, body, bad).wantProblem(t, http.StatusUnauthorized, signals.CodeSignatureInvalid)
	x.deliver(t, id, secret, body+" ", sign(secret, "msg_1", now, body)).wantProblem(t, http.StatusUnauthorized, signals.CodeSignatureInvalid)
	for _, at := range []time.Time{now.Add(-6 * time.Minute), now.Add(6 * time.Minute)} {
		x.deliver(t, id, secret, body, sign(secret, "msg_1", at, body)).
			wantProblem(t, http.StatusUnauthorized, signals.CodeTimestampOutOfTolerance)
	}
	// The signature does not replace the secret.
	x.deliver(t, id, "whsec_wrong", body, sign(secret, "msg_1", now, body)).
		wantProblem(t, http.StatusUnauthorized, signals.CodeWebhookSecretInvalid)

	head := x.head(x.o.Key)
	first := x.deliver(t, id, secret, body, sign(secret, "msg_1", now.Add(-4*time.Minute), body)).want(t, http.StatusAccepted)
	if x.head(x.o.Key) != head+1 {
		t.Fatal("an accepted delivery is not one ledger entry")
	}
	again := x.deliver(t, id, secret, body, sign(secret, "msg_1", now, body)).want(t, http.StatusOK)
	if again.str("status") != "duplicate" || again.str("delivery_id") != first.str("delivery_id") || again.num("events") != 0 {
		t.Fatalf("replay: %s (first %s)", again, first)
	}
	if x.head(x.o.Key) != head+1 {
		t.Fatal("a replayed delivery was stored again")
	}
	high := fraudEvent("high", now)
	x.deliver(t, id, secret, high, sign(secret, "msg_1", now, high)).want(t, http.StatusOK) // same id, other body: still once
	if r := x.decide(x.o.Key, `{"amount":5}`); r.str("outcome") != "ALLOW" {
		t.Fatalf("a replayed webhook-id changed the signals: %s", r)
	}
}

// N concurrent deliveries of one webhook-id: exactly one is stored.
func TestSignalConcurrentReplaysStoredOnce(t *testing.T) {
	t.Parallel()
	x := newSignalEnv(t, fraudBundle)
	id, secret := x.connector(t, x.o.Key, true)
	body := fraudEvent("high", x.clock())
	h := sign(secret, "msg_race", x.clock(), body)
	h["X-Webhook-Secret"] = secret
	head := x.head(x.o.Key)
	const n = 12
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := x.send("POST", pathSignalWebhooks+id, "", body, h)
			if err != nil {
				t.Error(err)
				return
			}
			statuses[i] = r.Status
		}()
	}
	wg.Wait()
	accepted := 0
	for _, s := range statuses {
		switch s {
		case http.StatusAccepted:
			accepted++
		case http.StatusOK:
		default:
			t.Errorf("status %d", s)
		}
	}
	if accepted != 1 || x.head(x.o.Key) != head+1 {
		t.Fatalf("%d deliveries accepted, ledger %d -> %d; want exactly one", accepted, head, x.head(x.o.Key))
	}
}

func TestSignalBadBodiesStoreNothing(t *testing.T) {
	t.Parallel()
	x := newSignalEnv(t, fraudBundle)
	id, secret := x.connector(t, x.o.Key, false)
	now := x.clock().Format(time.RFC3339)
	many := make([]string, signals.MaxEvents+1)
	for i := range many {
		many[i] = `{"type":"a","timestamp":"` + now + `","data":{}}`
	}
	cases := []struct{ body, code string }{
		{`{"events":[]}`, signals.CodeInvalidBatch},
		{`{}`, signals.CodeInvalidBatch},
		{`{"events":[` + strings.Join(many, ",") + `]}`, signals.CodeInvalidBatch},
		{`{"events":[{"type":"bad type","timestamp":"` + now + `","data":{}}]}`, signals.CodeInvalidType},
		{`{"events":[{"type":"","timestamp":"` + now + `","data":{}}]}`, signals.CodeInvalidType},
		{`{"events":[{"type":"a","timestamp":"yesterday","data":{}}]}`, signals.CodeInvalidTimestamp},
		{`{"events":[{"type":"a","timestamp":"2026-01-01T00:00:00","data":{}}]}`, signals.CodeInvalidTimestamp},
		{`{"events":[{"type":"a","timestamp":"` + x.clock().Add(time.Hour).Format(time.RFC3339) + `","data":{}}]}`, signals.CodeInvalidTimestamp},
		{`{"events":[{"type":"a","timestamp":"` + now + `","data":[1]}]}`, signals.CodeInvalidData},
		{`{"events":[{"type":"a","timestamp":"` + now + `","data":null}]}`, signals.CodeInvalidData},
		{`{"events":[{"type":"a","timestamp":"` + now + `"}]}`, signals.CodeInvalidData},
		{`{"events":[{"type":"a","timestamp":"` + now + `","data":{"x":"` + strings.Repeat("a", signals.MaxDataBytes) + `"}}]}`, signals.CodeInvalidData},
		{`{"events":[{"type":"a","timestamp":"` + now + `","data":{"x":1,"x":2}}]}`, ""},
		{`{"events":[{"type":"a","timestamp":"` + now + `","data":{},"extra":1}]}`, ""},
		// One good event and one bad: nothing of the delivery is stored.
		{`{"events":[{"type":"fraud.alert","timestamp":"` + now + `","data":{"level":"high"}},{"type":"a","timestamp":"x","data":{}}]}`, signals.CodeInvalidTimestamp},
	}
	head := x.head(x.o.Key)
	for _, tc := range cases {
		r := x.deliver(t, id, secret, tc.body, nil)
		if r.Status != http.StatusBadRequest || r.str("code") == "" || (tc.code != "" && r.str("code") != tc.code) {
			t.Errorf("%.80s: %s", tc.body, r)
		}
	}
	if h := x.head(x.o.Key); h != head {
		t.Fatalf("bad bodies were stored: ledger %d -> %d", head, h)
	}
	if r := x.decide(x.o.Key, `{"amount":5}`); r.str("outcome") != "ALLOW" {
		t.Fatalf("a refused delivery changed the decision: %s", r)
	}
}

func TestSignalConnectorsTenantIsolation(t *testing.T) {
	t.Parallel()
	x := newSignalEnv(t, fraudBundle)
	other := x.createOrg("Other")
	id, _ := x.connector(t, x.o.Key, true)

	list := x.req(t, "GET", pathSignalConnectors, x.o.Key, nil, nil).want(t, http.StatusOK)
	if strings.Contains(string(list.Raw), "whsec_") || strings.Contains(string(list.Raw), "secret") || !strings.Contains(string(list.Raw), id) {
		t.Fatalf("listing: %s", list)
	}
	if r := x.req(t, "GET", pathSignalConnectors, other.Key, nil, nil).want(t, http.StatusOK); strings.Contains(string(r.Raw), id) {
		t.Fatalf("another org sees the connector: %s", r)
	}
	x.req(t, "DELETE", pathSignalConnectors+"/"+id, other.Key, nil, nil).wantProblem(t, http.StatusNotFound, signals.CodeConnectorNotFound)
	x.req(t, "DELETE", pathSignalConnectors+"/"+unknownID, x.o.Key, nil, nil).wantProblem(t, http.StatusNotFound, signals.CodeConnectorNotFound)
	x.req(t, "DELETE", pathSignalConnectors+"/nope", x.o.Key, nil, nil).wantProblem(t, http.StatusBadRequest, signals.CodeInvalidConnectorID)
	rv := x.req(t, "DELETE", pathSignalConnectors+"/"+id, x.o.Key, nil, nil).want(t, http.StatusOK)
	if rv.str("status") != "REVOKED" || rv.str("revoked_at") == "" {
		t.Fatalf("revoke: %s", rv)
	}
	again := x.req(t, "DELETE", pathSignalConnectors+"/"+id, x.o.Key, nil, nil).want(t, http.StatusOK)
	if again.str("revoked_at") != rv.str("revoked_at") {
		t.Fatalf("revoking again moved revoked_at: %s", again)
	}
	// A key without integration:write is refused.
	reader := x.createKey(x.o, "decision:read")
	x.req(t, "GET", pathSignalConnectors, reader, nil, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
}

func TestSignalConnectorNeedsSecretsKeyToSign(t *testing.T) {
	t.Parallel()
	x := newExecEnvWith(t, fraudBundle, nil) // no secrets key
	x.req(t, "POST", pathSignalConnectors, x.o.Key, map[string]any{"name": "feed", "require_signature": true}, nil).
		wantProblem(t, http.StatusServiceUnavailable, signals.CodeSecretsNotConfigured)
	x.req(t, "POST", pathSignalConnectors, x.o.Key, map[string]any{"name": "feed"}, nil).want(t, http.StatusCreated)
	x.req(t, "POST", pathSignalConnectors, x.o.Key, map[string]any{"name": " "}, nil).
		wantProblem(t, http.StatusBadRequest, signals.CodeInvalidConnectorName)
}

func TestSignalIngressRateLimited(t *testing.T) {
	t.Parallel()
	x := newExecEnvWith(t, "", func(x *execEnv) { x.opts.RateLimit, x.opts.RateBurst = 1, 10 })
	var limited *result
	for range 15 {
		if r := x.deliver(t, unknownID, "whsec_x", `{}`, nil); r.Status == http.StatusTooManyRequests {
			limited = r
			break
		}
	}
	if limited == nil || limited.Header.Get("Retry-After") == "" || limited.str("code") != "RATE_LIMITED" {
		t.Fatalf("the ingress is not rate limited: %v", limited)
	}
}
