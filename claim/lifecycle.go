package claim

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"
)

// Issue stores g as a new grant in state ISSUED. Its lifecycle fields
// (claim, finalization, reconciliation) are cleared; a zero IssuedAt
// becomes the store's now. A grant id that is already stored is refused
// with ErrGrantExists. The nonce and the scope are not reserved here: they
// are taken by Claim.
func Issue(ctx context.Context, tx Tx, g Grant) error {
	if g.GrantID == "" || g.IntentHash == "" || g.Nonce == "" || g.Scope == "" || g.ExpiresAt.IsZero() {
		return errors.New("claim: a grant needs a grant id, an intent hash, a nonce, a scope and an expiry")
	}
	switch _, err := tx.Grant(ctx, g.GrantID); {
	case err == nil:
		return refuse(ErrGrantExists, "grant %q", g.GrantID)
	case !isNotFound(err):
		return fmt.Errorf("claim: read grant %q: %w", g.GrantID, err)
	}
	if g.IssuedAt.IsZero() {
		g.IssuedAt = tx.Now()
	}
	g.State = StateIssued
	g.ClaimTokenDigest, g.ClaimCorrelation = "", ""
	g.ClaimedAt, g.LeaseExpiresAt, g.FinalizedAt = time.Time{}, time.Time{}, time.Time{}
	g.FinalCode = ""
	g.Evidence, g.Receipt, g.EffectConfirmed, g.Reconciliation = nil, nil, false, nil
	return tx.PutGrant(ctx, g)
}

// ClaimRequest claims a grant right before the downstream commit.
type ClaimRequest struct {
	GrantID    string
	IntentHash string // must equal the grant's
	// ClaimTokenDigest is the digest of the fresh claim token handed to the
	// executor; Finalize must present the same.
	ClaimTokenDigest string
	Correlation      string
	// Lease is at least one second. The lease ends at now + Lease
	// truncated to a whole second (see Claim).
	Lease time.Duration
}

// MinLease is the shortest lease Claim accepts: a lease ends on a whole
// second, and a shorter one could end before it began.
const MinLease = time.Second

// Claim moves an ISSUED grant to CLAIMED, taking its nonce and its
// concurrency scope, all in tx. The checks run in this order, and a refusal
// writes nothing:
//
//  1. the grant exists (ErrGrantNotFound);
//  2. it is ISSUED (ErrReplay);
//  3. r.IntentHash is the grant's (ErrBindingMismatch);
//  4. the store's now is before the grant's expiry (ErrGrantExpired);
//  5. the nonce is unused, or used by this grant (ErrNonceUsed);
//  6. the scope is free: not held by a live claim (ErrScopeBusy), nor by
//     an execution whose outcome is unknown (ErrScopeUnreconciled).
//
// A scope is free when it has no claim record, or when its record names a
// grant that is COMMITTED or FAILED (finalized, or reconciled). A holder
// whose outcome is unknown keeps the scope: a grant finalized or recorded
// INDETERMINATE until Reconcile settles it, and a CLAIMED grant whose lease
// passed without a finalization (its effect may have happened; its late
// Finalize records INDETERMINATE, Expire does the same). An unknown effect
// is never retried automatically. A scope record that names a missing
// grant blocks the scope until its own lease passes (fail closed).
//
// On success the grant is CLAIMED with ClaimedAt = now and LeaseExpiresAt =
// now + r.Lease truncated to a whole second, so that the lease end is
// exactly a JWT NumericDate (the claim attestation's exp); the nonce names
// the grant, and the scope record names the grant with the same lease. now
// is tx.Now(), read once.
func Claim(ctx context.Context, tx Tx, r ClaimRequest) (Grant, error) {
	if r.ClaimTokenDigest == "" || r.Lease < MinLease {
		return Grant{}, errors.New("claim: a claim needs a claim token digest and a lease of at least one second")
	}
	g, err := readGrant(ctx, tx, r.GrantID)
	if err != nil {
		return Grant{}, err
	}
	if g.State != StateIssued {
		return Grant{}, refuse(ErrReplay, "grant %q is %s", g.GrantID, g.State)
	}
	if r.IntentHash != g.IntentHash {
		return Grant{}, refuse(ErrBindingMismatch, "intent hash is not the one grant %q was issued for", g.GrantID)
	}
	now := tx.Now()
	if !now.Before(g.ExpiresAt) {
		return Grant{}, refuse(ErrGrantExpired, "grant %q expired at %s", g.GrantID, g.ExpiresAt.Format(time.RFC3339Nano))
	}
	switch holder, err := tx.NonceGrant(ctx, g.Nonce); {
	case err == nil && holder != g.GrantID:
		return Grant{}, refuse(ErrNonceUsed, "nonce of grant %q was used by another grant", g.GrantID)
	case err != nil && !isNotFound(err):
		return Grant{}, fmt.Errorf("claim: read nonce: %w", err)
	}
	if err := scopeFree(ctx, tx, g.Scope, now); err != nil {
		return Grant{}, err
	}

	g.State = StateClaimed
	g.ClaimTokenDigest = r.ClaimTokenDigest
	g.ClaimCorrelation = r.Correlation
	g.ClaimedAt = now
	g.LeaseExpiresAt = now.Add(r.Lease).Truncate(time.Second) // after now, as r.Lease >= 1 s
	if err := tx.PutGrant(ctx, g); err != nil {
		return Grant{}, err
	}
	if err := tx.PutNonce(ctx, g.Nonce, g.GrantID); err != nil {
		return Grant{}, err
	}
	err = tx.PutScopeClaim(ctx, ScopeClaim{OrgID: g.OrgID, Scope: g.Scope, GrantID: g.GrantID, LeaseExpiresAt: g.LeaseExpiresAt})
	if err != nil {
		return Grant{}, err
	}
	return g, nil
}

