package clearance

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/policies"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/registry"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
)

// Defaults of the execution lifecycle.
const (
	DefaultGrantTTL   = 120 * time.Second
	DefaultClaimLease = 30 * time.Second
	DefaultIssuer     = "clearance"
)

// Codes of the execution routes.
const (
	CodeIntentMalformed     = decide.CodeIntentMalformed
	CodeIntentSignature     = decide.CodeIntentSignature
	CodeIntentNotCanonical  = decide.CodeIntentNotCanonical
	CodeIntentIDMismatch    = decide.CodeIntentIDMismatch
	CodeIntentAlreadyBound  = decide.CodeIntentAlreadyBound
	CodeApprovalUnverified  = decide.CodeApprovalUnverified
	CodeGrantInvalid        = "GRANT_INVALID"
	CodeGrantExpired        = "GRANT_EXPIRED"
	CodeGrantNotBound       = "GRANT_NOT_BOUND"
	CodeBindingMismatch     = "BINDING_MISMATCH"
	CodeGrantAlreadyClaimed = "GRANT_ALREADY_CLAIMED"
	CodeStaleAuthorization  = policies.CodeStaleAuthorization
	CodeDossierMismatch     = "DOSSIER_SIGNATURE_MISMATCH"
	CodeInvalidFinalization = "INVALID_FINALIZATION"
	CodeInvalidEvidence     = "INVALID_EFFECT_EVIDENCE"
	CodeIntentStale         = decide.CodeIntentStale
	CodeIntentNotYetValid   = decide.CodeIntentNotYetValid
)

// ExecutionIntent is the payload of a signed execution intent (DESIGN §8).
type ExecutionIntent = decide.ExecutionIntent

// Escalation says how an ESCALATE answer is handled.
type Escalation = decide.Escalation

// Escalation modes.
const (
	EscalationNone    = decide.EscalationNone
	EscalationManaged = decide.EscalationManaged
)

// AuthorityRequest is an enforce-and-bind call.
type AuthorityRequest = decide.AuthorityRequest

// AuthorityDecision is the enforce-and-bind answer.
type AuthorityDecision = decide.AuthorityDecision

// EnforceAndBind binds a single-use grant to a signed execution intent
// (see decide.Service.EnforceAndBind).
func (e *Engine) EnforceAndBind(ctx context.Context, req AuthorityRequest) (AuthorityDecision, error) {
	return e.Decide.EnforceAndBind(ctx, req)
}

var (
	grantClaims   = decide.GrantClaims
	intentInput   = decide.IntentInput
	actionClaim   = decide.ActionClaim
	grantRecordOf = decide.GrantRecordOf
)

// tokenGrant is a grant token checked against the key ring, with the stored
// grant its jti names (or the error reading it).
type tokenGrant struct {
	claims    grant.Claims
	stored    claim.Grant
	lookupErr error
	// recognized: the token is byte for byte the one recorded at issue.
	recognized bool
}

// checkToken verifies a grant token and reads the grant it names. A token
// byte-identical to the one recorded at issue is recognized by its digest,
// which spares the Ed25519 check (grant.VerifyOptions.Recognize); any other
// token is verified in full. A verification failure is returned as the
// grant package's error; a failed read of the stored grant is in lookupErr.
// The token's claims are compared with the stored grant by grantOf.
func (e *Engine) checkToken(ctx context.Context, orgID, token string, ignoreExpiry bool) (tokenGrant, error) {
	keys, err := e.signingKeys()
	if err != nil {
		return tokenGrant{}, err
	}
	var (
		tg     tokenGrant
		looked string
	)
	recognize := func(jti string, digest [sha256.Size]byte) bool {
		looked = jti
		tg.stored, tg.lookupErr = e.store.GrantOf(ctx, orgID, jti)
		want := canon.FormatDigest(digest)
		tg.recognized = tg.lookupErr == nil && subtle.ConstantTimeCompare([]byte(tg.stored.TokenDigest), []byte(want)) == 1
		return tg.recognized
	}
	tg.claims, err = grant.Verify(token, keys, grant.VerifyOptions{Now: e.now(), Issuer: e.opts.Issuer,
		MaxFutureIssuedAt: e.opts.MaxClockSkew, IgnoreExpiry: ignoreExpiry, Recognize: recognize})
	if err != nil {
		return tokenGrant{}, err
	}
	if looked != tg.claims.ID {
		tg.recognized = false
		tg.stored, tg.lookupErr = e.store.GrantOf(ctx, orgID, tg.claims.ID)
	}
	return tg, nil
}

