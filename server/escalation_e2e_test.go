package server_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance/approval"
	"github.com/clearancehq/clearance/approval/approvaltest"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/server"
)

// approvalBundle escalates amounts from 1,000 unless a verified approval
// accompanies them, and blocks from 10,000 whatever the approval.
const approvalBundle = `{"bundle_id":"esc","version":"v1","mode":"ENFORCEMENT","rules":[
 {"id":"needs-approval","match":[{"field":"amount","op":"ge","value":1000},{"field":"approval.verified","op":"eq","value":false}],"outcome":"ESCALATE","reason_codes":["NEEDS_APPROVAL"]},
 {"id":"too-big","match":[{"field":"amount","op":"ge","value":10000}],"outcome":"BLOCK","reason_codes":["TOO_BIG"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`

const (
	pathEscalations = "/v1/authority/escalations/"
	pathCompletions = "/v1/authority/presence-completions"
)

// fakeDirectory gives every org the fake approval service, with a
// credential of its own that the fake accepts from then on.
type fakeDirectory struct{ fake *approvaltest.Service }

func (d fakeDirectory) Endpoint(_ context.Context, org string) (approval.Endpoint, error) {
	cred := "cred-" + org
	d.fake.AddCredential(cred, org)
	return approval.Endpoint{BaseURL: d.fake.URL, Credential: cred, Issuer: d.fake.Issuer()}, nil
}

// escEnv is an execEnv whose orgs use a fake approval service (same clock).
type escEnv struct {
	*execEnv
	fake *approvaltest.Service
}

func newEscEnv(t testing.TB) *escEnv {
	t.Helper()
	e := &escEnv{}
	e.execEnv = newExecEnvWith(t, approvalBundle, func(x *execEnv) {
		e.fake = approvaltest.New(t, approvaltest.Options{Now: x.clock})
		x.approvals = fakeDirectory{e.fake}
	})
	return e
}

func managedIntent(m map[string]any) { m["escalation"] = map[string]any{"mode": "MANAGED"} }

// escalate binds a MANAGED intent of amount and requires a managed
// escalation; it returns the bind answer and the escalation id.
func (e *escEnv) escalate(t testing.TB, amount float64) (*result, string) {
	t.Helper()
	jws, _ := e.intent(t, intentSpec{amount: amount, mutate: managedIntent})
	r := e.bind(t, jws, nil).want(t, http.StatusOK)
	id := r.str("managed_escalation.escalation_id")
	if r.str("outcome") != "ESCALATE" || id == "" || r.str("managed_escalation.status") != "PENDING_APPROVAL" ||
		r.str("managed_escalation.status_url") != pathEscalations+id {
		t.Fatalf("want a managed escalation: %s", r)
	}
	if _, ok := r.JSON["execution_token"]; ok {
		t.Fatalf("an escalation carries a grant: %s", r)
	}
	return r, id
}

func (e *escEnv) status(t testing.TB, id string) *result {
	t.Helper()
	return e.req(t, "GET", pathEscalations+id, e.o.Key, nil, nil)
}

func (e *escEnv) complete(t testing.TB, id string) *result {
	t.Helper()
	return e.req(t, "POST", pathCompletions, e.o.Key, map[string]any{"escalation_id": id}, nil)
}

// requestOf is the escalation's approval request at the fake.
func (e *escEnv) requestOf(t testing.TB, id string) string {
	t.Helper()
	req := e.status(t, id).want(t, http.StatusOK).str("approval_request_id")
	if _, ok := e.fake.Get(req); !ok {
		t.Fatalf("the approval service has no request %q", req)
	}
	return req
}

