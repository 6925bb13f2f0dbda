package federation_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/federation"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// deployment is one Clearance deployment of the examples: an engine over
// an in-memory store, with its own issuer, grant key and one org.
type deployment struct {
	engine *clearance.Engine
	org    string
	close  func()
}

var exampleNow = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func newDeployment(ctx context.Context, issuer string, seed byte, bundle string) (*deployment, error) {
	backend, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		return nil, err
	}
	key, err := grant.KeyFromSeed(bytes.Repeat([]byte{seed}, 32))
	if err != nil {
		return nil, err
	}
	e, err := clearance.Open(backend, clearance.Options{Now: func() time.Time { return exampleNow }, Issuer: issuer,
		GrantKeys: grant.NewKeyRing(key)})
	if err != nil {
		return nil, err
	}
	org, err := e.Admin.CreateOrg(ctx, "Org of "+issuer)
	if err != nil {
		return nil, err
	}
	d := &deployment{engine: e, org: org.Org.ID, close: func() { _ = backend.Close() }}
	if bundle != "" {
		if _, err := e.Policies.PublishBundle(ctx, d.org, []byte(bundle)); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func (d *deployment) decide(ctx context.Context, body string) (decide.Decision, error) {
	return d.engine.Decide.Evaluate(ctx, decide.EvaluateRequest{OrgID: d.org, Route: decide.RouteEvaluateDecision, Body: []byte(body)})
}

// B allows only what A allowed for the same intent.
const partnerBundle = `{"bundle_id":"partner","version":"v1","mode":"ENFORCEMENT","rules":[
 {"id":"federated","when":"federation.exists(f, f.issuer == \"https://a.example\" && f.outcome == \"ALLOW\" && f.matches_intent)",
  "outcome":"ALLOW","reason_codes":["FEDERATED_ALLOW"]}],
 "default":{"outcome":"ESCALATE","reason_codes":["NEEDS_PARTNER"]}}`

const payment = `"decision_type":"PAYMENT","workflow_key":"payouts","amount":50,"action":{"type":"payment.send","currency":"EUR"}`

// Deployment A signs an envelope of one of its decisions for an org of
// deployment B, which trusts that org of A (here with A's keys inline). B's
// policy allows the payment only with A's ALLOW of the same payment;
// without the envelope, or for another amount, it escalates. Another
// tenant of A, whatever its own policy allowed, is not trusted.
func ExampleService_IssueEnvelope() {
	ctx := context.Background()
	a, err := newDeployment(ctx, "https://a.example", 1, `{"bundle_id":"a","version":"v1","mode":"ENFORCEMENT","rules":[],"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.close()
	b, err := newDeployment(ctx, "https://b.example", 2, partnerBundle)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.close()

	// B's org trusts A's org, and tells A its audience.
	jwks, _ := json.Marshal(a.engine.GrantKeys().JWKS(exampleNow))
	entry := `{"orgs":["` + a.org + `"],"jwks":` + string(jwks) + `}`
	if _, _, err := b.engine.Federation.PutIssuer(ctx, b.org, "https://a.example", []byte(entry)); err != nil {
		fmt.Println(err)
		return
	}
	audience := b.engine.Federation.Audience(b.org)

	decA, err := a.decide(ctx, "{"+payment+"}")
	if err != nil {
		fmt.Println(err)
		return
	}
	req, _ := json.Marshal(federation.EnvelopeRequest{DossierID: decA.DossierID, Audience: audience})
	env, err := a.engine.Federation.IssueEnvelope(ctx, a.org, req)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("A:", decA.Outcome, "envelope for", env.Audience == audience, "expires", env.ExpiresAt)

	list, _ := json.Marshal([]string{env.Envelope})
	without, _ := b.decide(ctx, "{"+payment+"}")
	with, _ := b.decide(ctx, "{"+payment+`,"federated_decisions":`+string(list)+"}")
	other, _ := b.decide(ctx, `{"decision_type":"PAYMENT","workflow_key":"payouts","amount":60,"action":{"type":"payment.send","currency":"EUR"},"federated_decisions":`+string(list)+"}")
	fmt.Println("B without the envelope:", without.Outcome)
	fmt.Println("B with it:", with.Outcome, with.ReasonCodes[2])
	fmt.Println("B with it, for another amount:", other.Outcome)

	// An envelope for another audience is refused, and nothing recorded.
	req, _ = json.Marshal(federation.EnvelopeRequest{DossierID: decA.DossierID, Audience: "https://c.example/federation/x"})
	wrong, _ := a.engine.Federation.IssueEnvelope(ctx, a.org, req)
	list, _ = json.Marshal([]string{wrong.Envelope})
	_, err = b.decide(ctx, "{"+payment+`,"federated_decisions":`+string(list)+"}")
	var refused *clearance.Error
	if errors.As(err, &refused) {
		fmt.Println("another audience:", refused.Code, refused.Fields[0].Field)
	}

	// Another tenant of A allows everything and signs an envelope for B's
	// audience: refused, for B's entry does not list that org.
	mallory, _ := a.engine.Admin.CreateOrg(ctx, "Mallory")
	_, _ = a.engine.Policies.PublishBundle(ctx, mallory.Org.ID, []byte(`{"bundle_id":"m","version":"v1","mode":"ENFORCEMENT","rules":[],"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`))
	decM, _ := a.engine.Decide.Evaluate(ctx, decide.EvaluateRequest{OrgID: mallory.Org.ID, Route: decide.RouteEvaluateDecision, Body: []byte("{" + payment + "}")})
	req, _ = json.Marshal(federation.EnvelopeRequest{DossierID: decM.DossierID, Audience: audience})
	envM, _ := a.engine.Federation.IssueEnvelope(ctx, mallory.Org.ID, req)
	list, _ = json.Marshal([]string{envM.Envelope})
	_, err = b.decide(ctx, "{"+payment+`,"federated_decisions":`+string(list)+"}")
	if errors.As(err, &refused) {
		fmt.Println("another org of A:", decM.Outcome, refused.Code, strings.Contains(refused.Detail, "is not among the orgs"))
	}
	// Output:
	// A: ALLOW envelope for true expires 2026-11-01T12:05:00Z
	// B without the envelope: ESCALATE
	// B with it: ALLOW FEDERATED_ALLOW
	// B with it, for another amount: ESCALATE
	// another audience: FEDERATED_DECISION_INVALID federated_decisions[0]
	// another org of A: ALLOW FEDERATED_DECISION_INVALID true
}

// The trust list names issuers by their exact iss (in a URL path the id
// is percent-encoded) and, on each, the issuing orgs it trusts. An org lists its entries and the audience envelopes
// for it must name.
func ExampleService_PutIssuer() {
	ctx := context.Background()
	b, err := newDeployment(ctx, "https://b.example", 2, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.close()
	e, created, err := b.engine.Federation.PutIssuer(ctx, b.org, "https://a.example",
		[]byte(`{"orgs":["0190f4b2-0000-7000-8000-0000000000a1"],`+
			`"jwks_url":"https://a.example/.well-known/clearance-execution-grant-jwks.json","max_age_seconds":3600}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(e.Issuer, e.Orgs, created, e.MaxAgeSeconds)
	fmt.Println("path: /v1/federation/issuers/" + url.PathEscape(e.Issuer))
	list, _ := b.engine.Federation.Issuers(ctx, b.org)
	fmt.Println(len(list.Issuers), list.Audience == "https://b.example/federation/"+b.org)
	// Output:
	// https://a.example [0190f4b2-0000-7000-8000-0000000000a1] true 3600
	// path: /v1/federation/issuers/https:%2F%2Fa.example
	// 1 true
}

// The intent digest leaves out what is local to one deployment, so the
// same payment decided on two routes, by two orgs, matches.
func ExampleIntentDigest() {
	evaluate, _ := policy.Intent{DecisionType: "PAYMENT", WorkflowKey: "payouts", Amount: policy.Amount{Value: 50, Set: true},
		Action: &policy.Action{Type: "payment.send", Currency: "EUR"}, Mode: policy.ModeShadow}.Input(exampleNow)
	signed, _ := policy.Intent{DecisionType: "PAYMENT", WorkflowKey: "payouts",
		Action:  &policy.Action{Type: "payment.send", Currency: "EUR", Amount: policy.Amount{Value: 50, Set: true, Raw: "50.00"}},
		Context: map[string]any{"policy_version": "v7"}}.Input(exampleNow.Add(time.Hour))
	d1, _ := federation.IntentDigest(&evaluate)
	d2, _ := federation.IntentDigest(&signed)
	fmt.Println(d1 == d2, d1)
	// Output:
	// true sha256:8b5b6bc0724788636564db5651160f26585f77cc599f399a166f49d639fd3d5f
}
