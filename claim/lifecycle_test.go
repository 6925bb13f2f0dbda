package claim_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clearancehq/clearance/claim"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	want = "sha256:expected"
	othr = "sha256:other"
)

func TestSettle(t *testing.T) {
	named := claim.Grant{ExpectedEffectDigest: want}
	unnamed := claim.Grant{}
	verified := &claim.Receipt{Profile: "VP-3", EffectDigest: want, Verified: true}
	mismatched := &claim.Receipt{Profile: "VP-3", EffectDigest: othr, Verified: true}
	unverified := &claim.Receipt{Profile: "VP-3", EffectDigest: want, Verified: false, Reason: "unknown kid"}
	noDigest := &claim.Receipt{Profile: "VP-3", Verified: true}
	explicit := func(status, digest string) *claim.Evidence {
		return &claim.Evidence{Kind: "API_RESPONSE", Status: status, EffectDigest: digest, Source: "whatever the caller said"}
	}
	fromExplicit := func(status, digest string) *claim.Evidence {
		return &claim.Evidence{Kind: "API_RESPONSE", Status: status, EffectDigest: digest, Source: claim.SourceEffectEvidence}
	}
	fromReceipt := func(status, digest string) *claim.Evidence {
		return &claim.Evidence{Kind: claim.EvidenceSignedReceipt, Status: status, EffectDigest: digest, Source: claim.SourceEffectReceipt}
	}
	tests := []struct {
		name      string
		g         claim.Grant
		outcome   claim.Outcome
		explicit  *claim.Evidence
		receipt   *claim.Receipt
		want      *claim.Evidence
		confirmed bool
	}{
		{"committed alone never confirms", named, claim.OutcomeCommitted, nil, nil, nil, false},
		{"explicit confirmed, digest matches", named, claim.OutcomeCommitted, explicit("CONFIRMED", want), nil, fromExplicit("CONFIRMED", want), true},
		{"explicit confirmed, other digest: recorded only", named, claim.OutcomeCommitted, explicit("CONFIRMED", othr), nil, fromExplicit("CONFIRMED", othr), false},
		{"explicit confirmed, no expected effect", unnamed, claim.OutcomeCommitted, explicit("CONFIRMED", othr), nil, fromExplicit("CONFIRMED", othr), true},
		{"explicit confirmed without a digest", unnamed, claim.OutcomeCommitted, explicit("CONFIRMED", ""), nil, fromExplicit("CONFIRMED", ""), false},
		{"explicit pending", named, claim.OutcomeCommitted, explicit("PENDING", want), nil, fromExplicit("PENDING", want), false},
		{"explicit lower-case status", named, claim.OutcomeCommitted, explicit("confirmed", want), nil, fromExplicit("confirmed", want), false},
		{"explicit confirmed for FAILED", named, claim.OutcomeFailed, explicit("CONFIRMED", want), nil, fromExplicit("CONFIRMED", want), false},
		{"explicit confirmed for INDETERMINATE", named, claim.OutcomeIndeterminate, explicit("CONFIRMED", want), nil, fromExplicit("CONFIRMED", want), false},
		{"explicit wins over a confirming receipt", named, claim.OutcomeCommitted, explicit("PENDING", want), verified, fromExplicit("PENDING", want), false},
		{"explicit wins over a mismatched receipt", named, claim.OutcomeCommitted, explicit("CONFIRMED", want), mismatched, fromExplicit("CONFIRMED", want), true},
		{"verified receipt, digest matches", named, claim.OutcomeCommitted, nil, verified, fromReceipt("CONFIRMED", want), true},
		{"verified receipt, other digest", named, claim.OutcomeCommitted, nil, mismatched, fromReceipt(claim.EvidenceDigestMismatch, othr), false},
		{"verified receipt for FAILED", named, claim.OutcomeFailed, nil, verified, fromReceipt(claim.EvidenceUnconfirmed, want), false},
		{"verified receipt for INDETERMINATE", named, claim.OutcomeIndeterminate, nil, verified, fromReceipt(claim.EvidenceUnconfirmed, want), false},
		{"verified receipt, grant named no effect", unnamed, claim.OutcomeCommitted, nil, verified, nil, false},
		{"unverified receipt is no evidence", named, claim.OutcomeCommitted, nil, unverified, nil, false},
		{"receipt without effect digest", named, claim.OutcomeCommitted, nil, noDigest, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var before *claim.Evidence
			if tc.explicit != nil {
				c := *tc.explicit
				before = &c
			}
			got, confirmed := claim.Settle(tc.g, tc.outcome, tc.explicit, tc.receipt)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("evidence (-want +got):\n%s", diff)
			}
			if confirmed != tc.confirmed {
				t.Errorf("confirmed = %v, want %v", confirmed, tc.confirmed)
			}
			if tc.explicit != nil && *tc.explicit != *before {
				t.Error("Settle modified the caller's evidence")
			}
		})
	}
}

