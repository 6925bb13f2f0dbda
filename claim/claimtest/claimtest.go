package claimtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/store"
)

// Harness gives the suite a backend on a clock and raw access to its
// records.
type Harness struct {
	// Open returns a fresh, empty backend whose store clock (Tx.Now) is now;
	// the harness closes it (for example with t.Cleanup).
	Open func(t *testing.T, now func() time.Time) store.Backend
	// DeleteScope removes the claim record of scope in orgID, bypassing
	// the lifecycle. When nil, the scope-invariant test is skipped.
	DeleteScope func(t *testing.T, b store.Backend, orgID, scope string)
}

const (
	orgA = "org_claim_a"
	orgB = "org_claim_b"

	lease = 30 * time.Second
	life  = 120 * time.Second

	// concurrency is the number of goroutines of the concurrency tests.
	concurrency = 64
)

// base is the suite's first instant: whole microseconds, exact in every
// backend.
var base = time.Date(2026, 3, 1, 12, 0, 0, 654321000, time.UTC)

var errBoom = errors.New("claimtest: fn failed on purpose")

var equalTimes = cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	if h.Open == nil {
		t.Fatal("claimtest: Harness.Open is nil")
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, e *env)
	}{
		{"IssueClaimFinalize", testLifecycle},
		{"IssueOnce", testIssueOnce},
		{"ReplayedClaim", testReplay},
		{"BindingMismatchWritesNothing", testBindingMismatch},
		{"ClaimAfterExpiry", testClaimAfterExpiry},
		{"ExpiryAfterClaimStillFinalizes", testExpiryAfterClaim},
		{"LeaseBoundary", testLeaseBoundary},
		{"LeaseEndsOnWholeSecond", testLeaseWholeSecond},
		{"ScopeBusyUntilFinalized", testScopeBusy},
		{"ScopeHeldAfterLapsedLease", testScopeLapsed},
		{"ScopeHeldWhileIndeterminate", testScopeIndeterminate},
		{"ScopeHeldAfterExpire", testScopeExpired},
		{"NonceReuse", testNonceReuse},
		{"ScopeInvariant", func(t *testing.T, e *env) { testScopeInvariant(t, e, h) }},
		{"ClaimTokenMismatch", testTokenMismatch},
		{"FinalizeRefusals", testFinalizeRefusals},
		{"FailedUpdateWritesNothing", testFailedUpdate},
		{"Reconcile", testReconcile},
		{"GrantsInStateOrder", testGrantsInStateOrder},
		{"OrgIsolation", testOrgIsolation},
		{"ConcurrentClaimsOneGrant", testConcurrentOneGrant},
		{"ConcurrentClaimsOneScope", testConcurrentOneScope},
		{"ConcurrentClaimsOneNonce", testConcurrentOneNonce},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{t: base}
			tc.fn(t, &env{b: h.Open(t, c.Now), clk: c})
		})
	}
}

// clock is the backend's store clock; the suite moves it.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