// grantOf returns the stored grant of a verified token, which must be the
// token issued for it: one recognized by its digest is; any other must state
// exactly the claims rebuilt from the stored grant, every member
// (BINDING_MISMATCH otherwise), so that nothing a caller presents stands in
// for what was issued.
func (e *Engine) grantOf(tg tokenGrant) (claim.Grant, error) {
	if isNotFound(tg.lookupErr) {
		return claim.Grant{}, newError(ErrConflict, CodeGrantInvalid, "the execution grant is not known")
	}
	if tg.lookupErr != nil {
		return claim.Grant{}, unavailable("read grant", tg.lookupErr)
	}
	if tg.recognized {
		return tg.stored, nil
	}
	intent, err := e.boundIntent(tg.stored)
	if err != nil {
		return claim.Grant{}, err
	}
	// Grants are issued only for ENFORCEMENT.
	if !tg.claims.Equal(grantClaims(e.opts.Issuer, tg.stored, intent, policy.ModeEnforcement)) {
		return claim.Grant{}, newError(ErrConflict, CodeBindingMismatch, "the execution grant does not match its recorded binding")
	}
	return tg.stored, nil
}

// boundIntent decodes the canonical intent a grant was issued for, within
// the JSON limits it was accepted under.
func (e *Engine) boundIntent(g claim.Grant) (ExecutionIntent, error) {
	var intent ExecutionIntent
	opts := e.decodeOptions()
	opts.RejectUnknown = false
	if err := strictjson.Decode(g.Intent, &intent, opts); err != nil {
		return intent, &Error{Kind: ErrConflict, Code: CodeBindingMismatch, Detail: "the grant's recorded intent cannot be read", Err: err}
	}
	return intent, nil
}

// verifyToken checks a grant token's signature, type, issuer and lifetime,
// its tenant and its binding to intentHash, and returns its stored grant,
// which the token states exactly (grantOf).
func (e *Engine) verifyToken(ctx context.Context, orgID, token, intentHash string) (claim.Grant, error) {
	if token == "" {
		return claim.Grant{}, invalid(CodeInvalidRequest, "execution_token", "execution_token is required")
	}
	tg, err := e.checkToken(ctx, orgID, token, false)
	var te *grant.TokenError
	switch {
	case errors.Is(err, grant.ErrTokenExpired):
		return claim.Grant{}, &Error{Kind: ErrConflict, Code: CodeGrantExpired, Detail: "the execution grant has expired", Err: err}
	case errors.As(err, &te):
		return claim.Grant{}, &Error{Kind: ErrConflict, Code: CodeGrantInvalid, Detail: "the execution grant is not valid: " + err.Error(), Err: err}
	case err != nil:
		return claim.Grant{}, err
	}
	c := tg.claims
	if c.OrgID != orgID {
		return claim.Grant{}, newError(ErrConflict, CodeGrantInvalid, "the execution grant belongs to another organization")
	}
	if intentHash == "" || c.IntentHash != intentHash {
		return claim.Grant{}, newError(ErrConflict, CodeGrantNotBound, "the execution grant is not bound to this intent_hash")
	}
	return e.grantOf(tg)
}

// GrantStatus is the verify-token answer.
type GrantStatus struct {
	Valid      bool         `json:"valid"`
	GrantID    string       `json:"grant_id"`
	DecisionID string       `json:"decision_id"`
	DossierID  string       `json:"dossier_id"`
	IntentHash string       `json:"intent_hash"`
	ExpiresAt  string       `json:"expires_at"`
	State      claim.State  `json:"state"`
	Action     grant.Action `json:"act"`
	ActorID    string       `json:"sub"`
}