// scopeFree returns nil when scope may be claimed at now (see Claim).
func scopeFree(ctx context.Context, tx Tx, scope string, now time.Time) error {
	c, err := tx.ScopeClaim(ctx, scope)
	switch {
	case isNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("claim: read scope claim: %w", err)
	}
	holder, err := tx.Grant(ctx, c.GrantID)
	switch {
	case isNotFound(err):
		if now.Before(c.LeaseExpiresAt) {
			return refuse(ErrScopeBusy, "scope is claimed until %s", c.LeaseExpiresAt.Format(time.RFC3339Nano))
		}
		return nil
	case err != nil:
		return fmt.Errorf("claim: read grant %q holding the scope: %w", c.GrantID, err)
	}
	switch {
	case holder.State == StateClaimed && (now.Before(c.LeaseExpiresAt) || now.Before(holder.LeaseExpiresAt)):
		return refuse(ErrScopeBusy, "scope is claimed by another grant until %s", c.LeaseExpiresAt.Format(time.RFC3339Nano))
	case holder.State == StateClaimed:
		return refuse(ErrScopeUnreconciled, "scope is held by grant %q, whose lease passed without a finalization; "+
			"its outcome is unknown until it is reconciled", holder.GrantID)
	case holder.State == StateIndeterminate:
		return refuse(ErrScopeUnreconciled, "scope is held by grant %q, INDETERMINATE until it is reconciled", holder.GrantID)
	}
	return nil // COMMITTED or FAILED: a stale record
}

// holdScope keeps g's scope held for an INDETERMINATE g: a missing record
// is put back naming g; a record of another grant is never touched.
func holdScope(ctx context.Context, tx Tx, g Grant) error {
	_, err := tx.ScopeClaim(ctx, g.Scope)
	switch {
	case err == nil:
		return nil
	case !isNotFound(err):
		return fmt.Errorf("claim: read scope claim: %w", err)
	}
	return tx.PutScopeClaim(ctx, ScopeClaim{OrgID: g.OrgID, Scope: g.Scope, GrantID: g.GrantID, LeaseExpiresAt: g.LeaseExpiresAt})
}

// releaseScope deletes g's scope record if it names g.
func releaseScope(ctx context.Context, tx Tx, g Grant) error {
	c, err := tx.ScopeClaim(ctx, g.Scope)
	switch {
	case isNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("claim: read scope claim: %w", err)
	case c.GrantID != g.GrantID:
		return nil
	}
	return tx.DeleteScopeClaim(ctx, g.Scope)
}

// FinalizeRequest reports the outcome of the downstream attempt.
type FinalizeRequest struct {
	GrantID          string
	ClaimTokenDigest string
	Outcome          Outcome
	// Evidence, Receipt and EffectConfirmed are recorded as given; the
	// caller computes them with Settle after verifying the receipt.
	// EffectConfirmed is recorded only for a COMMITTED outcome.
	Evidence        *Evidence
	Receipt         *Receipt
	EffectConfirmed bool
}

