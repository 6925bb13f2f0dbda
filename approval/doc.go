// Package approval is Clearance's side of the approval-service protocol
// (docs/decisions.md, "Managed escalation and the approval service"): it
// opens, reads and cancels the approval request of an escalation at the
// org's approval service, and verifies that a request is approved for
// exactly the escalation's org and intent.
//
// Its contract:
//
//   - The service is asked directly. Verify reads the request from the
//     service (Service.Get) and checks the sealed receipt the service
//     answers (grant.VerifyApprovalReceipt, against the service's published
//     keys and the issuer the org configured); what a client presents is
//     never enough, and VerifyPresented only adds that the presented
//     receipt must be the service's, byte for byte.
//   - Failures never authorize. A Verified is an approval only when
//     Approved() says so; PENDING is a result, not an error; DENIED,
//     EXPIRED, CANCELLED and REVOKED are ErrNotApproved; anything
//     contradictory (another org, intent or request, a receipt forged,
//     missing, of another request or with another decision) is
//     ErrEvidenceInvalid; no usable answer is ErrUnavailable. The caller
//     answers 409 for the first two and 503 for the last.
//   - All traffic goes through internal/outbound (TLS, no redirects,
//     timeouts, capped bodies, the SSRF guard). The credential is sent
//     only as "Authorization: Bearer" to the protocol's request routes
//     (never to the public key set), is redacted from anything the
//     service echoes, and is never printed by Endpoint's formatting. The
//     approval page's URL is kept: Request's formatting never prints it.
//   - Answers are decoded strictly (duplicate members, invalid UTF-8 and
//     trailing data refused); members the package does not know are
//     tolerated, the ones it uses are required and checked.
//   - Key sets are cached per base URL (HTTPOptions.KeyTTL), fetched once
//     for any number of concurrent callers, and fetched again for an
//     unknown kid at most once per call and once per
//     HTTPOptions.KeyRefetchInterval.
//
// Every error is (or wraps) an *Error that wraps exactly one sentinel of
// errors.go, with a stable Code.
package approval