// VerifyGrant checks a grant without consuming it: the token is verified
// as a claim verifies it, and the grant must still be ISSUED (a claimed or
// finalized grant is GRANT_ALREADY_CLAIMED). What it reports comes from the
// stored grant. It never authorizes execution by itself.
func (e *Engine) VerifyGrant(ctx context.Context, orgID, token, intentHash string) (GrantStatus, error) {
	g, err := e.verifyToken(ctx, orgID, token, intentHash)
	if err != nil {
		return GrantStatus{}, err
	}
	if g.State != claim.StateIssued {
		return GrantStatus{}, newError(ErrConflict, CodeGrantAlreadyClaimed, "the execution grant was already claimed (it is %s)", g.State)
	}
	intent, err := e.boundIntent(g)
	if err != nil {
		return GrantStatus{}, err
	}
	return GrantStatus{Valid: true, GrantID: g.GrantID, DecisionID: g.DecisionID, DossierID: g.DossierID,
		IntentHash: g.IntentHash, ExpiresAt: g.ExpiresAt.Format(timeFormat), State: g.State, Action: actionClaim(intent.Action),
		ActorID: g.ActorID}, nil
}

// ClaimRequest is a claim-token call.
type ClaimRequest struct {
	OrgID          string
	ExecutionToken string
	IntentHash     string
	CorrelationID  string
}

// ClaimResult is a claim-token answer. ShouldExecute is true only for a
// live claim; every failure is an error and never a ClaimResult.
type ClaimResult struct {
	ShouldExecute       bool   `json:"should_execute"`
	ClaimToken          string `json:"claim_token"`
	ClaimLeaseExpiresAt string `json:"claim_lease_expires_at"`
	Valid               bool   `json:"valid"`
	ClaimAttestation    string `json:"claim_attestation"`
	GrantID             string `json:"grant_id"`
	DecisionID          string `json:"decision_id"`
}

// Claim atomically claims a grant immediately before the downstream commit:
// it verifies the grant and its complete binding, checks that the dossier
// is intact, re-evaluates the intent under the org's current policy, then
// claims the grant's nonce and concurrency scope under a lease judged by the
// store's clock. Any failure is an error: nothing authorizes but a result.
func (e *Engine) Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error) {
	g, err := e.verifyToken(ctx, req.OrgID, req.ExecutionToken, req.IntentHash)
	if err != nil {
		return ClaimResult{}, err
	}
	if req.CorrelationID != "" && !ValidToken(req.CorrelationID) {
		return ClaimResult{}, invalid(CodeInvalidCorrelationID, "correlation_id", "correlation_id must be 1 to %d visible ASCII characters", MaxKeyLength)
	}
	if err := e.checkDossier(ctx, g); err != nil {
		return ClaimResult{}, err
	}
	intent, err := e.boundIntent(g)
	if err != nil {
		return ClaimResult{}, err
	}
	version, err := e.checkCurrentPolicy(ctx, g, intent)
	if err != nil {
		return ClaimResult{}, err
	}
	keys, err := e.signingKeys()
	if err != nil {
		return ClaimResult{}, err
	}
	signer, err := keys.Signer()
	if err != nil {
		return ClaimResult{}, err
	}
	secret, digest, err := newClaimToken(e.opts.Rand)
	if err != nil {
		return ClaimResult{}, unavailable("claim token", err)
	}
	attID, err := e.newID()
	if err != nil {
		return ClaimResult{}, unavailable("id generation", err)
	}
	var claimed claim.Grant
	err = e.store.Update(ctx, req.OrgID, func(tx store.Tx) error {
		if err := stillActive(ctx, tx, version); err != nil {
			return err
		}
		claimed, err = claim.Claim(ctx, tx, claim.ClaimRequest{GrantID: g.GrantID, IntentHash: req.IntentHash,
			ClaimTokenDigest: digest, Correlation: req.CorrelationID, Lease: e.opts.ClaimLease})
		if err != nil {
			return err
		}
		return e.appendRecord(ctx, tx, ledger.KindClaimed, claimed.GrantID, claimEvent{claimed.GrantID, digest,
			claimed.ClaimedAt.Format(timeFormat), claimed.LeaseExpiresAt.Format(timeFormat), req.CorrelationID})
	})
	if err != nil {
		return ClaimResult{}, lifecycleError("claim", err)
	}
	// Signed after the commit, outside the org's lock: the lease times come
	// from the store's clock inside the transaction. Should signing fail, the
	// claim stays recorded without a token, so nothing executes. Everything
	// it states comes from the stored grant; the lease ends on a whole
	// second, so exp is exactly its end.
	att, err := grant.MintAttestation(signer, grant.Attestation{
		Issuer: e.opts.Issuer, Audience: grant.AudAttestation, Subject: claimed.ActorID, OrgID: claimed.OrgID, ID: attID,
		IssuedAt: claimed.ClaimedAt.Unix(), Expiry: claimed.LeaseExpiresAt.Unix(), GrantID: claimed.GrantID,
		DecisionID: claimed.DecisionID, DossierID: claimed.DossierID, ClaimTokenDigest: digest, Action: actionClaim(intent.Action),
		Binding: grant.Binding{IntentHash: claimed.IntentHash, PayloadDigest: claimed.PayloadDigest, PayloadProfile: grant.PayloadProfile,
			ExpectedEffectDigest: claimed.ExpectedEffectDigest, Nonce: claimed.Nonce, Scope: claimed.Scope, Correlation: claimed.Correlation},
	})
	if err != nil {
		return ClaimResult{}, unavailable("sign claim attestation", err)
	}
	return ClaimResult{ShouldExecute: true, ClaimToken: secret, ClaimLeaseExpiresAt: claimed.LeaseExpiresAt.Format(timeFormat),
		Valid: true, ClaimAttestation: att, GrantID: claimed.GrantID, DecisionID: claimed.DecisionID}, nil
}

