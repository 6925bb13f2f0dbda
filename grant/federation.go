package grant

import (
	"crypto/ed25519"
	"time"

	"github.com/clearancehq/clearance/internal/canon"
)

// TypFederatedDecision is the typ of a federated decision envelope: one
// deployment's signed statement of a decision it recorded, presented to
// another deployment that trusts it as evidence for that one's own policy.
// No other verifier accepts it (a grant, an attestation or a verification
// envelope signed by the same key is not one, and it is none of them).
const TypFederatedDecision = "clearance-federated-decision+jwt"

// MaxFederatedLifetime bounds exp - iat of a federated decision envelope:
// it is a short-lived statement, not a credential.
const MaxFederatedLifetime = time.Hour

// FederatedDecision are the claims of a federated decision envelope: only
// facts that bear on authorization, never the intent itself (its digest
// stands for it).
type FederatedDecision struct {
	Issuer   string `json:"iss"` // the issuing deployment
	Audience string `json:"aud"` // the receiving org of the receiving deployment
	OrgID    string `json:"org"` // the issuing org
	ID       string `json:"jti"`
	IssuedAt int64  `json:"iat"`
	Expiry   int64  `json:"exp"`

	DecisionID    string   `json:"decision_id"`
	DossierID     string   `json:"dossier_id"`
	DossierDigest string   `json:"dossier_digest"` // the payload digest of its ledger entry
	LedgerSeq     uint64   `json:"ledger_seq"`
	DecidedAt     string   `json:"decided_at"` // RFC 3339
	Outcome       string   `json:"outcome"`
	Mode          string   `json:"mode"`
	ReasonCodes   []string `json:"reason_codes"`
	PolicyVersion string   `json:"policy_version"`
	BundleDigest  string   `json:"bundle_digest"`
	// IntentDigest is the digest of the decided intent as policies see it,
	// computed under IntentProfile, so that a receiver can tell whether it
	// decides the same intent.
	IntentDigest  string `json:"intent_digest"`
	IntentProfile string `json:"intent_digest_profile"`
}

// MintFederatedDecision signs f with k: a compact JWS whose header is
// {alg EdDSA, kid, typ TypFederatedDecision} over the RFC 8785 JSON of f.
// Every member but the reason codes is required; iat < exp <= iat +
// MaxFederatedLifetime; digests well formed.
func MintFederatedDecision(k Signer, f FederatedDecision) (string, error) {
	if f.ReasonCodes == nil {
		f.ReasonCodes = []string{} // [] on the wire, never null
	}
	if err := f.validate(); err != nil {
		return "", err
	}
	payload, err := canon.Marshal(f)
	if err != nil {
		return "", tokenError(ErrTokenClaims, "encoding claims: %v", err)
	}
	return signCompact(k, TypFederatedDecision, payload)
}

// VerifyFederatedDecision checks a federated decision envelope against the
// key lookup finds for its kid (lookup's contract is VerifyIntent's: an
// unknown kid wraps ErrUnknownKey) and returns its claims and the header's
// kid (also with an error, whenever the header decoded). The header rules
// are Verify's with typ TypFederatedDecision; the payload decodes strictly;
// the claims are MintFederatedDecision's; the lifetime is checked as
// Verify's with o (o.Issuer, when set, must equal iss). The audience and
// whether the issuer is trusted are the caller's to judge.
func VerifyFederatedDecision(jws string, lookup func(kid string) (ed25519.PublicKey, error), o VerifyOptions) (FederatedDecision, string, error) {
	if o.Now.IsZero() {
		return FederatedDecision{}, "", errNoClock
	}
	j, err := parseCompact(jws, TypFederatedDecision)
	if err != nil {
		return FederatedDecision{}, j.kid, err
	}
	pub, err := lookupPublic(j, lookup)
	if err != nil {
		return FederatedDecision{}, j.kid, err
	}
	if err := verifySignature(j, pub); err != nil {
		return FederatedDecision{}, j.kid, err
	}
	var f FederatedDecision
	if err := decodePayload(j.payload, &f); err != nil {
		return FederatedDecision{}, j.kid, err
	}
	if err := f.validate(); err != nil {
		return FederatedDecision{}, j.kid, err
	}
	if err := checkIssuer(f.Issuer, o); err != nil {
		return FederatedDecision{}, j.kid, err
	}
	if err := checkLifetime(o, f.IssuedAt, 0, f.Expiry); err != nil {
		return FederatedDecision{}, j.kid, err
	}
	return f, j.kid, nil
}

func (f FederatedDecision) validate() error {
	if err := required(
		"iss", f.Issuer, "aud", f.Audience, "org", f.OrgID, "jti", f.ID, "decision_id", f.DecisionID,
		"dossier_id", f.DossierID, "dossier_digest", f.DossierDigest, "decided_at", f.DecidedAt, "outcome", f.Outcome,
		"mode", f.Mode, "policy_version", f.PolicyVersion, "bundle_digest", f.BundleDigest,
		"intent_digest", f.IntentDigest, "intent_digest_profile", f.IntentProfile,
	); err != nil {
		return err
	}
	if f.ReasonCodes == nil {
		return tokenError(ErrTokenClaims, "reason_codes is required")
	}
	if f.LedgerSeq == 0 {
		return tokenError(ErrTokenClaims, "ledger_seq is required")
	}
	if _, err := time.Parse(time.RFC3339Nano, f.DecidedAt); err != nil {
		return tokenError(ErrTokenClaims, "decided_at is not an RFC 3339 time")
	}
	if err := lifetime(f.IssuedAt, f.Expiry); err != nil {
		return err
	}
	if f.Expiry-f.IssuedAt > int64(MaxFederatedLifetime/time.Second) {
		return tokenError(ErrTokenClaims, "exp - iat is %d s, more than %s", f.Expiry-f.IssuedAt, MaxFederatedLifetime)
	}
	return digests("dossier_digest", f.DossierDigest, "bundle_digest", f.BundleDigest, "intent_digest", f.IntentDigest)
}
