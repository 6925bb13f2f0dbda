package execution

import (
	"context"
	"errors"
	"fmt"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/registry"
	"github.com/clearancehq/clearance/store"
)

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
	Err    *core.Error
	Result FinalizeResult
}

func (r *FinalizeRefused) Error() string { return r.Err.Error() }

// Unwrap exposes the *Error, so the status table and codes apply.
func (r *FinalizeRefused) Unwrap() error { return r.Err }

// Finalize records the outcome of a claimed grant's downstream attempt. A
// grant that expired after its claim still finalizes while the lease holds.
// The lease is the store's clock's to judge: the token's iat, nbf and exp
// are not checked against the engine's clock, which may have jumped.
func (s *Service) Finalize(ctx context.Context, req FinalizeRequest) (FinalizeResult, error) {
	switch req.Outcome {
	case claim.OutcomeCommitted, claim.OutcomeFailed, claim.OutcomeIndeterminate:
	default:
		return FinalizeResult{}, core.Invalid(CodeInvalidFinalization, "outcome", "outcome must be COMMITTED, FAILED or INDETERMINATE")
	}
	if req.ClaimToken == "" {
		return FinalizeResult{}, core.Invalid(CodeInvalidFinalization, "claim_token", "claim_token is required")
	}
	explicit, err := evidenceOf(req.Evidence)
	if err != nil {
		return FinalizeResult{}, err
	}
	if req.ExecutionToken == "" {
		return FinalizeResult{}, core.Invalid(core.CodeInvalidRequest, "execution_token", "execution_token is required")
	}
	tg, err := s.checkToken(ctx, req.OrgID, req.ExecutionToken, true)
	var te *grant.TokenError
	if errors.As(err, &te) || (err == nil && tg.claims.OrgID != req.OrgID) {
		return FinalizeResult{}, &core.Error{Kind: core.ErrConflict, Code: CodeGrantInvalid, Detail: "the execution grant is not valid", Err: err}
	}
	if err != nil {
		return FinalizeResult{}, err
	}
	g, err := s.grantOf(ctx, tg)
	if err != nil {
		return FinalizeResult{}, err
	}
	receipt := s.checkReceipt(ctx, g, req.Receipt)
	evidence, confirmed := claim.Settle(g, req.Outcome, explicit, receipt)
	var fin claim.Finalization
	err = s.d.Store.Update(ctx, req.OrgID, func(tx store.Tx) error {
		fin, err = claim.Finalize(ctx, tx, claim.FinalizeRequest{GrantID: g.GrantID, ClaimTokenDigest: canon.Digest([]byte(req.ClaimToken)),
			Outcome: req.Outcome, Evidence: evidence, Receipt: receipt, EffectConfirmed: confirmed})
		if err != nil {
			return err
		}
		f := fin.Grant
		if s.cfg.Spend != nil {
			if err := s.cfg.Spend.Settle(ctx, tx, f.GrantID, f.State, f.FinalizedAt); err != nil {
				return err
			}
		}
		return s.appendRecord(ctx, tx, ledger.KindFinalized, f.GrantID, finalEvent{f.GrantID, f.State, f.FinalCode,
			f.FinalizedAt.Format(core.TimeFormat), f.EffectConfirmed, f.Evidence, f.Receipt})
	})
	if err != nil {
		return FinalizeResult{}, lifecycleError("finalize", err)
	}
	f := fin.Grant
	res := FinalizeResult{Outcome: f.State, FinalizedAt: f.FinalizedAt.Format(core.TimeFormat), EffectConfirmed: f.EffectConfirmed,
		Evidence: f.Evidence, ReceiptVerification: f.Receipt, GrantID: f.GrantID, Code: f.FinalCode}
	if fin.Refusal != nil {
		var ce *claim.Error
		code := f.FinalCode
		if errors.As(fin.Refusal, &ce) {
			code = ce.Code()
		}
		return FinalizeResult{}, &FinalizeRefused{Err: &core.Error{Kind: core.ErrConflict, Code: code,
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
		return nil, core.Invalid(CodeInvalidEvidence, "effect_evidence", "effect_evidence needs kind and status (1 to 64 characters)")
	}
	for _, f := range []struct{ field, v string }{{"effect_evidence.kind", in.Kind}, {"effect_evidence.status", in.Status}} {
		if !core.ValidText(f.v) {
			return nil, core.Invalid(CodeInvalidEvidence, f.field, "%s must be UTF-8 without control characters", f.field)
		}
	}
	if in.Kind == claim.EvidenceSignedReceipt {
		return nil, core.Invalid(CodeInvalidEvidence, "effect_evidence.kind", "SIGNED_RECEIPT evidence comes only from a verified effect_receipt")
	}
	if _, err := canon.ParseDigest(in.EffectDigest); err != nil {
		return nil, core.Invalid(CodeInvalidEvidence, "effect_evidence.effect_digest", "effect_digest must be sha256:<64 lowercase hex>")
	}
	return &claim.Evidence{Kind: in.Kind, Status: in.Status, EffectDigest: in.EffectDigest, Source: "effect_evidence"}, nil
}

// checkReceipt verifies a provider receipt against the org's provider keys
// (its iss must be the issuer registered with its key) and records it as
// presented. It never refuses finalization: a receipt of another profile,
// one that is not a receipt at all, or one that fails to verify is recorded
// unverified with the reason.
func (s *Service) checkReceipt(ctx context.Context, g claim.Grant, in *EffectReceipt) *claim.Receipt {
	if in == nil {
		return nil
	}
	r := &claim.Receipt{Profile: in.Profile, Token: in.Receipt}
	if in.Profile != grant.ProfileVP3 {
		r.Reason = "unsupported receipt profile: only " + grant.ProfileVP3 + " receipts are verified"
		return r
	}
	rc, kid, err := grant.VerifyReceipt(in.Receipt, func(kid string) (grant.ReceiptKey, error) {
		k, err := registry.LookupKey(ctx, s.d.Store, g.OrgID, registry.KindProvider, kid)
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
