package claim_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/clearancehq/clearance/claim"
)

// errMissing stands for a backend's not-found error: it wraps
// claim.ErrNotFound (a real backend wraps store.ErrNotFound too).
var errMissing = fmt.Errorf("memtx: %w", claim.ErrNotFound)

// memTx is a claim.Tx over maps, for one org, with a settable clock. Real
// backends run each lifecycle call in one atomic, per-org serialized
// transaction.
type memTx struct {
	now    time.Time
	grants map[string]claim.Grant
	nonces map[string]string
	scopes map[string]claim.ScopeClaim
	writes int
}

func newMemTx(now time.Time) *memTx {
	return &memTx{now: now, grants: map[string]claim.Grant{}, nonces: map[string]string{}, scopes: map[string]claim.ScopeClaim{}}
}

func (m *memTx) Now() time.Time { return m.now }

func (m *memTx) Grant(_ context.Context, id string) (claim.Grant, error) {
	g, ok := m.grants[id]
	if !ok {
		return g, errMissing
	}
	return g, nil
}

func (m *memTx) PutGrant(_ context.Context, g claim.Grant) error {
	m.writes++
	m.grants[g.GrantID] = g
	return nil
}

func (m *memTx) NonceGrant(_ context.Context, nonce string) (string, error) {
	id, ok := m.nonces[nonce]
	if !ok {
		return "", errMissing
	}
	return id, nil
}

func (m *memTx) PutNonce(_ context.Context, nonce, grantID string) error {
	m.writes++
	m.nonces[nonce] = grantID
	return nil
}

func (m *memTx) ScopeClaim(_ context.Context, scope string) (claim.ScopeClaim, error) {
	c, ok := m.scopes[scope]
	if !ok {
		return c, errMissing
	}
	return c, nil
}

func (m *memTx) PutScopeClaim(_ context.Context, c claim.ScopeClaim) error {
	m.writes++
	m.scopes[c.Scope] = c
	return nil
}

func (m *memTx) DeleteScopeClaim(_ context.Context, scope string) error {
	m.writes++
	delete(m.scopes, scope)
	return nil
}

// Issue a grant, claim it right before the downstream commit, and finalize
// it; then see a replayed claim and a finalization after the lease refused,
// whose scope stays held until it is reconciled.
func Example() {
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tx := newMemTx(t0)

	g := claim.Grant{
		OrgID: "org_acme", GrantID: "grt_1", IntentHash: "sha256:aa", Nonce: "n-1",
		Scope: "vendor:42", ExpectedEffectDigest: "sha256:ef", ExpiresAt: t0.Add(2 * time.Minute),
	}
	if err := claim.Issue(ctx, tx, g); err != nil {
		log.Fatal(err)
	}

	tx.now = t0.Add(10 * time.Second)
	c, err := claim.Claim(ctx, tx, claim.ClaimRequest{
		GrantID: "grt_1", IntentHash: "sha256:aa", ClaimTokenDigest: "sha256:c1", Lease: 30 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.State, "until", c.LeaseExpiresAt.Format(time.TimeOnly))

	_, err = claim.Claim(ctx, tx, claim.ClaimRequest{
		GrantID: "grt_1", IntentHash: "sha256:aa", ClaimTokenDigest: "sha256:c2", Lease: 30 * time.Second,
	})
	var ce *claim.Error
	if errors.As(err, &ce) {
		fmt.Println("second claim:", ce.Code())
	}

	// The executor committed and the provider's verified receipt carries the
	// expected effect digest: that confirms the effect.
	receipt := &claim.Receipt{Profile: "VP-3", EffectDigest: "sha256:ef", Verified: true}
	evidence, confirmed := claim.Settle(c, claim.OutcomeCommitted, nil, receipt)
	tx.now = t0.Add(20 * time.Second)
	f, err := claim.Finalize(ctx, tx, claim.FinalizeRequest{
		GrantID: "grt_1", ClaimTokenDigest: "sha256:c1", Outcome: claim.OutcomeCommitted,
		Evidence: evidence, Receipt: receipt, EffectConfirmed: confirmed,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(f.Grant.State, "confirmed:", f.Grant.EffectConfirmed, "by", f.Grant.Evidence.Kind)

	// A second grant of the scope, finalized after its lease: recorded
	// INDETERMINATE (commit it), answered 409.
	g2 := g
	g2.GrantID, g2.Nonce = "grt_2", "n-2"
	if err := claim.Issue(ctx, tx, g2); err != nil {
		log.Fatal(err)
	}
	if _, err := claim.Claim(ctx, tx, claim.ClaimRequest{GrantID: "grt_2", IntentHash: "sha256:aa", ClaimTokenDigest: "sha256:c3", Lease: 30 * time.Second}); err != nil {
		log.Fatal(err)
	}
	tx.now = tx.now.Add(30 * time.Second)
	f, err = claim.Finalize(ctx, tx, claim.FinalizeRequest{GrantID: "grt_2", ClaimTokenDigest: "sha256:c3", Outcome: claim.OutcomeCommitted})
	if err != nil {
		log.Fatal(err)
	}
	errors.As(f.Refusal, &ce)
	fmt.Println(f.Grant.State, f.Grant.FinalCode, ce.Code())

	// Its effect is unknown: the scope stays held until it is reconciled,
	// so a third grant of the scope is not an automatic retry.
	g3 := g
	g3.GrantID, g3.Nonce = "grt_3", "n-3"
	if err := claim.Issue(ctx, tx, g3); err != nil {
		log.Fatal(err)
	}
	claim3 := claim.ClaimRequest{GrantID: "grt_3", IntentHash: "sha256:aa", ClaimTokenDigest: "sha256:c4", Lease: 30 * time.Second}
	_, err = claim.Claim(ctx, tx, claim3)
	errors.As(err, &ce)
	fmt.Println("third claim:", ce.Code())
	if _, err := claim.Reconcile(ctx, tx, claim.ReconcileRequest{GrantID: "grt_2", Resolution: claim.OutcomeFailed}); err != nil {
		log.Fatal(err)
	}
	c3, err := claim.Claim(ctx, tx, claim3)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after reconciliation:", c3.State)
	// Output:
	// CLAIMED until 12:00:40
	// second claim: CLAIM_REPLAY
	// COMMITTED confirmed: true by SIGNED_RECEIPT
	// INDETERMINATE CLAIM_LEASE_EXPIRED CLAIM_LEASE_EXPIRED
	// third claim: CLAIM_SCOPE_UNRECONCILED
	// after reconciliation: CLAIMED
}