func TestErrorCodes(t *testing.T) {
	for sentinel, code := range map[error]string{
		claim.ErrGrantNotFound:       "GRANT_NOT_FOUND",
		claim.ErrGrantExists:         "GRANT_ALREADY_ISSUED",
		claim.ErrGrantExpired:        "GRANT_EXPIRED",
		claim.ErrReplay:              "CLAIM_REPLAY",
		claim.ErrNonceUsed:           "NONCE_ALREADY_USED",
		claim.ErrScopeBusy:           "CONCURRENCY_SCOPE_BUSY",
		claim.ErrScopeUnreconciled:   "CLAIM_SCOPE_UNRECONCILED",
		claim.ErrBindingMismatch:     "BINDING_MISMATCH",
		claim.ErrNotClaimed:          "GRANT_NOT_CLAIMED",
		claim.ErrClaimTokenMismatch:  "CLAIM_TOKEN_MISMATCH",
		claim.ErrAlreadyFinalized:    "ALREADY_FINALIZED",
		claim.ErrLeaseExpired:        "CLAIM_LEASE_EXPIRED",
		claim.ErrScopeInvariant:      "CLAIM_SCOPE_INVARIANT_VIOLATION",
		claim.ErrNotIndeterminate:    "NOT_INDETERMINATE",
		claim.ErrInvalidFinalization: "INVALID_FINALIZATION",
	} {
		if got := codeOf(t, sentinel); got != code {
			t.Errorf("%v: code %q, want %q", sentinel, got, code)
		}
	}
}

// codeOf provokes sentinel through the lifecycle and returns its code.
func codeOf(t *testing.T, sentinel error) string {
	t.Helper()
	ctx := t.Context()
	tx := newMemTx(t0)
	g := testGrant("g1")
	mustIssue(t, tx, g)
	claimReq := claim.ClaimRequest{GrantID: "g1", IntentHash: g.IntentHash, ClaimTokenDigest: "tok", Lease: time.Minute}
	fin := claim.FinalizeRequest{GrantID: "g1", ClaimTokenDigest: "tok", Outcome: claim.OutcomeCommitted}
	var err error
	switch sentinel {
	case claim.ErrGrantNotFound:
		_, err = claim.Claim(ctx, tx, claim.ClaimRequest{GrantID: "nope", ClaimTokenDigest: "tok", Lease: time.Minute})
	case claim.ErrGrantExists:
		err = claim.Issue(ctx, tx, g)
	case claim.ErrGrantExpired:
		tx.now = g.ExpiresAt
		_, err = claim.Claim(ctx, tx, claimReq)
	case claim.ErrReplay:
		mustClaim(t, tx, claimReq)
		_, err = claim.Claim(ctx, tx, claimReq)
	case claim.ErrNonceUsed:
		h := testGrant("g2")
		h.Nonce = g.Nonce
		mustIssue(t, tx, h)
		mustClaim(t, tx, claimReq)
		_, err = claim.Claim(ctx, tx, claim.ClaimRequest{GrantID: "g2", IntentHash: h.IntentHash, ClaimTokenDigest: "t2", Lease: time.Minute})
	case claim.ErrScopeBusy:
		h := testGrant("g2")
		h.Scope = g.Scope
		mustIssue(t, tx, h)
		mustClaim(t, tx, claimReq)
		_, err = claim.Claim(ctx, tx, claim.ClaimRequest{GrantID: "g2", IntentHash: h.IntentHash, ClaimTokenDigest: "t2", Lease: time.Minute})
	case claim.ErrScopeUnreconciled:
		h := testGrant("g2")
		h.Scope = g.Scope
		mustIssue(t, tx, h)
		mustClaim(t, tx, claimReq)
		fin.Outcome = claim.OutcomeIndeterminate
		mustFinalize(t, tx, fin)
		_, err = claim.Claim(ctx, tx, claim.ClaimRequest{GrantID: "g2", IntentHash: h.IntentHash, ClaimTokenDigest: "t2", Lease: time.Minute})
	case claim.ErrBindingMismatch:
		claimReq.IntentHash = "sha256:else"
		_, err = claim.Claim(ctx, tx, claimReq)
	case claim.ErrNotClaimed:
		_, err = claim.Finalize(ctx, tx, fin)
	case claim.ErrClaimTokenMismatch:
		mustClaim(t, tx, claimReq)
		fin.ClaimTokenDigest = "tok2"
		_, err = claim.Finalize(ctx, tx, fin)
	case claim.ErrAlreadyFinalized:
		mustClaim(t, tx, claimReq)
		mustFinalize(t, tx, fin)
		_, err = claim.Finalize(ctx, tx, fin)
	case claim.ErrLeaseExpired:
		mustClaim(t, tx, claimReq)
		tx.now = tx.now.Add(time.Minute)
		err = mustFinalize(t, tx, fin).Refusal
	case claim.ErrScopeInvariant:
		mustClaim(t, tx, claimReq)
		delete(tx.scopes, g.Scope)
		err = mustFinalize(t, tx, fin).Refusal
	case claim.ErrNotIndeterminate:
		_, err = claim.Reconcile(ctx, tx, claim.ReconcileRequest{GrantID: "g1", Resolution: claim.OutcomeFailed})
	case claim.ErrInvalidFinalization:
		mustClaim(t, tx, claimReq)
		fin.Outcome = "DONE"
		_, err = claim.Finalize(ctx, tx, fin)
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("provoking %v got %v", sentinel, err)
	}
	var ce *claim.Error
	if !errors.As(err, &ce) {
		t.Fatalf("%v is not a *claim.Error", err)
	}
	return ce.Code()
}

