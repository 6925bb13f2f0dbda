package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/policies"
	"github.com/clearancehq/clearance/proof"
)

// The share-link trio: one link opens verify, reproduce and (when the org
// asks for it) the proof bundle of one dossier, publicly. These run on
// Pebble and, with CLEARANCE_E2E_STORE=postgres, on PostgreSQL.

// sharedPath is the public route of a dossier's link.
func sharedPath(dossierID, route, sig string) string {
	return pathPublicDoss + dossierID + "/" + route + "?sig=" + sig
}

var shareRoutes = []string{clearance.ShareRouteVerify, clearance.ShareRouteReproduce, clearance.ShareRouteProofBundle}

// membersOf is the sorted member names of a JSON object answer.
func topMembers(r *result) []string {
	var out []string
	for k := range r.JSON {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// publishedLedgerKey is the ledger key as the server publishes it.
func (x *execEnv) publishedLedgerKey(t *testing.T) string {
	t.Helper()
	r := x.public(t, pathLedgerKey, nil).want(t, http.StatusOK)
	return strings.TrimSpace(string(r.Raw))
}

func TestShareLinkTrio(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, "")
	dec := x.req(t, "POST", pathEvaluate, x.o.Key, shareDecision, nil).want(t, http.StatusOK)
	id := dec.str("dossier_id")
	sharer := x.createKey(x.o, "audit:write")

	// The answer lists every route the link opens and what each reveals.
	plain := x.share(t, sharer, id, `{"expires_in_seconds":3600}`).want(t, http.StatusCreated)
	sig := plain.str("sig")
	if lookup(plain.JSON, "proof_bundle") != false || plain.str("urls.verify.url") != sharedPath(id, "verify", sig) ||
		plain.str("urls.reproduce.url") != sharedPath(id, "reproduce", sig) || lookup(plain.JSON, "urls.proof_bundle") != nil ||
		plain.str("urls.verify.reveals") != clearance.RevealsVerify || plain.str("urls.reproduce.reveals") != clearance.RevealsReproduce ||
		plain.str("url") != plain.str("urls.verify.url") {
		t.Fatalf("a link without the proof bundle: %s", plain)
	}
	full := x.share(t, sharer, id, `{"expires_in_seconds":3600,"proof_bundle":true}`).want(t, http.StatusCreated)
	fullSig := full.str("sig")
	if lookup(full.JSON, "proof_bundle") != true || full.str("urls.proof_bundle.url") != sharedPath(id, "proof-bundle", fullSig) ||
		full.str("urls.proof_bundle.reveals") != clearance.RevealsProofBundle || full.str("urls.verify.url") != sharedPath(id, "verify", fullSig) {
		t.Fatalf("a link with the proof bundle: %s", full)
	}
	if off := x.share(t, sharer, id, `{"proof_bundle":false}`).want(t, http.StatusCreated); lookup(off.JSON, "proof_bundle") != false {
		t.Fatalf("proof_bundle false: %s", off)
	}

	// Before a checkpoint covers the entry: verify places it by the chain,
	// and the proof bundle, which needs the anchor, says to wait.
	v := x.public(t, sharedPath(id, "verify", sig), nil).want(t, http.StatusOK)
	if lookup(v.JSON, "verified") != true || lookup(v.JSON, "ledger.checkpointed") != false ||
		lookup(v.JSON, "ledger.chain_valid") != true || lookup(v.JSON, "ledger.anchored_checkpoint_valid") != nil {
		t.Fatalf("verify before sealing: %s", v)
	}
	x.public(t, sharedPath(id, "proof-bundle", fullSig), nil).wantProblem(t, http.StatusConflict, clearance.CodeEntryNotYetSealed)

	x.req(t, "POST", pathSeal, x.o.Key, `{}`, nil).want(t, http.StatusOK)
	v = x.public(t, sharedPath(id, "verify", sig), nil).want(t, http.StatusOK)
	if lookup(v.JSON, "verified") != true || lookup(v.JSON, "ledger.checkpointed") != true ||
		lookup(v.JSON, "ledger.anchored_checkpoint_valid") != true || lookup(v.JSON, "ledger.chain_valid") != true ||
		v.num("ledger.checkpoint_tree_size") < dec.num("ledger_seq") {
		t.Fatalf("verify after sealing: %s", v)
	}
	wantNoLeak(t, v.Raw, x.o, dec)

	// The proof bundle verifies offline against the published ledger key,
	// and is the dossier the link names.
	vkey := x.publishedLedgerKey(t)
	pb := x.public(t, sharedPath(id, "proof-bundle", fullSig), nil).want(t, http.StatusOK)
	if res := proof.Verify(pb.Raw, vkey); !res.Valid {
		t.Fatalf("the shared proof bundle does not verify: %+v", res.Checks)
	}
	if res := proof.Verify(pb.Raw, x.otherLedgerKey(t)); res.Valid {
		t.Fatal("the shared proof bundle verified with another ledger key")
	}
	if pb.str("dossier_id") != id || pb.str("dossier_digest") != dec.str("dossier_digest") ||
		pb.Header.Get("Referrer-Policy") != "no-referrer" || pb.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("proof bundle: %s %v", pb, pb.Header)
	}
	// It is the packet the org's own route serves (issued_at aside).
	own := x.req(t, "GET", pathDossiers+id+"/proof-packet?org_id="+x.o.ID, x.o.Key, nil, nil).want(t, http.StatusOK)
	for _, m := range []string{"dossier", "ledger_entry", "ledger_anchor", "ledger_origin", "ledger_verifier_key", "org_id"} {
		if !bytes.Equal(rawMember(t, pb, m), rawMember(t, own, m)) {
			t.Errorf("member %s differs from the org's proof packet", m)
		}
	}
	// A link made without it never opens it: the one refusal.
	refusal := x.public(t, sharedPath(id, "proof-bundle", sig), nil).wantProblem(t, http.StatusNotFound, clearance.CodeShareLinkInvalid)

	// Reproduce: the outcomes and the policy's name and digest, nothing more.
	rp := x.public(t, sharedPath(id, "reproduce", sig), nil).want(t, http.StatusOK)
	wantMembers := []string{"bundle_digest", "dossier_id", "link_expires_at", "matches", "policy_version", "recorded_outcome",
		"reproduced_at", "reproduced_outcome"}
	if got := topMembers(rp); !slices.Equal(got, wantMembers) {
		t.Errorf("reproduce members %v, want %v", got, wantMembers)
	}
	if rp.str("dossier_id") != id || rp.str("recorded_outcome") != dec.str("outcome") || rp.str("reproduced_outcome") != dec.str("outcome") ||
		lookup(rp.JSON, "matches") != true || rp.str("policy_version") != dec.str("policy_snapshot.policy_version") ||
		rp.str("bundle_digest") != dec.str("policy_snapshot.bundle_digest") || rp.str("reproduced_at") != execStart.Format(time.RFC3339) ||
		rp.str("link_expires_at") != plain.str("expires_at") || rp.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("reproduce: %s", rp)
	}
	for _, leak := range []string{x.o.ID, dec.str("decision_id"), "intent", "actor", "reason", "rules", "agent-secret-7", "PAYOUT_SECRET_TYPE",
		"wf-secret-payables", "order-secret-1", "EUR", "org_id", "amount"} {
		if strings.Contains(string(rp.Raw), leak) {
			t.Errorf("the reproduction holds %q: %s", leak, rp.Raw)
		}
	}
	// A browser asking for HTML still gets JSON from the two new routes.
	for _, route := range []string{"reproduce", "proof-bundle"} {
		r := x.public(t, sharedPath(id, route, fullSig), map[string]string{"Accept": "text/html"}).want(t, http.StatusOK)
		if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			t.Errorf("%s to a browser: Content-Type %q", route, r.Header.Get("Content-Type"))
		}
	}

	// Tampered, foreign, expired and revoked links: the one 404 on all
	// three routes, the same detail each time.
	b := x.createOrg("Other")
	decB := x.req(t, "POST", pathEvaluate, b.Key, `{"amount":5}`, nil).want(t, http.StatusOK)
	sigB := x.share(t, b.Key, decB.str("dossier_id"), `{"proof_bundle":true}`).want(t, http.StatusCreated).str("sig")
	payload, mac, _ := strings.Cut(fullSig, ".")
	refused := func(name, dossierID, s string) {
		t.Helper()
		for _, route := range shareRoutes {
			r := x.public(t, sharedPath(dossierID, route, s), nil).wantProblem(t, http.StatusNotFound, clearance.CodeShareLinkInvalid)
			if r.str("detail") != refusal.str("detail") || strings.Contains(string(r.Raw), x.o.ID) || strings.Contains(string(r.Raw), b.ID) {
				t.Errorf("%s on %s: the refusal differs or names an org: %s", name, route, r)
			}
		}
	}
	refused("mac tampered", id, payload+"."+flipAt(mac, 4))
	refused("payload tampered", id, flipAt(payload, 12)+"."+mac)
	refused("grants byte set without the mac", id, flipAt(payload, 23)+"."+mac)
	refused("another org's link on this dossier", id, sigB)
	refused("this link on another org's dossier", decB.str("dossier_id"), fullSig)
	refused("another id of the org", dec.str("decision_id"), fullSig)

	x.advance(time.Hour)
	refused("expired", id, fullSig)
	fresh := x.share(t, sharer, id, `{"proof_bundle":true}`).want(t, http.StatusCreated).str("sig")
	for _, route := range shareRoutes {
		x.public(t, sharedPath(id, route, fresh), nil).want(t, http.StatusOK)
	}
	x.req(t, "DELETE", pathShareRevoke, sharer, nil, nil).want(t, http.StatusOK)
	refused("revoked", id, fresh)
	// Org B's links are untouched by org A's revocation.
	x.req(t, "POST", pathSeal, b.Key, `{}`, nil).want(t, http.StatusOK)
	for _, route := range shareRoutes {
		x.public(t, sharedPath(decB.str("dossier_id"), route, sigB), nil).want(t, http.StatusOK)
	}
}

