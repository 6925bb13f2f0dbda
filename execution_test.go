package clearance_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/registry"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// execEnv is an engine with signing keys, a clock both the engine and the
// store read, an org, and a registered agent key.
type execEnv struct {
	e        *clearance.Engine
	org      clearance.CreatedOrg
	agent    grant.Key
	provider grant.Key
	ring     *grant.KeyRing
	now      *atomic.Int64 // unix nanos
	seq      atomic.Int64
}

func newExecEnv(t testing.TB, bundle string) *execEnv {
	t.Helper()
	return newExecEnvWith(t, bundle, clearance.Options{})
}

// newExecEnvWith is newExecEnv with engine options (its clock and grant
// keys are set here).
func newExecEnvWith(t testing.TB, bundle string, opts clearance.Options) *execEnv {
	t.Helper()
	return newExecEnvOver(t, bundle, opts, nil)
}

// newExecEnvOver is newExecEnvWith over wrap(the Pebble store); a nil wrap
// is the store itself.
func newExecEnvOver(t testing.TB, bundle string, opts clearance.Options, wrap func(store.Backend) store.Backend) *execEnv {
	t.Helper()
	x := &execEnv{now: &atomic.Int64{}}
	x.now.Store(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, x.now.Load()).UTC() }
	ps, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Close() })
	var b store.Backend = ps
	if wrap != nil {
		b = wrap(ps)
	}
	signing, _ := grant.KeyFromSeed(seed(1))
	x.ring = grant.NewKeyRing(signing)
	opts.Now, opts.GrantKeys = clock, x.ring
	x.e, err = clearance.Open(b, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	x.org = newOrg(t, x.e)
	x.agent, _ = grant.KeyFromSeed(seed(2))
	x.provider, _ = grant.KeyFromSeed(seed(3))
	for kind, k := range map[registry.Kind]grant.Key{registry.KindAgent: x.agent, registry.KindProvider: x.provider} {
		jwk, _ := json.Marshal(k.PublicJWK())
		r := registry.Registration{KID: k.KID(), PublicJWK: jwk}
		if kind == registry.KindProvider {
			r.Issuer = "psp" // the iss its receipts must name
		}
		if _, _, err := x.e.Admin.RegisterKey(ctx, x.org.Org.ID, kind, r); err != nil {
			t.Fatal(err)
		}
	}
	if bundle != "" {
		if _, err := x.e.Policies.PublishBundle(ctx, x.org.Org.ID, []byte(bundle)); err != nil {
			t.Fatal(err)
		}
	}
	return x
}

func seed(b byte) []byte {
	s := make([]byte, 32)
	s[0] = b
	return s
}

func (x *execEnv) advance(d time.Duration) { x.now.Add(int64(d)) }

const enforceAll = `{"bundle_id":"pay","version":"v1","mode":"ENFORCEMENT","rules":[
 {"id":"big","match":[{"field":"amount","op":"ge","value":10000}],"outcome":"BLOCK","reason_codes":["TOO_BIG"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`

// intentMembers returns the members of a fresh refund intent of x's org for
// amount, issued at x's start; prefix starts its ids (intent, nonce, scope).
func (x *execEnv) intentMembers(prefix string, amount float64) map[string]any {
	n := x.seq.Add(1)
	return map[string]any{
		"intent_id": fmt.Sprintf("%sintent-%d", prefix, n), "org_id": x.org.Org.ID, "actor": map[string]any{"id": "agent-7", "type": "agent"},
		"action":       map[string]any{"type": "refund", "amount": amount, "currency": "EUR", "target": "order-1"},
		"workflow_key": "refunds", "decision_type": "REFUND", "nonce": fmt.Sprintf("%snonce-%d", prefix, n),
		"concurrency_scope": fmt.Sprintf("%sscope-%d", prefix, n), "escalation": map[string]any{"mode": "NONE"},
		"issued_at": "2026-11-01T12:00:00Z",
	}
}

// sign signs m, canonicalized, as an execution intent with x's agent key.
func (x *execEnv) sign(t testing.TB, m map[string]any) string {
	t.Helper()
	payload, err := canon.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := grant.SignIntent(x.agent, payload)
	if err != nil {
		t.Fatal(err)
	}
	return jws
}

// intent signs an execution intent for amount in scope ("" for its own).
func (x *execEnv) intent(t testing.TB, amount float64, scope, effect string) (jws, id string) {
	t.Helper()
	m := x.intentMembers("", amount)
	if scope != "" {
		m["concurrency_scope"] = scope
	}
	if effect != "" {
		m["expected_effect_digest"] = effect
	}
	return x.sign(t, m), m["intent_id"].(string)
}

