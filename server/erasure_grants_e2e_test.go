package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/clearancehq/clearance/approval/approvaltest"
	"github.com/clearancehq/clearance/capsule"
	"github.com/clearancehq/clearance/escalation"
	"github.com/clearancehq/clearance/privacy"
	"github.com/clearancehq/clearance/proof"
	"github.com/clearancehq/clearance/server"
)

// grantErasureSetting seals the actor (the data subject), the customer in
// the context and the action's target.
const grantErasureSetting = `{"subject":"/actor/id","personal":["/context/customer/email","/context/customer/name","/action/target"]}`

// personalIntent makes an intent spec's intent one of a customer's: actor
// id, context and action target are personal.
func personalIntent(p []string, managed bool) func(m map[string]any) {
	return func(m map[string]any) {
		m["actor"] = map[string]any{"id": p[0], "type": "agent"}
		m["context"] = map[string]any{"customer": map[string]any{"email": p[1], "name": p[2], "tier": "gold"}}
		m["action"].(map[string]any)["target"] = p[3]
		if managed {
			managedIntent(m)
		}
	}
}

// TestErasureCoversGrantsEscalationsAndReplays is the proof for
// enforce-and-bind: a data subject with a claimed and finalized grant, a
// live grant, an escalation concluded into a grant, a pending escalation
// and idempotent replays is erased; then nothing personal of either
// subject is anywhere in the raw store (values, signed intents, grant
// tokens), the ledger, proof packets and capsules verify, the erased
// subject's grants are never claimed, its pending escalation cannot
// conclude into a grant, its replay resurrects nothing, and the other
// subject's grants still claim. Runs on Pebble and PostgreSQL.
func TestErasureCoversGrantsEscalationsAndReplays(t *testing.T) {
	t.Parallel()
	e := &escEnv{}
	e.execEnv = newExecEnvWith(t, approvalBundle, func(x *execEnv) {
		e.fake = approvaltest.New(t, approvaltest.Options{Now: x.clock})
		x.approvals = fakeDirectory{e.fake}
		x.secretsKey = testSecretsKey
	})
	o := e.o
	vkey := testLedgerKey(t).VerifierKey()
	alice := []string{"cust-alice-5521", "alice.grants@example.com", "Alice Grant-Testperson", "iban-alice-DE4450001"}
	bob := []string{"cust-bob-8830", "bob.grants@example.com", "Bob Grant-Testperson", "iban-bob-DE8830002"}
	e.req(t, "PUT", pathDataProtection(o.ID), o.Key, grantErasureSetting, nil).want(t, http.StatusOK)

	var secrets []string // signed intents and grant tokens: they carry the values too
	grantOf := func(p []string, amount float64) (issued, string) {
		t.Helper()
		jws, id := e.intent(t, intentSpec{amount: amount, mutate: personalIntent(p, false)})
		r := e.bind(t, jws, nil).want(t, http.StatusOK)
		g := issued{token: r.str("execution_token"), hash: r.str("intent_hash"), grantID: r.str("grant_id"), intentID: id, bind: r}
		if g.token == "" || r.str("outcome") != "ALLOW" {
			t.Fatalf("want a grant: %s", r)
		}
		secrets = append(secrets, jws, g.token)
		return g, jws
	}

	// Alice: a grant claimed and finalized, a live grant, and replays of
	// its intent answering the same token while she exists.
	done, _ := grantOf(alice, 100)
	c := e.claimed(t, done)
	e.finalize(t, done.token, c.str("claim_token"), "COMMITTED", nil).want(t, http.StatusOK)
	live, liveJWS := grantOf(alice, 200)
	replay := e.bind(t, liveJWS, nil).want(t, http.StatusOK)
	if replay.Header.Get(server.HeaderReplayed) != "true" || replay.str("execution_token") != live.token {
		t.Fatalf("a replay before erasure: %v %s", replay.Header, replay)
	}
	if v := e.req(t, "POST", pathVerifyToken, o.Key, map[string]any{"execution_token": live.token, "intent_hash": live.hash}, nil).
		want(t, http.StatusOK); v.str("sub") != alice[0] || v.str("act.target") != alice[3] {
		t.Fatalf("verify-token of a sealed grant shows the opened values: %s", v)
	}

	// Alice: an escalation approved into a grant, and one left pending.
	escalate := func(p []string) (*result, string) {
		t.Helper()
		jws, _ := e.intent(t, intentSpec{amount: 2500, mutate: personalIntent(p, true)})
		secrets = append(secrets, jws)
		r := e.bind(t, jws, nil).want(t, http.StatusOK)
		id := r.str("managed_escalation.escalation_id")
		if r.str("outcome") != "ESCALATE" || id == "" {
			t.Fatalf("want a managed escalation: %s", r)
		}
		return r, id
	}
	approvedBind, approved := escalate(alice)
	e.fake.Approve(e.requestOf(t, approved), "ana@example.com")
	ready := e.complete(t, approved).want(t, http.StatusAccepted)
	if ready.str("status") != "GRANT_READY" || ready.str("execution_token") == "" {
		t.Fatalf("want GRANT_READY: %s", ready)
	}
	secrets = append(secrets, ready.str("execution_token"))
	escGrant := issued{token: ready.str("execution_token"), hash: approvedBind.str("intent_hash"), grantID: ready.str("grant_id")}
	if again := e.status(t, approved).want(t, http.StatusOK); again.str("execution_token") != escGrant.token {
		t.Fatalf("the status of a sealed GRANT_READY shows its token: %s", again)
	}
	pendingBind, pending := escalate(alice)

	// Bob: a live grant, left alone by alice's erasure.
	bobGrant, bobJWS := grantOf(bob, 300)

	// Erase alice.
	er := e.req(t, "POST", pathErasures(o.ID), o.Key, `{"subject_id":"`+alice[0]+`"}`, nil).want(t, http.StatusCreated)
	p, err := privacy.VerifyReceipt(er.str("receipt"), vkey)
	if err != nil || len(p.KeysDestroyed) != 1 || p.DossiersAffected != 5 { // two grants, two ESCALATEs, one approved decision
		t.Fatalf("receipt %+v: %v (%s)", p, err, er)
	}
	if !strings.Contains(strings.Join(p.StoresTouched, ","), "grants:personal_data_crypto_shredded") {
		t.Fatalf("the receipt does not name the grants: %v", p.StoresTouched)
	}

	// Her grants are never claimed again, nor verified.
	for _, g := range []issued{live, escGrant} {
		wantFailedClaim(t, e.claim(t, pathClaim, g.token, g.hash), "STALE_AUTHORIZATION")
		e.req(t, "POST", pathVerifyToken, o.Key, map[string]any{"execution_token": g.token, "intent_hash": g.hash}, nil).
			wantProblem(t, http.StatusConflict, "STALE_AUTHORIZATION")
	}
	// A replay of her intent resurrects no token.
	if r := e.bind(t, liveJWS, nil); r.Status != http.StatusConflict || r.str("code") != "STALE_AUTHORIZATION" || r.str("execution_token") != "" {
		t.Fatalf("a replay after erasure: %s", r)
	}
	// Her concluded escalation shows no token any more; her pending one
	// cannot conclude into a grant once approved.
	if st := e.status(t, approved).want(t, http.StatusOK); st.str("status") != "GRANT_READY" || st.str("execution_token") != "" {
		t.Fatalf("an erased subject's GRANT_READY escalation: %s", st)
	}
	e.fake.Approve(e.requestOf(t, pending), "ana@example.com")
	e.complete(t, pending)
	st := e.status(t, pending).want(t, http.StatusOK)
	if st.str("status") != string(escalation.StateFailed) || st.str("reason") != escalation.ReasonSubjectErased ||
		st.str("execution_token") != "" || st.str("grant_id") != "" || st.str("resolved_decision_id") != "" {
		t.Fatalf("an erased subject's pending escalation after approval: %s", st)
	}

	// Bob's grant still claims and his replay still answers his token.
	if r := e.bind(t, bobJWS, nil).want(t, http.StatusOK); r.str("execution_token") != bobGrant.token {
		t.Fatalf("bob's replay: %s", r)
	}
	bc := e.claimed(t, bobGrant)
	e.finalize(t, bobGrant.token, bc.str("claim_token"), "COMMITTED", nil).want(t, http.StatusOK)

	// The evidence still verifies: the ledger, and every dossier's proof
	// packet and capsule.
	e.req(t, "POST", pathSeal, o.Key, `{}`, nil).want(t, http.StatusOK)
	if v := e.verify(o.Key); v.JSON["valid"] != true {
		t.Fatalf("the ledger after erasure: %s", v)
	}
	dossiers := []string{done.bind.str("dossier_id"), live.bind.str("dossier_id"), approvedBind.str("dossier_id"),
		ready.str("resolved_dossier_id"), pendingBind.str("dossier_id"), bobGrant.bind.str("dossier_id")}
	for _, id := range dossiers {
		pk := e.req(t, "GET", pathDossiers+id+"/proof-packet?org_id="+o.ID, o.Key, nil, nil).want(t, http.StatusOK)
		if res := proof.Verify(pk.Raw, vkey); !res.Valid {
			t.Fatalf("proof packet of %s after erasure: %+v", id, res.Checks)
		}
		cp := e.req(t, "GET", pathDossiers+id+"/agent-action-capsule?org_id="+o.ID, o.Key, nil, nil).want(t, http.StatusOK)
		if res := capsule.Verify(cp.Raw); !res.OK {
			t.Fatalf("capsule of %s after erasure: %+v", id, res.Findings)
		}
	}
	if r := e.req(t, "GET", pathDossiers+dossiers[0], o.Key, nil, nil).want(t, http.StatusOK); r.Header.Get(server.HeaderPersonalData) != privacy.StatusErased {
		t.Fatalf("alice's dossier after erasure: %v", r.Header)
	}

	// No value of either subject, no signed intent and no grant token (nor
	// the payload segment that carries the values) is in the raw store.
	e.stop()
	var needles [][]byte
	for _, v := range append(alice, bob...) {
		needles = append(needles, []byte(v))
	}
	for _, s := range secrets {
		needles = append(needles, []byte(s), []byte(strings.Split(s, ".")[1]))
	}
	scanRawStore(t, e.dbDir, needles, nil) // bob's key stays; alice's deletion is TestErasureKeepsEvidenceVerifiable's

}
