package grant

import "crypto/ed25519"

// TypErasureReceipt is the typ of a signed erasure receipt: what an
// erasure of a data subject's personal data destroyed, signed with the
// ledger key (whose verifier key the service publishes), so that the
// requester can prove the erasure offline. No verifier of another kind
// accepts it.
const TypErasureReceipt = "clearance-erasure-receipt+jwt"

// AudErasureReceipt is the audience of erasure receipts.
const AudErasureReceipt = "clearance-erasure-receipts"

var erasureReceipt = document{typ: TypErasureReceipt, aud: AudErasureReceipt, noun: "receipt"}

// SignErasureReceipt signs payload, the RFC 8785 JSON of a receipt object
// whose aud is AudErasureReceipt, with k (header {alg EdDSA, kid, typ
// TypErasureReceipt}).
func SignErasureReceipt(k Signer, payload []byte) (string, error) {
	return erasureReceipt.sign(k, payload)
}

// VerifyErasureReceipt checks a signed erasure receipt against the key
// found by lookup (whose contract is VerifyIntent's) and returns its
// payload and the header's kid. The header rules are Verify's with typ
// TypErasureReceipt.
func VerifyErasureReceipt(jws string, lookup func(kid string) (ed25519.PublicKey, error)) ([]byte, string, error) {
	return erasureReceipt.verify(jws, lookup)
}