func (x *execEnv) bind(t testing.TB, jws string) clearance.AuthorityDecision {
	t.Helper()
	d, err := x.e.EnforceAndBind(context.Background(), clearance.AuthorityRequest{OrgID: x.org.Org.ID, SignedIntent: jws})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func effectDigest(s string) string { return canon.Digest([]byte(s)) }

func TestFullCycleWithReceipt(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, enforceAll)
	effect := effectDigest("refund-42")
	jws, _ := x.intent(t, 120, "order-1", effect)
	d := x.bind(t, jws)
	if d.Outcome != "ALLOW" || d.ExecutionToken == "" || d.Mode != "ENFORCEMENT" {
		t.Fatalf("expected a grant: %+v", d)
	}
	st, err := x.e.VerifyGrant(ctx, x.org.Org.ID, d.ExecutionToken, d.IntentHash)
	if err != nil || !st.Valid || st.State != claim.StateIssued {
		t.Fatalf("verify: %+v %v", st, err)
	}
	c, err := x.e.Claim(ctx, clearance.ClaimRequest{OrgID: x.org.Org.ID, ExecutionToken: d.ExecutionToken, IntentHash: d.IntentHash})
	if err != nil || !c.ShouldExecute || c.ClaimToken == "" {
		t.Fatalf("claim: %+v %v", c, err)
	}
	att, err := grant.VerifyAttestation(c.ClaimAttestation, x.ring, grant.VerifyOptions{Now: time.Unix(0, x.now.Load()), Issuer: "clearance"})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(c.ClaimToken))
	if att.ClaimTokenDigest != canon.FormatDigest(sum) || att.Binding.IntentHash != d.IntentHash || att.GrantID != d.GrantID {
		t.Fatalf("attestation %+v", att)
	}
	if _, err := x.e.Claim(ctx, clearance.ClaimRequest{OrgID: x.org.Org.ID, ExecutionToken: d.ExecutionToken, IntentHash: d.IntentHash}); !errors.Is(err, clearance.ErrConflict) {
		t.Fatalf("second claim: %v", err)
	}
	receipt, err := grant.SignReceipt(x.provider, grant.ReceiptClaims{Issuer: "psp", GrantID: d.GrantID, EffectDigest: effect, IssuedAt: 1})
	if err != nil {
		t.Fatal(err)
	}
	f, err := x.e.Finalize(ctx, clearance.FinalizeRequest{OrgID: x.org.Org.ID, ExecutionToken: d.ExecutionToken, ClaimToken: c.ClaimToken,
		Outcome: claim.OutcomeCommitted, Receipt: &clearance.EffectReceipt{Profile: "VP-3", Receipt: receipt}})
	if err != nil {
		t.Fatal(err)
	}
	if !f.EffectConfirmed || f.Evidence == nil || f.Evidence.Kind != claim.EvidenceSignedReceipt || !f.ReceiptVerification.Verified {
		t.Fatalf("finalize %+v", f)
	}
	if _, err := x.e.Finalize(ctx, clearance.FinalizeRequest{OrgID: x.org.Org.ID, ExecutionToken: d.ExecutionToken, ClaimToken: c.ClaimToken,
		Outcome: claim.OutcomeCommitted}); !errors.Is(err, clearance.ErrConflict) {
		t.Fatalf("replayed finalize: %v", err)
	}
	rep, err := x.e.Audit.VerifyLedger(ctx, x.org.Org.ID)
	if err != nil || !rep.Valid {
		t.Fatalf("ledger %+v %v", rep, err)
	}
}

func TestNonAuthorizingAnswers(t *testing.T) {
	x := newExecEnv(t, enforceAll)
	jws, _ := x.intent(t, 20000, "s", "")
	if d := x.bind(t, jws); d.Outcome != "BLOCK" || d.ExecutionToken != "" {
		t.Fatalf("BLOCK must not carry a grant: %+v", d)
	}
	shadow := newExecEnv(t, "") // starter policy, SHADOW
	jws, _ = shadow.intent(t, 5, "s", "")
	if d := shadow.bind(t, jws); d.Outcome != "ALLOW" || d.Mode != "SHADOW" || d.ExecutionToken != "" {
		t.Fatalf("SHADOW must not carry a grant: %+v", d)
	}
}