type claimEvent struct {
	GrantID          string `json:"grant_id"`
	ClaimTokenDigest string `json:"claim_token_digest"`
	ClaimedAt        string `json:"claimed_at"`
	LeaseExpiresAt   string `json:"lease_expires_at"`
	Correlation      string `json:"correlation_id,omitempty"`
}

// checkDossier checks that the dossier still has the digest the grant was
// bound to.
func (e *Engine) checkDossier(ctx context.Context, g claim.Grant) error {
	r, err := e.store.Dossier(ctx, g.OrgID, g.DossierID)
	if err != nil && !isNotFound(err) {
		return unavailable("read dossier", err)
	}
	if err != nil || digestOf(r.Body) != g.DossierDigest {
		return newError(ErrConflict, CodeDossierMismatch, "the grant's dossier is missing or no longer matches its digest")
	}
	return nil
}

// checkCurrentPolicy re-evaluates g's bound intent under the org's version
// active now, whatever the intent pins, and returns that version; any answer
// but ALLOW in ENFORCEMENT is a stale authorization.
func (e *Engine) checkCurrentPolicy(ctx context.Context, g claim.Grant, intent ExecutionIntent) (string, error) {
	in, err := intentInput(intent, "", e.now())
	if err != nil {
		return "", newError(ErrConflict, CodeStaleAuthorization, "the bound intent cannot be re-evaluated")
	}
	res, err := e.Policies.Resolve(ctx, g.OrgID, "")
	if err != nil {
		var ee *Error
		if errors.As(err, &ee) && errors.Is(err, ErrUnavailable) {
			return "", err
		}
		return "", &Error{Kind: ErrConflict, Code: CodeStaleAuthorization, Detail: "the current policy cannot be resolved", Err: err}
	}
	c := res.Policy
	pd := c.Evaluate(&in)
	if pd.Err != nil || pd.Outcome != policy.OutcomeAllow || res.Mode("") != policy.ModeEnforcement {
		return "", newError(ErrConflict, CodeStaleAuthorization,
			"under the current policy (%s) the action is %s in %s mode", c.Snapshot().PolicyVersion, pd.Outcome, res.Mode(""))
	}
	return c.Snapshot().PolicyVersion, nil
}

// claimTokenPrefix marks claim tokens, like API keys are marked.
const claimTokenPrefix = "clr_claim_"

func newClaimToken(rand io.Reader) (secret, digest string, err error) {
	s, _, err := tenant.NewSecret(rand, claimTokenPrefix)
	if err != nil {
		return "", "", err
	}
	return s, canon.Digest([]byte(s)), nil
}

// lifecycleError maps claim-package errors to engine errors: a lifecycle
// refusal is a 409, a store failure a 503.
// lifecycleError is the kernel's answer, a store not-found being the
// grant's.
func lifecycleError(op string, err error) error {
	if isNotFound(err) {
		return newError(ErrConflict, CodeGrantInvalid, "the execution grant is not known")
	}
	return core.Translate(op, err)
}

