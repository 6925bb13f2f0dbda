package grant

import "crypto/ed25519"

// TypGrowthReport is the typ of a signed growth report: a platform
// operator's monthly aggregate, prepared as evidence for editorial review.
// It is signed with the reporting key, never a grant key, and no verifier
// of another kind accepts it.
const TypGrowthReport = "clearance-growth-report+jwt"

// AudGrowthReport is the audience of growth reports.
const AudGrowthReport = "clearance-growth-reports"

var growthReport = document{typ: TypGrowthReport, aud: AudGrowthReport, noun: "report"}

// SignGrowthReport signs payload, the RFC 8785 JSON of a report object
// whose aud is AudGrowthReport, with the reporting key k (header {alg
// EdDSA, kid, typ TypGrowthReport}).
func SignGrowthReport(k Signer, payload []byte) (string, error) {
	return growthReport.sign(k, payload)
}

// VerifyGrowthReport checks a signed growth report against the reporting
// key found by lookup (whose contract is VerifyIntent's) and returns its
// payload, RFC 8785 JSON whose aud is AudGrowthReport, and the header's
// kid (also with an error, whenever the header decoded). The header rules
// are Verify's with typ TypGrowthReport. What the report says is the
// caller's to decode.
func VerifyGrowthReport(jws string, lookup func(kid string) (ed25519.PublicKey, error)) ([]byte, string, error) {
	return growthReport.verify(jws, lookup)
}