func TestIntentIDIsTheIssuanceBoundary(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, enforceAll)
	jws, id := x.intent(t, 10, "s", "")
	first := x.bind(t, jws)
	again := x.bind(t, jws)
	if !again.Replayed || again.ExecutionToken != first.ExecutionToken || again.DecisionID != first.DecisionID {
		t.Fatalf("replay differs: %+v vs %+v", again, first)
	}
	// Another intent under the same intent_id.
	payload := map[string]any{"intent_id": id, "org_id": x.org.Org.ID, "actor": map[string]any{"id": "a"},
		"action": map[string]any{"type": "refund", "amount": 11}, "nonce": "other", "concurrency_scope": "s",
		"escalation": map[string]any{"mode": "NONE"}, "issued_at": "2026-11-01T12:00:00Z"}
	b, _ := canon.Marshal(payload)
	other, _ := grant.SignIntent(x.agent, b)
	if _, err := x.e.EnforceAndBind(ctx, clearance.AuthorityRequest{OrgID: x.org.Org.ID, SignedIntent: other}); !errors.Is(err, clearance.ErrConflict) {
		t.Fatalf("another intent under a bound intent_id: %v", err)
	}
	if _, err := x.e.EnforceAndBind(ctx, clearance.AuthorityRequest{OrgID: x.org.Org.ID, SignedIntent: jws, IdempotencyKey: "nope"}); !errors.Is(err, clearance.ErrInvalidRequest) {
		t.Fatalf("Idempotency-Key other than intent_id: %v", err)
	}
}

func TestIntentSignatureAndCanonicalForm(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, enforceAll)
	stranger, _ := grant.KeyFromSeed(seed(9))
	payload := []byte(`{"intent_id":"i"}`)
	forged, _ := grant.SignIntent(stranger, payload)
	if _, err := x.e.EnforceAndBind(ctx, clearance.AuthorityRequest{OrgID: x.org.Org.ID, SignedIntent: forged}); !errors.Is(err, clearance.ErrForbidden) {
		t.Fatalf("unregistered key: %v", err)
	}
	notCanonical, _ := grant.SignIntent(x.agent, []byte(`{ "intent_id": "i" }`))
	if _, err := x.e.EnforceAndBind(ctx, clearance.AuthorityRequest{OrgID: x.org.Org.ID, SignedIntent: notCanonical}); !errors.Is(err, clearance.ErrInvalidRequest) {
		t.Fatalf("non-canonical payload: %v", err)
	}
	if _, err := x.e.EnforceAndBind(ctx, clearance.AuthorityRequest{OrgID: x.org.Org.ID, SignedIntent: "a.b.c"}); !errors.Is(err, clearance.ErrInvalidRequest) {
		t.Fatalf("garbage: %v", err)
	}
	jws, _ := x.intent(t, 10, "s", "")
	if _, err := x.e.Admin.RevokeKey(ctx, x.org.Org.ID, registry.KindAgent, x.agent.KID()); err != nil {
		t.Fatal(err)
	}
	if _, err := x.e.EnforceAndBind(ctx, clearance.AuthorityRequest{OrgID: x.org.Org.ID, SignedIntent: jws}); !errors.Is(err, clearance.ErrForbidden) {
		t.Fatalf("revoked agent key: %v", err)
	}
}

func TestStaleAuthorizationAndLease(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, enforceAll)
	jws, _ := x.intent(t, 500, "s1", "")
	d := x.bind(t, jws)
	// A stricter bundle makes the bound intent stale.
	strict := `{"bundle_id":"pay","version":"v2","mode":"ENFORCEMENT","rules":[],"default":{"outcome":"ESCALATE","reason_codes":["HOLD"]}}`
	if _, err := x.e.Policies.PublishBundle(ctx, x.org.Org.ID, []byte(strict)); err != nil {
		t.Fatal(err)
	}
	_, err := x.e.Claim(ctx, clearance.ClaimRequest{OrgID: x.org.Org.ID, ExecutionToken: d.ExecutionToken, IntentHash: d.IntentHash})
	var ce *clearance.Error
	if !errors.As(err, &ce) || ce.Code != clearance.CodeStaleAuthorization {
		t.Fatalf("stale claim: %v", err)
	}

	y := newExecEnv(t, enforceAll)
	jws, _ = y.intent(t, 500, "s2", "")
	d = y.bind(t, jws)
	c, err := y.e.Claim(ctx, clearance.ClaimRequest{OrgID: y.org.Org.ID, ExecutionToken: d.ExecutionToken, IntentHash: d.IntentHash})
	if err != nil {
		t.Fatal(err)
	}
	// The grant expires (120 s) while the lease (30 s) ... no: move past the lease only.
	y.advance(30 * time.Second)
	_, err = y.e.Finalize(ctx, clearance.FinalizeRequest{OrgID: y.org.Org.ID, ExecutionToken: d.ExecutionToken, ClaimToken: c.ClaimToken, Outcome: claim.OutcomeCommitted})
	var refused *clearance.FinalizeRefused
	if !errors.As(err, &refused) || refused.Result.Outcome != claim.StateIndeterminate || refused.Result.Code != "CLAIM_LEASE_EXPIRED" {
		t.Fatalf("finalize at the lease boundary: %v", err)
	}
	list, err := y.e.Execution.Indeterminate(ctx, y.org.Org.ID, 0)
	if err != nil || len(list) != 1 {
		t.Fatalf("indeterminate list %v %v", list, err)
	}
	g, err := y.e.Execution.Reconcile(ctx, clearance.ReconcileRequest{OrgID: y.org.Org.ID, GrantID: d.GrantID, Resolution: claim.OutcomeFailed, Note: "provider says no"})
	if err != nil || g.Reconciliation == nil || g.Reconciliation.Resolution != claim.OutcomeFailed {
		t.Fatalf("reconcile %+v %v", g, err)
	}
}