type env struct {
	b   store.Backend
	clk *clock
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// newGrant returns grant id of org with its own nonce and scope, issued at
// base and expiring life later.
func newGrant(org, id string) claim.Grant {
	return claim.Grant{
		OrgID:                org,
		GrantID:              id,
		DecisionID:           "dec_" + id,
		DossierID:            "dos_" + id,
		DossierDigest:        digest("dossier " + id),
		IntentID:             "int_" + id,
		IntentHash:           digest("intent " + id),
		PayloadDigest:        digest("payload " + id),
		ExpectedEffectDigest: digest("effect " + id),
		Nonce:                "nonce_" + id,
		Scope:                "scope_" + id,
		Correlation:          "corr_" + id,
		ActorID:              "agent_7",
		ActionType:           "payment.send",
		PolicyVersion:        "2026-03-01.1",
		BundleDigest:         digest("bundle"),
		Intent:               fmt.Appendf(nil, `{"intent_id":"int_%s","nonce":"nonce_%s"}`, id, id),
		IssuedAt:             base,
		ExpiresAt:            base.Add(life),
	}
}

func token(id string) string { return digest("claim token " + id) }

func (e *env) update(t *testing.T, org string, fn func(ctx context.Context, tx store.Tx) error) error {
	t.Helper()
	return e.b.Update(t.Context(), org, func(tx store.Tx) error { return fn(t.Context(), tx) })
}

func (e *env) issue(t *testing.T, gs ...claim.Grant) {
	t.Helper()
	for _, g := range gs {
		err := e.update(t, g.OrgID, func(ctx context.Context, tx store.Tx) error { return claim.Issue(ctx, tx, g) })
		if err != nil {
			t.Fatalf("Issue(%s): %v", g.GrantID, err)
		}
	}
}

func (e *env) claim(t *testing.T, g claim.Grant) (claim.Grant, error) {
	t.Helper()
	return e.claimAs(t, g, g.IntentHash)
}

func (e *env) claimAs(t *testing.T, g claim.Grant, intentHash string) (claim.Grant, error) {
	t.Helper()
	var out claim.Grant
	err := e.update(t, g.OrgID, func(ctx context.Context, tx store.Tx) error {
		var err error
		out, err = claim.Claim(ctx, tx, claim.ClaimRequest{
			GrantID: g.GrantID, IntentHash: intentHash, ClaimTokenDigest: token(g.GrantID),
			Correlation: "claim_corr_" + g.GrantID, Lease: lease,
		})
		return err
	})
	return out, err
}

func (e *env) mustClaim(t *testing.T, g claim.Grant) claim.Grant {
	t.Helper()
	c, err := e.claim(t, g)
	if err != nil {
		t.Fatalf("Claim(%s) at %s: %v", g.GrantID, e.clk.Now().Format(time.RFC3339Nano), err)
	}
	return c
}

// finalize runs Finalize in an Update that commits whenever Finalize
// returns no error (a Refusal is committed), as the engine does.
func (e *env) finalize(t *testing.T, org string, r claim.FinalizeRequest) (claim.Finalization, error) {
	t.Helper()
	var out claim.Finalization
	err := e.update(t, org, func(ctx context.Context, tx store.Tx) error {
		var err error
		out, err = claim.Finalize(ctx, tx, r)
		return err
	})
	return out, err
}

func committed(g claim.Grant) claim.FinalizeRequest {
	return claim.FinalizeRequest{GrantID: g.GrantID, ClaimTokenDigest: token(g.GrantID), Outcome: claim.OutcomeCommitted}
}

func (e *env) mustFinalize(t *testing.T, g claim.Grant) claim.Grant {
	t.Helper()
	f, err := e.finalize(t, g.OrgID, committed(g))
	if err != nil || f.Refusal != nil {
		t.Fatalf("Finalize(%s) = %v, refusal %v; want success", g.GrantID, err, f.Refusal)
	}
	return f.Grant
}

func (e *env) reconcile(t *testing.T, org string, r claim.ReconcileRequest) (claim.Grant, error) {
	t.Helper()
	var out claim.Grant
	err := e.update(t, org, func(ctx context.Context, tx store.Tx) error {
		var err error
		out, err = claim.Reconcile(ctx, tx, r)
		return err
	})
	return out, err
}

func (e *env) stored(t *testing.T, org, id string) claim.Grant {
	t.Helper()
	g, err := e.b.GrantOf(t.Context(), org, id)
	if err != nil {
		t.Fatalf("GrantOf(%s, %s): %v", org, id, err)
	}
	return g
}

func (e *env) wantState(t *testing.T, org, id string, want claim.State) claim.Grant {
	t.Helper()
	g := e.stored(t, org, id)
	if g.State != want {
		t.Fatalf("grant %s is %s, want %s", id, g.State, want)
	}
	return g
}

// scopeClaim reads scope's record through a Tx; ok is false when absent.
func (e *env) scopeClaim(t *testing.T, org, scope string) (claim.ScopeClaim, bool) {
	t.Helper()
	var c claim.ScopeClaim
	var found bool
	err := e.update(t, org, func(ctx context.Context, tx store.Tx) error {
		var err error
		c, err = tx.ScopeClaim(ctx, scope)
		if errors.Is(err, store.ErrNotFound) && errors.Is(err, claim.ErrNotFound) {
			return nil
		}
		found = err == nil
		return err
	})
	if err != nil {
		t.Fatalf("ScopeClaim(%s): %v", scope, err)
	}
	return c, found
}

// nonceGrant reads the grant that used nonce; "" when unused.
func (e *env) nonceGrant(t *testing.T, org, nonce string) string {
	t.Helper()
	var id string
	err := e.update(t, org, func(ctx context.Context, tx store.Tx) error {
		var err error
		id, err = tx.NonceGrant(ctx, nonce)
		if errors.Is(err, store.ErrNotFound) && errors.Is(err, claim.ErrNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		t.Fatalf("NonceGrant: %v", err)
	}
	return id
}

func (e *env) inState(t *testing.T, org string, state claim.State) []string {
	t.Helper()
	var ids []string
	err := e.b.GrantsInState(t.Context(), org, state, func(g claim.Grant) bool {
		if g.State != state {
			t.Errorf("GrantsInState(%s) passed grant %s in state %s", state, g.GrantID, g.State)
		}
		ids = append(ids, g.GrantID)
		return true
	})
	if err != nil {
		t.Fatalf("GrantsInState(%s, %s): %v", org, state, err)
	}
	return ids
}

func wantIDs(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("%s (-want +got):\n%s", what, diff)
	}
}

// wantRefused checks that err is a *claim.Error wrapping sentinel.
func wantRefused(t *testing.T, what string, err, sentinel error) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("%s: error %v, want %v", what, err, sentinel)
	}
	var ce *claim.Error
	if !errors.As(err, &ce) || ce.Code() == "" {
		t.Fatalf("%s: error %v (%T) is not a *claim.Error with a code", what, err, err)
	}
}

func wantGrant(t *testing.T, what string, got, want claim.Grant) {
	t.Helper()
	if diff := cmp.Diff(want, got, equalTimes, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("%s (-want +got):\n%s", what, diff)
	}
}

