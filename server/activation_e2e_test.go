package server_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/server"
)

// smallOnlyBundle (v1) allows amounts below 1,000; freezeBundle (v2) blocks
// everything. Both are ENFORCEMENT.
const (
	smallOnlyBundle = `{"bundle_id":"pay","version":"v1","mode":"ENFORCEMENT","rules":[
 {"id":"big","match":[{"field":"amount","op":"ge","value":1000}],"outcome":"BLOCK","reason_codes":["TOO_BIG"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`
	freezeBundle = `{"bundle_id":"pay","version":"v2","mode":"ENFORCEMENT","rules":[],
 "default":{"outcome":"BLOCK","reason_codes":["FROZEN"]}}`
)

// activatePath is the activation route of a version.
func activatePath(version string) string { return pathBundles + "/" + version + "/activate" }

// pinned is an intentSpec for amount whose context pins version.
func pinned(amount float64, version string) intentSpec {
	return intentSpec{amount: amount, mutate: func(m map[string]any) {
		m["context"] = map[string]any{"policy_version": version}
	}}
}

// wantNoGrant fails unless r is a 200 decision of outcome in SHADOW that
// carries no grant.
func wantNoGrant(t testing.TB, r *result, outcome string) {
	t.Helper()
	r.want(t, http.StatusOK)
	if r.str("outcome") != outcome || r.str("mode") != "SHADOW" || r.str("execution_token") != "" || r.str("grant_id") != "" {
		t.Fatalf("want %s in SHADOW without a grant: %s", outcome, r)
	}
}

// A pin to a version that is not the active one is evaluated and recorded,
// never authorizes: an agent cannot choose its own, laxer, policy.
func TestPinnedOlderVersionNeverAuthorizes(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, smallOnlyBundle)
	x.publish(x.o.Key, freezeBundle).want(t, http.StatusCreated)

	d := x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":500,"context":{"policy_version":"v1"}}`, nil)
	wantNoGrant(t, d, "ALLOW")
	if d.str("policy_snapshot.policy_version") != "v1" || d.str("active_policy_version") != "v2" {
		t.Fatalf("pinned decision: %s", d)
	}
	dos := x.req(t, "GET", pathDossiers+d.str("dossier_id"), x.o.Key, nil, nil).want(t, http.StatusOK)
	if dos.str("policy_pin") != "v1" || dos.str("active_policy_version") != "v2" || dos.str("mode") != "SHADOW" ||
		dos.str("policy_snapshot.policy_version") != "v1" {
		t.Fatalf("the dossier must record the pin and the active version: %s", dos)
	}

	jws, _ := x.intent(t, pinned(500, "v1"))
	b := x.bind(t, jws, nil)
	wantNoGrant(t, b, "ALLOW")
	if b.str("policy_snapshot.policy_version") != "v1" || b.str("active_policy_version") != "v2" {
		t.Fatalf("pinned enforce-and-bind: %s", b)
	}

	// Unpinned, and pinned to the active version: the freeze applies.
	for _, s := range []intentSpec{{amount: 500}, pinned(500, "v2")} {
		jws, _ := x.intent(t, s)
		if r := x.bind(t, jws, nil).want(t, http.StatusOK); r.str("outcome") != "BLOCK" || r.str("execution_token") != "" ||
			r.str("active_policy_version") != "" {
			t.Fatalf("under the active freeze: %s", r)
		}
	}
	x.ledgerOK(t)
}