func TestGrantExpiringAfterClaimStillFinalizes(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, enforceAll)
	jws, _ := x.intent(t, 500, "s", "")
	d := x.bind(t, jws)
	x.advance(119 * time.Second) // 1 s before the grant expires
	c, err := x.e.Claim(ctx, clearance.ClaimRequest{OrgID: x.org.Org.ID, ExecutionToken: d.ExecutionToken, IntentHash: d.IntentHash})
	if err != nil {
		t.Fatal(err)
	}
	x.advance(20 * time.Second) // grant expired, lease still live
	if _, err := x.e.Finalize(ctx, clearance.FinalizeRequest{OrgID: x.org.Org.ID, ExecutionToken: d.ExecutionToken, ClaimToken: c.ClaimToken, Outcome: claim.OutcomeCommitted}); err != nil {
		t.Fatalf("finalize within the lease after the grant expired: %v", err)
	}
	jws, _ = x.intent(t, 500, "s", "")
	d = x.bind(t, jws)
	x.advance(120 * time.Second)
	if _, err := x.e.Claim(ctx, clearance.ClaimRequest{OrgID: x.org.Org.ID, ExecutionToken: d.ExecutionToken, IntentHash: d.IntentHash}); !errors.Is(err, clearance.ErrConflict) {
		t.Fatalf("claim of an expired grant: %v", err)
	}
}

func TestConcurrentClaimsOneWinner(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, enforceAll)
	jws, _ := x.intent(t, 500, "s", "")
	d := x.bind(t, jws)
	var wins, losses atomic.Int32
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			c, err := x.e.Claim(ctx, clearance.ClaimRequest{OrgID: x.org.Org.ID, ExecutionToken: d.ExecutionToken, IntentHash: d.IntentHash})
			switch {
			case err == nil && c.ShouldExecute:
				wins.Add(1)
			case errors.Is(err, clearance.ErrConflict):
				losses.Add(1)
			default:
				t.Errorf("unexpected: %+v %v", c, err)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 || losses.Load() != 63 {
		t.Fatalf("wins %d losses %d", wins.Load(), losses.Load())
	}
}

func TestTamperedTokenNeverClaims(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, enforceAll)
	jws, _ := x.intent(t, 500, "s", "")
	d := x.bind(t, jws)
	tok := []byte(d.ExecutionToken)
	for i := range tok {
		m := append([]byte(nil), tok...)
		m[i] ^= 0x01
		if c, err := x.e.Claim(ctx, clearance.ClaimRequest{OrgID: x.org.Org.ID, ExecutionToken: string(m), IntentHash: d.IntentHash}); err == nil || c.ShouldExecute {
			t.Fatalf("flipped byte %d claimed: %+v", i, c)
		}
	}
}

