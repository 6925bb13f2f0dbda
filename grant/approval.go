package grant

import (
	"bytes"
	"crypto/ed25519"

	"github.com/clearancehq/clearance/internal/canon"
)

// TypApprovalReceipt is the typ of an approval service's sealed receipt:
// the record of one human decision on one action-bound approval request.
const TypApprovalReceipt = "clearance-approval-receipt+jwt"

// AudApproval is the audience of approval receipts: Clearance's managed
// escalation, which accepts one only as evidence for a fresh evaluation.
const AudApproval = "clearance-escalation"

// The decisions an approval receipt records.
const (
	ApprovalApproved = "APPROVED"
	ApprovalDenied   = "DENIED"
)

// PresenceWebAuthnUV is the presence method of a WebAuthn assertion whose
// authenticator verified the user (a passkey with PIN or biometrics). It is
// the only method the reference approval service issues.
const PresenceWebAuthnUV = "webauthn-uv"

// ApprovalReceipt is the payload of a sealed approval receipt. It binds the
// human's decision to the request and, through intent_hash, to the exact
// intent the request was opened for. It carries who decided and how their
// presence was proven, never the assertion itself.
type ApprovalReceipt struct {
	Issuer     string `json:"iss"` // the approval service
	Audience   string `json:"aud"` // AudApproval
	ID         string `json:"jti"` // the receipt's own id
	RequestID  string `json:"request_id"`
	OrgID      string `json:"org"`
	IntentHash string `json:"intent_hash"` // sha256:<hex> of the canonical intent
	Approver   string `json:"approver"`    // the approver's id at the service
	Decision   string `json:"decision"`    // ApprovalApproved or ApprovalDenied
	Presence   string `json:"presence"`    // PresenceWebAuthnUV
	IssuedAt   int64  `json:"iat"`         // when the human decided, Unix seconds
}

// SignApprovalReceipt signs r as a sealed approval receipt with k (header
// {alg EdDSA, kid, typ TypApprovalReceipt}); the payload is r's RFC 8785
// JSON. The approval service signs receipts; r must pass the checks
// VerifyApprovalReceipt applies.
func SignApprovalReceipt(k Signer, r ApprovalReceipt) (string, error) {
	if err := r.validate(); err != nil {
		return "", err
	}
	payload, err := canon.Marshal(r)
	if err != nil {
		return "", tokenError(ErrTokenClaims, "encoding approval receipt: %v", err)
	}
	return signCompact(k, TypApprovalReceipt, payload)
}

// VerifyApprovalReceipt checks a sealed approval receipt against the
// approval service's key found by lookup (whose contract is VerifyIntent's)
// and returns its payload and the header's kid. The header rules are
// Verify's with typ TypApprovalReceipt; the payload must be RFC 8785
// canonical JSON and decode strictly; aud must be AudApproval, iss the
// issuer the caller expects (ErrTokenIssuer), every member present, the
// decision and presence method known and intent_hash a digest string. A
// receipt records a past decision and has no lifetime: that it answers the
// request, org and intent the caller holds, and was not used before, is the
// caller's to check.
//
// kid is returned whenever the header decoded, also with an error.
func VerifyApprovalReceipt(jws string, lookup func(kid string) (ed25519.PublicKey, error), issuer string) (ApprovalReceipt, string, error) {
	j, err := parseCompact(jws, TypApprovalReceipt)
	if err != nil {
		return ApprovalReceipt{}, j.kid, err
	}
	pub, err := lookupPublic(j, lookup)
	if err != nil {
		return ApprovalReceipt{}, j.kid, err
	}
	if err := verifySignature(j, pub); err != nil {
		return ApprovalReceipt{}, j.kid, err
	}
	var r ApprovalReceipt
	if err := decodePayload(j.payload, &r); err != nil {
		return ApprovalReceipt{}, j.kid, err
	}
	if c, err := canon.Transform(j.payload); err != nil || !bytes.Equal(c, j.payload) {
		return ApprovalReceipt{}, j.kid, tokenError(ErrTokenMalformed, "the receipt payload is not RFC 8785 canonical JSON")
	}
	if err := r.validate(); err != nil {
		return ApprovalReceipt{}, j.kid, err
	}
	if issuer == "" || r.Issuer != issuer {
		return ApprovalReceipt{}, j.kid, tokenError(ErrTokenIssuer, "iss %q is not %q, the approval service expected", r.Issuer, issuer)
	}
	return r, j.kid, nil
}

func (r ApprovalReceipt) validate() error {
	if err := required("iss", r.Issuer, "jti", r.ID, "request_id", r.RequestID, "org", r.OrgID,
		"intent_hash", r.IntentHash, "approver", r.Approver, "decision", r.Decision, "presence", r.Presence); err != nil {
		return err
	}
	if r.Audience != AudApproval {
		return tokenError(ErrTokenAudience, "aud %q, want %q", r.Audience, AudApproval)
	}
	if r.IssuedAt <= 0 {
		return tokenError(ErrTokenClaims, "iat is required")
	}
	if r.Decision != ApprovalApproved && r.Decision != ApprovalDenied {
		return tokenError(ErrTokenClaims, "decision %q, want %q or %q", r.Decision, ApprovalApproved, ApprovalDenied)
	}
	if r.Presence != PresenceWebAuthnUV {
		return tokenError(ErrTokenClaims, "presence %q, want %q", r.Presence, PresenceWebAuthnUV)
	}
	return digests("intent_hash", r.IntentHash)
}