func testLifecycle(t *testing.T, e *env) {
	g := newGrant(orgA, "g1")
	e.issue(t, g)
	want := g
	want.State = claim.StateIssued
	wantGrant(t, "issued grant", e.stored(t, orgA, "g1"), want)
	wantIDs(t, "ISSUED", e.inState(t, orgA, claim.StateIssued), "g1")

	claimAt := base.Add(10 * time.Second)
	e.clk.Set(claimAt)
	c := e.mustClaim(t, g)
	want.State = claim.StateClaimed
	want.ClaimTokenDigest = token("g1")
	want.ClaimCorrelation = "claim_corr_g1"
	want.ClaimedAt = claimAt
	want.LeaseExpiresAt = claimAt.Add(lease).Truncate(time.Second) // claimAt is not a whole second
	wantGrant(t, "Claim result", c, want)
	wantGrant(t, "claimed grant", e.stored(t, orgA, "g1"), want)
	wantIDs(t, "ISSUED after claim", e.inState(t, orgA, claim.StateIssued))
	wantIDs(t, "CLAIMED", e.inState(t, orgA, claim.StateClaimed), "g1")
	if id := e.nonceGrant(t, orgA, g.Nonce); id != "g1" {
		t.Fatalf("nonce names %q, want g1", id)
	}
	sc, ok := e.scopeClaim(t, orgA, g.Scope)
	if !ok || sc.GrantID != "g1" || sc.OrgID != orgA || !sc.LeaseExpiresAt.Equal(want.LeaseExpiresAt) {
		t.Fatalf("scope claim = %+v (found %v), want g1's with its lease", sc, ok)
	}

	finAt := claimAt.Add(5 * time.Second)
	e.clk.Set(finAt)
	ev := &claim.Evidence{Kind: "API_RESPONSE", Status: claim.EvidenceConfirmed, EffectDigest: g.ExpectedEffectDigest, Source: claim.SourceEffectEvidence}
	rc := &claim.Receipt{Profile: "VP-3", Token: "eyJ.x.y", KID: "prov_1", Issuer: "https://psp.example", EffectDigest: g.ExpectedEffectDigest, Verified: true}
	f, err := e.finalize(t, orgA, claim.FinalizeRequest{
		GrantID: "g1", ClaimTokenDigest: token("g1"), Outcome: claim.OutcomeCommitted,
		Evidence: ev, Receipt: rc, EffectConfirmed: true,
	})
	if err != nil || f.Refusal != nil {
		t.Fatalf("Finalize = %v, refusal %v", err, f.Refusal)
	}
	want.State = claim.StateCommitted
	want.FinalizedAt = finAt
	want.Evidence = ev
	want.Receipt = rc
	want.EffectConfirmed = true
	wantGrant(t, "Finalize result", f.Grant, want)
	wantGrant(t, "finalized grant", e.stored(t, orgA, "g1"), want)
	if sc, ok := e.scopeClaim(t, orgA, g.Scope); ok {
		t.Fatalf("scope still claimed after finalization: %+v", sc)
	}
	wantIDs(t, "CLAIMED after finalize", e.inState(t, orgA, claim.StateClaimed))
	wantIDs(t, "COMMITTED", e.inState(t, orgA, claim.StateCommitted), "g1")
}

func testIssueOnce(t *testing.T, e *env) {
	g := newGrant(orgA, "g1")
	e.issue(t, g)
	other := newGrant(orgA, "g1")
	other.IntentHash = digest("another intent")
	err := e.update(t, orgA, func(ctx context.Context, tx store.Tx) error { return claim.Issue(ctx, tx, other) })
	wantRefused(t, "second Issue", err, claim.ErrGrantExists)
	if got := e.stored(t, orgA, "g1"); got.IntentHash != g.IntentHash {
		t.Fatal("second Issue replaced the grant")
	}
}

func testReplay(t *testing.T, e *env) {
	g := newGrant(orgA, "g1")
	e.issue(t, g)
	first := e.mustClaim(t, g)
	e.clk.Set(base.Add(time.Second))
	_, err := e.claim(t, g)
	wantRefused(t, "second claim", err, claim.ErrReplay)
	wantGrant(t, "grant after replay", e.stored(t, orgA, "g1"), first)
	e.mustFinalize(t, g)
	_, err = e.claim(t, g)
	wantRefused(t, "claim after finalization", err, claim.ErrReplay)
}

func testBindingMismatch(t *testing.T, e *env) {
	g := newGrant(orgA, "g1")
	e.issue(t, g)
	_, err := e.claimAs(t, g, digest("a different intent"))
	wantRefused(t, "claim with another intent hash", err, claim.ErrBindingMismatch)
	e.wantState(t, orgA, "g1", claim.StateIssued)
	if id := e.nonceGrant(t, orgA, g.Nonce); id != "" {
		t.Fatalf("refused claim used the nonce (for %q)", id)
	}
	if sc, ok := e.scopeClaim(t, orgA, g.Scope); ok {
		t.Fatalf("refused claim took the scope: %+v", sc)
	}
	e.mustClaim(t, g)
}

func testClaimAfterExpiry(t *testing.T, e *env) {
	g, h := newGrant(orgA, "g1"), newGrant(orgA, "g2")
	e.issue(t, g, h)
	e.clk.Set(g.ExpiresAt) // exp itself is too late
	_, err := e.claim(t, g)
	wantRefused(t, "claim at exp", err, claim.ErrGrantExpired)
	e.wantState(t, orgA, "g1", claim.StateIssued)
	if id := e.nonceGrant(t, orgA, g.Nonce); id != "" {
		t.Fatal("expired claim used the nonce")
	}
	e.clk.Set(h.ExpiresAt.Add(-time.Microsecond))
	e.mustClaim(t, h)
}

func testExpiryAfterClaim(t *testing.T, e *env) {
	g := newGrant(orgA, "g1")
	e.issue(t, g)
	e.clk.Set(g.ExpiresAt.Add(-10 * time.Second))
	c := e.mustClaim(t, g)
	if !c.LeaseExpiresAt.After(g.ExpiresAt) {
		t.Fatal("test setup: the lease must outlive the grant")
	}
	e.clk.Set(g.ExpiresAt.Add(5 * time.Second)) // grant expired, lease live
	if got := e.mustFinalize(t, g); got.State != claim.StateCommitted {
		t.Fatalf("state %s, want COMMITTED", got.State)
	}
}