// Activation is explicit and ledgered: staging changes no decision, a claim
// re-evaluates under the version active at claim time whatever the intent
// pins, and an org can roll back on purpose.
func TestPolicyActivation(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, smallOnlyBundle)
	other := x.createOrg("Other")
	readOnly := x.createKey(x.o, "policy:read")

	// A grant under v1, pinned to v1 while v1 is active.
	g1 := x.grantFor(t, pinned(500, "v1"))

	// Staged: published, not active; decisions do not change.
	st := x.req(t, "POST", pathBundles+"?activate=false", x.o.Key, freezeBundle, nil).want(t, http.StatusCreated)
	if st.str("version") != "v2" || lookup(st.JSON, "active") != false {
		t.Fatalf("staged publish: %s", st)
	}
	list := x.req(t, "GET", pathBundles, x.o.Key, nil, nil).want(t, http.StatusOK)
	if list.str("active_version") != "v1" || lookup(list.JSON, "bundles.0.active") != true || lookup(list.JSON, "bundles.1.active") != false {
		t.Fatalf("list after staging: %s", list)
	}
	g2 := x.grantFor(t, intentSpec{amount: 500})
	jws, _ := x.intent(t, pinned(500, "v2"))
	wantNoGrant(t, x.bind(t, jws, nil), "BLOCK") // the staged version can be tried out, in SHADOW

	// Activate v2: every outstanding grant is stale at claim, pinned or not.
	head := x.head(x.o.Key)
	a := x.req(t, "POST", activatePath("v2"), x.o.Key, `{}`, nil).want(t, http.StatusOK)
	if a.str("active_version") != "v2" || a.str("previous_version") != "v1" || lookup(a.JSON, "changed") != true ||
		uint64(a.num("ledger_seq")) != head+1 || a.str("bundle_digest") != st.str("bundle_digest") || a.str("activated_at") == "" {
		t.Fatalf("activate v2: %s", a)
	}
	wantFailedClaim(t, x.claim(t, pathClaim, g1.token, g1.hash), clearance.CodeStaleAuthorization)
	wantFailedClaim(t, x.claim(t, pathConsume, g2.token, g2.hash), clearance.CodeStaleAuthorization)
	if one := x.req(t, "GET", pathBundles+"/v2", x.o.Key, nil, nil).want(t, http.StatusOK); lookup(one.JSON, "active") != true {
		t.Fatalf("v2 after activation: %s", one)
	}

	// Activating the active version again changes nothing (alias line).
	head = x.head(x.o.Key)
	again := x.req(t, "POST", pathPolicies+"/v2/activate", x.o.Key, `{}`, nil).want(t, http.StatusOK)
	if again.str("active_version") != "v2" || lookup(again.JSON, "changed") != false || again.num("ledger_seq") != a.num("ledger_seq") {
		t.Fatalf("re-activation: %s", again)
	}
	if h := x.head(x.o.Key); h != head {
		t.Fatalf("re-activation moved the head %d -> %d", head, h)
	}

	// A precondition on the active version guards against a concurrent change.
	x.req(t, "POST", activatePath("v1"), x.o.Key, `{"expected_active_version":"v1"}`, nil).
		wantProblem(t, http.StatusConflict, clearance.CodeActiveVersionMismatch)
	// Unknown versions, other orgs and other scopes change nothing.
	x.req(t, "POST", activatePath("v9"), x.o.Key, `{}`, nil).wantProblem(t, http.StatusNotFound, clearance.CodePolicyNotFound)
	x.req(t, "POST", activatePath("v1"), other.Key, `{}`, nil).wantProblem(t, http.StatusNotFound, clearance.CodePolicyNotFound)
	x.req(t, "POST", activatePath("v1"), readOnly, `{}`, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	if h := x.head(x.o.Key); h != head {
		t.Fatalf("refused activations moved the head %d -> %d", head, h)
	}

	// Roll back on purpose: v1 grants again, and its grants claim.
	back := x.req(t, "POST", activatePath("v1"), x.o.Key, `{"expected_active_version":"v2"}`, nil).want(t, http.StatusOK)
	if back.str("active_version") != "v1" || back.str("previous_version") != "v2" || lookup(back.JSON, "changed") != true {
		t.Fatalf("rollback: %s", back)
	}
	x.claimed(t, x.grantFor(t, intentSpec{amount: 500}))
	// The platform key activates for a named org.
	x.req(t, "POST", activatePath("v1")+"?org_id="+x.o.ID, x.platform, `{}`, nil).want(t, http.StatusOK)

	// Every activation is a ledger entry naming the version and its digest.
	var got []string
	for _, en := range x.entries(x.o.Key) {
		if en["kind"] == ledger.KindPolicyActivated {
			got = append(got, fmt.Sprintf("%s %s", en["subject_id"], en["payload_digest"]))
		}
	}
	v1Digest := x.req(t, "GET", pathBundles+"/v1", x.o.Key, nil, nil).want(t, http.StatusOK).str("bundle_digest")
	want := []string{"v1 " + v1Digest, "v2 " + st.str("bundle_digest"), "v1 " + v1Digest}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("activation entries:\n got %v\nwant %v", got, want)
	}
	x.ledgerOK(t)
}

// Publishing activates by default; an identical republish changes nothing,
// not even which version is active, and ?activate takes true or false only.
func TestPublishActivatesByDefault(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o := e.createOrg("Acme")
	e.publish(o.Key, bundleJSON("v1", "ENFORCEMENT", 100)).want(t, http.StatusCreated)
	p2 := e.do("POST", pathBundles+"?activate=true", o.Key, bundleJSON("v2", "ENFORCEMENT", 10), nil).want(t, http.StatusCreated)
	if lookup(p2.JSON, "active") != true {
		t.Fatalf("publish with activate=true: %s", p2)
	}
	e.do("POST", activatePath("v1"), o.Key, `{}`, nil).want(t, http.StatusOK)
	head := e.head(o.Key)
	again := e.publish(o.Key, bundleJSON("v2", "ENFORCEMENT", 10)).want(t, http.StatusOK)
	if lookup(again.JSON, "active") != false || e.head(o.Key) != head {
		t.Fatalf("an identical republish must not activate: %s", again)
	}
	if d := e.decide(o.Key, `{"amount":50}`); d.str("policy_snapshot.policy_version") != "v1" {
		t.Fatalf("after the rollback v1 decides: %s", d)
	}
	head = e.head(o.Key)
	for _, q := range []string{"?activate=no", "?activate=", "?activate=TRUE", "?activate=true&activate=false"} {
		e.do("POST", pathBundles+q, o.Key, bundleJSON("v3", "ENFORCEMENT", 10), nil).wantProblem(t, http.StatusBadRequest, "INVALID_QUERY")
	}
	if e.head(o.Key) != head {
		t.Fatal("refused publishes moved the head")
	}
}
