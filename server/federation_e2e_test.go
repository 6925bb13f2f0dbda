package server_test

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/federation"
	"github.com/clearancehq/clearance/grant"
)

const (
	pathFedEnvelopes = "/v1/federation/envelopes"
	pathFedIssuers   = "/v1/federation/issuers"
	issuerA          = "https://a.clearance.test"
	issuerB          = "https://b.clearance.test"
)

// partnerBundle allows only what issuer A allowed for the same intent;
// everything else waits for a human.
const partnerBundle = `{"bundle_id":"partner","version":"v1","mode":"ENFORCEMENT","rules":[
 {"id":"federated","when":"federation.exists(f, f.issuer == \"https://a.clearance.test\" && f.outcome == \"ALLOW\" && f.matches_intent)",
  "outcome":"ALLOW","reason_codes":["FEDERATED_ALLOW"]},
 {"id":"huge","match":[{"field":"amount","op":"ge","value":10000}],"outcome":"BLOCK","reason_codes":["TOO_BIG"]}],
 "default":{"outcome":"ESCALATE","reason_codes":["NEEDS_PARTNER"]}}`

// plainBundle reads no federation: a federated decision changes nothing.
const plainBundle = `{"bundle_id":"plain","version":"v1","mode":"ENFORCEMENT","rules":[],
 "default":{"outcome":"ESCALATE","reason_codes":["NEEDS_PARTNER"]}}`

// plainAllow allows everything: the policy of a tenant of a multi-tenant
// issuer that B does not trust.
const plainAllow = `{"bundle_id":"anything","version":"v1","mode":"ENFORCEMENT","rules":[],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`

// payment is the intent both deployments decide.
const payment = `"decision_type":"PAYMENT","workflow_key":"payouts","amount":50,` +
	`"actor":{"id":"agent-7","type":"agent"},"action":{"type":"payment.send","currency":"EUR","target":"acct-1"}`

// fedDeployment is one Clearance deployment of the federation tests: its
// own store, clock, grant keys and issuer, behind its own HTTP server.
func fedDeployment(t *testing.T, issuer, bundle string) *execEnv {
	t.Helper()
	return newExecEnvWith(t, bundle, func(x *execEnv) {
		x.tune = func(o *clearance.Options) {
			o.Issuer = issuer
			// The deployments run on loopback: the only way to let the
			// outbound client fetch the other's JWKS.
			o.AllowPrivateDestinations = true
		}
	})
}

func issuerPath(iss string) string { return pathFedIssuers + "/" + url.PathEscape(iss) }

func jwksURL(x *execEnv) string {
	return x.srv.URL + "/.well-known/clearance-execution-grant-jwks.json"
}

// audienceOf is the audience an org's trust list answers.
func audienceOf(t *testing.T, x *execEnv, key string) string {
	t.Helper()
	return x.req(t, "GET", pathFedIssuers, key, nil, nil).want(t, http.StatusOK).str("audience")
}

// envelopeFor asks deployment x for an envelope of dossier for audience.
func envelopeFor(t *testing.T, x *execEnv, key, dossierID, audience string, ttl int) string {
	t.Helper()
	body := map[string]any{"dossier_id": dossierID, "audience": audience}
	if ttl > 0 {
		body["ttl_seconds"] = ttl
	}
	return x.req(t, "POST", pathFedEnvelopes, key, body, nil).want(t, http.StatusOK).str("envelope")
}

// withEnvelopes is an evaluate-decision body of payment (amount replaced
// when given) presenting envelopes.
func withEnvelopes(amount string, envelopes ...string) string {
	p := payment
	if amount != "" {
		p = strings.Replace(p, `"amount":50`, `"amount":`+amount, 1)
	}
	if len(envelopes) == 0 {
		return "{" + p + "}"
	}
	list, _ := json.Marshal(envelopes)
	return "{" + p + `,"federated_decisions":` + string(list) + "}"
}

