package server_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	pathSpendGates        = "/v1/execution/spend-gates"
	pathSpendReservations = "/v1/execution/spend-reservations/"
)

// spendBundle allows everything, within a budget of 1,000 EUR a day for
// the refunds workflow (the intents of execEnv are 100 EUR refunds by
// default).
const spendBundle = `{"bundle_id":"spend","version":"v1","mode":"ENFORCEMENT",
 "spend_gates":[{"id":"refunds.daily","workflow_keys":["refunds"],"currency":"EUR","limit":"1000","window":"DAY"}],
 "rules":[],"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`

// gateStatus reads one gate's budget through the API.
func (x *execEnv) gateStatus(t testing.TB, gateID string) *result {
	t.Helper()
	return x.req(t, "GET", pathSpendGates+"/"+gateID+"?org_id="+x.o.ID, x.o.Key, nil, nil).want(t, http.StatusOK)
}

func wantBudget(t testing.TB, r *result, reserved, committed, held, remaining string) {
	t.Helper()
	got := []string{r.str("reserved"), r.str("committed"), r.str("held"), r.str("remaining")}
	if want := []string{reserved, committed, held, remaining}; !slices.Equal(got, want) {
		t.Fatalf("budget (reserved, committed, held, remaining) = %v, want %v: %s", got, want, r)
	}
}

// 64 claims race for a budget that holds 10 of them, half through one
// server and half through another over the same data: exactly 10 run, and
// the budget then moves with every outcome (committed, released, held,
// reconciled) and frees exactly what it should.
func TestSpendGateRacingClaimsNeverOverspend(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, spendBundle)
	y := x.peer()
	const n = 64
	grants := make([]issued, n)
	for i := range grants {
		grants[i] = x.grantFor(t, intentSpec{})
	}
	wantBudget(t, x.gateStatus(t, "refunds.daily"), "0", "0", "0", "1000")

	results := make([]*result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		e := x.env
		if i%2 == 1 {
			e = y
		}
		wg.Go(func() {
			<-start
			results[i], errs[i] = e.send("POST", pathClaim, x.o.Key,
				map[string]any{"execution_token": grants[i].token, "intent_hash": grants[i].hash}, nil)
		})
	}
	close(start)
	wg.Wait()
	var won, lost []int
	for i, r := range results {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		switch {
		case r.Status == http.StatusOK && lookup(r.JSON, "should_execute") == true:
			won = append(won, i)
		default:
			wantFailedClaim(t, r, "SPEND_LIMIT_EXCEEDED")
			lost = append(lost, i)
		}
	}
	if len(won) != 10 {
		t.Fatalf("%d claims ran within a budget of 10", len(won))
	}
	wantBudget(t, x.gateStatus(t, "refunds.daily"), "1000", "0", "0", "0")

	// Settle the ten: 4 committed, 3 failed, 3 indeterminate.
	outcomes := []string{"COMMITTED", "COMMITTED", "COMMITTED", "COMMITTED", "FAILED", "FAILED", "FAILED",
		"INDETERMINATE", "INDETERMINATE", "INDETERMINATE"}
	for k, i := range won {
		r := x.finalize(t, grants[i].token, results[i].str("claim_token"), outcomes[k], nil).want(t, http.StatusOK)
		if r.str("outcome") != outcomes[k] {
			t.Fatalf("finalized %s: %s", outcomes[k], r)
		}
	}
	wantBudget(t, x.gateStatus(t, "refunds.daily"), "0", "400", "300", "300")
	res := x.req(t, "GET", pathSpendReservations+grants[won[7]].grantID+"?org_id="+x.o.ID, x.o.Key, nil, nil).want(t, http.StatusOK)
	if res.str("state") != "HELD" {
		t.Fatalf("an INDETERMINATE claim's reservation: %s", res)
	}

	// The 300 left hold three more claims, not a fourth.
	for k, i := range lost[:4] {
		r := x.claim(t, pathClaim, grants[i].token, grants[i].hash)
		if k < 3 {
			r.want(t, http.StatusOK)
			results[i] = r
			continue
		}
		wantFailedClaim(t, r, "SPEND_LIMIT_EXCEEDED")
	}
	// A held amount reconciled as FAILED is free again; one reconciled as
	// COMMITTED is spent.
	x.req(t, "POST", pathReconcile+"/"+grants[won[7]].grantID, x.o.Key, map[string]any{"resolution": "FAILED"}, nil).want(t, http.StatusOK)
	x.req(t, "POST", pathReconcile+"/"+grants[won[8]].grantID, x.o.Key, map[string]any{"resolution": "COMMITTED"}, nil).want(t, http.StatusOK)
	wantBudget(t, x.gateStatus(t, "refunds.daily"), "300", "500", "100", "100")
	x.claimed(t, grants[lost[3]])
	wantBudget(t, x.gateStatus(t, "refunds.daily"), "400", "500", "100", "0")

	// Enforce-and-bind sees the budget gone: a non-authorizing answer with
	// the gate's reason code, and the dossier says what the gate saw.
	jws, _ := x.intent(t, intentSpec{})
	b := x.bind(t, jws, nil).want(t, http.StatusOK)
	if b.str("outcome") != "BLOCK" || b.str("execution_token") != "" || !slices.Contains(strs(b.JSON["reason_codes"]), "SPEND_LIMIT_EXCEEDED") {
		t.Fatalf("bind over budget: %s", b)
	}
	d := x.req(t, "GET", pathDossiers+b.str("dossier_id"), x.o.Key, nil, nil).want(t, http.StatusOK)
	spent, _ := d.JSON["spend"].([]any)
	if len(spent) != 1 || fmt.Sprint(spent[0].(map[string]any)["used"]) != "1000" || fmt.Sprint(spent[0].(map[string]any)["gate_id"]) != "refunds.daily" {
		t.Fatalf("dossier spend: %s", d)
	}
	x.ledgerOK(t)
}