// process runs the escalation worker's due work now.
func (e *escEnv) process(t testing.TB) {
	t.Helper()
	if _, err := e.engine.Escalations.Process(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// noSecrets fails when r shows the approval page locator or the org's
// credential at the approval service.
func (e *escEnv) noSecrets(t testing.TB, r *result, reqID string) {
	t.Helper()
	rec, _ := e.fake.Get(reqID)
	for _, secret := range []string{rec.ApprovalURL, "cred-" + e.o.ID} {
		if secret != "" && bytes.Contains(r.Raw, []byte(secret)) {
			t.Fatalf("the answer shows %q: %s", secret, r)
		}
	}
}

func transitionStates(r *result) []string {
	var out []string
	list, _ := lookup(r.JSON, "transitions").([]any)
	for _, v := range list {
		out = append(out, v.(map[string]any)["status"].(string))
	}
	return out
}

func TestEscalationApprovedToGrantReadyClaimFinalize(t *testing.T) {
	t.Parallel()
	e := newEscEnv(t)
	bind, id := e.escalate(t, 2500)
	req := e.requestOf(t, id)
	rec, _ := e.fake.Get(req)
	if rec.IntentHash != bind.str("intent_hash") || rec.OrgID != e.o.ID || rec.EscalationID != id {
		t.Fatalf("the approval request is not bound to the intent: %+v", rec)
	}
	e.noSecrets(t, bind, req)

	// Pending: no grant; a hint before the human decided changes nothing.
	st := e.status(t, id).want(t, http.StatusOK)
	if st.str("status") != "PENDING_APPROVAL" || st.str("execution_token") != "" {
		t.Fatalf("pending: %s", st)
	}
	if got := e.complete(t, id).want(t, http.StatusAccepted); got.str("status") != "PENDING_APPROVAL" {
		t.Fatalf("a hint before the decision: %s", got)
	}

	e.fake.Approve(req, "ana@example.com")
	done := e.complete(t, id).want(t, http.StatusAccepted)
	e.noSecrets(t, done, req)
	if done.str("status") != "GRANT_READY" || done.str("execution_token") == "" || done.str("approval.approver") != "ana@example.com" ||
		done.str("approval.presence") != grant.PresenceWebAuthnUV || done.str("resolved_outcome") != "ALLOW" {
		t.Fatalf("want GRANT_READY with a grant: %s", done)
	}
	if got := transitionStates(done); strings.Join(got, ",") != "PENDING_APPROVAL,GRANT_READY" {
		t.Fatalf("transitions %v", got)
	}
	// The fresh decision's dossier records the approval with its receipt.
	dos := e.req(t, "GET", pathDossiers+done.str("resolved_dossier_id"), e.o.Key, nil, nil).want(t, http.StatusOK)
	if dos.str("approval.request_id") != req || dos.str("approval.receipt") == "" || dos.str("escalation_id") != id ||
		dos.str("route") != "managed-escalation" || dos.str("parent_decision_id") != bind.str("decision_id") {
		t.Fatalf("the resolved dossier: %s", dos)
	}
	// A replayed hint is accepted and changes nothing.
	again := e.complete(t, id).want(t, http.StatusAccepted)
	if again.str("execution_token") != done.str("execution_token") {
		t.Fatalf("a replayed hint changed the grant: %s", again)
	}

	g := issued{token: done.str("execution_token"), hash: bind.str("intent_hash"), grantID: done.str("grant_id")}
	c := e.claimed(t, g)
	e.finalize(t, g.token, c.str("claim_token"), "COMMITTED", nil).want(t, http.StatusOK)

	// The capsules: the ESCALATE's chain ends with a human's resolution
	// superseding its hitl_dispatched verdict; the fresh decision was
	// disposed by a human and names the receipt.
	capsuleOf := func(dossier string) map[string]any {
		t.Helper()
		r := e.req(t, "GET", pathDossiers+dossier+"/agent-action-capsule?org_id="+e.o.ID, e.o.Key, nil, nil).want(t, http.StatusOK)
		if r.Header.Get(server.HeaderClass1Verified) != "true" {
			t.Fatalf("the capsule of %s failed Class 1", dossier)
		}
		return r.JSON
	}
	closed := capsuleOf(bind.str("dossier_id"))
	if lookup(closed, "disposition.verdict_class") != "resolved" || lookup(closed, "disposition.human_disposed") != true ||
		lookup(closed, "chain.relation") != "supersedes" || lookup(closed["com.github.clearancehq"], "escalation.state") != "GRANT_READY" ||
		lookup(closed["com.github.clearancehq"], "escalation.resolved_decision_id") != done.str("resolved_decision_id") {
		t.Fatalf("the escalation's capsule: %v", closed)
	}
	resolved := capsuleOf(done.str("resolved_dossier_id"))
	if lookup(resolved, "disposition.approver") != "human" || lookup(resolved, "disposition.human_disposed") != true ||
		lookup(resolved["com.github.clearancehq"], "approval.request_id") != req {
		t.Fatalf("the resolved decision's capsule: %v", resolved)
	}
	e.ledgerOK(t)
}

func TestEscalationForgedOrForeignApprovalsGrantNothing(t *testing.T) {
	t.Parallel()
	e := newEscEnv(t)

	// A receipt signed with another key under the published kid.
	_, forged := e.escalate(t, 2000)
	published := mustKey(t, 90)
	e.fake.Publish(published)
	e.fake.SetSigner(kidSigner{kid: published.KID(), key: mustKey(t, 91)})
	e.fake.Approve(e.requestOf(t, forged), "mallory")
	r := e.complete(t, forged).wantProblem(t, http.StatusConflict, "ESCALATION_CONCLUDED")
	if r.str("code") != "ESCALATION_CONCLUDED" {
		t.Fatal(r)
	}
	if st := e.status(t, forged).want(t, http.StatusOK); st.str("status") != "FAILED" || st.str("reason") != "APPROVAL_EVIDENCE_INVALID" ||
		st.str("execution_token") != "" {
		t.Fatalf("a forged receipt: %s", st)
	}
	e.fake.SetSigner(published)

	// The service answers with a receipt of another intent's request.
	_, a := e.escalate(t, 2100)
	_, b := e.escalate(t, 2200)
	ra, rb := e.requestOf(t, a), e.requestOf(t, b)
	receiptA := e.fake.Approve(ra, "ana")
	e.fake.Update(rb, func(r *approvaltest.Record) {
		r.Status, r.Receipt, r.Approver, r.DecidedAt = approvaltest.Approved, receiptA, "ana", e.clock()
	})
	e.complete(t, b).wantProblem(t, http.StatusConflict, "ESCALATION_CONCLUDED")
	if st := e.status(t, b).want(t, http.StatusOK); st.str("status") != "FAILED" || st.str("execution_token") != "" {
		t.Fatalf("a receipt of another intent: %s", st)
	}

	// A's approval named in a completion of escalation C.
	_, c := e.escalate(t, 2300)
	e.req(t, "POST", pathCompletions, e.o.Key, map[string]any{"escalation_id": c, "request_id": ra}, nil).
		wantProblem(t, http.StatusConflict, "COMPLETION_REQUEST_MISMATCH")
	// A's receipt presented as evidence for another intent.
	jws, _ := e.intent(t, intentSpec{amount: 2300})
	e.req(t, "POST", pathBind, e.o.Key, map[string]any{"signed_intent": jws,
		"approval_evidence": map[string]any{"request_id": ra, "receipt": receiptA}}, nil).
		wantProblem(t, http.StatusConflict, "APPROVAL_EVIDENCE_UNVERIFIED")
	if st := e.status(t, c).want(t, http.StatusOK); st.str("status") != "PENDING_APPROVAL" {
		t.Fatalf("escalation C moved: %s", st)
	}
	// A itself still concludes with its own approval.
	if st := e.complete(t, a).want(t, http.StatusAccepted); st.str("status") != "GRANT_READY" {
		t.Fatalf("A: %s", st)
	}
	e.ledgerOK(t)
}

// kidSigner signs with key under another key's kid: a forgery.
type kidSigner struct {
	kid string
	key grant.Key
}

func (k kidSigner) KeyID() string { return k.kid }
func (k kidSigner) Sign(msg []byte) ([]byte, error) {
	return ed25519.Sign(ed25519.NewKeyFromSeed(k.key.Seed()), msg), nil
}

func TestEscalationApprovalServiceDown(t *testing.T) {
	t.Parallel()
	e := newEscEnv(t)
	down := func(w http.ResponseWriter, _ *http.Request) bool {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return true
	}
	_, id := e.escalate(t, 2000)
	req := e.requestOf(t, id)

	e.fake.SetFault(down)
	before := e.fingerprint(t)
	jws, _ := e.intent(t, intentSpec{amount: 3000, mutate: managedIntent})
	e.bind(t, jws, nil).wantProblem(t, http.StatusServiceUnavailable, "APPROVAL_SERVICE_UNAVAILABLE")
	if after := e.fingerprint(t); after != before {
		t.Fatal("a MANAGED escalation the approval service could not open changed the store")
	}

	// A completion while the service is down: accepted, VERIFYING, retried.
	st := e.complete(t, id).want(t, http.StatusAccepted)
	if st.str("status") != "VERIFYING" || st.str("execution_token") != "" {
		t.Fatalf("want VERIFYING: %s", st)
	}
	e.fake.SetFault(nil)
	e.fake.Approve(req, "ana")
	e.process(t) // the retry is not due yet
	if st := e.status(t, id); st.str("status") != "VERIFYING" {
		t.Fatalf("retried early: %s", st)
	}
	e.advance(time.Minute)
	e.process(t)
	if st := e.status(t, id); st.str("status") != "GRANT_READY" || st.str("execution_token") == "" {
		t.Fatalf("after the retry: %s", st)
	}
}

func TestEscalationDeadlineCancelAndDenial(t *testing.T) {
	t.Parallel()
	e := newEscEnv(t)
	_, late := e.escalate(t, 2000)
	_, pending := e.escalate(t, 2100)
	_, denied := e.escalate(t, 2200)

	// Cancel a pending one; the service's request is withdrawn too.
	c := e.req(t, "DELETE", pathEscalations+pending, e.o.Key, nil, nil).want(t, http.StatusOK)
	if c.str("status") != "CANCELLED" || c.str("reason") != "CANCELLED_BY_CALLER" {
		t.Fatalf("cancel: %s", c)
	}
	if rec, _ := e.fake.Get(c.str("approval_request_id")); rec.Status != approvaltest.Cancelled {
		t.Fatalf("the approval request is %s", rec.Status)
	}
	// Cancel a final one: returned as it stands.
	again := e.req(t, "DELETE", pathEscalations+pending, e.o.Key, nil, nil).want(t, http.StatusOK)
	if again.str("status") != "CANCELLED" || again.str("updated_at") != c.str("updated_at") {
		t.Fatalf("cancel again: %s", again)
	}

	// Denied by the approver.
	e.fake.Deny(e.requestOf(t, denied), "bob")
	e.complete(t, denied).wantProblem(t, http.StatusConflict, "ESCALATION_CONCLUDED")
	if st := e.status(t, denied); st.str("status") != "DENIED" || st.str("reason") != "APPROVER_DENIED" {
		t.Fatalf("denied: %s", st)
	}

	// Not approved by the deadline: the worker expires it.
	e.advance(16 * time.Minute)
	e.process(t)
	st := e.status(t, late).want(t, http.StatusOK)
	if st.str("status") != "EXPIRED" || st.str("reason") != "DEADLINE_PASSED" {
		t.Fatalf("past the deadline: %s", st)
	}
	if got := transitionStates(st); strings.Join(got, ",") != "PENDING_APPROVAL,EXPIRED" {
		t.Fatalf("transitions %v", got)
	}
	e.complete(t, late).wantProblem(t, http.StatusConflict, "ESCALATION_CONCLUDED")
	if got := e.req(t, "DELETE", pathEscalations+late, e.o.Key, nil, nil).want(t, http.StatusOK); got.str("status") != "EXPIRED" {
		t.Fatalf("cancelling an expired escalation: %s", got)
	}
	e.ledgerOK(t)
}

func TestEscalationTenantIsolationAndPlatformKey(t *testing.T) {
	t.Parallel()
	e := newEscEnv(t)
	_, id := e.escalate(t, 2000)
	other := e.createOrg("Other")
	e.req(t, "GET", pathEscalations+id, other.Key, nil, nil).wantProblem(t, http.StatusNotFound, "ESCALATION_NOT_FOUND")
	e.req(t, "DELETE", pathEscalations+id, other.Key, nil, nil).wantProblem(t, http.StatusNotFound, "ESCALATION_NOT_FOUND")
	e.req(t, "POST", pathCompletions, other.Key, map[string]any{"escalation_id": id}, nil).
		wantProblem(t, http.StatusNotFound, "ESCALATION_NOT_FOUND")
	e.req(t, "GET", pathEscalations+id, e.platform, nil, nil).wantProblem(t, http.StatusBadRequest, "ORG_ID_REQUIRED")
	if st := e.req(t, "GET", pathEscalations+id+"?org_id="+e.o.ID, e.platform, nil, nil).want(t, http.StatusOK); st.str("escalation_id") != id {
		t.Fatal(st)
	}
	e.req(t, "GET", pathEscalations+id+"?org_id="+other.ID, e.platform, nil, nil).wantProblem(t, http.StatusNotFound, "ESCALATION_NOT_FOUND")
	if st := e.status(t, id); st.str("status") != "PENDING_APPROVAL" {
		t.Fatalf("another org's requests moved the escalation: %s", st)
	}
}

// Exactly one grant when completions race, on one server or several.
func TestEscalationRacingCompletionsOneGrant(t *testing.T) {
	t.Parallel()
	e := newEscEnv(t)
	_, id := e.escalate(t, 2000)
	e.fake.Approve(e.requestOf(t, id), "ana")
	const n = 32
	tokens := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := e.complete(t, id)
			if r.Status != http.StatusAccepted || r.str("status") != "GRANT_READY" {
				t.Errorf("completion %d: %s", i, r)
				return
			}
			tokens[i] = r.str("execution_token")
		})
	}
	wg.Wait()
	for i := range tokens {
		if tokens[i] != tokens[0] || tokens[i] == "" {
			t.Fatalf("completion %d got another grant", i)
		}
	}
	led := e.req(t, "GET", pathLedger+"?limit=1000", e.o.Key, nil, nil).want(t, http.StatusOK)
	grants, decisions := 0, 0
	entries, _ := lookup(led.JSON, "entries").([]any)
	for _, v := range entries {
		switch v.(map[string]any)["kind"] {
		case "grant.issued":
			grants++
		case "decision.recorded":
			decisions++
		}
	}
	if grants != 1 || decisions != 2 {
		t.Fatalf("%d grants and %d decisions for one escalation", grants, decisions)
	}
}