// BenchmarkCycle measures enforce-and-bind → claim → finalize in process,
// on Pebble with fsync, with concurrent callers on one org.
func BenchmarkCycle(b *testing.B) {
	ctx := context.Background()
	x := newExecEnv(b, enforceAll)
	b.ReportAllocs()
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			jws, id := x.intent(b, 10, "", "")
			_ = id
			d, err := x.e.EnforceAndBind(ctx, clearance.AuthorityRequest{OrgID: x.org.Org.ID, SignedIntent: jws})
			if err != nil || d.ExecutionToken == "" {
				b.Fatalf("bind: %v", err)
			}
			c, err := x.e.Claim(ctx, clearance.ClaimRequest{OrgID: x.org.Org.ID, ExecutionToken: d.ExecutionToken, IntentHash: d.IntentHash})
			if err != nil {
				b.Fatalf("claim: %v", err)
			}
			if _, err := x.e.Finalize(ctx, clearance.FinalizeRequest{OrgID: x.org.Org.ID, ExecutionToken: d.ExecutionToken,
				ClaimToken: c.ClaimToken, Outcome: claim.OutcomeCommitted}); err != nil {
				b.Fatalf("finalize: %v", err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
}

// BenchmarkEnforceAndBind measures the durable grant issuance alone.
func BenchmarkEnforceAndBind(b *testing.B) {
	ctx := context.Background()
	x := newExecEnv(b, enforceAll)
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			jws, _ := x.intent(b, 10, "", "")
			if _, err := x.e.EnforceAndBind(ctx, clearance.AuthorityRequest{OrgID: x.org.Org.ID, SignedIntent: jws}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestLapsedClaimBecomesReconcilable(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, enforceAll)
	jws, _ := x.intent(t, 500, "s", "")
	d := x.bind(t, jws)
	c, err := x.e.Claim(ctx, clearance.ClaimRequest{OrgID: x.org.Org.ID, ExecutionToken: d.ExecutionToken, IntentHash: d.IntentHash})
	if err != nil {
		t.Fatal(err)
	}
	if list, _ := x.e.Execution.Indeterminate(ctx, x.org.Org.ID, 0); len(list) != 0 {
		t.Fatalf("a live claim listed as indeterminate: %+v", list)
	}
	x.advance(31 * time.Second) // the executor never finalizes
	list, err := x.e.Execution.Indeterminate(ctx, x.org.Org.ID, 0)
	if err != nil || len(list) != 1 || list[0].GrantID != d.GrantID || list[0].FinalCode != "CLAIM_LEASE_EXPIRED" {
		t.Fatalf("lapsed claim not listed: %+v %v", list, err)
	}
	// Listing records nothing; the sweep does.
	if n, err := x.e.Execution.ExpireLapsed(ctx, x.org.Org.ID); err != nil || n != 1 {
		t.Fatalf("ExpireLapsed = %d, %v; want the lapsed claim recorded by it, not by the listing", n, err)
	}
	_, err = x.e.Finalize(ctx, clearance.FinalizeRequest{OrgID: x.org.Org.ID, ExecutionToken: d.ExecutionToken, ClaimToken: c.ClaimToken, Outcome: claim.OutcomeCommitted})
	var refused *clearance.FinalizeRefused
	if !errors.As(err, &refused) || refused.Result.Code != "CLAIM_LEASE_EXPIRED" {
		t.Fatalf("late finalize after the sweep: %v", err)
	}
	if rep, err := x.e.Audit.VerifyLedger(ctx, x.org.Org.ID); err != nil || !rep.Valid {
		t.Fatalf("ledger %+v %v", rep, err)
	}
}

// boundGrants binds n grants (outside the timer of the caller).
func boundGrants(b *testing.B, x *execEnv, n int) []clearance.AuthorityDecision {
	out := make([]clearance.AuthorityDecision, n)
	for i := range out {
		jws, _ := x.intent(b, 10, "", "")
		out[i] = x.bind(b, jws)
	}
	return out
}

// BenchmarkClaim measures claim-token alone: verify, binding and dossier
// checks, current-policy re-evaluation, the durable claim and the signed
// attestation.
func BenchmarkClaim(b *testing.B) {
	ctx := context.Background()
	x := newExecEnv(b, enforceAll)
	grants := boundGrants(b, x, b.N)
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			d := grants[next.Add(1)-1]
			if _, err := x.e.Claim(ctx, clearance.ClaimRequest{OrgID: x.org.Org.ID, ExecutionToken: d.ExecutionToken, IntentHash: d.IntentHash}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkFinalize measures finalize-token alone on claimed grants.
func BenchmarkFinalize(b *testing.B) {
	ctx := context.Background()
	x := newExecEnv(b, enforceAll)
	grants := boundGrants(b, x, b.N)
	claims := make([]string, b.N)
	for i, d := range grants {
		c, err := x.e.Claim(ctx, clearance.ClaimRequest{OrgID: x.org.Org.ID, ExecutionToken: d.ExecutionToken, IntentHash: d.IntentHash})
		if err != nil {
			b.Fatal(err)
		}
		claims[i] = c.ClaimToken
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1) - 1
			if _, err := x.e.Finalize(ctx, clearance.FinalizeRequest{OrgID: x.org.Org.ID, ExecutionToken: grants[i].ExecutionToken,
				ClaimToken: claims[i], Outcome: claim.OutcomeCommitted}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
