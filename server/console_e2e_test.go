package server_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/clearancehq/clearance/client"
)

// The console's data routes over real HTTP, on the e2e backend: decisions
// filtered newest first, activity by bucket, outcome and mode, executions
// by state; and no org reads another's.

const (
	pathConsoleDecisions = "/v1/console/decisions"
	pathConsoleActivity  = "/v1/console/activity"
)

func TestConsoleDecisionsAndActivity(t *testing.T) {
	x := newExecEnv(t, bandsBundle)
	c, agent := x.agentFor(t)
	ctx := context.Background()
	// Decisions of every outcome (the bundle's bands), another workflow,
	// and one full cycle, a minute apart.
	for _, amount := range []int{100, 2000, 6000, 20000, 30000} {
		x.advance(time.Minute)
		x.req(t, "POST", pathEvaluate, x.o.Key, map[string]any{"decision_type": "REFUND", "workflow_key": "refunds", "amount": amount}, nil).
			want(t, http.StatusOK)
	}
	x.advance(time.Minute)
	x.req(t, "POST", pathEvaluate, x.o.Key, map[string]any{"decision_type": "PAYMENT", "workflow_key": "payouts", "amount": 50}, nil).
		want(t, http.StatusOK)
	x.advance(time.Minute)
	if _, err := agent.Run(ctx, refundIntent("s-console", 100), func(context.Context, *client.ClaimResponse) (*client.EffectEvidence, error) {
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	x.advance(time.Minute)

	window := "&from=" + url.QueryEscape(execStart.Add(-time.Hour).Format(time.RFC3339)) + "&to=" + url.QueryEscape(x.clock().Format(time.RFC3339))
	list := func(q string) []map[string]any {
		t.Helper()
		r := x.req(t, "GET", pathConsoleDecisions+"?org_id="+x.o.ID+q+window, x.o.Key, nil, nil).want(t, http.StatusOK)
		var out []map[string]any
		for _, d := range r.JSON["decisions"].([]any) {
			out = append(out, d.(map[string]any))
		}
		return out
	}
	all := list("")
	if len(all) != 7 {
		t.Fatalf("decisions: %d, want 7: %v", len(all), all)
	}
	for i := 1; i < len(all); i++ {
		if all[i-1]["created_at"].(string) < all[i]["created_at"].(string) {
			t.Fatalf("not newest first: %v", all)
		}
	}
	if all[0]["decision_type"] != "REFUND" || all[1]["workflow_key"] != "payouts" {
		t.Fatalf("newest decisions: %v, %v", all[0], all[1])
	}
	blocked := list("&outcome=BLOCK")
	if len(blocked) != 2 || blocked[0]["outcome"] != "BLOCK" || blocked[1]["outcome"] != "BLOCK" {
		t.Fatalf("BLOCK: %v", blocked)
	}
	if p := list("&workflow=payouts&mode=ENFORCEMENT"); len(p) != 1 || p[0]["outcome"] != "ALLOW" {
		t.Fatalf("payouts: %v", p)
	}
	r := x.req(t, "GET", pathConsoleDecisions+"?limit=2"+window, x.o.Key, nil, nil).want(t, http.StatusOK)
	if got := r.JSON["decisions"].([]any); len(got) != 2 || r.JSON["truncated"] != true ||
		got[0].(map[string]any)["dossier_id"] != all[0]["dossier_id"] {
		t.Fatalf("limit 2: %s", r)
	}
	// The Go client reads the same, typed.
	from, to := execStart.Add(-time.Hour).Format(time.RFC3339), x.clock().Format(time.RFC3339)
	typed, err := c.ConsoleDecisions(ctx, client.Query("outcome", "BLOCK"), client.Query("from", from), client.Query("to", to))
	if err != nil || len(typed.Decisions) != 2 || typed.Decisions[0].DossierId.String() != blocked[0]["dossier_id"] {
		t.Fatalf("client: %+v, %v", typed, err)
	}
	act, err := c.ConsoleActivity(ctx, client.Query("from", from), client.Query("to", to))
	if err != nil || act.Totals.ByOutcome.BLOCK != 2 || act.Executions.COMMITTED != 1 {
		t.Fatalf("client activity: %+v, %v", act, err)
	}
	// Every listed dossier opens.
	x.req(t, "GET", pathDossiers+all[3]["dossier_id"].(string), x.o.Key, nil, nil).want(t, http.StatusOK)

	a := x.req(t, "GET", pathConsoleActivity+"?bucket=hour"+window, x.o.Key, nil, nil).want(t, http.StatusOK)
	totals := a.JSON["totals"].(map[string]any)
	byOutcome := totals["by_outcome"].(map[string]any)
	want := map[string]float64{"ALLOW": 3, "ESCALATE": 1, "REVIEW_REQUIRED": 1, "BLOCK": 2}
	for o, n := range want {
		if byOutcome[o] != n {
			t.Errorf("totals %s = %v, want %v", o, byOutcome[o], n)
		}
	}
	if totals["by_mode"].(map[string]any)["ENFORCEMENT"] != 7.0 {
		t.Errorf("by mode: %v", totals["by_mode"])
	}
	var summed float64
	for _, s := range a.JSON["series"].([]any) {
		for _, n := range s.(map[string]any)["by_outcome"].(map[string]any) {
			summed += n.(float64)
		}
	}
	if summed != 7 || a.JSON["bucket"] != "hour" {
		t.Errorf("series sum %v, bucket %v", summed, a.JSON["bucket"])
	}
	if ex := a.JSON["executions"].(map[string]any); ex["COMMITTED"] != 1.0 || a.JSON["reconciliation_queue"] != 0.0 {
		t.Errorf("executions %v, queue %v", ex, a.JSON["reconciliation_queue"])
	}
	if lat := a.JSON["latency"].(map[string]any); lat["requests"].(float64) < 1 || lat["p99_ms"].(float64) < lat["p50_ms"].(float64) {
		t.Errorf("latency %v", lat)
	}
	if d := x.req(t, "GET", pathConsoleActivity+"?bucket=day"+window, x.o.Key, nil, nil).want(t, http.StatusOK); len(d.JSON["series"].([]any)) < 1 {
		t.Errorf("day buckets: %s", d)
	}

	// Bad input is a 400 that names the parameter.
	for _, q := range []string{"?outcome=MAYBE", "?mode=LIVE", "?workflow=%20x", "?limit=0", "?limit=201", "?from=yesterday"} {
		x.req(t, "GET", pathConsoleDecisions+q, x.o.Key, nil, nil).want(t, http.StatusBadRequest)
	}
	x.req(t, "GET", pathConsoleActivity+"?bucket=week", x.o.Key, nil, nil).want(t, http.StatusBadRequest)
	x.req(t, "GET", pathConsoleActivity+"?bucket=hour&from=2020-01-01T00:00:00Z&to=2020-03-01T00:00:00Z", x.o.Key, nil, nil).
		wantProblem(t, http.StatusBadRequest, "INVALID_REQUEST")

	// Isolation: another org sees none of it, and names no other org.
	other := x.createOrg("Other")
	if r := x.req(t, "GET", pathConsoleDecisions+"?from="+url.QueryEscape(execStart.Add(-time.Hour).Format(time.RFC3339)), other.Key, nil, nil).
		want(t, http.StatusOK); len(r.JSON["decisions"].([]any)) != 0 {
		t.Fatalf("another org's list: %s", r)
	}
	x.req(t, "GET", pathConsoleDecisions+"?org_id="+x.o.ID, other.Key, nil, nil).wantProblem(t, http.StatusForbidden, "ORG_MISMATCH")
	x.req(t, "GET", pathConsoleActivity+"?org_id="+x.o.ID, other.Key, nil, nil).wantProblem(t, http.StatusForbidden, "ORG_MISMATCH")
	// A key without a decision read scope is refused.
	writer := x.createKey(x.o, "policy:write")
	x.req(t, "GET", pathConsoleActivity, writer, nil, nil).want(t, http.StatusForbidden)
}
