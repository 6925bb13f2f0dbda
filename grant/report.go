package grant

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"

	"github.com/clearancehq/clearance/internal/canon"
)

// TypGrowthReport is the typ of a signed growth report: a platform
// operator's monthly aggregate, prepared as evidence for editorial review.
// It is signed with the reporting key, never a grant key, and no verifier
// of another kind accepts it.
const TypGrowthReport = "clearance-growth-report+jwt"

// AudGrowthReport is the audience of growth reports.
const AudGrowthReport = "clearance-growth-reports"

// SignGrowthReport signs payload, the RFC 8785 JSON of a report object
// whose aud is AudGrowthReport, with the reporting key k (header {alg
// EdDSA, kid, typ TypGrowthReport}).
func SignGrowthReport(k Signer, payload []byte) (string, error) {
	if err := checkGrowthReport(payload); err != nil {
		return "", err
	}
	return signCompact(k, TypGrowthReport, payload)
}

// VerifyGrowthReport checks a signed growth report against the reporting
// key found by lookup (whose contract is VerifyIntent's) and returns its
// payload, RFC 8785 JSON whose aud is AudGrowthReport, and the header's
// kid (also with an error, whenever the header decoded). The header rules
// are Verify's with typ TypGrowthReport. What the report says is the
// caller's to decode.
func VerifyGrowthReport(jws string, lookup func(kid string) (ed25519.PublicKey, error)) ([]byte, string, error) {
	j, err := parseCompact(jws, TypGrowthReport)
	if err != nil {
		return nil, j.kid, err
	}
	pub, err := lookupPublic(j, lookup)
	if err != nil {
		return nil, j.kid, err
	}
	if err := verifySignature(j, pub); err != nil {
		return nil, j.kid, err
	}
	if err := checkGrowthReport(j.payload); err != nil {
		return nil, j.kid, err
	}
	return j.payload, j.kid, nil
}

// checkGrowthReport: a canonical JSON object with aud AudGrowthReport.
func checkGrowthReport(payload []byte) error {
	if c, err := canon.Transform(payload); err != nil || !bytes.Equal(c, payload) {
		return tokenError(ErrTokenMalformed, "the report payload is not RFC 8785 canonical JSON")
	}
	var head struct {
		Aud *string `json:"aud"`
	}
	if err := json.Unmarshal(payload, &head); err != nil {
		return tokenError(ErrTokenMalformed, "the report payload is not a JSON object")
	}
	if head.Aud == nil || *head.Aud != AudGrowthReport {
		return tokenError(ErrTokenAudience, "aud must be %q", AudGrowthReport)
	}
	return nil
}