func testLeaseBoundary(t *testing.T, e *env) {
	g, h := newGrant(orgA, "g1"), newGrant(orgA, "g2")
	e.issue(t, g, h)
	c := e.mustClaim(t, g)
	e.mustClaim(t, h)

	// One microsecond before the boundary still finalizes.
	e.clk.Set(c.LeaseExpiresAt.Add(-time.Microsecond))
	e.mustFinalize(t, h)

	e.clk.Set(c.LeaseExpiresAt) // exactly at the boundary
	f, err := e.finalize(t, orgA, committed(g))
	if err != nil {
		t.Fatalf("Finalize at the boundary: %v (want a committed refusal)", err)
	}
	wantRefused(t, "Finalize at the boundary", f.Refusal, claim.ErrLeaseExpired)
	var ce *claim.Error
	if errors.As(f.Refusal, &ce); ce.Code() != claim.CodeLeaseExpired {
		t.Fatalf("refusal code %q, want %s", ce.Code(), claim.CodeLeaseExpired)
	}
	if f.Grant.State != claim.StateIndeterminate || f.Grant.FinalCode != claim.CodeLeaseExpired {
		t.Fatalf("Finalization.Grant state %s code %q", f.Grant.State, f.Grant.FinalCode)
	}
	got := e.wantState(t, orgA, "g1", claim.StateIndeterminate)
	if got.FinalCode != claim.CodeLeaseExpired || !got.FinalizedAt.Equal(c.LeaseExpiresAt) || got.EffectConfirmed {
		t.Fatalf("stored refusal: code %q finalized_at %s confirmed %v", got.FinalCode, got.FinalizedAt, got.EffectConfirmed)
	}
	if sc, ok := e.scopeClaim(t, orgA, g.Scope); !ok || sc.GrantID != "g1" {
		t.Fatalf("lease-expired finalization released its scope (%+v, found %v); it is held until reconciled", sc, ok)
	}
	wantIDs(t, "INDETERMINATE", e.inState(t, orgA, claim.StateIndeterminate), "g1")

	_, err = e.finalize(t, orgA, committed(g))
	wantRefused(t, "second Finalize", err, claim.ErrAlreadyFinalized)
	_, err = e.finalize(t, orgA, committed(h))
	wantRefused(t, "second Finalize of a committed grant", err, claim.ErrAlreadyFinalized)
}

// sameScope returns n grants of one scope.
func sameScope(org, scope string, ids ...string) []claim.Grant {
	var out []claim.Grant
	for _, id := range ids {
		g := newGrant(org, id)
		g.Scope = scope
		out = append(out, g)
	}
	return out
}

func testScopeBusy(t *testing.T, e *env) {
	gs := sameScope(orgA, "vendor:42", "a", "b")
	a, b := gs[0], gs[1]
	e.issue(t, a, b)
	ca := e.mustClaim(t, a)
	e.clk.Set(ca.LeaseExpiresAt.Add(-time.Microsecond))
	_, err := e.claim(t, b)
	wantRefused(t, "claim of a busy scope", err, claim.ErrScopeBusy)
	e.wantState(t, orgA, "b", claim.StateIssued)
	if id := e.nonceGrant(t, orgA, b.Nonce); id != "" {
		t.Fatal("refused claim used the nonce")
	}
	e.mustFinalize(t, a)
	e.mustClaim(t, b)
	if sc, ok := e.scopeClaim(t, orgA, "vendor:42"); !ok || sc.GrantID != "b" {
		t.Fatalf("scope claim = %+v (found %v), want b's", sc, ok)
	}
}

// testLeaseWholeSecond: a lease ends on a whole second (the claim
// attestation's exp is exactly the lease end), never after now+lease and
// less than a second before it.
func testLeaseWholeSecond(t *testing.T, e *env) {
	for i, at := range []time.Time{
		base, // .654321
		base.Truncate(time.Second).Add(time.Second),                      // a whole second
		base.Truncate(time.Second).Add(2*time.Second - time.Microsecond), // just before one
	} {
		g := newGrant(orgA, fmt.Sprintf("g%d", i))
		e.issue(t, g)
		e.clk.Set(at)
		c := e.mustClaim(t, g)
		end := c.LeaseExpiresAt
		if end.Nanosecond() != 0 || end.After(at.Add(lease)) || !end.After(at.Add(lease-time.Second)) {
			t.Fatalf("claimed at %s: lease ends %s; want the whole second in (now+lease-1s, now+lease]",
				at.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano))
		}
		if got := e.stored(t, orgA, g.GrantID); !got.LeaseExpiresAt.Equal(end) {
			t.Fatalf("stored lease %s, returned %s", got.LeaseExpiresAt, end)
		}
		if sc, ok := e.scopeClaim(t, orgA, g.Scope); !ok || !sc.LeaseExpiresAt.Equal(end) {
			t.Fatalf("scope record %+v (found %v), want lease %s", sc, ok, end)
		}
		e.clk.Set(end.Add(-time.Microsecond))
		e.mustFinalize(t, g)
	}
}