// Rules see the budget: a policy escalates before the budget is gone, and
// a currency the gate does not count is refused rather than let through.
func TestSpendGateSeenByPolicy(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, `{"bundle_id":"spend","version":"v1","mode":"ENFORCEMENT",
 "spend_gates":[{"id":"refunds.daily","workflow_keys":["refunds"],"currency":"EUR","limit":"250","window":"DAY","per_actor":true}],
 "rules":[{"id":"low","match":[{"field":"spend.refunds.daily.remaining","op":"le","value":150}],"outcome":"ESCALATE","reason_codes":["BUDGET_LOW"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`)
	g := x.grantFor(t, intentSpec{})
	x.claimed(t, g)
	jws, _ := x.intent(t, intentSpec{})
	if b := x.bind(t, jws, nil).want(t, http.StatusOK); b.str("outcome") != "ESCALATE" || !slices.Contains(strs(b.JSON["reason_codes"]), "BUDGET_LOW") {
		t.Fatalf("with 150 left: %s", b)
	}
	// Per actor: another actor has a budget of its own.
	other, _ := x.intent(t, intentSpec{mutate: func(m map[string]any) { m["actor"] = map[string]any{"id": "agent-8", "type": "agent"} }})
	if b := x.bind(t, other, nil).want(t, http.StatusOK); b.str("outcome") != "ALLOW" {
		t.Fatalf("another actor's budget: %s", b)
	}
	r := x.req(t, "GET", pathSpendGates+"?org_id="+x.o.ID+"&actor_id=agent-7", x.o.Key, nil, nil).want(t, http.StatusOK)
	gates, _ := r.JSON["spend_gates"].([]any)
	if len(gates) != 1 || gates[0].(map[string]any)["remaining"] != "150" || gates[0].(map[string]any)["partition"] != "agent-7" {
		t.Fatalf("agent-7's budget: %s", r)
	}
	usd, _ := x.intent(t, intentSpec{mutate: func(m map[string]any) {
		m["action"].(map[string]any)["currency"] = "USD"
	}})
	if b := x.bind(t, usd, nil).want(t, http.StatusOK); b.str("outcome") != "BLOCK" || !slices.Contains(strs(b.JSON["reason_codes"]), "SPEND_CURRENCY_MISMATCH") {
		t.Fatalf("another currency: %s", b)
	}
	x.req(t, "GET", pathSpendGates+"/nope?org_id="+x.o.ID, x.o.Key, nil, nil).wantProblem(t, http.StatusNotFound, "SPEND_GATE_NOT_FOUND")
	// Another org sees none of it.
	o2 := x.createOrg("Other")
	x.req(t, "GET", pathSpendReservations+g.grantID+"?org_id="+o2.ID, o2.Key, nil, nil).wantProblem(t, http.StatusNotFound, "SPEND_GATE_NOT_FOUND")
	x.req(t, "GET", pathSpendReservations+g.grantID+"?org_id="+x.o.ID, o2.Key, nil, nil).want(t, http.StatusForbidden)
	if r := x.req(t, "GET", pathSpendGates+"?org_id="+o2.ID, o2.Key, nil, nil).want(t, http.StatusOK); len(r.JSON["spend_gates"].([]any)) != 0 {
		t.Fatalf("another org's gates: %s", r)
	}
}