// Approval evidence presented with an intent, verified with the service;
// the grant's claim asks the service again.
func TestApprovalEvidenceVerifiedAndRecheckedAtClaim(t *testing.T) {
	t.Parallel()
	e := newEscEnv(t)
	// The escalation's approval serves as evidence for its own intent only;
	// the escalation's grant is re-checked at claim.
	bind, id := e.escalate(t, 2000)
	req := e.requestOf(t, id)
	e.fake.Approve(req, "ana")
	done := e.complete(t, id).want(t, http.StatusAccepted)
	e.fake.Revoke(req)
	r := e.claim(t, pathClaim, done.str("execution_token"), bind.str("intent_hash"))
	wantFailedClaim(t, r, "APPROVAL_REVOKED")

	// Evidence with a service that cannot be reached: 503, nothing granted.
	jws, _ := e.intent(t, intentSpec{amount: 2000})
	e.fake.SetFault(func(w http.ResponseWriter, _ *http.Request) bool {
		http.Error(w, "down", http.StatusBadGateway)
		return true
	})
	e.req(t, "POST", pathBind, e.o.Key, map[string]any{"signed_intent": jws,
		"approval_evidence": map[string]any{"request_id": req, "receipt": "a.b.c"}}, nil).
		wantProblem(t, http.StatusServiceUnavailable, "APPROVAL_SERVICE_UNAVAILABLE")
	e.fake.SetFault(nil)
	e.req(t, "POST", pathBind, e.o.Key, map[string]any{"signed_intent": jws,
		"approval_evidence": map[string]any{"request_id": "nope"}}, nil).
		wantProblem(t, http.StatusBadRequest, "INVALID_APPROVAL_EVIDENCE")
}

