package decide

import (
	"testing"
	"time"

	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/policy"
)

// BenchmarkWireToDecision is a decision from the request's bytes to an
// outcome, without storage: strict decoding of the evaluate-decision body,
// the policy input, the canonical intent and its digest (what the dossier
// records), and the starter policy's evaluation, as Evaluate does them.
func BenchmarkWireToDecision(b *testing.B) {
	body := []byte(`{"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":250.5,"actor":{"id":"agent-7","type":"agent"}}`)
	opts := strictjson.Options{RejectUnknown: true}
	starter := policy.Starter()
	now := time.Unix(1_700_000_000, 0)
	b.ReportAllocs()
	for b.Loop() {
		d, err := decode(RouteEvaluateDecision, body, "", opts)
		if err != nil {
			b.Fatal(err)
		}
		in, err := d.intent.Input(now)
		if err != nil {
			b.Fatal(err)
		}
		intent, err := d.canonicalIntent(body)
		if err != nil {
			b.Fatal(err)
		}
		_ = canon.Digest(intent)
		if pd := starter.Evaluate(&in); pd.Outcome != policy.OutcomeAllow {
			b.Fatal(pd.Outcome)
		}
	}
}