// Finalization is the result of Finalize. A non-nil Refusal (a *Error
// wrapping ErrLeaseExpired or ErrScopeInvariant) means the grant was
// recorded INDETERMINATE with FinalCode set: the caller must still commit
// the transaction, then answer 409 with the refusal's code.
type Finalization struct {
	Grant   Grant
	Refusal error
}

// Finalize records the outcome of a CLAIMED grant. These errors write
// nothing, and are checked in this order: the grant is missing
// (ErrGrantNotFound); it is ISSUED (ErrNotClaimed); it is COMMITTED, FAILED
// or INDETERMINATE (ErrAlreadyFinalized: a replay); the claim token digest
// differs, compared in constant time (ErrClaimTokenMismatch); the outcome is
// not COMMITTED, FAILED or INDETERMINATE (ErrInvalidFinalization).
//
// Then, with now = tx.Now() read once:
//   - now at or after the claim lease boundary: INDETERMINATE with FinalCode
//     CLAIM_LEASE_EXPIRED, Refusal ErrLeaseExpired. The grant's own expiry
//     does not matter: a grant that expires after a successful claim still
//     finalizes while its lease holds;
//   - the scope record missing or naming another grant: INDETERMINATE with
//     FinalCode CLAIM_SCOPE_INVARIANT_VIOLATION, Refusal ErrScopeInvariant;
//   - otherwise the state becomes r.Outcome.
//
// In every case FinalizedAt is now, and the evidence and receipt are
// recorded as given (for a later reconciliation), EffectConfirmed only for a
// COMMITTED state. A COMMITTED or FAILED grant releases its scope (deletes
// the record when it names this grant). An INDETERMINATE grant keeps it
// held until Reconcile: its record stays, and a missing one is put back
// naming it. A scope record of another grant is never touched.
func Finalize(ctx context.Context, tx Tx, r FinalizeRequest) (Finalization, error) {
	g, err := readGrant(ctx, tx, r.GrantID)
	if err != nil {
		return Finalization{}, err
	}
	lapsed := g.State == StateIndeterminate && g.Lapsed
	switch {
	case g.State == StateClaimed || lapsed:
	case g.State == StateIssued:
		return Finalization{}, refuse(ErrNotClaimed, "grant %q was never claimed", g.GrantID)
	case g.State == StateCommitted, g.State == StateFailed, g.State == StateIndeterminate:
		return Finalization{}, refuse(ErrAlreadyFinalized, "grant %q is already %s", g.GrantID, g.State)
	default:
		return Finalization{}, fmt.Errorf("claim: grant %q is in unknown state %q", g.GrantID, g.State)
	}
	if subtle.ConstantTimeCompare([]byte(g.ClaimTokenDigest), []byte(r.ClaimTokenDigest)) != 1 {
		return Finalization{}, refuse(ErrClaimTokenMismatch, "claim token is not the one grant %q was claimed with", g.GrantID)
	}
	if !validOutcome(r.Outcome) {
		return Finalization{}, refuse(ErrInvalidFinalization, "outcome %q is not COMMITTED, FAILED or INDETERMINATE", r.Outcome)
	}
	if lapsed {
		// Expire already recorded the lapse; answer the executor's late
		// finalize the way it would have been answered, once.
		g.Lapsed = false
		g.Evidence, g.Receipt = cloneEvidence(r.Evidence), cloneReceipt(r.Receipt)
		if err := tx.PutGrant(ctx, g); err != nil {
			return Finalization{}, err
		}
		return Finalization{Grant: g, Refusal: refuse(ErrLeaseExpired, "claim lease of grant %q ended at %s",
			g.GrantID, g.LeaseExpiresAt.Format(time.RFC3339Nano))}, nil
	}

	now := tx.Now()
	c, err := tx.ScopeClaim(ctx, g.Scope)
	switch {
	case isNotFound(err):
	case err != nil:
		return Finalization{}, fmt.Errorf("claim: read scope claim: %w", err)
	}
	found := err == nil
	holds := found && c.GrantID == g.GrantID

	g.FinalizedAt = now
	g.Evidence = cloneEvidence(r.Evidence)
	g.Receipt = cloneReceipt(r.Receipt)
	g.EffectConfirmed = false
	var refusal error
	switch {
	case !now.Before(g.LeaseExpiresAt):
		g.State, g.FinalCode = StateIndeterminate, CodeLeaseExpired
		refusal = refuse(ErrLeaseExpired, "claim lease of grant %q ended at %s", g.GrantID, g.LeaseExpiresAt.Format(time.RFC3339Nano))
	case !holds:
		g.State, g.FinalCode = StateIndeterminate, CodeScopeInvariant
		refusal = refuse(ErrScopeInvariant, "scope claim of grant %q is missing", g.GrantID)
	default:
		g.State = State(r.Outcome)
		g.EffectConfirmed = r.EffectConfirmed && r.Outcome == OutcomeCommitted
	}
	if err := tx.PutGrant(ctx, g); err != nil {
		return Finalization{}, err
	}
	switch {
	case g.State == StateIndeterminate && !found:
		if err := holdScope(ctx, tx, g); err != nil {
			return Finalization{}, err
		}
	case g.State != StateIndeterminate && holds:
		if err := tx.DeleteScopeClaim(ctx, g.Scope); err != nil {
			return Finalization{}, err
		}
	}
	return Finalization{Grant: g, Refusal: refusal}, nil
}