func TestFederationE2E(t *testing.T) {
	a := fedDeployment(t, issuerA, bandsBundle)
	b := fedDeployment(t, issuerB, partnerBundle)
	plain := b.createOrg("Plain") // trusts A too, but its policy reads no federation
	b.publish(plain.Key, plainBundle).want(t, http.StatusCreated)
	other := b.createOrg("Other") // trusts nobody
	audB, audPlain := audienceOf(t, b, b.o.Key), audienceOf(t, b, plain.Key)
	if audB != issuerB+"/federation/"+b.o.ID {
		t.Fatalf("audience %q", audB)
	}

	// A decides the payment: ALLOW.
	decA := a.req(t, "POST", pathEvaluate, a.o.Key, "{"+payment+"}", nil).want(t, http.StatusOK)
	if decA.str("outcome") != "ALLOW" {
		t.Fatalf("A: %s", decA)
	}
	env := envelopeFor(t, a, a.o.Key, decA.str("dossier_id"), audB, 0)

	// Not on B's trust list yet: refused, nothing recorded.
	head := b.head(b.o.Key)
	r := b.req(t, "POST", pathEvaluate, b.o.Key, withEnvelopes("", env), nil).wantProblem(t, http.StatusBadRequest, clearance.CodeFederatedDecisionInvalid)
	if f := lookup(r.JSON, "errors"); f == nil || !strings.Contains(r.String(), "federated_decisions[0]") || !strings.Contains(r.String(), "trust list") {
		t.Fatalf("the refusal names neither the envelope nor why: %s", r)
	}
	if b.head(b.o.Key) != head {
		t.Fatal("a refused envelope recorded something")
	}

	// B's org trusts A by its JWKS URL.
	trustA := entry(map[string]any{"jwks_url": jwksURL(a), "max_age_seconds": 3600}, a.o.ID)
	put := b.req(t, "PUT", issuerPath(issuerA), b.o.Key, trustA, nil).want(t, http.StatusCreated)
	if put.str("issuer") != issuerA || put.str("jwks_url") != jwksURL(a) || lookup(put.JSON, "orgs.0") != a.o.ID {
		t.Fatalf("put: %s", put)
	}
	b.req(t, "PUT", issuerPath(issuerA), b.o.Key, trustA, nil).want(t, http.StatusOK)
	b.req(t, "GET", issuerPath(issuerA), b.o.Key, nil, nil).want(t, http.StatusOK)
	if got := b.req(t, "GET", pathFedIssuers, b.o.Key, nil, nil).want(t, http.StatusOK); lookup(got.JSON, "issuers.0.issuer") != issuerA {
		t.Fatalf("list: %s", got)
	}
	b.req(t, "PUT", issuerPath(issuerA), plain.Key, entry(map[string]any{"jwks_url": jwksURL(a)}, a.o.ID), nil).want(t, http.StatusCreated)

	// Without the envelope B escalates; with it, its rule allows.
	b.req(t, "POST", pathEvaluate, b.o.Key, withEnvelopes(""), nil).want(t, http.StatusOK)
	if got := b.req(t, "POST", pathEvaluate, b.o.Key, withEnvelopes(""), nil).str("outcome"); got != "ESCALATE" {
		t.Fatalf("without an envelope: %s", got)
	}
	dec := b.req(t, "POST", pathEvaluate, b.o.Key, withEnvelopes("", env), nil).want(t, http.StatusOK)
	if dec.str("outcome") != "ALLOW" || !strings.Contains(dec.String(), "FEDERATED_ALLOW") {
		t.Fatalf("a trusted ALLOW of the same intent: %s", dec)
	}
	// The dossier records the envelope whole: an auditor checks it
	// against A's published keys without trusting B.
	dos := b.req(t, "GET", "/v1/protocol/dossiers/"+dec.str("dossier_id"), b.o.Key, nil, nil).want(t, http.StatusOK)
	if lookup(dos.JSON, "federation.0.envelope") != env || lookup(dos.JSON, "federation.0.matches_intent") != true ||
		lookup(dos.JSON, "federation.0.issuer") != issuerA || lookup(dos.JSON, "federation.0.decision_id") != decA.str("decision_id") ||
		lookup(dos.JSON, "federation.0.org") != a.o.ID {
		t.Fatalf("dossier federation: %s", dos)
	}
	claims := auditEnvelope(t, a, env, b.clock())
	if claims.DossierID != decA.str("dossier_id") || claims.DossierDigest != decA.str("dossier_digest") || claims.Audience != audB ||
		claims.LedgerSeq != uint64(decA.num("ledger_seq")) || claims.Outcome != "ALLOW" || claims.IntentProfile != federation.IntentProfile {
		t.Fatalf("envelope claims %+v do not state A's decision %s", claims, decA)
	}

	// Another intent (another amount): the envelope is evidence, but not
	// for this intent, so B's rule does not hold.
	other60 := b.req(t, "POST", pathEvaluate, b.o.Key, withEnvelopes("60", env), nil).want(t, http.StatusOK)
	if other60.str("outcome") != "ESCALATE" {
		t.Fatalf("another intent: %s", other60)
	}
	// Enforce-and-bind takes envelopes too: the grant names them and its
	// claim verifies them again, against the trust list as it is then.
	paymentIntent := func(m map[string]any) {
		m["action"] = map[string]any{"type": "payment.send", "amount": 50, "currency": "EUR", "target": "acct-1"}
		m["workflow_key"], m["decision_type"] = "payouts", "PAYMENT"
	}
	bindWith := func(envelopes ...string) *result {
		t.Helper()
		jws, _ := b.intent(t, intentSpec{amount: 50, mutate: paymentIntent})
		body := map[string]any{"signed_intent": jws}
		if len(envelopes) > 0 {
			body["federated_decisions"] = envelopes
		}
		return b.req(t, "POST", pathBind, b.o.Key, body, nil).want(t, http.StatusOK)
	}
	if r := bindWith(); r.str("outcome") != "ESCALATE" || r.str("execution_token") != "" {
		t.Fatalf("a bound intent without an envelope: %s", r)
	}
	bound := bindWith(env)
	if bound.str("outcome") != "ALLOW" || bound.str("execution_token") == "" {
		t.Fatalf("a bound intent with a trusted ALLOW of the same intent: %s", bound)
	}
	b.claimed(t, issued{token: bound.str("execution_token"), hash: bound.str("intent_hash")})
	// A's keys rotated out of B's entry between bind and claim: stale.
	stale := bindWith(env)
	b.req(t, "PUT", issuerPath(issuerA), b.o.Key, entry(map[string]any{"jwks": json.RawMessage(
		`{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"other","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`)}, a.o.ID), nil).want(t, http.StatusOK)
	r = b.claim(t, pathClaim, stale.str("execution_token"), stale.str("intent_hash")).want(t, http.StatusConflict)
	if r.str("code") != "STALE_AUTHORIZATION" || lookup(r.JSON, "should_execute") != false {
		t.Fatalf("a claim whose envelope no longer verifies: %s", r)
	}
	b.req(t, "PUT", issuerPath(issuerA), b.o.Key, trustA, nil).want(t, http.StatusOK)

	// A's org taken off B's entry between bind and claim: stale too, and
	// put back, the same envelope verifies again.
	stale = bindWith(env)
	b.req(t, "PUT", issuerPath(issuerA), b.o.Key, entry(map[string]any{"jwks_url": jwksURL(a)}, plain.ID), nil).want(t, http.StatusOK)
	r = b.claim(t, pathClaim, stale.str("execution_token"), stale.str("intent_hash")).want(t, http.StatusConflict)
	if r.str("code") != "STALE_AUTHORIZATION" || lookup(r.JSON, "should_execute") != false || !strings.Contains(r.String(), "is not among the orgs") {
		t.Fatalf("a claim whose issuing org is no longer trusted: %s", r)
	}
	b.req(t, "PUT", issuerPath(issuerA), b.o.Key, trustA, nil).want(t, http.StatusOK)
	again := bindWith(env)
	b.claimed(t, issued{token: again.str("execution_token"), hash: again.str("intent_hash")})

	// The multi-tenant issuer: another tenant of A (one anybody could
	// sign up for) allows everything, so a payment A's org would send for
	// review, and signs its ALLOW for B's audience. B's rule reads issuer,
	// outcome and intent only, yet the envelope is refused: B's entry
	// trusts A's org, not every org of A.
	mallory := a.createOrg("Mallory")
	a.publish(mallory.Key, plainAllow).want(t, http.StatusCreated)
	decM := a.req(t, "POST", pathEvaluate, mallory.Key, withEnvelopes("5000"), nil).want(t, http.StatusOK)
	if decM.str("outcome") != "ALLOW" {
		t.Fatalf("Mallory's own decision: %s", decM)
	}
	envM := envelopeFor(t, a, mallory.Key, decM.str("dossier_id"), audB, 0)
	head = b.head(b.o.Key)
	r = b.req(t, "POST", pathEvaluate, b.o.Key, withEnvelopes("5000", envM), nil).wantProblem(t, http.StatusBadRequest, clearance.CodeFederatedDecisionInvalid)
	if !strings.Contains(r.String(), "federated_decisions[0]") || !strings.Contains(r.String(), mallory.ID) || !strings.Contains(r.String(), "is not among the orgs") {
		t.Fatalf("another tenant's envelope: %s", r)
	}
	if b.head(b.o.Key) != head {
		t.Fatal("a refused envelope recorded something")
	}
	// Listed, its ALLOW is evidence like A's own org's (what B's rule
	// would have answered without the org binding), and the dossier names
	// the org; a rule may narrow to one org with f.org.
	b.req(t, "PUT", issuerPath(issuerA), b.o.Key, entry(map[string]any{"jwks_url": jwksURL(a), "max_age_seconds": 3600}, a.o.ID, mallory.ID), nil).
		want(t, http.StatusOK)
	decMB := b.req(t, "POST", pathEvaluate, b.o.Key, withEnvelopes("5000", envM), nil).want(t, http.StatusOK)
	if decMB.str("outcome") != "ALLOW" || !strings.Contains(decMB.String(), "FEDERATED_ALLOW") {
		t.Fatalf("a listed org's envelope: %s", decMB)
	}
	dosM := b.req(t, "GET", "/v1/protocol/dossiers/"+decMB.str("dossier_id"), b.o.Key, nil, nil).want(t, http.StatusOK)
	if lookup(dosM.JSON, "federation.0.org") != mallory.ID {
		t.Fatalf("dossier federation org: %s", dosM)
	}
	b.req(t, "PUT", issuerPath(issuerA), b.o.Key, trustA, nil).want(t, http.StatusOK)

	// The org whose policy reads no federation: unchanged by it.
	envPlain := envelopeFor(t, a, a.o.Key, decA.str("dossier_id"), audPlain, 0)
	if got := b.req(t, "POST", pathEvaluate, plain.Key, withEnvelopes("", envPlain), nil).want(t, http.StatusOK).str("outcome"); got != "ESCALATE" {
		t.Fatalf("a policy without a federation rule: %s", got)
	}

	// Refusals: each 400, naming the envelope, recording nothing.
	head = b.head(b.o.Key)
	refused := func(name, body, want string) {
		t.Helper()
		r := b.req(t, "POST", pathEvaluate, b.o.Key, body, nil).wantProblem(t, http.StatusBadRequest, clearance.CodeFederatedDecisionInvalid)
		if !strings.Contains(r.String(), want) {
			t.Errorf("%s: the refusal does not say %q: %s", name, want, r)
		}
	}
	parts := strings.Split(env, ".")
	sig := []byte(parts[2])
	sig[3] ^= 1
	refused("tampered signature", withEnvelopes("", parts[0]+"."+parts[1]+"."+string(sig)), "signature")
	refused("wrong audience", withEnvelopes("", envPlain), "audience")
	refused("twice", withEnvelopes("", env, env), "twice")
	refused("second of two bad", withEnvelopes("", env, "x.y.z"), "federated_decisions[1]")
	short := envelopeFor(t, a, a.o.Key, decA.str("dossier_id"), audB, 30)
	b.advance(31 * time.Second)
	refused("expired", withEnvelopes("", short), "expired")
	if b.head(b.o.Key) != head {
		t.Fatal("a refused envelope recorded something")
	}

	// Tenant isolation: another org of B uses none of b.o's trust, and
	// can neither read nor change it.
	envOther := envelopeFor(t, a, a.o.Key, decA.str("dossier_id"), audienceOf(t, b, other.Key), 0)
	b.req(t, "POST", pathEvaluate, other.Key, withEnvelopes("", envOther), nil).wantProblem(t, http.StatusBadRequest, clearance.CodeFederatedDecisionInvalid)
	b.req(t, "GET", issuerPath(issuerA), other.Key, nil, nil).wantProblem(t, http.StatusNotFound, clearance.CodeTrustedIssuerNotFound)
	b.req(t, "DELETE", issuerPath(issuerA), other.Key, nil, nil).wantProblem(t, http.StatusNotFound, clearance.CodeTrustedIssuerNotFound)
	if got := b.req(t, "GET", pathFedIssuers, other.Key, nil, nil).want(t, http.StatusOK); len(lookup(got.JSON, "issuers").([]any)) != 0 {
		t.Fatalf("another org sees a trust list: %s", got)
	}
	b.req(t, "GET", issuerPath(issuerA)+"?org_id="+b.o.ID, other.Key, nil, nil).wantProblem(t, http.StatusForbidden, "ORG_MISMATCH")
	// Nor may an org have envelopes made of another org's decisions.
	a2 := a.createOrg("A2")
	a.req(t, "POST", pathFedEnvelopes, a2.Key, map[string]any{"dossier_id": decA.str("dossier_id"), "audience": audB}, nil).
		wantProblem(t, http.StatusNotFound, "DOSSIER_NOT_FOUND")

	// A rotates its grant key and revokes the old one. B fetches A's keys
	// again on an unknown kid (no sooner than KeyRefetchInterval after the
	// last fetch) and at the latest after KeyTTL: deterministic, by B's clock.
	rotated := a.ring.Rotate(mustKey(t, 9), a.clock(), time.Hour)
	revoked, err := rotated.Revoke(a.ring.Active().KID(), a.clock())
	if err != nil {
		t.Fatal(err)
	}
	envOld := envelopeFor(t, a, a.o.Key, decA.str("dossier_id"), audB, 600)
	a.engine.SetGrantKeys(revoked)
	envNew := envelopeFor(t, a, a.o.Key, decA.str("dossier_id"), audB, 600)
	b.advance(federation.KeyRefetchInterval)
	if got := b.req(t, "POST", pathEvaluate, b.o.Key, withEnvelopes("", envNew), nil).want(t, http.StatusOK).str("outcome"); got != "ALLOW" {
		t.Fatalf("an envelope of A's new key: %s", got)
	}
	refused("revoked key", withEnvelopes("", envOld), "not in the issuer's current key set")

	// An issuer whose keys cannot be read: 503, nothing recorded.
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) }))
	defer down.Close()
	b.req(t, "PUT", issuerPath(issuerA), b.o.Key, entry(map[string]any{"jwks_url": down.URL + "/jwks.json"}, a.o.ID), nil).want(t, http.StatusOK)
	b.req(t, "POST", pathEvaluate, b.o.Key, withEnvelopes("", envNew), nil).wantProblem(t, http.StatusServiceUnavailable, clearance.CodeFederationIssuerUnavailable)

	// An inline JWKS: A's set as published now.
	jwks := a.req(t, "GET", "/.well-known/clearance-execution-grant-jwks.json", "", nil, nil).want(t, http.StatusOK)
	b.req(t, "PUT", issuerPath(issuerA), b.o.Key, entry(map[string]any{"jwks": json.RawMessage(jwks.Raw)}, a.o.ID), nil).want(t, http.StatusOK)
	if got := b.req(t, "POST", pathEvaluate, b.o.Key, withEnvelopes("", envNew), nil).want(t, http.StatusOK).str("outcome"); got != "ALLOW" {
		t.Fatalf("an inline JWKS: %s", got)
	}

	// Taken off the trust list: refused again.
	b.req(t, "DELETE", issuerPath(issuerA), b.o.Key, nil, nil).want(t, http.StatusOK)
	refused("removed issuer", withEnvelopes("", envNew), "trust list")
	b.req(t, "GET", issuerPath(issuerA), b.o.Key, nil, nil).wantProblem(t, http.StatusNotFound, clearance.CodeTrustedIssuerNotFound)

	// The trust list is bounded, counted where the entry is added.
	for i := range federation.MaxTrustedIssuers {
		b.req(t, "PUT", issuerPath("issuer-"+string(rune('a'+i%26))+strings.Repeat("x", i/26)), other.Key,
			entry(map[string]any{"jwks": json.RawMessage(jwks.Raw)}, a.o.ID), nil).want(t, http.StatusCreated)
	}
	b.req(t, "PUT", issuerPath("one-too-many"), other.Key, entry(map[string]any{"jwks": json.RawMessage(jwks.Raw)}, a.o.ID), nil).
		wantProblem(t, http.StatusConflict, clearance.CodeTrustedIssuerLimitReached)

	a.ledgerOK(t)
	b.ledgerOK(t)
}