// The same MANAGED intent sent again, later, is answered as recorded,
// without a second request at the approval service; another intent under
// the bound intent_id is refused before any request is opened for it.
func TestEscalationIntentRetriedAndIntentIDReused(t *testing.T) {
	t.Parallel()
	e := newEscEnv(t)
	jws, intentID := e.intent(t, intentSpec{amount: 2000, mutate: managedIntent})
	first := e.bind(t, jws, nil).want(t, http.StatusOK)
	opens := e.fake.Count("POST", "/v1/approval-requests")
	e.advance(3 * time.Second)
	again := e.bind(t, jws, nil).want(t, http.StatusOK)
	if again.Header.Get(server.HeaderReplayed) != "true" ||
		again.str("managed_escalation.escalation_id") != first.str("managed_escalation.escalation_id") {
		t.Fatalf("a retried MANAGED intent: %s", again)
	}
	other, _ := e.intent(t, intentSpec{id: intentID, amount: 3000, mutate: managedIntent})
	e.bind(t, other, nil).wantProblem(t, http.StatusConflict, "INTENT_ID_ALREADY_BOUND")
	if n := e.fake.Count("POST", "/v1/approval-requests"); n != opens {
		t.Fatalf("%d requests opened at the approval service, want %d", n, opens)
	}
}

