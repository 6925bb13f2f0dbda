package clearance_test

import (
	"context"
	"testing"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// BenchmarkEvaluateDecisionEvents is BenchmarkEvaluatePebbleSyncParallel
// for an org without a destination and for one with a WEBHOOK integration
// whose worker does not run: what a decision.resolved event costs on the
// request path (delivery is off it).
func BenchmarkEvaluateDecisionEvents(b *testing.B) {
	for _, variant := range []string{"none", "webhook"} {
		b.Run(variant, func(b *testing.B) {
			ctx := context.Background()
			st, err := pebblestore.Open(b.TempDir(), pebblestore.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			e, err := clearance.Open(st, clearance.Options{SecretsKey: []byte("bench-secrets-key-of-32-bytes!!!"), AllowPrivateDestinations: true})
			if err != nil {
				b.Fatal(err)
			}
			o := newOrg(b, e)
			if variant == "webhook" {
				if _, err := e.Webhooks.Connect(ctx, o.Org.ID, []byte(`{"config":{"endpoint_url":"http://127.0.0.1:9/hook","provider_name":"bench"},`+
					`"credentials":{"webhook_secret":"whsec-bench-secret-0123456789"}}`)); err != nil {
					b.Fatal(err)
				}
			}
			evaluateParallel(b, e, request(b, o, `{"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":250.5}`))
			b.StopTimer()
			pending, err := e.Webhooks.Backlog(ctx)
			if err != nil {
				b.Fatal(err)
			}
			want := 0
			if variant == "webhook" {
				want = min(b.N, 1000)
			}
			if pending != want {
				b.Fatalf("%d events pending after %d decisions, want %d", pending, b.N, want)
			}
		})
	}
}
