package connector_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/admin"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
	"github.com/clearancehq/clearance/webhook"
)

// receiver records what it is sent; it answers each request with the next
// status of statuses, then 204.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	got      []delivered
	statuses []int
}

type delivered struct {
	body           []byte
	event, id, sig string
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	r := &receiver{statuses: statuses}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, delivered{b, req.Header.Get(webhook.HeaderEvent), req.Header.Get(webhook.HeaderDeliveryID), req.Header.Get(webhook.HeaderSignature)})
		status := http.StatusNoContent
		if len(r.statuses) > 0 {
			status, r.statuses = r.statuses[0], r.statuses[1:]
		}
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) received() []delivered {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivered(nil), r.got...)
}

// Callback URLs join the decision.resolved fan-out beside the WEBHOOK
// integration: each gets its own signed delivery (its own secret, shown
// once), its filter is applied, a removed callback receives nothing more
// and its pending retries are dropped, and another org neither sees nor
// removes it.
func TestWebhooksJoinTheFanOut(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	e := h.engine
	o, err := e.Admin.CreateOrg(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	other, err := e.Admin.CreateOrg(ctx, "Other")
	if err != nil {
		t.Fatal(err)
	}
	flaky, filtered, integration := newReceiver(t, http.StatusInternalServerError), newReceiver(t), newReceiver(t)
	caller, err := e.Admin.Authenticate(ctx, o.Key.Secret)
	if err != nil {
		t.Fatal(err)
	}

	cb, err := e.Connector.AddWebhook(ctx, caller, fmt.Appendf(nil, `{"url":%q}`, flaky.URL))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cb.SigningSecret, webhook.PrefixCallbackSecret) || cb.Event != webhook.EventDecisionResolved {
		t.Fatalf("registration answered %+v", cb)
	}
	_, err = e.Connector.AddWebhook(ctx, caller, fmt.Appendf(nil, `{"url":%q,"filter":{"outcomes":["BLOCK"]}}`, filtered.URL))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Webhooks.Connect(ctx, o.Org.ID, fmt.Appendf(nil,
		`{"config":{"endpoint_url":%q},"credentials":{"webhook_secret":"whsec-integration-0123456789"}}`, integration.URL)); err != nil {
		t.Fatal(err)
	}

	// Refusals change nothing.
	for name, tc := range map[string]struct{ body, code string }{
		"the same URL again": {fmt.Sprintf(`{"url":%q}`, flaky.URL), webhook.CodeCallbackExists},
		"no url":             {`{}`, webhook.CodeInvalidCallback},
		"not http":           {`{"url":"ftp://example.com/x"}`, webhook.CodeDestinationForbidden},
		"userinfo":           {`{"url":"https://u:p@example.com/x"}`, webhook.CodeDestinationForbidden},
		"an unknown outcome": {`{"url":"https://example.com/y","filter":{"outcomes":["MAYBE"]}}`, webhook.CodeInvalidCallback},
		"an unknown member":  {`{"url":"https://example.com/z","events":["x"]}`, "UNKNOWN_MEMBER"},
	} {
		_, err := e.Connector.AddWebhook(ctx, caller, []byte(tc.body))
		wantCode(t, name, err, tc.code)
	}
	for i := 2; i < webhook.MaxCallbacks; i++ {
		if _, err := e.Connector.AddWebhook(ctx, caller, fmt.Appendf(nil, `{"url":"https://example.com/hook/%d","filter":{"modes":["ENFORCEMENT"]}}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	_, err = e.Connector.AddWebhook(ctx, caller, []byte(`{"url":"https://example.com/one-more"}`))
	wantCode(t, "one callback more than the limit", err, webhook.CodeCallbackLimitReached)
	if list, err := e.Connector.Webhooks(ctx, o.Org.ID); err != nil || len(list) != webhook.MaxCallbacks || list[0].SubscriptionID != cb.SubscriptionID {
		t.Fatalf("Webhooks = %d callbacks, %v", len(list), err)
	}
	if list, err := e.Connector.Webhooks(ctx, other.Org.ID); err != nil || len(list) != 0 {
		t.Fatalf("another org sees %d callbacks, %v", len(list), err)
	}
	wantCode(t, "another org removing it", e.Connector.RemoveWebhook(ctx, other.Org.ID, cb.SubscriptionID), webhook.CodeCallbackNotFound)

	// A decision (the starter policy escalates 2,500 in SHADOW): the flaky
	// callback and the integration are sent it; the BLOCK-only one is not.
	evaluate := func() clearance.Decision {
		t.Helper()
		d, err := e.Evaluate(ctx, clearance.EvaluateRequest{OrgID: o.Org.ID, Route: clearance.RouteEvaluateDecision,
			Body: []byte(`{"decision_type":"PAYMENT","workflow_key":"ap","amount":2500}`)})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	d := evaluate()
	if _, err := e.Webhooks.Dispatch(ctx); err != nil {
		t.Fatal(err)
	}
	got, want := flaky.received(), integration.received()
	if len(got) != 1 || len(want) != 1 || len(filtered.received()) != 0 {
		t.Fatalf("first pass: callback %d, integration %d, filtered callback %d deliveries; want 1, 1, 0",
			len(got), len(want), len(filtered.received()))
	}
	if got[0].id == want[0].id || got[0].event != webhook.EventDecisionResolved || string(got[0].body) != string(want[0].body) {
		t.Fatalf("callback delivery %s %s, integration %s: want the same body under a delivery id of its own", got[0].id, got[0].event, want[0].id)
	}
	if err := webhook.Verify(got[0].sig, got[0].body, []byte(cb.SigningSecret), h.now, 5*time.Minute); err != nil {
		t.Fatalf("the callback's signature does not verify with its secret: %v", err)
	}
	if err := webhook.Verify(got[0].sig, got[0].body, []byte("whsec-integration-0123456789"), h.now, 5*time.Minute); err == nil {
		t.Fatal("the callback's delivery verifies with the integration's secret")
	}
	var body struct {
		DossierID string `json:"dossier_id"`
	}
	if err := json.Unmarshal(got[0].body, &body); err != nil || body.DossierID != d.DossierID {
		t.Fatalf("body %s: want decision %s", got[0].body, d.DossierID)
	}
	dest := webhook.CallbackPrefix + cb.SubscriptionID
	log, err := e.Webhooks.Deliveries(ctx, o.Org.ID, webhook.DeliveryFilter{Destination: dest, Day: h.now.Format(time.DateOnly)})
	if err != nil || len(log) != 1 || log[0].State != webhook.StateRetrying || log[0].Destination != dest {
		t.Fatalf("the callback's delivery log: %+v, %v; want one retrying delivery", log, err)
	}

	// The WEBHOOK integration's redelivery does not reach a callback's
	// delivery.
	if _, err := e.Webhooks.Redeliver(ctx, o.Org.ID, log[0].DeliveryID); err == nil {
		t.Fatal("the integration's Redeliver took a callback's delivery")
	} else {
		wantCode(t, "redelivering a callback's delivery as the integration's", err, webhook.CodeDeliveryNotFound)
	}

	// Removed while its delivery waits to be retried: the retry is dropped
	// and later decisions are not sent to it.
	if err := e.Connector.RemoveWebhook(ctx, o.Org.ID, cb.SubscriptionID); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "removing it twice", e.Connector.RemoveWebhook(ctx, o.Org.ID, cb.SubscriptionID), webhook.CodeCallbackNotFound)
	h.advance(time.Minute)
	if _, err := e.Webhooks.Deliver(ctx); err != nil {
		t.Fatal(err)
	}
	log, err = e.Webhooks.Deliveries(ctx, o.Org.ID, webhook.DeliveryFilter{Destination: dest, Day: h.now.Format(time.DateOnly)})
	if err != nil || len(log) != 1 || log[0].State != webhook.StateDropped {
		t.Fatalf("after removal: %+v, %v; want the delivery dropped", log, err)
	}
	evaluate()
	if _, err := e.Webhooks.Dispatch(ctx); err != nil {
		t.Fatal(err)
	}
	if n, m := len(flaky.received()), len(integration.received()); n != 1 || m != 2 {
		t.Fatalf("after removal: callback %d deliveries, integration %d; want 1 and 2", n, m)
	}
}

// A callback lives as long as the credential that registered it: once the
// owner revokes the platform's credential (or a replayed code does), the
// callback is inactive, its pending deliveries are dropped and no later
// decision reaches it.
func TestWebhooksEndWithTheirCredential(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	e := h.engine
	o, err := e.Admin.CreateOrg(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	var platform admin.IssuedKey
	if err := h.backend.Update(ctx, o.Org.ID, func(tx store.Tx) error {
		var err error
		platform, err = e.Admin.IssueKeyIn(ctx, tx, admin.KeySpec{OrgID: o.Org.ID, Kind: tenant.KindOrg,
			Scopes: []tenant.Scope{tenant.ScopeAutomation, tenant.ScopeDecisionWrite}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	caller, err := e.Admin.Authenticate(ctx, platform.Secret)
	if err != nil {
		t.Fatal(err)
	}
	rv := newReceiver(t, http.StatusServiceUnavailable)
	cb, err := e.Connector.AddWebhook(ctx, caller, fmt.Appendf(nil, `{"url":%q}`, rv.URL))
	if err != nil {
		t.Fatal(err)
	}
	decide := func() {
		t.Helper()
		if _, err := e.Evaluate(ctx, clearance.EvaluateRequest{OrgID: o.Org.ID, Route: clearance.RouteEvaluateDecision,
			Body: []byte(`{"decision_type":"PAYMENT","workflow_key":"ap","amount":50}`)}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Webhooks.Dispatch(ctx); err != nil {
			t.Fatal(err)
		}
	}
	decide()
	if n := len(rv.received()); n != 1 {
		t.Fatalf("before the revocation: %d deliveries, want 1", n)
	}
	if err := e.Admin.RevokeCredential(ctx, o.Org.ID, caller.KeyHash(), "test"); err != nil {
		t.Fatal(err)
	}
	list, err := e.Connector.Webhooks(ctx, o.Org.ID)
	if err != nil || len(list) != 1 || list[0].Active {
		t.Fatalf("after the revocation: %+v, %v; want the callback listed inactive", list, err)
	}
	h.advance(time.Minute) // the failed first attempt's retry is due
	if _, err := e.Webhooks.Deliver(ctx); err != nil {
		t.Fatal(err)
	}
	decide()
	if n := len(rv.received()); n != 1 {
		t.Fatalf("after the revocation: %d deliveries, want still 1", n)
	}
	log, err := e.Connector.WebhookDeliveries(ctx, o.Org.ID, cb.SubscriptionID, webhook.DeliveryFilter{Day: h.now.Format(time.DateOnly)})
	if err != nil || len(log) != 2 || log[0].State != webhook.StateDropped || log[1].State != webhook.StateDropped {
		t.Fatalf("the callback's log: %+v, %v; want both deliveries dropped", log, err)
	}
	_, err = e.Connector.WebhookDeliveries(ctx, o.Org.ID, "not-an-id", webhook.DeliveryFilter{})
	wantCode(t, "the log of an unknown callback", err, webhook.CodeCallbackNotFound)
}