// Approval evidence obtained beforehand authorizes its own intent once the
// service confirms it; a receipt that was evidence once is never evidence
// for another escalation; a read-only key does not see grant tokens.
func TestApprovalEvidenceGrantsAndReceiptsAreSingleUse(t *testing.T) {
	t.Parallel()
	e := newEscEnv(t)
	// Evidence: a request opened at the service for this exact intent.
	jws, _ := e.intent(t, intentSpec{amount: 2000})
	hash := e.intentHashOf(t, jws)
	cred := "cred-" + e.o.ID
	e.fake.AddCredential(cred, e.o.ID)
	opened := e.openAtFake(t, cred, hash)
	receipt := e.fake.Approve(opened, "ana")
	r := e.req(t, "POST", pathBind, e.o.Key, map[string]any{"signed_intent": jws,
		"approval_evidence": map[string]any{"request_id": opened, "receipt": receipt}}, nil).want(t, http.StatusOK)
	if r.str("outcome") != "ALLOW" || r.str("execution_token") == "" {
		t.Fatalf("approval evidence: %s", r)
	}
	dos := e.req(t, "GET", pathDossiers+r.str("dossier_id"), e.o.Key, nil, nil).want(t, http.StatusOK)
	if dos.str("approval.receipt") != receipt || dos.str("approval.approver") != "ana" {
		t.Fatalf("the dossier's approval: %s", dos)
	}
	e.claimed(t, issued{token: r.str("execution_token"), hash: r.str("intent_hash")})

	// Escalation B's request answered with a receipt whose jti is A's.
	_, a := e.escalate(t, 2100)
	_, b := e.escalate(t, 2200)
	ra, rb := e.requestOf(t, a), e.requestOf(t, b)
	e.fake.Approve(ra, "ana")
	rec, _ := e.fake.Get(rb)
	rec.Approver, rec.DecidedAt = "ana", e.clock()
	rc := e.fake.ReceiptFor(rec, approvaltest.Approved)
	rc.ID = "rcpt_" + ra
	forged := e.fake.Sign(rc)
	e.fake.Update(rb, func(r *approvaltest.Record) {
		r.Status, r.Receipt, r.Approver, r.DecidedAt = approvaltest.Approved, forged, "ana", rec.DecidedAt
	})
	if st := e.complete(t, a).want(t, http.StatusAccepted); st.str("status") != "GRANT_READY" {
		t.Fatalf("A: %s", st)
	}
	e.complete(t, b).wantProblem(t, http.StatusConflict, "ESCALATION_CONCLUDED")
	if st := e.status(t, b); st.str("status") != "FAILED" || st.str("reason") != "APPROVAL_RECEIPT_REUSED" || st.str("execution_token") != "" {
		t.Fatalf("B: %s", st)
	}

	// A read-only key sees GRANT_READY and the grant id, not the token.
	ro := e.createKey(e.o, "decision:read")
	st := e.req(t, "GET", pathEscalations+a, ro, nil, nil).want(t, http.StatusOK)
	if st.str("status") != "GRANT_READY" || st.str("grant_id") == "" || st.str("execution_token") != "" {
		t.Fatalf("read-only: %s", st)
	}
}

// intentHashOf is the intent_hash of a compact JWS intent: SHA-256 of its
// payload bytes.
func (e *escEnv) intentHashOf(t testing.TB, jws string) string {
	t.Helper()
	parts := strings.Split(jws, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	return canon.Digest(payload)
}

// openAtFake opens an approval request at the fake for intentHash, as an
// approval flow outside Clearance would, and returns its id.
func (e *escEnv) openAtFake(t testing.TB, cred, intentHash string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"org_id": e.o.ID, "escalation_id": "outside-1", "intent_hash": intentHash,
		"actor": map[string]any{"id": "agent-7", "type": "agent"}, "action": map[string]any{"type": "payment.send"},
		"expires_at": e.clock().Add(time.Hour).Format(time.RFC3339)})
	rq, _ := http.NewRequest(http.MethodPost, e.fake.URL+"/v1/approval-requests", bytes.NewReader(body))
	rq.Header.Set("Authorization", "Bearer "+cred)
	rq.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(rq)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		RequestID string `json:"request_id"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("open at the fake: %d %v", res.StatusCode, err)
	}
	return out.RequestID
}
