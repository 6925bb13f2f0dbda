package main

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
	"syscall"
	"testing"
	"time"

	"github.com/clearancehq/clearance/internal/acktest"
)

// hookSecret signs the deliveries of the webhook tests.
const hookSecret = "whsec-binary-test-0123456789"

// hookRequest is one request a test receiver got.
type hookRequest struct {
	id, event, signature string
	body                 []byte
	at                   time.Time
}

// hookConnect connects the org's WEBHOOK integration to url.
func hookConnect(t *testing.T, baseURL, orgID, key, url string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"config": map[string]any{"endpoint_url": url},
		"credentials": map[string]any{"webhook_secret": hookSecret}})
	if err != nil {
		t.Fatal(err)
	}
	mustCall(t, "POST", baseURL+"/v1/orgs/"+orgID+"/integrations/WEBHOOK/connect", key, string(body), http.StatusCreated)
}

// hookSignatureValid checks X-Clearance-Signature with its own HMAC code:
// t=<unix>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>, t within 5 minutes.
func hookSignatureValid(header string, body []byte, secret string) bool {
	var ts string
	var v1 []string
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			v1 = append(v1, v)
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(v1) == 0 {
		return false
	}
	if d := time.Since(time.Unix(unix, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return false
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	want := hex.EncodeToString(m.Sum(nil))
	for _, got := range v1 {
		if hmac.Equal([]byte(got), []byte(want)) {
			return true
		}
	}
	return false
}

// hookEvaluationID is the evaluation_id of a decision.resolved body.
func hookEvaluationID(body []byte) string {
	var b struct {
		EvaluationID string `json:"evaluation_id"`
	}
	_ = json.Unmarshal(body, &b)
	return b.EvaluationID
}

// hookLogEntry is one record of the delivery log.
type hookLogEntry struct {
	DeliveryID string `json:"delivery_id"`
	State      string `json:"state"`
	Attempts   []struct {
		StatusCode int `json:"status_code"`
	} `json:"attempts"`
}

// hookDeliveryLog reads the org's delivery log of one UTC day of events.
func hookDeliveryLog(t *testing.T, baseURL, orgID, key, day, state string) ([]byte, []hookLogEntry) {
	t.Helper()
	r := mustCall(t, "GET", baseURL+"/v1/orgs/"+orgID+"/integrations/WEBHOOK/deliveries?limit=500&day="+day+"&state="+state, key, "", http.StatusOK)
	var log struct {
		Deliveries []hookLogEntry `json:"deliveries"`
	}
	if err := json.Unmarshal(r.raw, &log); err != nil {
		t.Fatal(err)
	}
	return r.raw, log.Deliveries
}

// hookDay is the UTC day of a decision's event, which files its delivery
// in the log (a test running over midnight reads the right day).
func hookDay(t *testing.T, dec *reply) string {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, str(dec.json, "created_at"))
	if err != nil {
		t.Fatalf("decision created_at: %v: %s", err, dec.raw)
	}
	return at.UTC().Format(time.DateOnly)
}

// TestSIGKILLMidDeliveryRedelivers kills the server while a receiver holds
// its first delivery attempt open, restarts it on the same data directory,
// and requires the delivery to come again once the dead worker's lease has
// passed, with the same X-Clearance-Delivery-Id, the same body and a valid
// signature, and to stop once a 200 is recorded.
func TestSIGKILLMidDeliveryRedelivers(t *testing.T) {
	// The worker raises a lease to its attempt timeout + 5s (15s by
	// default), so the redelivery comes about 15s after the kill.
	const lease = 3 * time.Second
	dir := t.TempDir()
	flags := []string{"--rate-limit", "-1", "--allow-private-destinations", "--webhook-lease", lease.String(),
		"--webhook-poll", "50ms", "--webhook-retries", "1s,2s"}

	var (
		mu      sync.Mutex
		got     []hookRequest
		first   = make(chan hookRequest, 1) // the first attempt has arrived
		later   = make(chan hookRequest, 1)
		release = make(chan struct{}) // ends the held first attempt
	)
	rv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := hookRequest{id: r.Header.Get("X-Clearance-Delivery-Id"), event: r.Header.Get("X-Clearance-Event"),
			signature: r.Header.Get("X-Clearance-Signature"), body: body, at: time.Now()}
		mu.Lock()
		got = append(got, req)
		n := len(got)
		mu.Unlock()
		if n == 1 {
			first <- req
			// Held until the test lets go or the dead server's connection closes.
			select {
			case <-release:
			case <-r.Context().Done():
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		select {
		case later <- req:
		default: // counted in got; the test reads the first
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rv.Close)
	var releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(letGo) // before rv.Close, which waits for handlers

	p := startServer(t, dir, flags...)
	org := mustCall(t, "POST", p.url+"/v1/platform/orgs", platformKey(t, dir), `{"name":"Hook crash"}`, http.StatusCreated)
	orgID, key := str(org.json, "org_id"), str(org.json, "api_key")
	mustCall(t, "POST", p.url+"/v1/protocol/policies/bundles", key, acktest.Bundle, http.StatusCreated)
	hookConnect(t, p.url, orgID, key, rv.URL+"/hook")
	dec := mustCall(t, "POST", p.url+"/v1/protocol/evaluate-decision", key,
		`{"decision_type":"PAYMENT","workflow_key":"hooks","amount":250}`, http.StatusOK)
	evalID := str(dec.json, "evaluation_id")
	if evalID == "" {
		t.Fatalf("evaluate-decision answered without an evaluation_id: %s", dec.raw)
	}

	var held hookRequest
	select {
	case held = <-first:
	case <-time.After(30 * time.Second):
		t.Fatal("the first delivery attempt never reached the receiver")
	}
	// Killed while the attempt is in flight: its outcome is never recorded.
	if code := p.signal(syscall.SIGKILL); code != -1 {
		t.Fatalf("the server exited with %d, want death by SIGKILL", code)
	}
	if held.id == "" || held.event != "decision.resolved" || hookEvaluationID(held.body) != evalID {
		t.Fatalf("first attempt: delivery id %q, event %q, body %s; want decision.resolved of %s", held.id, held.event, held.body, evalID)
	}
	if !hookSignatureValid(held.signature, held.body, hookSecret) {
		t.Fatalf("first attempt: signature %q does not verify", held.signature)
	}
	letGo()

	p = startServer(t, dir, flags...)
	var again hookRequest
	select {
	case again = <-later:
	case <-time.After(60 * time.Second):
		mu.Lock()
		n := len(got)
		mu.Unlock()
		t.Fatalf("no delivery after the restart within 60s; the receiver got %d requests", n)
	}
	if again.id != held.id {
		t.Fatalf("redelivery after the crash has delivery id %q, the interrupted attempt had %q", again.id, held.id)
	}
	if string(again.body) != string(held.body) || again.event != held.event {
		t.Fatalf("the redelivery changed: event %q body %s, was %q %s", again.event, again.body, held.event, held.body)
	}
	if !hookSignatureValid(again.signature, again.body, hookSecret) {
		t.Fatalf("redelivery: signature %q does not verify", again.signature)
	}
	if wrong := hookSignatureValid(again.signature, again.body, hookSecret+"x"); wrong {
		t.Fatal("the signature check accepts any secret")
	}
	// The dead worker's lease had to pass first: no attempt overlapped it.
	if gap := again.at.Sub(held.at); gap < lease-500*time.Millisecond {
		t.Fatalf("redelivered %v after the interrupted attempt, before its %v lease ended", gap, lease)
	} else {
		t.Logf("redelivered %v after the interrupted attempt", gap.Round(time.Millisecond))
	}

	// The 200 is recorded: delivered, and not attempted again.
	deadline := time.Now().Add(30 * time.Second)
	for {
		raw, log := hookDeliveryLog(t, p.url, orgID, key, hookDay(t, dec), "")
		if len(log) != 1 || log[0].DeliveryID != held.id {
			t.Fatalf("delivery log: %s; want one delivery %s", raw, held.id)
		}
		if d := log[0]; d.State == "delivered" {
			if n := len(d.Attempts); n == 0 || d.Attempts[n-1].StatusCode != http.StatusOK {
				t.Fatalf("delivered without a recorded 200: %s", raw)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the delivery was not recorded delivered within 30s: %s", raw)
		}
		<-time.After(50 * time.Millisecond) // poll interval
	}
	mu.Lock()
	n := len(got)
	mu.Unlock()
	if n != 2 {
		t.Fatalf("the receiver got %d requests, want 2 (the interrupted attempt and one after the restart)", n)
	}
	if code := p.signal(syscall.SIGTERM); code != 0 {
		t.Fatalf("SIGTERM: exit %d (%v), stderr %s", code, p.waitErr, p.stderr.String())
	}
}