// LeasePassed reports whether g is a claim whose lease passed at now
// without a finalization: CLAIMED, and now at or after the lease end (the
// boundary itself is expired, as in Finalize).
func LeasePassed(g Grant, now time.Time) bool {
	return g.State == StateClaimed && !now.Before(g.LeaseExpiresAt)
}

// Lapse returns g as it is recorded once its lease passed without a
// finalization: INDETERMINATE with CLAIM_LEASE_EXPIRED, Lapsed, nothing
// confirmed, and FinalizedAt the lease end rather than the time anyone
// noticed, so that the record is the same whenever it is written (and a
// listing that shows a lapsed claim before Expire shows what Expire
// records). It changes nothing else; callers check LeasePassed first.
func Lapse(g Grant) Grant {
	g.State, g.FinalCode, g.Lapsed, g.EffectConfirmed = StateIndeterminate, CodeLeaseExpired, true, false
	g.FinalizedAt = g.LeaseExpiresAt
	return g
}

// Expire records Lapse(g) for a CLAIMED grant whose lease has passed by the
// store's clock (LeasePassed), so that it can be reconciled. Its scope
// stays held until then (a missing record is put back naming it, as in
// Finalize). Any other grant is returned unchanged with changed false.
func Expire(ctx context.Context, tx Tx, grantID string) (g Grant, changed bool, err error) {
	g, err = readGrant(ctx, tx, grantID)
	if err != nil {
		return Grant{}, false, err
	}
	if !LeasePassed(g, tx.Now()) {
		return g, false, nil
	}
	g = Lapse(g)
	if err := tx.PutGrant(ctx, g); err != nil {
		return Grant{}, false, err
	}
	if err := holdScope(ctx, tx, g); err != nil {
		return Grant{}, false, err
	}
	return g, true, nil
}

// ReconcileRequest settles an INDETERMINATE grant with late evidence.
type ReconcileRequest struct {
	GrantID         string
	Resolution      Outcome // COMMITTED or FAILED
	Evidence        *Evidence
	Receipt         *Receipt
	EffectConfirmed bool // recorded only for COMMITTED
	Note            string
}

// Reconcile settles an INDETERMINATE grant: it records a Reconciliation
// (ReconciledAt = tx.Now()), moves the state to the resolution, COMMITTED
// or FAILED, and releases the grant's concurrency scope (deletes the record
// when it names this grant). The original finalization (FinalizedAt, FinalCode, Evidence,
// Receipt, EffectConfirmed) is kept as it was, so a grant with a
// Reconciliation is one that was INDETERMINATE, and GrantsInState(
// INDETERMINATE) lists exactly the grants still awaiting reconciliation.
// Reconciliation never re-authorizes execution: a grant is claimed once.
//
// Errors, which write nothing: the grant is missing (ErrGrantNotFound); it
// is not INDETERMINATE, which includes one already reconciled
// (ErrNotIndeterminate); the resolution is not COMMITTED or FAILED
// (ErrInvalidFinalization).
func Reconcile(ctx context.Context, tx Tx, r ReconcileRequest) (Grant, error) {
	g, err := readGrant(ctx, tx, r.GrantID)
	if err != nil {
		return Grant{}, err
	}
	if g.State != StateIndeterminate {
		if g.Reconciliation != nil {
			return Grant{}, refuse(ErrNotIndeterminate, "grant %q was already reconciled as %s", g.GrantID, g.Reconciliation.Resolution)
		}
		return Grant{}, refuse(ErrNotIndeterminate, "grant %q is %s", g.GrantID, g.State)
	}
	if r.Resolution != OutcomeCommitted && r.Resolution != OutcomeFailed {
		return Grant{}, refuse(ErrInvalidFinalization, "resolution %q is not COMMITTED or FAILED", r.Resolution)
	}
	g.Reconciliation = &Reconciliation{
		Resolution:      r.Resolution,
		Evidence:        cloneEvidence(r.Evidence),
		Receipt:         cloneReceipt(r.Receipt),
		EffectConfirmed: r.EffectConfirmed && r.Resolution == OutcomeCommitted,
		Note:            r.Note,
		ReconciledAt:    tx.Now(),
	}
	g.State = State(r.Resolution)
	if err := tx.PutGrant(ctx, g); err != nil {
		return Grant{}, err
	}
	if err := releaseScope(ctx, tx, g); err != nil {
		return Grant{}, err
	}
	return g, nil
}