// testScopeLapsed: a claim whose lease passed without a finalization has
// an unknown outcome; its scope stays held, through its late finalization,
// until it is reconciled.
func testScopeLapsed(t *testing.T, e *env) {
	gs := sameScope(orgA, "vendor:42", "a", "b", "c")
	a, b, c := gs[0], gs[1], gs[2]
	e.issue(t, a, b, c)
	ca := e.mustClaim(t, a)

	e.clk.Set(ca.LeaseExpiresAt.Add(-time.Microsecond))
	_, err := e.claim(t, b)
	wantRefused(t, "claim just before the holder's lease ends", err, claim.ErrScopeBusy)

	e.clk.Set(ca.LeaseExpiresAt) // a's lease has passed; a was never finalized
	_, err = e.claim(t, b)
	wantRefused(t, "claim after the holder's lease lapsed", err, claim.ErrScopeUnreconciled)
	e.wantState(t, orgA, "a", claim.StateClaimed)
	e.wantState(t, orgA, "b", claim.StateIssued)
	if id := e.nonceGrant(t, orgA, b.Nonce); id != "" {
		t.Fatal("refused claim used the nonce")
	}

	e.clk.Set(ca.LeaseExpiresAt.Add(time.Second))
	f, err := e.finalize(t, orgA, committed(a))
	if err != nil {
		t.Fatalf("late Finalize of a: %v", err)
	}
	wantRefused(t, "late Finalize of a", f.Refusal, claim.ErrLeaseExpired)
	e.wantState(t, orgA, "a", claim.StateIndeterminate)
	if sc, ok := e.scopeClaim(t, orgA, "vendor:42"); !ok || sc.GrantID != "a" {
		t.Fatalf("scope record after a's late finalization: %+v (found %v), want a's", sc, ok)
	}
	_, err = e.claim(t, b)
	wantRefused(t, "claim while the holder is INDETERMINATE", err, claim.ErrScopeUnreconciled)

	if _, err := e.reconcile(t, orgA, claim.ReconcileRequest{GrantID: "a", Resolution: claim.OutcomeFailed}); err != nil {
		t.Fatalf("Reconcile(a): %v", err)
	}
	if sc, ok := e.scopeClaim(t, orgA, "vendor:42"); ok {
		t.Fatalf("reconciliation kept the scope record: %+v", sc)
	}
	cb := e.mustClaim(t, b)
	_, err = e.claim(t, c)
	wantRefused(t, "claim while the new holder is live", err, claim.ErrScopeBusy)
	if sc, ok := e.scopeClaim(t, orgA, "vendor:42"); !ok || sc.GrantID != "b" || !sc.LeaseExpiresAt.Equal(cb.LeaseExpiresAt) {
		t.Fatalf("scope record %+v (found %v), want b's", sc, ok)
	}
	if got := e.mustFinalize(t, b); got.State != claim.StateCommitted {
		t.Fatalf("b is %s", got.State)
	}
	e.mustClaim(t, c)
}

// testScopeIndeterminate: an execution finalized INDETERMINATE within its
// lease keeps its scope until it is reconciled; COMMITTED or FAILED
// resolutions both release it.
func testScopeIndeterminate(t *testing.T, e *env) {
	gs := sameScope(orgA, "vendor:42", "a", "b", "c")
	a, b, c := gs[0], gs[1], gs[2]
	e.issue(t, a, b, c)
	e.mustClaim(t, a)
	r := committed(a)
	r.Outcome = claim.OutcomeIndeterminate
	if f, err := e.finalize(t, orgA, r); err != nil || f.Refusal != nil || f.Grant.State != claim.StateIndeterminate {
		t.Fatalf("Finalize INDETERMINATE = %+v, %v", f, err)
	}
	if sc, ok := e.scopeClaim(t, orgA, "vendor:42"); !ok || sc.GrantID != "a" {
		t.Fatalf("scope record after INDETERMINATE: %+v (found %v), want a's", sc, ok)
	}
	// After a's lease, still held.
	e.clk.Set(base.Add(lease + 30*time.Second))
	_, err := e.claim(t, b)
	wantRefused(t, "claim of a scope held by an INDETERMINATE execution", err, claim.ErrScopeUnreconciled)
	e.wantState(t, orgA, "b", claim.StateIssued)

	if _, err := e.reconcile(t, orgA, claim.ReconcileRequest{GrantID: "a", Resolution: claim.OutcomeCommitted}); err != nil {
		t.Fatalf("Reconcile(a): %v", err)
	}
	cb := e.mustClaim(t, b)

	// The same with the new holder, resolved FAILED within its lease.
	r = committed(b)
	r.Outcome = claim.OutcomeIndeterminate
	if f, err := e.finalize(t, orgA, r); err != nil || f.Refusal != nil {
		t.Fatalf("Finalize INDETERMINATE = %+v, %v", f, err)
	}
	_, err = e.claim(t, c)
	wantRefused(t, "claim of a scope held by b", err, claim.ErrScopeUnreconciled)
	if _, err := e.reconcile(t, orgA, claim.ReconcileRequest{GrantID: "b", Resolution: claim.OutcomeFailed}); err != nil {
		t.Fatalf("Reconcile(b): %v", err)
	}
	if !e.clk.Now().Before(cb.LeaseExpiresAt) {
		t.Fatal("test setup: b's lease must still run")
	}
	e.mustClaim(t, c) // b is settled: its lease no longer matters
}

// testScopeExpired: Expire records a lapsed claim INDETERMINATE, finalized
// at its lease end, and keeps its scope held until reconciliation.
func testScopeExpired(t *testing.T, e *env) {
	gs := sameScope(orgA, "vendor:42", "a", "b")
	a, b := gs[0], gs[1]
	e.issue(t, a, b)
	ca := e.mustClaim(t, a)
	expire := func() (claim.Grant, bool) {
		t.Helper()
		var (
			g       claim.Grant
			changed bool
		)
		err := e.update(t, orgA, func(ctx context.Context, tx store.Tx) error {
			var err error
			g, changed, err = claim.Expire(ctx, tx, "a")
			return err
		})
		if err != nil {
			t.Fatalf("Expire: %v", err)
		}
		return g, changed
	}
	if _, changed := expire(); changed {
		t.Fatal("Expire changed a live claim")
	}
	e.clk.Set(ca.LeaseExpiresAt.Add(5 * time.Second)) // the sweep runs late
	g, changed := expire()
	if !changed || g.State != claim.StateIndeterminate || g.FinalCode != claim.CodeLeaseExpired || !g.Lapsed {
		t.Fatalf("Expire = %+v, %v", g, changed)
	}
	// Recorded at the lease end, whenever the sweep ran: the record is the
	// one a listing showed before it (claim.Lapse).
	if st := e.stored(t, orgA, "a"); !st.FinalizedAt.Equal(ca.LeaseExpiresAt) || !g.FinalizedAt.Equal(ca.LeaseExpiresAt) ||
		st.State != claim.StateIndeterminate || !st.Lapsed {
		t.Fatalf("stored after Expire: finalized_at %s (returned %s), want the lease end %s; %+v",
			st.FinalizedAt, g.FinalizedAt, ca.LeaseExpiresAt, st)
	}
	if sc, ok := e.scopeClaim(t, orgA, "vendor:42"); !ok || sc.GrantID != "a" {
		t.Fatalf("scope record after Expire: %+v (found %v), want a's", sc, ok)
	}
	_, err := e.claim(t, b)
	wantRefused(t, "claim of a scope held by an expired claim", err, claim.ErrScopeUnreconciled)
	if _, err := e.reconcile(t, orgA, claim.ReconcileRequest{GrantID: "a", Resolution: claim.OutcomeFailed}); err != nil {
		t.Fatalf("Reconcile(a): %v", err)
	}
	e.mustClaim(t, b)
}