// entry is a trust list entry body trusting orgs of the issuer, with the
// members of m.
func entry(m map[string]any, orgs ...string) map[string]any {
	out := map[string]any{"orgs": orgs}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// auditEnvelope verifies a recorded envelope as an auditor would: against
// the issuer's published JWKS alone.
func auditEnvelope(t *testing.T, issuer *execEnv, jws string, at time.Time) grant.FederatedDecision {
	t.Helper()
	r := issuer.req(t, "GET", "/.well-known/clearance-execution-grant-jwks.json", "", nil, nil).want(t, http.StatusOK)
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(r.Raw, &set); err != nil {
		t.Fatal(err)
	}
	keys := map[string]ed25519.PublicKey{}
	for _, k := range set.Keys {
		pub, kid, err := grant.ParsePublicJWK(k)
		if err != nil {
			t.Fatal(err)
		}
		keys[kid] = pub
	}
	f, _, err := grant.VerifyFederatedDecision(jws, func(kid string) (ed25519.PublicKey, error) {
		if k, ok := keys[kid]; ok {
			return k, nil
		}
		return nil, grant.ErrUnknownKey
	}, grant.VerifyOptions{Now: at})
	if err != nil && !errors.Is(err, grant.ErrTokenExpired) {
		t.Fatalf("the recorded envelope does not verify against the issuer's JWKS: %v", err)
	}
	return f
}
