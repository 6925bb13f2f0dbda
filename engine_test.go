package clearance_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// newEngine opens an engine over a fresh Pebble store in a temp dir.
func newEngine(t testing.TB) *clearance.Engine {
	t.Helper()
	b, err := pebblestore.Open(t.TempDir(), pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	e, err := clearance.Open(b, clearance.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func newOrg(t testing.TB, e *clearance.Engine) clearance.CreatedOrg {
	t.Helper()
	o, err := e.Admin.CreateOrg(context.Background(), "Acme")
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func request(t testing.TB, o clearance.CreatedOrg, body string) clearance.EvaluateRequest {
	t.Helper()
	return clearance.EvaluateRequest{OrgID: o.Org.ID, Route: clearance.RouteEvaluateDecision, Body: []byte(body)}
}

func TestEvaluateRecordsDossierAndLedger(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	o := newOrg(t, e)
	d, err := e.Evaluate(ctx, request(t, o, `{"decision_type":"PAYMENT","workflow_key":"ap","amount":2500}`))
	if err != nil {
		t.Fatal(err)
	}
	if d.Outcome != policy.OutcomeEscalate || d.Mode != policy.ModeShadow {
		t.Fatalf("starter policy in SHADOW should escalate 2500, got %s/%s", d.Outcome, d.Mode)
	}
	if d.PolicySnapshot.BundleID != "starter" || d.PolicySnapshot.BundleDigest == "" {
		t.Fatalf("snapshot %+v", d.PolicySnapshot)
	}
	rec, err := e.Evidence.Dossier(ctx, o.Org.ID, d.DossierID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Digest != d.DossierDigest {
		t.Fatalf("dossier digest %s, decision says %s", rec.Digest, d.DossierDigest)
	}
	var dos clearance.Dossier
	if err := json.Unmarshal(rec.Body, &dos); err != nil {
		t.Fatal(err)
	}
	if dos.IntentAsReceived != `{"decision_type":"PAYMENT","workflow_key":"ap","amount":2500}` || dos.LedgerSeq != d.LedgerSeq {
		t.Fatalf("dossier %+v", dos)
	}
	page, err := e.Audit.Ledger(ctx, o.Org.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	last := page.Entries[len(page.Entries)-1]
	if last.Seq != d.LedgerSeq || last.PayloadDigest != d.DossierDigest || last.SubjectID != d.DossierID {
		t.Fatalf("ledger entry %+v does not record decision %+v", last, d)
	}
	rep, err := e.Audit.VerifyLedger(ctx, o.Org.ID)
	if err != nil || !rep.Valid {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	if _, err := e.Evidence.Dossier(ctx, newOrg(t, e).Org.ID, d.DossierID); !errors.Is(err, clearance.ErrNotFound) {
		t.Fatalf("another org read the dossier: %v", err)
	}
}

func TestIdempotency(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	o := newOrg(t, e)
	r := request(t, o, `{"amount":5}`)
	r.IdempotencyKey = "k1"
	first, err := e.Evaluate(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	// Same body, other whitespace: the same decision.
	r2 := request(t, o, ` { "amount" : 5 } `)
	r2.IdempotencyKey = "k1"
	again, err := e.Evaluate(ctx, r2)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Replayed || again.DecisionID != first.DecisionID || again.LedgerSeq != first.LedgerSeq {
		t.Fatalf("replay %+v, first %+v", again, first)
	}
	other := request(t, o, `{"amount":6}`)
	other.IdempotencyKey = "k1"
	if _, err := e.Evaluate(ctx, other); !errors.Is(err, clearance.ErrConflict) {
		t.Fatalf("other body under the same key: %v", err)
	}
	page, _ := e.Audit.Ledger(ctx, o.Org.ID, 0, 0)
	if got := page.Head.Seq; got != first.LedgerSeq {
		t.Fatalf("replays must not append: head %d, decision %d", got, first.LedgerSeq)
	}
}

func TestConcurrentIdempotentRequestsDecideOnce(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	o := newOrg(t, e)
	const n = 16
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := request(t, o, `{"amount":1}`)
			r.IdempotencyKey = "same"
			d, err := e.Evaluate(ctx, r)
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = d.DecisionID
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("two decisions for one key: %v", ids)
		}
	}
}

func TestPolicyPublishPinAndConflicts(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	o := newOrg(t, e)
	v1 := `{"bundle_id":"b","version":"v1","mode":"ENFORCEMENT","rules":[{"id":"all","outcome":"BLOCK","reason_codes":["NOPE"]}],"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`
	v2 := `{"bundle_id":"b","version":"v2","mode":"ENFORCEMENT","rules":[],"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`
	p1, err := e.Policies.PublishBundle(ctx, o.Org.ID, []byte(v1))
	if err != nil || !p1.Created {
		t.Fatalf("publish v1: %+v %v", p1, err)
	}
	if again, err := e.Policies.PublishBundle(ctx, o.Org.ID, []byte(v1)); err != nil || again.Created {
		t.Fatalf("identical republish should be accepted as existing: %+v %v", again, err)
	}
	if _, err := e.Policies.PublishBundle(ctx, o.Org.ID, []byte(`{"bundle_id":"b","version":"v1","mode":"SHADOW","rules":[],"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`)); !errors.Is(err, clearance.ErrConflict) {
		t.Fatalf("other body under v1: %v", err)
	}
	if _, err := e.Policies.PublishBundle(ctx, o.Org.ID, []byte(v2)); err != nil {
		t.Fatal(err)
	}
	d, err := e.Evaluate(ctx, request(t, o, `{"amount":1}`))
	if err != nil || d.Outcome != policy.OutcomeAllow || d.PolicySnapshot.PolicyVersion != "v2" || d.Mode != policy.ModeEnforcement {
		t.Fatalf("newest version should be active: %+v %v", d, err)
	}
	d, err = e.Evaluate(ctx, request(t, o, `{"amount":1,"context":{"policy_version":"v1"}}`))
	if err != nil || d.Outcome != policy.OutcomeBlock || d.PolicySnapshot.PolicyVersion != "v1" {
		t.Fatalf("pin to v1: %+v %v", d, err)
	}
	if _, err := e.Evaluate(ctx, request(t, o, `{"amount":1,"context":{"policy_version":"v9"}}`)); !errors.Is(err, clearance.ErrConflict) {
		t.Fatalf("unknown pin: %v", err)
	}
	d, err = e.Evaluate(ctx, request(t, o, `{"amount":1,"mode":"SHADOW"}`))
	if err != nil || d.Mode != policy.ModeShadow {
		t.Fatalf("a request may ask for SHADOW: %+v %v", d, err)
	}
	var ce *clearance.Error
	_, err = e.Policies.PublishBundle(ctx, o.Org.ID, []byte(`{"bundle_id":"b","version":"v3","mode":"ENFORCEMENT","rules":[{"id":"x","when":"intent.amount +","outcome":"BLOCK","reason_codes":["X"]}],"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`))
	if !errors.Is(err, clearance.ErrUnprocessable) || !errors.As(err, &ce) || len(ce.Fields) == 0 {
		t.Fatalf("bad CEL should be 422 naming the rule: %v", err)
	}
	rep, err := e.Audit.VerifyLedger(ctx, o.Org.ID)
	if err != nil || !rep.Valid {
		t.Fatalf("verify %+v %v", rep, err)
	}
}

func TestShadowReport(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	b, err := pebblestore.Open(t.TempDir(), pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	e, _ := clearance.Open(b, clearance.Options{Now: func() time.Time { return now }})
	o := newOrg(t, e)
	for _, body := range []string{`{"workflow_key":"a","amount":1}`, `{"workflow_key":"a","amount":20000}`, `{"workflow_key":"b"}`} {
		if _, err := e.Evaluate(ctx, request(t, o, body)); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := e.Evidence.ShadowReport(ctx, o.Org.ID, clearance.Between(now.Add(-time.Hour), now.Add(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total != 3 || rep.ByOutcome[policy.OutcomeAllow] != 1 || rep.ByOutcome[policy.OutcomeBlock] != 1 || rep.ByOutcome[policy.OutcomeEscalate] != 1 {
		t.Fatalf("report %+v", rep)
	}
	if len(rep.ByWorkflow) != 2 || rep.ByWorkflow[0].WorkflowKey != "a" || rep.ByWorkflow[0].Total != 2 {
		t.Fatalf("by workflow %+v", rep.ByWorkflow)
	}
	empty, _ := e.Evidence.ShadowReport(ctx, o.Org.ID, clearance.Between(now.Add(time.Hour), now.Add(2*time.Hour)))
	if empty.Total != 0 {
		t.Fatalf("window excludes: %+v", empty)
	}
}

func BenchmarkEvaluatePebbleSync(b *testing.B) {
	ctx := context.Background()
	e := newEngine(b)
	o := newOrg(b, e)
	body := `{"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":250.5}`
	r := request(b, o, body)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := e.Evaluate(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEvaluatePebbleSyncParallel(b *testing.B) {
	e := newEngine(b)
	o := newOrg(b, e)
	evaluateParallel(b, e, request(b, o, `{"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":250.5}`))
}

// evaluateParallel times r decided by 32 callers per core.
func evaluateParallel(b *testing.B, e *clearance.Engine, r clearance.EvaluateRequest) {
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := e.Evaluate(ctx, r); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "clearance-example-")
	defer os.RemoveAll(dir)
	backend, _ := pebblestore.Open(dir, pebblestore.Options{})
	defer backend.Close()
	engine, _ := clearance.Open(backend, clearance.Options{})

	org, _ := engine.Admin.CreateOrg(ctx, "Acme")
	body := []byte(`{"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":12000}`)
	d, err := engine.Evaluate(ctx, clearance.EvaluateRequest{
		OrgID: org.Org.ID, Route: clearance.RouteEvaluateDecision, Body: body,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(d.Outcome, d.Mode, d.ReasonCodes)
	rep, _ := engine.Audit.VerifyLedger(ctx, org.Org.ID)
	fmt.Println("ledger valid:", rep.Valid, "entries:", rep.EntriesChecked)
	// Output:
	// BLOCK SHADOW [PROTOCOL_OUTCOME_BLOCK POLICY_MATCHED AMOUNT_AT_OR_ABOVE_BLOCK_THRESHOLD]
	// ledger valid: true entries: 3
}

// BenchmarkEvaluateOrgs is BenchmarkEvaluatePebbleSyncParallel over one org
// and over 64, each caller deciding for org i mod orgs: per-org
// serialization must not become a global one.
func BenchmarkEvaluateOrgs(b *testing.B) {
	for _, n := range []int{1, 64} {
		b.Run(fmt.Sprintf("orgs=%d", n), func(b *testing.B) {
			ctx := context.Background()
			e := newEngine(b)
			reqs := make([]clearance.EvaluateRequest, n)
			for i := range reqs {
				reqs[i] = request(b, newOrg(b, e), `{"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":250.5}`)
			}
			var next atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(32)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				r := reqs[int(next.Add(1))%n]
				for pb.Next() {
					if _, err := e.Evaluate(ctx, r); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}