func testGrant(id string) claim.Grant {
	return claim.Grant{
		OrgID: "org_1", GrantID: id, IntentHash: "sha256:intent-" + id, Nonce: "nonce-" + id,
		Scope: "scope-" + id, ExpectedEffectDigest: want, IssuedAt: t0, ExpiresAt: t0.Add(2 * time.Minute),
	}
}

func mustIssue(t *testing.T, tx claim.Tx, g claim.Grant) {
	t.Helper()
	if err := claim.Issue(t.Context(), tx, g); err != nil {
		t.Fatal(err)
	}
}

func mustClaim(t *testing.T, tx claim.Tx, r claim.ClaimRequest) claim.Grant {
	t.Helper()
	g, err := claim.Claim(t.Context(), tx, r)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func mustFinalize(t *testing.T, tx claim.Tx, r claim.FinalizeRequest) claim.Finalization {
	t.Helper()
	f, err := claim.Finalize(t.Context(), tx, r)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestRefusalsWriteNothing: every refusal returned as an error leaves the
// Tx untouched (a backend discards the Update anyway; the lifecycle does
// not rely on it).
func TestRefusalsWriteNothing(t *testing.T) {
	for _, sentinel := range []error{
		claim.ErrGrantExists, claim.ErrGrantExpired, claim.ErrBindingMismatch, claim.ErrNotClaimed, claim.ErrNotIndeterminate,
	} {
		tx := newMemTx(t0)
		g := testGrant("g1")
		mustIssue(t, tx, g)
		tx.writes = 0
		var err error
		switch sentinel {
		case claim.ErrGrantExists:
			err = claim.Issue(t.Context(), tx, g)
		case claim.ErrGrantExpired:
			tx.now = g.ExpiresAt.Add(time.Second)
			_, err = claim.Claim(t.Context(), tx, claim.ClaimRequest{GrantID: "g1", IntentHash: g.IntentHash, ClaimTokenDigest: "t", Lease: time.Minute})
		case claim.ErrBindingMismatch:
			_, err = claim.Claim(t.Context(), tx, claim.ClaimRequest{GrantID: "g1", IntentHash: "x", ClaimTokenDigest: "t", Lease: time.Minute})
		case claim.ErrNotClaimed:
			_, err = claim.Finalize(t.Context(), tx, claim.FinalizeRequest{GrantID: "g1", ClaimTokenDigest: "t", Outcome: claim.OutcomeFailed})
		case claim.ErrNotIndeterminate:
			_, err = claim.Reconcile(t.Context(), tx, claim.ReconcileRequest{GrantID: "g1", Resolution: claim.OutcomeFailed})
		}
		if !errors.Is(err, sentinel) || tx.writes != 0 {
			t.Errorf("%v: err %v, %d writes", sentinel, err, tx.writes)
		}
	}
}

func TestScopeRecordEdgeCases(t *testing.T) {
	ctx := t.Context()
	tx := newMemTx(t0)
	g := testGrant("g1")
	mustIssue(t, tx, g)
	req := claim.ClaimRequest{GrantID: "g1", IntentHash: g.IntentHash, ClaimTokenDigest: "t", Lease: time.Minute}

	// A record naming a grant that does not exist blocks until its lease
	// passes (fail closed).
	tx.scopes[g.Scope] = claim.ScopeClaim{OrgID: "org_1", Scope: g.Scope, GrantID: "ghost", LeaseExpiresAt: t0.Add(time.Second)}
	if _, err := claim.Claim(ctx, tx, req); !errors.Is(err, claim.ErrScopeBusy) {
		t.Fatalf("claim over a live orphan record: %v, want ErrScopeBusy", err)
	}
	tx.now = t0.Add(time.Second)
	c := mustClaim(t, tx, req)
	if tx.scopes[g.Scope].GrantID != "g1" {
		t.Fatal("the scope record does not name the new holder")
	}

	// A record left behind by a finalized grant is stale, lease or not.
	h := testGrant("g2")
	h.Scope = g.Scope
	mustIssue(t, tx, h)
	mustFinalize(t, tx, claim.FinalizeRequest{GrantID: "g1", ClaimTokenDigest: "t", Outcome: claim.OutcomeFailed})
	tx.scopes[g.Scope] = claim.ScopeClaim{OrgID: "org_1", Scope: g.Scope, GrantID: "g1", LeaseExpiresAt: c.LeaseExpiresAt}
	mustClaim(t, tx, claim.ClaimRequest{GrantID: "g2", IntentHash: h.IntentHash, ClaimTokenDigest: "t2", Lease: time.Minute})
}

// failingTx fails every read: storage failures are returned as they are,
// never as a coded refusal and never as a success.
type failingTx struct{ *memTx }

var errDown = errors.New("store down")

func (failingTx) Grant(context.Context, string) (claim.Grant, error) { return claim.Grant{}, errDown }

func TestStorageFailureIsNotARefusal(t *testing.T) {
	tx := failingTx{newMemTx(t0)}
	ctx := t.Context()
	errs := []error{
		claim.Issue(ctx, tx, testGrant("g1")),
	}
	_, err := claim.Claim(ctx, tx, claim.ClaimRequest{GrantID: "g1", ClaimTokenDigest: "t", Lease: time.Minute})
	errs = append(errs, err)
	_, err = claim.Finalize(ctx, tx, claim.FinalizeRequest{GrantID: "g1", ClaimTokenDigest: "t", Outcome: claim.OutcomeCommitted})
	errs = append(errs, err)
	_, err = claim.Reconcile(ctx, tx, claim.ReconcileRequest{GrantID: "g1", Resolution: claim.OutcomeCommitted})
	errs = append(errs, err)
	for i, err := range errs {
		var ce *claim.Error
		if !errors.Is(err, errDown) || errors.As(err, &ce) {
			t.Errorf("call %d: %v, want the storage error without a code", i, err)
		}
	}
	if tx.writes != 0 {
		t.Errorf("%d writes after failed reads", tx.writes)
	}
}

func TestBadRequestsAreNotRefusals(t *testing.T) {
	tx := newMemTx(t0)
	bad := testGrant("g1")
	bad.Nonce = ""
	if err := claim.Issue(t.Context(), tx, bad); err == nil {
		t.Fatal("Issue accepted a grant without a nonce")
	}
	mustIssue(t, tx, testGrant("g1"))
	for _, r := range []claim.ClaimRequest{
		{GrantID: "g1", IntentHash: "sha256:intent-g1", Lease: time.Minute},
		{GrantID: "g1", IntentHash: "sha256:intent-g1", ClaimTokenDigest: "t"},
		{GrantID: "g1", IntentHash: "sha256:intent-g1", ClaimTokenDigest: "t", Lease: time.Second - time.Nanosecond},
	} {
		if _, err := claim.Claim(t.Context(), tx, r); err == nil {
			t.Fatalf("Claim(%+v) succeeded", r)
		}
	}
	if tx.grants["g1"].State != claim.StateIssued {
		t.Fatal("a bad claim request changed the grant")
	}
}

func TestExpireRecordsLapsedClaims(t *testing.T) {
	ctx := context.Background()
	tx := newMemTx(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	g := claim.Grant{OrgID: "o", GrantID: "g1", IntentHash: "h", Nonce: "n", Scope: "s", ExpiresAt: tx.now.Add(time.Hour)}
	if err := claim.Issue(ctx, tx, g); err != nil {
		t.Fatal(err)
	}
	if _, err := claim.Claim(ctx, tx, claim.ClaimRequest{GrantID: "g1", IntentHash: "h", ClaimTokenDigest: "d", Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, changed, err := claim.Expire(ctx, tx, "g1"); err != nil || changed {
		t.Fatalf("a live lease must not expire: %v %v", changed, err)
	}
	claimed := tx.grants["g1"]
	tx.now = tx.now.Add(time.Minute + 7*time.Second) // the sweep runs late
	got, changed, err := claim.Expire(ctx, tx, "g1")
	if err != nil || !changed || got.State != claim.StateIndeterminate || got.FinalCode != claim.CodeLeaseExpired || !got.Lapsed {
		t.Fatalf("expire: %+v %v %v", got, changed, err)
	}
	if !got.FinalizedAt.Equal(claimed.LeaseExpiresAt) {
		t.Fatalf("finalized_at %s, want the lease end %s", got.FinalizedAt, claimed.LeaseExpiresAt)
	}
	if d := cmp.Diff(claim.Lapse(claimed), tx.grants["g1"]); d != "" {
		t.Fatalf("recorded lapse differs from claim.Lapse (-want +got):\n%s", d)
	}
	if sc, ok := tx.scopes["s"]; !ok || sc.GrantID != "g1" {
		t.Fatalf("scope record %+v (found %v): a lapsed claim holds its scope until reconciled", sc, ok)
	}
	// The executor's late finalize is answered CLAIM_LEASE_EXPIRED once, then ALREADY_FINALIZED.
	f, err := claim.Finalize(ctx, tx, claim.FinalizeRequest{GrantID: "g1", ClaimTokenDigest: "d", Outcome: claim.OutcomeCommitted})
	if err != nil || !errors.Is(f.Refusal, claim.ErrLeaseExpired) || f.Grant.State != claim.StateIndeterminate {
		t.Fatalf("late finalize: %+v %v", f, err)
	}
	if _, err := claim.Finalize(ctx, tx, claim.FinalizeRequest{GrantID: "g1", ClaimTokenDigest: "d", Outcome: claim.OutcomeCommitted}); !errors.Is(err, claim.ErrAlreadyFinalized) {
		t.Fatalf("second finalize: %v", err)
	}
}

func TestLapseIsTheRecordAtTheLeaseEnd(t *testing.T) {
	end := time.Date(2026, 11, 1, 0, 1, 0, 0, time.UTC)
	g := claim.Grant{GrantID: "g1", State: claim.StateClaimed, ClaimedAt: end.Add(-time.Minute), LeaseExpiresAt: end,
		ClaimTokenDigest: "d", Evidence: &claim.Evidence{Kind: "k"}}
	for _, c := range []struct {
		g    claim.Grant
		now  time.Time
		want bool
	}{
		{g, end.Add(-time.Nanosecond), false},
		{g, end, true}, // the boundary itself has passed, as in Finalize
		{g, end.Add(time.Hour), true},
		{func() claim.Grant { h := g; h.State = claim.StateIssued; return h }(), end.Add(time.Hour), false},
		{func() claim.Grant { h := g; h.State = claim.StateIndeterminate; return h }(), end.Add(time.Hour), false},
	} {
		if got := claim.LeasePassed(c.g, c.now); got != c.want {
			t.Errorf("LeasePassed(%s, lease end %+v) = %v", c.g.State, c.now.Sub(end), got)
		}
	}
	l := claim.Lapse(g)
	if l.State != claim.StateIndeterminate || l.FinalCode != claim.CodeLeaseExpired || !l.Lapsed || l.EffectConfirmed ||
		!l.FinalizedAt.Equal(end) || l.ClaimTokenDigest != "d" || l.Evidence != g.Evidence {
		t.Fatalf("Lapse = %+v", l)
	}
	if g.State != claim.StateClaimed || !g.FinalizedAt.IsZero() {
		t.Fatalf("Lapse changed its argument: %+v", g)
	}
}

func TestIssueOrder(t *testing.T) {
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	gs := []claim.Grant{
		{GrantID: "b", IssuedAt: at.Add(time.Second)},
		{GrantID: "c", IssuedAt: at},
		{GrantID: "a", IssuedAt: at.Add(time.Second)},
		{GrantID: "B", IssuedAt: at.Add(time.Second)}, // bytewise: upper case first
	}
	slices.SortFunc(gs, claim.IssueOrder)
	var ids []string
	for _, g := range gs {
		ids = append(ids, g.GrantID)
	}
	if got := strings.Join(ids, " "); got != "c B a b" {
		t.Fatalf("IssueOrder sorts %q", got)
	}
}