// FinalizeRequest is a finalize-token call.
type FinalizeRequest struct {
	OrgID          string
	ExecutionToken string
	ClaimToken     string
	Outcome        claim.Outcome
	Evidence       *EffectEvidence
	Receipt        *EffectReceipt
}

// EffectEvidence is digest-bound evidence of the effect.
type EffectEvidence struct {
	Kind         string `json:"kind"`
	Status       string `json:"status"`
	EffectDigest string `json:"effect_digest"`
}

// EffectReceipt is a provider's signed receipt (profile VP-3). Any receipt
// is recorded as presented; only a VP-3 receipt can verify.
type EffectReceipt struct {
	Profile string `json:"profile"`
	Receipt string `json:"receipt"`
}

// FinalizeResult is the finalize-token answer.
type FinalizeResult struct {
	Outcome             claim.State     `json:"outcome"`
	FinalizedAt         string          `json:"finalized_at"`
	EffectConfirmed     bool            `json:"effect_confirmed"`
	Evidence            *claim.Evidence `json:"evidence"`
	ReceiptVerification *claim.Receipt  `json:"receipt_verification,omitempty"`
	GrantID             string          `json:"grant_id"`
	Code                string          `json:"code,omitempty"`
}

// FinalizeRefused is the error of a finalization that was recorded as
// INDETERMINATE (lease expired, scope invariant): Result is the 409 body.
type FinalizeRefused struct {
	Err    *Error
	Result FinalizeResult
}

func (r *FinalizeRefused) Error() string { return r.Err.Error() }

// Unwrap exposes the *Error, so the status table and codes apply.
func (r *FinalizeRefused) Unwrap() error { return r.Err }

// Finalize records the outcome of a claimed grant's downstream attempt. A
// grant that expired after its claim still finalizes while the lease holds.
func (e *Engine) Finalize(ctx context.Context, req FinalizeRequest) (FinalizeResult, error) {
	switch req.Outcome {
	case claim.OutcomeCommitted, claim.OutcomeFailed, claim.OutcomeIndeterminate:
	default:
		return FinalizeResult{}, invalid(CodeInvalidFinalization, "outcome", "outcome must be COMMITTED, FAILED or INDETERMINATE")
	}
	if req.ClaimToken == "" {
		return FinalizeResult{}, invalid(CodeInvalidFinalization, "claim_token", "claim_token is required")
	}
	explicit, err := evidenceOf(req.Evidence)
	if err != nil {
		return FinalizeResult{}, err
	}
	if req.ExecutionToken == "" {
		return FinalizeResult{}, invalid(CodeInvalidRequest, "execution_token", "execution_token is required")
	}
	tg, err := e.checkToken(ctx, req.OrgID, req.ExecutionToken, true)
	var te *grant.TokenError
	if errors.As(err, &te) || (err == nil && tg.claims.OrgID != req.OrgID) {
		return FinalizeResult{}, &Error{Kind: ErrConflict, Code: CodeGrantInvalid, Detail: "the execution grant is not valid", Err: err}
	}
	if err != nil {
		return FinalizeResult{}, err
	}
	g, err := e.grantOf(tg)
	if err != nil {
		return FinalizeResult{}, err
	}
	receipt := e.checkReceipt(ctx, g, req.Receipt)
	evidence, confirmed := claim.Settle(g, req.Outcome, explicit, receipt)
	var fin claim.Finalization
	err = e.store.Update(ctx, req.OrgID, func(tx store.Tx) error {
		fin, err = claim.Finalize(ctx, tx, claim.FinalizeRequest{GrantID: g.GrantID, ClaimTokenDigest: canon.Digest([]byte(req.ClaimToken)),
			Outcome: req.Outcome, Evidence: evidence, Receipt: receipt, EffectConfirmed: confirmed})
		if err != nil {
			return err
		}
		f := fin.Grant
		return e.appendRecord(ctx, tx, ledger.KindFinalized, f.GrantID, finalEvent{f.GrantID, f.State, f.FinalCode,
			f.FinalizedAt.Format(timeFormat), f.EffectConfirmed, f.Evidence, f.Receipt})
	})
	if err != nil {
		return FinalizeResult{}, lifecycleError("finalize", err)
	}
	f := fin.Grant
	res := FinalizeResult{Outcome: f.State, FinalizedAt: f.FinalizedAt.Format(timeFormat), EffectConfirmed: f.EffectConfirmed,
		Evidence: f.Evidence, ReceiptVerification: f.Receipt, GrantID: f.GrantID, Code: f.FinalCode}
	if fin.Refusal != nil {
		var ce *claim.Error
		code := f.FinalCode
		if errors.As(fin.Refusal, &ce) {
			code = ce.Code()
		}
		return FinalizeResult{}, &FinalizeRefused{Err: &Error{Kind: ErrConflict, Code: code,
			Detail: "finalization recorded as INDETERMINATE: " + fin.Refusal.Error(), Err: fin.Refusal}, Result: res}
	}
	return res, nil
}

