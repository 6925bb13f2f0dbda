package approval

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"

	"github.com/clearancehq/clearance/grant"
)

// Verify asks the approval service (through svc, at ep) for request
// requestID and checks that the answer is an approval of want: the
// answer names requestID, want.OrgID and want.IntentHash, and either
//
//   - is PENDING without a receipt: Verified{Status: StatusPending}, no
//     error (not an approval: Approved() is false); or
//   - is APPROVED with a receipt that verifies (grant.VerifyApprovalReceipt
//     with svc.PublicKey and ep.Issuer) for the same request, org and
//     intent, with decision APPROVED, the answer's approver, and issued
//     between the request's creation and its expiry (to the second).
//
// DENIED, EXPIRED, CANCELLED and REVOKED are ErrNotApproved with the
// status in (*Error).Status. An answer or receipt that contradicts the
// rest, and a request the service does not know for ep's org, are
// ErrEvidenceInvalid. Failing to get a usable answer (unreachable,
// timeout, redirect, 5xx, a refused credential, a malformed answer, a key
// set that cannot be fetched) is ErrUnavailable; malformed input is
// ErrInvalidRequest. No error comes with an approval.
//
// Verify trusts nothing a client presents: the receipt it verifies is the
// one the service answers. The receipt's jti is the caller's to bind to
// one escalation, so that one approval never serves twice.
func Verify(ctx context.Context, svc Service, ep Endpoint, requestID string, want Binding) (Verified, error) {
	if svc == nil {
		return Verified{}, fail(ErrInvalidRequest, "no approval service client")
	}
	if err := checkID("request id", requestID); err != nil {
		return Verified{}, fail(ErrInvalidRequest, "%v", err)
	}
	if err := want.validate(); err != nil {
		return Verified{}, fail(ErrInvalidRequest, "binding: %v", err)
	}
	r, err := svc.Get(ctx, ep, requestID)
	switch {
	case err == nil:
	case is(err, ErrNotFound):
		return Verified{}, fail(ErrEvidenceInvalid, "the approval service knows no request %q for this org (%v)", requestID, err)
	case is(err, ErrEvidenceInvalid), is(err, ErrInvalidEndpoint), is(err, ErrInvalidRequest), is(err, ErrUnavailable):
		return Verified{}, err
	default:
		return Verified{}, unavailable(err)
	}
	contradicts := func(format string, args ...any) (Verified, error) {
		return Verified{}, newError(ErrEvidenceInvalid, r.Status, fmt.Errorf("%w: request %q: "+format, append([]any{ErrEvidenceInvalid, requestID}, args...)...))
	}
	switch {
	case r.RequestID != requestID:
		return contradicts("the service answered request %q", r.RequestID)
	case r.OrgID != want.OrgID:
		return contradicts("it is for org %q, not %q", r.OrgID, want.OrgID)
	case r.IntentHash != want.IntentHash:
		return contradicts("it is for intent %s, not %s", r.IntentHash, want.IntentHash)
	}
	switch r.Status {
	case StatusPending:
		if r.Receipt != "" {
			return contradicts("PENDING with a receipt")
		}
		return Verified{Status: StatusPending, Request: r}, nil
	case StatusDenied, StatusExpired, StatusCancelled, StatusRevoked:
		return Verified{}, newError(ErrNotApproved, r.Status, fmt.Errorf("%w: request %q is %s", ErrNotApproved, requestID, r.Status))
	case StatusApproved:
	default:
		return Verified{}, fail(ErrUnavailable, "request %q: status %q is not one of the protocol's", requestID, truncate(string(r.Status)))
	}
	if r.Receipt == "" {
		return contradicts("APPROVED without a receipt")
	}
	lookup := func(kid string) (ed25519.PublicKey, error) { return svc.PublicKey(ctx, ep, kid) }
	rc, kid, err := grant.VerifyApprovalReceipt(r.Receipt, lookup, ep.Issuer)
	if err != nil {
		var refusal *grant.TokenError
		if errors.As(err, &refusal) {
			return contradicts("receipt: %w", err)
		}
		// Not a verdict on the receipt: its key could not be looked up.
		var e *Error
		if errors.As(err, &e) && (e.code == CodeUnavailable || e.code == CodeInvalidEndpoint) {
			return Verified{}, e
		}
		return Verified{}, unavailable(err)
	}
	switch {
	case rc.RequestID != r.RequestID:
		return contradicts("the receipt is for request %q", rc.RequestID)
	case rc.OrgID != want.OrgID:
		return contradicts("the receipt is for org %q", rc.OrgID)
	case rc.IntentHash != want.IntentHash:
		return contradicts("the receipt is for intent %s", rc.IntentHash)
	case rc.Decision != grant.ApprovalApproved:
		return contradicts("APPROVED with a receipt whose decision is %s", rc.Decision)
	case r.Approver != "" && rc.Approver != r.Approver:
		return contradicts("the receipt's approver %q is not the answer's %q", rc.Approver, r.Approver)
	case rc.IssuedAt > r.ExpiresAt.Unix():
		return contradicts("the receipt was issued at %d, after the request expired at %d", rc.IssuedAt, r.ExpiresAt.Unix())
	case rc.IssuedAt < r.CreatedAt.Unix():
		return contradicts("the receipt was issued at %d, before the request was created at %d", rc.IssuedAt, r.CreatedAt.Unix())
	}
	return Verified{Status: StatusApproved, Request: r, Receipt: rc, ReceiptJWS: r.Receipt, KeyID: kid}, nil
}

// VerifyPresented checks evidence a client presents: Verify on
// presented.RequestID, which must give an approval whose receipt is
// byte for byte presented.Receipt. A missing receipt, one that differs, and
// a request the service still holds as PENDING are ErrEvidenceInvalid;
// Verify's errors otherwise.
func VerifyPresented(ctx context.Context, svc Service, ep Endpoint, presented Evidence, want Binding) (Verified, error) {
	if presented.Receipt == "" {
		return Verified{}, fail(ErrEvidenceInvalid, "no receipt presented")
	}
	if len(presented.Receipt) > MaxReceiptLength {
		return Verified{}, fail(ErrEvidenceInvalid, "the presented receipt is longer than %d bytes", MaxReceiptLength)
	}
	v, err := Verify(ctx, svc, ep, presented.RequestID, want)
	if err != nil {
		return Verified{}, err
	}
	if !v.Approved() {
		return Verified{}, newError(ErrEvidenceInvalid, v.Status, fmt.Errorf("%w: request %q is %s at the service: the presented receipt is not its", ErrEvidenceInvalid, presented.RequestID, v.Status))
	}
	if presented.Receipt != v.ReceiptJWS {
		return Verified{}, newError(ErrEvidenceInvalid, v.Status, fmt.Errorf("%w: request %q: the presented receipt is not the one the service holds", ErrEvidenceInvalid, presented.RequestID))
	}
	return v, nil
}

// unavailable wraps an error that is not one of the package's as
// ErrUnavailable, keeping it as the cause; one of the package's it only
// quotes, so that the result wraps one sentinel.
func unavailable(err error) error {
	var e *Error
	if errors.As(err, &e) {
		return fail(ErrUnavailable, "%v", err)
	}
	return fail(ErrUnavailable, "%w", err)
}