func testNonceReuse(t *testing.T, e *env) {
	a, b := newGrant(orgA, "a"), newGrant(orgA, "b")
	b.Nonce = a.Nonce
	e.issue(t, a, b)
	e.mustClaim(t, a)
	_, err := e.claim(t, b)
	wantRefused(t, "claim with a used nonce", err, claim.ErrNonceUsed)
	e.wantState(t, orgA, "b", claim.StateIssued)
	if sc, ok := e.scopeClaim(t, orgA, b.Scope); ok {
		t.Fatalf("refused claim took the scope: %+v", sc)
	}
	e.mustFinalize(t, a)
	_, err = e.claim(t, b)
	wantRefused(t, "claim with a used nonce after its grant finalized", err, claim.ErrNonceUsed)
	if id := e.nonceGrant(t, orgA, a.Nonce); id != "a" {
		t.Fatalf("nonce names %q, want a", id)
	}
}

func testScopeInvariant(t *testing.T, e *env, h Harness) {
	if h.DeleteScope == nil {
		t.Skip("Harness.DeleteScope is nil")
	}
	g := newGrant(orgA, "g1")
	e.issue(t, g)
	e.mustClaim(t, g)
	h.DeleteScope(t, e.b, orgA, g.Scope)
	f, err := e.finalize(t, orgA, committed(g))
	if err != nil {
		t.Fatalf("Finalize: %v (want a committed refusal)", err)
	}
	wantRefused(t, "Finalize without a scope claim", f.Refusal, claim.ErrScopeInvariant)
	got := e.wantState(t, orgA, "g1", claim.StateIndeterminate)
	if got.FinalCode != claim.CodeScopeInvariant {
		t.Fatalf("final code %q, want %s", got.FinalCode, claim.CodeScopeInvariant)
	}
	_, err = e.finalize(t, orgA, committed(g))
	wantRefused(t, "second Finalize", err, claim.ErrAlreadyFinalized)
	// The INDETERMINATE grant holds its scope again until reconciled.
	if sc, ok := e.scopeClaim(t, orgA, g.Scope); !ok || sc.GrantID != "g1" {
		t.Fatalf("scope record after the invariant violation: %+v (found %v), want g1's", sc, ok)
	}
	other := newGrant(orgA, "g2")
	other.Scope = g.Scope
	e.issue(t, other)
	_, err = e.claim(t, other)
	wantRefused(t, "claim of the scope", err, claim.ErrScopeUnreconciled)
}

func testTokenMismatch(t *testing.T, e *env) {
	g := newGrant(orgA, "g1")
	e.issue(t, g)
	c := e.mustClaim(t, g)
	for _, tok := range []string{"", token("g2"), token("g1")[:20]} {
		r := committed(g)
		r.ClaimTokenDigest = tok
		_, err := e.finalize(t, orgA, r)
		wantRefused(t, fmt.Sprintf("Finalize with claim token %q", tok), err, claim.ErrClaimTokenMismatch)
	}
	wantGrant(t, "grant after refused finalizations", e.stored(t, orgA, "g1"), c)
	e.mustFinalize(t, g)
}

func testFinalizeRefusals(t *testing.T, e *env) {
	g := newGrant(orgA, "g1")
	e.issue(t, g)
	_, err := e.finalize(t, orgA, committed(g))
	wantRefused(t, "Finalize of an ISSUED grant", err, claim.ErrNotClaimed)
	_, err = e.finalize(t, orgA, committed(newGrant(orgA, "missing")))
	wantRefused(t, "Finalize of a missing grant", err, claim.ErrGrantNotFound)
	_, err = e.claim(t, newGrant(orgA, "missing"))
	wantRefused(t, "Claim of a missing grant", err, claim.ErrGrantNotFound)

	c := e.mustClaim(t, g)
	for _, o := range []claim.Outcome{"", "committed", "SUCCEEDED"} {
		r := committed(g)
		r.Outcome = o
		_, err := e.finalize(t, orgA, r)
		wantRefused(t, fmt.Sprintf("Finalize with outcome %q", o), err, claim.ErrInvalidFinalization)
	}
	wantGrant(t, "grant after refused finalizations", e.stored(t, orgA, "g1"), c)
	if _, ok := e.scopeClaim(t, orgA, g.Scope); !ok {
		t.Fatal("a refused finalization released the scope")
	}

	// An executor-reported FAILED never confirms, whatever it claims.
	r := committed(g)
	r.Outcome, r.EffectConfirmed = claim.OutcomeFailed, true
	f, err := e.finalize(t, orgA, r)
	if err != nil || f.Refusal != nil {
		t.Fatalf("Finalize FAILED = %v, %v", err, f.Refusal)
	}
	if got := e.wantState(t, orgA, "g1", claim.StateFailed); got.EffectConfirmed {
		t.Fatal("a FAILED finalization recorded a confirmed effect")
	}
}