type finalEvent struct {
	GrantID         string          `json:"grant_id"`
	State           claim.State     `json:"state"`
	Code            string          `json:"code,omitempty"`
	FinalizedAt     string          `json:"finalized_at"`
	EffectConfirmed bool            `json:"effect_confirmed"`
	Evidence        *claim.Evidence `json:"evidence,omitempty"`
	Receipt         *claim.Receipt  `json:"receipt,omitempty"`
}

func evidenceOf(in *EffectEvidence) (*claim.Evidence, error) {
	if in == nil {
		return nil, nil
	}
	if in.Kind == "" || len(in.Kind) > 64 || in.Status == "" || len(in.Status) > 64 {
		return nil, invalid(CodeInvalidEvidence, "effect_evidence", "effect_evidence needs kind and status (1 to 64 characters)")
	}
	for _, f := range []struct{ field, v string }{{"effect_evidence.kind", in.Kind}, {"effect_evidence.status", in.Status}} {
		if !validText(f.v) {
			return nil, invalid(CodeInvalidEvidence, f.field, "%s must be UTF-8 without control characters", f.field)
		}
	}
	if in.Kind == claim.EvidenceSignedReceipt {
		return nil, invalid(CodeInvalidEvidence, "effect_evidence.kind", "SIGNED_RECEIPT evidence comes only from a verified effect_receipt")
	}
	if _, err := canon.ParseDigest(in.EffectDigest); err != nil {
		return nil, invalid(CodeInvalidEvidence, "effect_evidence.effect_digest", "effect_digest must be sha256:<64 lowercase hex>")
	}
	return &claim.Evidence{Kind: in.Kind, Status: in.Status, EffectDigest: in.EffectDigest, Source: "effect_evidence"}, nil
}

// checkReceipt verifies a provider receipt against the org's provider keys
// (its iss must be the issuer registered with its key) and records it as
// presented. It never refuses finalization: a receipt of another profile,
// one that is not a receipt at all, or one that fails to verify is recorded
// unverified with the reason.
func (e *Engine) checkReceipt(ctx context.Context, g claim.Grant, in *EffectReceipt) *claim.Receipt {
	if in == nil {
		return nil
	}
	r := &claim.Receipt{Profile: in.Profile, Token: in.Receipt}
	if in.Profile != grant.ProfileVP3 {
		r.Reason = "unsupported receipt profile: only " + grant.ProfileVP3 + " receipts are verified"
		return r
	}
	rc, kid, err := grant.VerifyReceipt(in.Receipt, func(kid string) (grant.ReceiptKey, error) {
		k, err := registry.LookupKey(ctx, e.store, g.OrgID, registry.KindProvider, kid)
		return grant.ReceiptKey{Public: k.PublicKey, Issuer: k.Issuer}, err
	})
	r.KID = kid
	switch {
	case err != nil:
		r.Reason = err.Error()
	case rc.GrantID != g.GrantID:
		r.Reason = fmt.Sprintf("the receipt names grant %q, not %q", rc.GrantID, g.GrantID)
	case rc.IntentHash != "" && rc.IntentHash != g.IntentHash:
		r.Reason = "the receipt names another intent_hash"
	default:
		r.Verified, r.Issuer, r.EffectDigest, r.Outcome = true, rc.Issuer, rc.EffectDigest, rc.Outcome
	}
	return r
}

// ReconcileRequest settles an INDETERMINATE finalization with late evidence.
type ReconcileRequest struct {
	OrgID      string
	GrantID    string
	Resolution claim.Outcome
	Evidence   *EffectEvidence
	Receipt    *EffectReceipt
	Note       string
}

