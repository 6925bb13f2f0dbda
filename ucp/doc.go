// Package ucp validates Universal Commerce Protocol (UCP) checkout
// response envelopes before any policy sees them, parses merchant signing
// keys, verifies the merchant's terms signature and checks the shape and
// binding of a checkout mandate. It is pure: no I/O, no clock, no
// randomness.
//
// # Envelopes
//
// Parse accepts a body only if it is a complete UCP checkout response
// envelope negotiated at a supported release, named by ucp.version with an
// exact string match (Releases: 2026-04-08, 2026-08-25). Anything else is
// unsupported, never validated under another release: each release has its
// own validator, chosen by one switch, compiled once at first use from the
// official JSON Schemas embedded in schemas/ (registered under their $id,
// with a loader that refuses everything, so nothing is fetched).
//
// The envelope is validated against the release's shopping/checkout.json:
// the seven top-level members ucp, id, line_items, status, currency,
// totals and links are required; members the schema leaves open
// (extensions such as fulfillment, or x_ members) stay open and are not
// validated. Line items keep their required id, item, quantity and totals
// and quantity >= 1; items their id, title and price; totals hold exactly
// one subtotal and exactly one total. The schemas give a line item's own
// totals no such rule, so none is added. "format" is an annotation, as
// draft 2020-12 defines it by default.
//
// Release rules beyond the schemas:
//   - 2026-08-25 requires ucp.payment_handlers (its schema says so).
//   - 2026-04-08 keeps it optional although the official schema requires
//     it: an envelope without it is validated as if an empty object were
//     there. Only the validator sees that object; Canonical and Digest are
//     of the body as sent.
//   - A payment handler id must be unique across ucp.payment_handlers:
//     payment instruments name their handler by id alone.
//
// Bytes are held to the house rules of internal/strictjson before any
// schema: one JSON object, no duplicate member names anywhere, valid
// UTF-8, no U+0000, nesting at most 64, no trailing data, at most
// MaxEnvelopeBytes. Number literals are bounded too (at most 64
// characters, an exponent within ±400, within the range of a double, as
// I-JSON asks): beyond that, comparing one number costs the validator tens
// of milliseconds, and RFC 8785 is defined over I-JSON only.
//
// # Exact integers
//
// JSON Schema counts 2.0, 2e0 and 2500.0 as integers. Here, where the
// schema types a value "integer" (amounts, prices, quantities), it must be
// written as an integer literal without fraction or exponent and lie
// within ±(2^53−1). The validator is given every number as json.Number,
// the literal as written. A custom vocabulary registered with the
// jsonschema compiler sees each schema object of the release; to those
// whose "type" admits "integer" but not "number" it adds a keyword that
// checks that literal. It runs exactly where the validator applies such a
// schema object, through $ref, allOf and if/then, so it reaches every
// location the schema types as integer and no other: a fraction in an
// anyOf branch allowing "number", or in an open member no schema governs,
// is kept.
//
// # Errors
//
// Every refusal is an *Error with a code (the Code constants), the RFC
// 6901 pointer of the failing location ("" for the whole body; for a
// missing member, where it should be) and a one-line detail: for schema
// failures the deepest cause, ties broken by pointer. The sentinel of the
// code is wrapped, for errors.Is.
//
// # Merchant terms
//
// ap2.merchant_authorization is a JWS with detached payload (RFC 7515
// Appendix F) in which the merchant signs the RFC 8785 form of the
// envelope without its ap2 member (TermsPayload), as UCP's AP2 mandates
// extension specifies. Parse checks its form; VerifyTerms checks the ECDSA
// signature (raw R||S) with the key a lookup returns for its kid.
// Merchant keys are public EC JWKs on P-256 (ES256) or P-384 (ES384), the
// curves UCP allows; ES512 is accepted in form but no key verifies it.
//
// # Checkout mandates
//
// CheckMandate checks ap2.checkout_mandate, an SD-JWT with key binding
// (RFC 9901), for shape and for binding to the checkout; see its
// documentation for both rules. Its signatures are not verified: the
// issuer is the buyer's wallet or platform, whose keys Clearance does not
// hold. The binding rule follows UCP's AP2 mandates extension ("the
// checkout mandate MUST contain the full checkout response including the
// ap2.merchant_authorization field") and AP2's closed Checkout Mandate,
// whose checkout_jwt is the merchant-signed JWT of the checkout and
// checkout_hash its SHA-256. Under UCP that JWT is the merchant
// authorization with its payload attached. The official pattern for
// checkout_mandate in ap2_mandate.json cannot match an SD-JWT+kb (it
// allows no dots after a "~"), so it is not applied.
package ucp