func strs(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, s := range l {
		out = append(out, fmt.Sprint(s))
	}
	return out
}

// A claim whose lease passes without a finalization keeps its amount used
// (an unknown outcome frees nothing) until it is reconciled.
func TestSpendGateLapsedClaimHoldsUntilReconciled(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, spendBundle)
	g := x.grantFor(t, intentSpec{amount: 700})
	late := x.grantFor(t, intentSpec{amount: 400}) // bound while the budget was unused
	x.claimed(t, g)
	x.advance(31 * time.Second)
	wantBudget(t, x.gateStatus(t, "refunds.daily"), "700", "0", "0", "300")
	wantFailedClaim(t, x.claim(t, pathClaim, late.token, late.hash), "SPEND_LIMIT_EXCEEDED")
	x.req(t, "POST", pathReconcile+"/"+g.grantID, x.o.Key, map[string]any{"resolution": "FAILED"}, nil).want(t, http.StatusOK)
	wantBudget(t, x.gateStatus(t, "refunds.daily"), "0", "0", "0", "1000")
	r := x.req(t, "GET", pathSpendReservations+g.grantID+"?org_id="+x.o.ID, x.o.Key, nil, nil).want(t, http.StatusOK)
	if r.str("state") != "RELEASED" {
		t.Fatalf("reservation after reconciling a lapsed claim: %s", r)
	}
	x.claimed(t, late)
	x.ledgerOK(t)
}

// A new version of a gate with another window continues from what was
// spent: every claim counts in every kind of window, whatever the gate's.
func TestSpendGateWindowChangeKeepsCounting(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, spendBundle) // 1,000 EUR a DAY
	for range 9 {
		g := x.grantFor(t, intentSpec{})
		x.finalize(t, g.token, x.claimed(t, g).str("claim_token"), "COMMITTED", nil).want(t, http.StatusOK)
	}
	week := strings.Replace(strings.Replace(spendBundle, `"window":"DAY"`, `"window":"WEEK"`, 1), `"version":"v1"`, `"version":"v2"`, 1)
	if r := x.publish(x.o.Key, week); r.Status >= 300 {
		t.Fatalf("publish: %s", r)
	}
	wantBudget(t, x.gateStatus(t, "refunds.daily"), "0", "900", "0", "100")
	g := x.grantFor(t, intentSpec{})
	x.claimed(t, g)
	jws, _ := x.intent(t, intentSpec{})
	if b := x.bind(t, jws, nil).want(t, http.StatusOK); b.str("outcome") != "BLOCK" {
		t.Fatalf("over the weekly budget: %s", b)
	}
	// Another currency is another budget, never a conversion.
	usd := strings.Replace(strings.Replace(week, `"currency":"EUR"`, `"currency":"USD"`, 1), `"version":"v2"`, `"version":"v3"`, 1)
	if r := x.publish(x.o.Key, usd); r.Status >= 300 {
		t.Fatalf("publish: %s", r)
	}
	wantBudget(t, x.gateStatus(t, "refunds.daily"), "0", "0", "0", "1000")
}