// Reconcile records how an INDETERMINATE execution turned out, and releases
// its concurrency scope. A claim whose lease passed without a finalization
// is first recorded INDETERMINATE (CLAIM_LEASE_EXPIRED), as the listing
// does. It never re-authorizes execution.
func (e *Engine) Reconcile(ctx context.Context, req ReconcileRequest) (claim.Grant, error) {
	if req.Resolution != claim.OutcomeCommitted && req.Resolution != claim.OutcomeFailed {
		return claim.Grant{}, invalid(CodeInvalidFinalization, "resolution", "resolution must be COMMITTED or FAILED")
	}
	if len(req.Note) > 2000 {
		return claim.Grant{}, invalid(CodeInvalidRequest, "note", "note is at most 2000 characters")
	}
	explicit, err := evidenceOf(req.Evidence)
	if err != nil {
		return claim.Grant{}, err
	}
	g, err := e.store.GrantOf(ctx, req.OrgID, req.GrantID)
	if isNotFound(err) || (err == nil && g.OrgID != req.OrgID) {
		return claim.Grant{}, newError(ErrNotFound, claim.CodeGrantNotFound, "grant not found")
	}
	if err != nil {
		return claim.Grant{}, unavailable("read grant", err)
	}
	receipt := e.checkReceipt(ctx, g, req.Receipt)
	evidence, confirmed := claim.Settle(g, req.Resolution, explicit, receipt)
	var out claim.Grant
	err = e.store.Update(ctx, req.OrgID, func(tx store.Tx) error {
		if err := e.expireInTx(ctx, tx, g.GrantID); err != nil {
			return err
		}
		out, err = claim.Reconcile(ctx, tx, claim.ReconcileRequest{GrantID: g.GrantID, Resolution: req.Resolution,
			Evidence: evidence, Receipt: receipt, EffectConfirmed: confirmed, Note: req.Note})
		if err != nil {
			return err
		}
		return e.appendRecord(ctx, tx, ledger.KindReconciled, out.GrantID, out.Reconciliation)
	})
	if err != nil {
		return claim.Grant{}, lifecycleError("reconcile", err)
	}
	return out, nil
}

// Indeterminate lists the org's INDETERMINATE executions, oldest first.
// Claims whose lease passed without a finalization are first recorded as
// INDETERMINATE (CLAIM_LEASE_EXPIRED), so that they can be reconciled.
func (e *Engine) Indeterminate(ctx context.Context, orgID string, limit int) ([]claim.Grant, error) {
	if limit <= 0 || limit > MaxLedgerPage {
		limit = DefaultLedgerPage
	}
	if err := e.expireLapsed(ctx, orgID); err != nil {
		return nil, err
	}
	out := []claim.Grant{}
	err := e.store.GrantsInState(ctx, orgID, claim.StateIndeterminate, func(g claim.Grant) bool {
		out = append(out, g)
		return len(out) < limit
	})
	if err != nil {
		return nil, unavailable("list executions", err)
	}
	return out, nil
}

// expireLapsed records the org's lapsed claims as INDETERMINATE; the
// lifecycle re-checks each lease against the store's clock.
func (e *Engine) expireLapsed(ctx context.Context, orgID string) error {
	now := e.now()
	var lapsed []string
	err := e.store.GrantsInState(ctx, orgID, claim.StateClaimed, func(g claim.Grant) bool {
		if !now.Before(g.LeaseExpiresAt) {
			lapsed = append(lapsed, g.GrantID)
		}
		return true
	})
	if err != nil {
		return unavailable("list executions", err)
	}
	for _, id := range lapsed {
		if err := e.store.Update(ctx, orgID, func(tx store.Tx) error { return e.expireInTx(ctx, tx, id) }); err != nil {
			return lifecycleError("expire claim", err)
		}
	}
	return nil
}

// expireInTx records grantID INDETERMINATE (ledgered) if it is a claim
// whose lease passed without a finalization; otherwise it does nothing.
func (e *Engine) expireInTx(ctx context.Context, tx store.Tx, grantID string) error {
	g, changed, err := claim.Expire(ctx, tx, grantID)
	if err != nil || !changed {
		return err
	}
	return e.appendRecord(ctx, tx, ledger.KindFinalized, g.GrantID, finalEvent{GrantID: g.GrantID, State: g.State,
		Code: g.FinalCode, FinalizedAt: g.FinalizedAt.Format(timeFormat)})
}