func testFailedUpdate(t *testing.T, e *env) {
	g := newGrant(orgA, "g1")
	e.issue(t, g)
	err := e.update(t, orgA, func(ctx context.Context, tx store.Tx) error {
		if _, err := claim.Claim(ctx, tx, claim.ClaimRequest{GrantID: "g1", IntentHash: g.IntentHash, ClaimTokenDigest: token("g1"), Lease: lease}); err != nil {
			return err
		}
		// Reads in the Tx see its own writes.
		if got, err := tx.Grant(ctx, "g1"); err != nil || got.State != claim.StateClaimed {
			return fmt.Errorf("Tx read after Claim: %v, state %s", err, got.State)
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Update = %v, want errBoom", err)
	}
	e.wantState(t, orgA, "g1", claim.StateIssued)
	if id := e.nonceGrant(t, orgA, g.Nonce); id != "" {
		t.Fatal("a failed Update used the nonce")
	}
	if sc, ok := e.scopeClaim(t, orgA, g.Scope); ok {
		t.Fatalf("a failed Update took the scope: %+v", sc)
	}
	wantIDs(t, "CLAIMED", e.inState(t, orgA, claim.StateClaimed))
	wantIDs(t, "ISSUED", e.inState(t, orgA, claim.StateIssued), "g1")
	e.mustClaim(t, g)
}

func testReconcile(t *testing.T, e *env) {
	gs := []claim.Grant{newGrant(orgA, "issued"), newGrant(orgA, "claimed"), newGrant(orgA, "done"), newGrant(orgA, "ind1"), newGrant(orgA, "ind2")}
	e.issue(t, gs...)
	for _, g := range gs[1:] {
		e.mustClaim(t, g)
	}
	e.mustFinalize(t, gs[2])
	e.clk.Set(base.Add(time.Second))
	for _, g := range gs[3:] {
		r := committed(g)
		r.Outcome = claim.OutcomeIndeterminate
		if f, err := e.finalize(t, orgA, r); err != nil || f.Refusal != nil || f.Grant.FinalCode != "" {
			t.Fatalf("Finalize INDETERMINATE = %+v, %v", f, err)
		}
	}
	wantIDs(t, "INDETERMINATE", e.inState(t, orgA, claim.StateIndeterminate), "ind1", "ind2")

	for _, id := range []string{"issued", "claimed", "done"} {
		_, err := e.reconcile(t, orgA, claim.ReconcileRequest{GrantID: id, Resolution: claim.OutcomeCommitted})
		wantRefused(t, "Reconcile of "+id, err, claim.ErrNotIndeterminate)
	}
	_, err := e.reconcile(t, orgA, claim.ReconcileRequest{GrantID: "missing", Resolution: claim.OutcomeCommitted})
	wantRefused(t, "Reconcile of a missing grant", err, claim.ErrGrantNotFound)
	for _, res := range []claim.Outcome{claim.OutcomeIndeterminate, ""} {
		_, err := e.reconcile(t, orgA, claim.ReconcileRequest{GrantID: "ind1", Resolution: res})
		wantRefused(t, fmt.Sprintf("Reconcile with resolution %q", res), err, claim.ErrInvalidFinalization)
	}
	e.wantState(t, orgA, "ind1", claim.StateIndeterminate)

	before := e.stored(t, orgA, "ind1")
	recAt := base.Add(time.Hour)
	e.clk.Set(recAt)
	ev := &claim.Evidence{Kind: "LEDGER_LOOKUP", Status: claim.EvidenceConfirmed, EffectDigest: gs[3].ExpectedEffectDigest, Source: claim.SourceEffectEvidence}
	got, err := e.reconcile(t, orgA, claim.ReconcileRequest{GrantID: "ind1", Resolution: claim.OutcomeCommitted, Evidence: ev, EffectConfirmed: true, Note: "found in the PSP dashboard"})
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	want := before
	want.State = claim.StateCommitted
	want.Reconciliation = &claim.Reconciliation{Resolution: claim.OutcomeCommitted, Evidence: ev, EffectConfirmed: true, Note: "found in the PSP dashboard", ReconciledAt: recAt}
	wantGrant(t, "Reconcile result", got, want)
	wantGrant(t, "reconciled grant", e.stored(t, orgA, "ind1"), want)

	got, err = e.reconcile(t, orgA, claim.ReconcileRequest{GrantID: "ind2", Resolution: claim.OutcomeFailed, EffectConfirmed: true})
	if err != nil || got.State != claim.StateFailed || got.Reconciliation.EffectConfirmed {
		t.Fatalf("Reconcile FAILED = %+v, %v; want FAILED, not confirmed", got, err)
	}

	wantIDs(t, "INDETERMINATE after reconciliation", e.inState(t, orgA, claim.StateIndeterminate))
	wantIDs(t, "COMMITTED", e.inState(t, orgA, claim.StateCommitted), "done", "ind1")
	wantIDs(t, "FAILED", e.inState(t, orgA, claim.StateFailed), "ind2")

	_, err = e.reconcile(t, orgA, claim.ReconcileRequest{GrantID: "ind1", Resolution: claim.OutcomeFailed})
	wantRefused(t, "second Reconcile", err, claim.ErrNotIndeterminate)
	_, err = e.finalize(t, orgA, committed(gs[3]))
	wantRefused(t, "Finalize after Reconcile", err, claim.ErrAlreadyFinalized)
	_, err = e.claim(t, gs[3])
	wantRefused(t, "Claim after Reconcile", err, claim.ErrReplay)
}

func testGrantsInStateOrder(t *testing.T, e *env) {
	// Issued out of id order; the same instant twice.
	times := map[string]time.Duration{"g_c": 0, "g_a": 2 * time.Second, "g_b": time.Second, "g_d": time.Second}
	for _, id := range []string{"g_a", "g_b", "g_c", "g_d"} {
		g := newGrant(orgA, id)
		g.IssuedAt = base.Add(times[id])
		e.issue(t, g)
	}
	e.issue(t, newGrant(orgB, "g_other"))
	wantIDs(t, "ISSUED", e.inState(t, orgA, claim.StateIssued), "g_c", "g_b", "g_d", "g_a")
	wantIDs(t, "ISSUED of org B", e.inState(t, orgB, claim.StateIssued), "g_other")
	wantIDs(t, "CLAIMED", e.inState(t, orgA, claim.StateClaimed))

	var first []string
	err := e.b.GrantsInState(t.Context(), orgA, claim.StateIssued, func(g claim.Grant) bool {
		first = append(first, g.GrantID)
		return len(first) < 2
	})
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "GrantsInState stopped by fn", first, "g_c", "g_b")

	e.mustClaim(t, e.stored(t, orgA, "g_b"))
	wantIDs(t, "ISSUED after a claim", e.inState(t, orgA, claim.StateIssued), "g_c", "g_d", "g_a")
	wantIDs(t, "CLAIMED after a claim", e.inState(t, orgA, claim.StateClaimed), "g_b")
}

func testOrgIsolation(t *testing.T, e *env) {
	g := newGrant(orgA, "g1")
	e.issue(t, g)
	_, err := e.b.GrantOf(t.Context(), orgB, "g1")
	if !errors.Is(err, store.ErrNotFound) || !errors.Is(err, claim.ErrNotFound) {
		t.Fatalf("GrantOf(other org) = %v, want store.ErrNotFound and claim.ErrNotFound", err)
	}
	other := g
	other.OrgID = orgB
	_, err = e.claim(t, other)
	wantRefused(t, "Claim of another org's grant", err, claim.ErrGrantNotFound)
	// The same ids in org B are independent.
	e.issue(t, other)
	e.mustClaim(t, g)
	e.mustClaim(t, other)
	err = e.update(t, orgB, func(ctx context.Context, tx store.Tx) error { return tx.PutGrant(ctx, g) })
	if err == nil {
		t.Fatal("a Tx of org B wrote a grant of org A")
	}
}

// race claims every grant of gs at once, each in its own Update, and
// requires exactly one success, every other claim refused with sentinel,
// and only the winner stored CLAIMED.
func race(t *testing.T, e *env, gs []claim.Grant, sentinel error) {
	t.Helper()
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		mu      sync.Mutex
		won     []string
		refused int
		other   []error
	)
	for _, g := range gs {
		wg.Go(func() {
			<-start
			var c claim.Grant
			err := e.b.Update(context.Background(), g.OrgID, func(tx store.Tx) error {
				var err error
				c, err = claim.Claim(context.Background(), tx, claim.ClaimRequest{
					GrantID: g.GrantID, IntentHash: g.IntentHash, ClaimTokenDigest: token(g.GrantID), Lease: lease,
				})
				runtime.Gosched() // widen the window a store without serialization would lose
				return err
			})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won = append(won, c.GrantID)
			case errors.Is(err, sentinel):
				refused++
			default:
				other = append(other, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(other) > 0 {
		t.Fatalf("unexpected errors: %v", other)
	}
	if len(won) != 1 || refused != len(gs)-1 {
		t.Fatalf("%d claims won (%v), %d refused with %v; want exactly 1 and %d", len(won), won, refused, sentinel, len(gs)-1)
	}
	var claimed []string
	for _, g := range gs {
		if got := e.stored(t, g.OrgID, g.GrantID); got.State == claim.StateClaimed {
			claimed = append(claimed, g.GrantID)
		}
	}
	if len(claimed) != 1 || claimed[0] != won[0] {
		t.Fatalf("stored CLAIMED grants %v, want only the winner %s", claimed, won[0])
	}
}

func testConcurrentOneGrant(t *testing.T, e *env) {
	g := newGrant(orgA, "g1")
	e.issue(t, g)
	gs := make([]claim.Grant, concurrency)
	for i := range gs {
		gs[i] = g
	}
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		mu      sync.Mutex
		won     int
		replays int
		other   []error
	)
	for i := range concurrency {
		wg.Go(func() {
			<-start
			err := e.b.Update(context.Background(), orgA, func(tx store.Tx) error {
				_, err := claim.Claim(context.Background(), tx, claim.ClaimRequest{
					GrantID: "g1", IntentHash: g.IntentHash, ClaimTokenDigest: digest(fmt.Sprint("token ", i)), Lease: lease,
				})
				runtime.Gosched() // widen the window a store without serialization would lose
				return err
			})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errors.Is(err, claim.ErrReplay):
				replays++
			default:
				other = append(other, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(other) > 0 {
		t.Fatalf("unexpected errors: %v", other)
	}
	if won != 1 || replays != concurrency-1 {
		t.Fatalf("%d claims won, %d replays; want 1 and %d", won, replays, concurrency-1)
	}
	e.wantState(t, orgA, "g1", claim.StateClaimed)
}

func testConcurrentOneScope(t *testing.T, e *env) {
	ids := make([]string, concurrency)
	for i := range ids {
		ids[i] = fmt.Sprintf("g%02d", i)
	}
	gs := sameScope(orgA, "vendor:42", ids...)
	e.issue(t, gs...)
	race(t, e, gs, claim.ErrScopeBusy)
}

func testConcurrentOneNonce(t *testing.T, e *env) {
	gs := make([]claim.Grant, concurrency)
	for i := range gs {
		gs[i] = newGrant(orgA, fmt.Sprintf("g%02d", i))
		gs[i].Nonce = "the_nonce"
	}
	e.issue(t, gs...)
	race(t, e, gs, claim.ErrNonceUsed)
}