// rawMember is one member of a JSON object answer, as sent.
func rawMember(t *testing.T, r *result, name string) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r.Raw, &m); err != nil {
		t.Fatal(err)
	}
	return m[name]
}

func TestSharedReproductionKeepsItsConflictsClear(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, "")
	dec := x.req(t, "POST", pathEvaluate, x.o.Key, shareDecision, nil).want(t, http.StatusOK)
	id := dec.str("dossier_id")
	sig := x.share(t, x.o.Key, id, `{}`).want(t, http.StatusCreated).str("sig")

	// The dossier now names a bundle the org never published.
	gone := "sha256:" + strings.Repeat("ab", 32)
	x.stop()
	withRawDB(t, x.dbDir, func(db rawDB) {
		body := db.dossierBody(x.o.ID, id)
		db.putDossierBody(x.o.ID, id, bytes.Replace(body, []byte(dec.str("policy_snapshot.bundle_digest")), []byte(gone), 1))
	})
	x.open(x.ring)

	own := x.req(t, "GET", pathDossiers+id+"/reproduce?org_id="+x.o.ID, x.o.Key, nil, nil).
		wantProblem(t, http.StatusConflict, policies.CodeRecordedPolicyUnavailable)
	r := x.public(t, sharedPath(id, "reproduce", sig), nil).wantProblem(t, http.StatusConflict, policies.CodeRecordedPolicyUnavailable)
	// The org's own answer names the policy; the public one names nothing.
	if !strings.Contains(own.str("detail"), gone) {
		t.Fatalf("the org's answer: %s", own)
	}
	for _, leak := range []string{gone, dec.str("policy_snapshot.policy_version"), x.o.ID} {
		if strings.Contains(string(r.Raw), leak) {
			t.Errorf("the public conflict holds %q: %s", leak, r)
		}
	}
	// And verify reports the change.
	if v := x.public(t, sharedPath(id, "verify", sig), nil).want(t, http.StatusOK); lookup(v.JSON, "verified") != false {
		t.Fatalf("a changed dossier verified: %s", v)
	}
}

func TestShareLinkTrioSharesOneRateLimit(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, "")
	id := x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":5}`, nil).want(t, http.StatusOK).str("dossier_id")
	x.req(t, "POST", pathSeal, x.o.Key, `{}`, nil).want(t, http.StatusOK)
	sig := x.share(t, x.o.Key, id, `{"proof_bundle":true}`).want(t, http.StatusCreated).str("sig")
	x.opts.RateLimit, x.opts.RateBurst = 0.001, 1
	x.reopen(x.ring)

	x.public(t, sharedPath(id, "reproduce", sig), nil).want(t, http.StatusOK)
	for _, route := range shareRoutes {
		r := x.public(t, sharedPath(id, route, sig), nil).wantProblem(t, http.StatusTooManyRequests, "RATE_LIMITED")
		if r.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: no Retry-After: %v", route, r.Header)
		}
	}
	// Invalid links are refused before the limiter.
	for _, route := range shareRoutes {
		x.public(t, sharedPath(id, route, "x"), nil).wantProblem(t, http.StatusNotFound, clearance.CodeShareLinkInvalid)
	}
}
