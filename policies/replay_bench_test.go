package policies_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/policies"
)

// BenchmarkReplay replays a structured-predicate draft over 20,000
// recorded decisions of three workflows: reading each dossier from Pebble,
// rebuilding its input from the recorded intent, evaluating and counting.
// decisions/s is the figure the replay promises per core (run it with
// -cpu 1: a replay is one goroutine).
func BenchmarkReplay(b *testing.B) {
	const n = 20_000
	x := newLifecycle(b, clearance.Options{ReplayInlineLimit: n})
	p := x.engine.Policies
	if _, err := p.PublishBundle(x.ctx, x.org, limitBundle("v1", 5000)); err != nil {
		b.Fatal(err)
	}
	from := x.clock()
	workflows := []string{"ap", "payroll", "travel"}
	for i := range n {
		body := fmt.Sprintf(`{"decision_type":"PAYMENT","workflow_key":%q,"amount":%d,"action":{"type":"pay","currency":"EUR","target":"vendor"},"actor":{"id":"agent-%d","type":"agent"},"context":{"vendor":"v-%d","region":"eu"}}`,
			workflows[i%3], (i*137)%10_000, i%50, i%200)
		if _, err := x.engine.Decide.Evaluate(x.ctx, clearance.EvaluateRequest{OrgID: x.org, Route: clearance.RouteEvaluateDecision, Body: []byte(body)}); err != nil {
			b.Fatal(err)
		}
		x.advance(time.Millisecond)
	}
	if _, _, err := p.PutDraft(x.ctx, policies.DraftRequest{OrgID: x.org, Name: "tight", Raw: limitBundle("v2", 1000)}); err != nil {
		b.Fatal(err)
	}
	req := fmt.Appendf(nil, `{"draft":"tight","from":%q,"to":%q}`, from.Format(time.RFC3339Nano), x.clock().Format(time.RFC3339Nano))
	b.ResetTimer()
	for b.Loop() {
		r, _, err := p.StartReplay(x.ctx, x.org, req)
		if err != nil || r.Result.Replayed != n {
			b.Fatalf("replay: %+v %v", r.Result, err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}
