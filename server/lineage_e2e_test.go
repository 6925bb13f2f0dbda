package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/server"
)

// Evidence routes of decision chains, overrides and dispatches.
const (
	pathChain       = "/v1/protocol/decision-chains/"
	pathChainByEval = "/v1/protocol/decision-chains/by-evaluation/"
	pathDispatches  = "/v1/protocol/executions/dispatches"
)

func pathOverrides(dossierID string) string   { return pathDossiers + dossierID + "/overrides" }
func pathDossierDisp(dossierID string) string { return pathDossiers + dossierID + "/dispatches" }

// chainIDs returns the decision ids of a chain answer, in order.
func chainIDs(r *result) []string {
	list, _ := lookup(r.JSON, "members").([]any)
	out := make([]string, len(list))
	for i, m := range list {
		out[i], _ = m.(map[string]any)["decision_id"].(string)
	}
	return out
}

func sameIDs(a []string, b ...string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

// recordDigest is the digest of a response body's RFC 8785 form: for a
// recorded override or dispatch, the payload_digest of its ledger entry.
func recordDigest(t testing.TB, r *result) string {
	t.Helper()
	c, err := canon.Transform(r.Raw)
	if err != nil {
		t.Fatal(err)
	}
	return sha256Digest(c)
}

// entryOf returns the org's ledger entry at seq.
func (x *execEnv) entryOf(t testing.TB, key string, seq float64) map[string]any {
	t.Helper()
	for _, en := range x.entries(key) {
		if en["seq"] == seq {
			return en
		}
	}
	t.Fatalf("no ledger entry %v", seq)
	return nil
}

func TestDecisionChainsE2E(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	a := x.o
	q := "?org_id=" + a.ID
	get := func(path, key string) *result { return x.req(t, "GET", path, key, nil, nil) }

	root := x.req(t, "POST", pathEvaluate, a.Key, `{"workflow_key":"ap","amount":5}`, nil).want(t, http.StatusOK)
	rootChain := root.str("chain_id")
	if rootChain != clearance.RootChainID(a.ID, root.str("decision_id")) || root.str("parent_decision_id") != "" {
		t.Fatalf("a decision starts its own chain: %s", root)
	}
	x.advance(time.Millisecond)
	child := x.req(t, "POST", pathEvaluate, a.Key,
		`{"workflow_key":"ap","amount":1500,"parent_decision_id":`+lit(root.str("decision_id"))+`}`, nil).want(t, http.StatusOK)
	if child.str("chain_id") != rootChain || child.str("parent_decision_id") != root.str("decision_id") {
		t.Fatalf("a child joins its parent's chain: %s", child)
	}
	dos := get(pathDossiers+child.str("dossier_id"), a.Key).want(t, http.StatusOK)
	if dos.str("chain_id") != rootChain || dos.str("parent_decision_id") != root.str("decision_id") {
		t.Fatalf("the dossier records chain and parent: %s", dos)
	}
	// The deprecated alias reads the same body.
	x.advance(time.Millisecond)
	alias := x.req(t, "POST", pathEvaluateOld, a.Key, `{"amount":5,"parent_decision_id":`+lit(child.str("decision_id"))+`}`, nil).
		want(t, http.StatusOK)
	// A signed intent names its parent inside the signature.
	x.advance(time.Millisecond)
	jws, _ := x.intent(t, intentSpec{mutate: func(m map[string]any) { m["parent_decision_id"] = alias.str("decision_id") }})
	bound := x.bind(t, jws, nil).want(t, http.StatusOK)
	if bound.str("chain_id") != rootChain || bound.str("execution_token") == "" {
		t.Fatalf("enforce-and-bind joins the parent's chain: %s", bound)
	}

	ch := get(pathChain+rootChain+q, a.Key).want(t, http.StatusOK)
	if !sameIDs(chainIDs(ch), root.str("decision_id"), child.str("decision_id"), alias.str("decision_id"), bound.str("decision_id")) {
		t.Fatalf("members in order: %s", ch)
	}
	if ch.num("count") != 4 || ch.str("head.decision_id") != bound.str("decision_id") || ch.str("head.grant_id") != bound.str("grant_id") ||
		ch.str("org_id") != a.ID || ch.str("chain_id") != rootChain || ch.str("members.1.outcome") != "ESCALATE" ||
		ch.str("members.1.dossier_digest") != child.str("dossier_digest") || ch.str("members.1.parent_decision_id") != root.str("decision_id") {
		t.Fatalf("chain: %s", ch)
	}
	byEval := get(pathChainByEval+child.str("evaluation_id")+q, a.Key).want(t, http.StatusOK)
	if string(byEval.Raw) != string(ch.Raw) {
		t.Fatalf("by-evaluation returns the whole chain:\n%s\n%s", byEval, ch)
	}
	// The platform key names the org.
	get(pathChain+rootChain+q, x.platform).want(t, http.StatusOK)

	// Correlation: the header on evaluate-decision, the body member on a hook.
	x.advance(time.Millisecond)
	c1 := x.req(t, "POST", pathEvaluate, a.Key, `{"workflow_key":"ap","amount":5}`, map[string]string{server.HeaderCorrelationID: "run-7"}).
		want(t, http.StatusOK)
	x.advance(time.Millisecond)
	c2 := x.req(t, "POST", pathGate, a.Key, `{"workflow_key":"ap","amount":20000,"correlation_id":"run-7"}`, nil).want(t, http.StatusOK)
	c3 := x.req(t, "POST", pathEvaluate, a.Key, `{"workflow_key":"ar","amount":5}`, map[string]string{server.HeaderCorrelationID: "run-7"}).
		want(t, http.StatusOK)
	corrChain := clearance.CorrelationChainID(a.ID, "ap", "run-7")
	if c1.str("chain_id") != corrChain || c3.str("chain_id") == corrChain {
		t.Fatalf("correlation chains are per (org, workflow_key, correlation id): %s / %s", c1, c3)
	}
	cc := get(pathChainByEval+c1.str("evaluation_id")+q, a.Key).want(t, http.StatusOK)
	if !sameIDs(chainIDs(cc), c1.str("decision_id"), c2.str("decision.decision_id")) || cc.str("chain_id") != corrChain || c2.str("decision.chain_id") != corrChain ||
		cc.str("members.1.correlation_id") != "run-7" || cc.str("members.1.route") != "action-gate" {
		t.Fatalf("correlation chain: %s", cc)
	}

	// Refusals.
	head := x.head(a.Key)
	x.req(t, "POST", pathEvaluate, a.Key, `{"amount":5,"parent_decision_id":"01900000-0000-7000-8000-000000000000"}`, nil).
		wantProblem(t, http.StatusConflict, clearance.CodeParentDecisionUnknown)
	x.req(t, "POST", pathEvaluate, a.Key, `{"amount":5,"parent_decision_id":"p-1"}`, nil).
		wantProblem(t, http.StatusBadRequest, clearance.CodeInvalidParentDecision)
	x.req(t, "POST", pathEvaluate, a.Key, `{"amount":5,"parent_decision_id":5}`, nil).wantProblem(t, http.StatusBadRequest, "WRONG_TYPE")
	jws, _ = x.intent(t, intentSpec{mutate: func(m map[string]any) { m["parent_decision_id"] = "01900000-0000-7000-8000-000000000000" }})
	x.bind(t, jws, nil).wantProblem(t, http.StatusConflict, clearance.CodeParentDecisionUnknown)
	if got := x.head(a.Key); got != head {
		t.Fatalf("refused decisions moved the ledger %d -> %d", head, got)
	}
	for _, p := range []string{pathChain + rootChain, pathChainByEval + child.str("evaluation_id")} {
		get(p, a.Key).wantProblem(t, http.StatusBadRequest, clearance.CodeOrgRequired)
		get(p+"?org_id=", a.Key).wantProblem(t, http.StatusBadRequest, clearance.CodeOrgRequired)
		get(p, x.platform).wantProblem(t, http.StatusBadRequest, clearance.CodeOrgRequired)
	}

	// Cross-org: another org's chain is 404; naming another org is 403.
	b := x.createOrg("Other")
	bq := "?org_id=" + b.ID
	bDec := x.req(t, "POST", pathEvaluate, b.Key, `{"amount":5}`, nil).want(t, http.StatusOK)
	for _, p := range []string{pathChain + rootChain, pathChainByEval + child.str("evaluation_id"), pathChain + corrChain} {
		get(p+bq, b.Key).wantProblem(t, http.StatusNotFound, clearance.CodeChainNotFound)
		get(p+bq, x.platform).wantProblem(t, http.StatusNotFound, clearance.CodeChainNotFound)
		get(p+q, b.Key).wantProblem(t, http.StatusForbidden, clearance.CodeOrgMismatch)
	}
	get(pathChain+bDec.str("chain_id")+q, a.Key).wantProblem(t, http.StatusNotFound, clearance.CodeChainNotFound)
	get(pathChain+bDec.str("chain_id")+bq, b.Key).want(t, http.StatusOK)
	// A parent of another org is unknown.
	x.req(t, "POST", pathEvaluate, b.Key, `{"amount":5,"parent_decision_id":`+lit(root.str("decision_id"))+`}`, nil).
		wantProblem(t, http.StatusConflict, clearance.CodeParentDecisionUnknown)
	// Ids that name nothing.
	for _, id := range []string{"01900000-0000-7000-8000-000000000000", "not-a-uuid", strings.ToUpper(rootChain), root.str("decision_id")} {
		get(pathChain+id+q, a.Key).wantProblem(t, http.StatusNotFound, clearance.CodeChainNotFound)
		get(pathChainByEval+id+q, a.Key).wantProblem(t, http.StatusNotFound, clearance.CodeChainNotFound)
	}
	x.ledgerOK(t)
}

func TestOverridesE2E(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	a := x.o
	auditWriter := x.createKey(a, "audit:write")
	agentKey := x.createKey(a, "decision:write")
	reader := x.createKey(a, "audit:read")

	jws, _ := x.intent(t, intentSpec{amount: 1500})
	esc := x.bind(t, jws, nil).want(t, http.StatusOK)
	if esc.str("outcome") != "ESCALATE" || esc.str("execution_token") != "" {
		t.Fatalf("want a non-authorizing ESCALATE: %s", esc)
	}
	escDossier := esc.str("dossier_id")
	dossierDigest := x.req(t, "GET", pathDossiers+escDossier, a.Key, nil, nil).want(t, http.StatusOK).Header.Get(server.HeaderDossierDigest)
	g := x.grantFor(t, intentSpec{}) // an ALLOW grant of the same workflow
	body := `{"resolution":"APPROVED","actor":{"id":"alice@example.com","type":"human"},"note":"called the customer","reason_code":"CUSTOMER_VERIFIED"}`

	x.req(t, "POST", pathOverrides(escDossier), agentKey, body, nil).wantProblem(t, http.StatusForbidden, clearance.CodeInsufficientScope)
	x.req(t, "POST", pathOverrides(escDossier), reader, body, nil).wantProblem(t, http.StatusForbidden, clearance.CodeInsufficientScope)
	head := x.head(a.Key)
	o := x.req(t, "POST", pathOverrides(escDossier), auditWriter, body, map[string]string{server.HeaderIdempotencyKey: "ov-1"}).
		want(t, http.StatusCreated)
	neverExecutes(t, o)
	if o.str("resolution") != "APPROVED" || o.str("decision_outcome") != "ESCALATE" || o.str("dossier_id") != escDossier ||
		o.str("dossier_digest") != dossierDigest || o.str("actor.id") != "alice@example.com" || o.num("ledger_seq") != float64(head+1) ||
		o.str("execution_token") != "" || o.str("grant_id") != "" {
		t.Fatalf("override: %s", o)
	}
	en := x.entryOf(t, a.Key, float64(head+1))
	if en["kind"] != "decision.overridden" || en["subject_id"] != o.str("override_id") || en["payload_digest"] != recordDigest(t, o) {
		t.Fatalf("ledger entry %v of %s", en, o)
	}
	if x.head(a.Key) != head+1 {
		t.Fatal("an override writes exactly one ledger entry (and no grant)")
	}
	replay := x.req(t, "POST", pathOverrides(escDossier), auditWriter, body, map[string]string{server.HeaderIdempotencyKey: "ov-1"}).
		want(t, http.StatusCreated)
	if replay.Header.Get(server.HeaderReplayed) != "true" || string(replay.Raw) != string(o.Raw) {
		t.Fatalf("replay: %s", replay)
	}
	x.req(t, "POST", pathOverrides(escDossier), auditWriter, strings.Replace(body, "APPROVED", "REJECTED", 1),
		map[string]string{server.HeaderIdempotencyKey: "ov-1"}).wantProblem(t, http.StatusConflict, clearance.CodeIdempotencyKeyReused)
	second := x.req(t, "POST", pathOverrides(escDossier)+"?org_id="+a.ID, a.Key, `{"resolution":"REJECTED","actor":{"id":"bob","type":"human"}}`, nil).
		want(t, http.StatusCreated)

	trail := x.req(t, "GET", pathOverrides(escDossier), reader, nil, nil).want(t, http.StatusOK)
	if trail.str("overrides.0.override_id") != o.str("override_id") || trail.str("overrides.1.override_id") != second.str("override_id") ||
		trail.str("outcome") != "ESCALATE" || trail.str("decision_id") != esc.str("decision_id") || len(lookup(trail.JSON, "overrides").([]any)) != 2 {
		t.Fatalf("trail: %s", trail)
	}

	// Never authority: the same intent is still ESCALATE without a token, the
	// dossier is unchanged, and the ALLOW grant claims as before.
	again := x.bind(t, jws, nil).want(t, http.StatusOK)
	if again.str("outcome") != "ESCALATE" || again.str("execution_token") != "" || again.Header.Get(server.HeaderReplayed) != "true" {
		t.Fatalf("after an approval: %s", again)
	}
	if d := x.req(t, "GET", pathDossiers+escDossier, a.Key, nil, nil).want(t, http.StatusOK).Header.Get(server.HeaderDossierDigest); d != dossierDigest {
		t.Fatal("the override changed the dossier")
	}
	for _, en := range x.entries(a.Key) {
		if en["kind"] == "grant.issued" && en["subject_id"] != g.grantID {
			t.Fatalf("a grant appeared: %v", en)
		}
	}
	x.claimed(t, g)

	// Refusals.
	head = x.head(a.Key)
	allow := g.bind.str("dossier_id")
	x.req(t, "POST", pathOverrides(allow), a.Key, body, nil).wantProblem(t, http.StatusConflict, clearance.CodeOverrideNotApplicable)
	x.req(t, "POST", pathOverrides(escDossier), a.Key, `{"resolution":"MAYBE","actor":{"id":"a","type":"human"}}`, nil).
		wantProblem(t, http.StatusBadRequest, clearance.CodeInvalidOverride)
	x.req(t, "POST", pathOverrides(escDossier), a.Key, `{"resolution":"APPROVED","actor":{"id":"a"}}`, nil).
		wantProblem(t, http.StatusBadRequest, clearance.CodeInvalidOverride)
	x.req(t, "POST", pathOverrides(escDossier), a.Key, `{"resolution":"APPROVED","actor":{"id":"a","type":"human"},"grant":true}`, nil).
		wantProblem(t, http.StatusBadRequest, "UNKNOWN_MEMBER")
	x.req(t, "POST", pathOverrides("01900000-0000-7000-8000-000000000000"), a.Key, body, nil).
		wantProblem(t, http.StatusNotFound, clearance.CodeDossierNotFound)
	if got := x.head(a.Key); got != head {
		t.Fatalf("refused overrides moved the ledger %d -> %d", head, got)
	}
	if r := x.req(t, "GET", pathOverrides(allow), a.Key, nil, nil).want(t, http.StatusOK); len(lookup(r.JSON, "overrides").([]any)) != 0 {
		t.Fatalf("an ALLOW dossier has an empty trail: %s", r)
	}

	// Cross-org: another org's dossier is 404 on both verbs.
	b := x.createOrg("Other")
	x.req(t, "GET", pathOverrides(escDossier), b.Key, nil, nil).wantProblem(t, http.StatusNotFound, clearance.CodeDossierNotFound)
	x.req(t, "POST", pathOverrides(escDossier), b.Key, body, nil).wantProblem(t, http.StatusNotFound, clearance.CodeDossierNotFound)
	x.req(t, "GET", pathOverrides(escDossier)+"?org_id="+b.ID, x.platform, nil, nil).wantProblem(t, http.StatusNotFound, clearance.CodeDossierNotFound)
	x.req(t, "GET", pathOverrides(escDossier)+"?org_id="+a.ID, b.Key, nil, nil).wantProblem(t, http.StatusForbidden, clearance.CodeOrgMismatch)
	if got := x.head(a.Key); got != head {
		t.Fatalf("cross-org requests moved the ledger %d -> %d", head, got)
	}
	x.ledgerOK(t)
}

func TestDispatchesE2E(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	a := x.o
	g := x.grantFor(t, intentSpec{})
	dossierID := g.bind.str("dossier_id")
	dossierDigest := g.bind.str("dossier_digest")
	reqDigest := sha256Digest([]byte(`POST /v1/refunds {"order":"order-1","amount":100}`))
	body := func(token, claimToken string, extra map[string]any) map[string]any {
		m := map[string]any{"execution_token": token, "claim_token": claimToken, "request_digest": reqDigest,
			"target": "https://psp.example/v1/refunds", "dispatched_at": "2026-11-01T12:00:01Z"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	post := func(key string, b any, h map[string]string) *result {
		return x.req(t, "POST", pathDispatches, key, b, h)
	}

	post(a.Key, body(g.token, "clr_claim_none", nil), nil).wantProblem(t, http.StatusConflict, "GRANT_NOT_CLAIMED")
	claimToken := x.claimed(t, g).str("claim_token")
	head := x.head(a.Key)
	first := post(a.Key, body(g.token, claimToken, nil), map[string]string{server.HeaderIdempotencyKey: "dsp-1"}).want(t, http.StatusCreated)
	neverExecutes(t, first)
	if first.str("grant_id") != g.grantID || first.str("dossier_id") != dossierID || first.str("request_digest") != reqDigest ||
		first.str("claim_token_digest") != sha256Digest([]byte(claimToken)) || first.num("ledger_seq") != float64(head+1) {
		t.Fatalf("dispatch: %s", first)
	}
	en := x.entryOf(t, a.Key, float64(head+1))
	if en["kind"] != "execution.dispatched" || en["subject_id"] != first.str("dispatch_id") || en["payload_digest"] != recordDigest(t, first) {
		t.Fatalf("ledger entry %v of %s", en, first)
	}
	replay := post(a.Key, body(g.token, claimToken, nil), map[string]string{server.HeaderIdempotencyKey: "dsp-1"}).want(t, http.StatusCreated)
	if replay.Header.Get(server.HeaderReplayed) != "true" || string(replay.Raw) != string(first.Raw) {
		t.Fatalf("replay: %s", replay)
	}
	byID := body("", claimToken, map[string]any{"grant_id": g.grantID, "target": "https://psp.example/v1/refunds?attempt=2"})
	delete(byID, "execution_token")
	second := post(a.Key, byID, nil).want(t, http.StatusCreated)

	list := x.req(t, "GET", pathDossierDisp(dossierID), a.Key, nil, nil).want(t, http.StatusOK)
	if list.str("dispatches.0.dispatch_id") != first.str("dispatch_id") || list.str("dispatches.1.dispatch_id") != second.str("dispatch_id") ||
		list.str("grant_id") != g.grantID || list.str("grant_state") != "CLAIMED" || len(lookup(list.JSON, "dispatches").([]any)) != 2 {
		t.Fatalf("dispatches of the dossier: %s", list)
	}
	if d := x.req(t, "GET", pathDossiers+dossierID, a.Key, nil, nil).want(t, http.StatusOK).Header.Get(server.HeaderDossierDigest); d != dossierDigest {
		t.Fatal("a dispatch changed the dossier")
	}

	// Refusals change nothing.
	head = x.head(a.Key)
	reader := x.createKey(a, "audit:read")
	post(reader, body(g.token, claimToken, nil), nil).wantProblem(t, http.StatusForbidden, clearance.CodeInsufficientScope)
	post(a.Key, body(g.token, claimToken+"x", nil), nil).wantProblem(t, http.StatusConflict, "CLAIM_TOKEN_MISMATCH")
	post(a.Key, body(g.token, claimToken, map[string]any{"request_digest": "sha256:abc"}), nil).wantProblem(t, http.StatusBadRequest, clearance.CodeInvalidDispatch)
	post(a.Key, body(g.token, claimToken, map[string]any{"dispatched_at": "2026-11-01"}), nil).wantProblem(t, http.StatusBadRequest, clearance.CodeInvalidDispatch)
	post(a.Key, body(g.token, claimToken, map[string]any{"grant_id": "01900000-0000-7000-8000-000000000000"}), nil).
		wantProblem(t, http.StatusBadRequest, clearance.CodeInvalidDispatch)
	post(a.Key, body(g.token, claimToken, map[string]any{"should_execute": true}), nil).wantProblem(t, http.StatusBadRequest, "UNKNOWN_MEMBER")
	other := x.grantFor(t, intentSpec{}) // ISSUED
	head = x.head(a.Key)
	post(a.Key, body(other.token, claimToken, nil), nil).wantProblem(t, http.StatusConflict, "GRANT_NOT_CLAIMED")

	// Cross-org: another org's grant is 404, by token or by id.
	b := x.createOrg("Other")
	post(b.Key, body(g.token, claimToken, nil), nil).wantProblem(t, http.StatusNotFound, "GRANT_NOT_FOUND")
	post(b.Key, byID, nil).wantProblem(t, http.StatusNotFound, "GRANT_NOT_FOUND")
	x.req(t, "GET", pathDossierDisp(dossierID), b.Key, nil, nil).wantProblem(t, http.StatusNotFound, clearance.CodeDossierNotFound)
	x.req(t, "GET", pathDossierDisp(dossierID)+"?org_id="+b.ID, x.platform, nil, nil).wantProblem(t, http.StatusNotFound, clearance.CodeDossierNotFound)
	if got := x.head(a.Key); got != head {
		t.Fatalf("refused dispatches moved the ledger %d -> %d", head, got)
	}

	// The lease boundary (the store's clock), and a finalized grant.
	fg := x.grantFor(t, intentSpec{})
	fc := x.claimed(t, fg).str("claim_token")
	x.finalize(t, fg.token, fc, "COMMITTED", nil).want(t, http.StatusOK)
	post(a.Key, body(fg.token, fc, nil), nil).wantProblem(t, http.StatusConflict, "ALREADY_FINALIZED")
	x.advance(30 * time.Second)
	post(a.Key, body(g.token, claimToken, nil), nil).wantProblem(t, http.StatusConflict, "CLAIM_LEASE_EXPIRED")
	// A decision without a grant has no dispatches.
	jws, _ := x.intent(t, intentSpec{amount: 1500})
	esc := x.bind(t, jws, nil).want(t, http.StatusOK)
	if r := x.req(t, "GET", pathDossierDisp(esc.str("dossier_id")), a.Key, nil, nil).want(t, http.StatusOK); r.str("grant_id") != "" ||
		len(lookup(r.JSON, "dispatches").([]any)) != 0 {
		t.Fatalf("no grant, no dispatches: %s", r)
	}
	x.ledgerOK(t)
}