// Evidence sources and the statuses Settle gives derived evidence.
const (
	SourceEffectEvidence = "effect_evidence"
	SourceEffectReceipt  = "effect_receipt"

	// EvidenceDigestMismatch: a verified receipt's effect digest is not the
	// grant's expected effect digest.
	EvidenceDigestMismatch = "DIGEST_MISMATCH"
	// EvidenceUnconfirmed: a matching receipt for an outcome other than
	// COMMITTED.
	EvidenceUnconfirmed = "UNCONFIRMED"
)

// Settle applies the evidence rules of finalization, purely:
//
//   - explicit effect evidence takes precedence. It is returned (Source
//     "effect_evidence") and confirms only when its Status is CONFIRMED, it
//     has an effect digest, that digest equals the grant's expected effect
//     digest when the grant named one, and the outcome is COMMITTED;
//     otherwise it is recorded without confirming;
//   - else, when the grant named an expected effect and a VERIFIED receipt
//     carries an effect digest, the receipt becomes SIGNED_RECEIPT evidence
//     (Source "effect_receipt") with Status CONFIRMED, confirming, when the
//     digests agree and the outcome is COMMITTED; DIGEST_MISMATCH when they
//     differ; UNCONFIRMED for another outcome;
//   - else there is no evidence, and nothing confirms: COMMITTED alone
//     proves only that an attempt was finalized.
//
// An unverified receipt is never evidence (it is still recorded as
// presented, by the caller, in FinalizeRequest.Receipt).
func Settle(g Grant, outcome Outcome, explicit *Evidence, receipt *Receipt) (*Evidence, bool) {
	if explicit != nil {
		e := *explicit
		e.Source = SourceEffectEvidence
		confirmed := outcome == OutcomeCommitted &&
			e.Status == EvidenceConfirmed &&
			e.EffectDigest != "" &&
			(g.ExpectedEffectDigest == "" || e.EffectDigest == g.ExpectedEffectDigest)
		return &e, confirmed
	}
	if receipt == nil || !receipt.Verified || receipt.EffectDigest == "" || g.ExpectedEffectDigest == "" {
		return nil, false
	}
	e := &Evidence{Kind: EvidenceSignedReceipt, EffectDigest: receipt.EffectDigest, Source: SourceEffectReceipt}
	switch {
	case receipt.EffectDigest != g.ExpectedEffectDigest:
		e.Status = EvidenceDigestMismatch
	case outcome != OutcomeCommitted, receipt.Outcome != "" && receipt.Outcome != string(OutcomeCommitted):
		// Both the executor and the provider must say the effect happened.
		e.Status = EvidenceUnconfirmed
	default:
		e.Status = EvidenceConfirmed
		return e, true
	}
	return e, false
}

func validOutcome(o Outcome) bool {
	return o == OutcomeCommitted || o == OutcomeFailed || o == OutcomeIndeterminate
}

// readGrant reads a grant, refusing a missing one with ErrGrantNotFound.
func readGrant(ctx context.Context, tx Tx, grantID string) (Grant, error) {
	if grantID == "" {
		return Grant{}, refuse(ErrGrantNotFound, "no grant id")
	}
	g, err := tx.Grant(ctx, grantID)
	switch {
	case isNotFound(err):
		return Grant{}, refuse(ErrGrantNotFound, "grant %q", grantID)
	case err != nil:
		return Grant{}, fmt.Errorf("claim: read grant %q: %w", grantID, err)
	}
	return g, nil
}

func cloneEvidence(e *Evidence) *Evidence {
	if e == nil {
		return nil
	}
	c := *e
	return &c
}

func cloneReceipt(r *Receipt) *Receipt {
	if r == nil {
		return nil
	}
	c := *r
	return &c
}
