package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
)

// UCP checkout authority: a merchant's checkout bound to an exact-action
// grant, and the merchant keys its signed terms are verified with.

// AuthorizeCheckout decides a UCP checkout and, when it is allowed, binds a
// grant to it: POST /v1/ucp/checkout/authorize. A refused checkout is a
// 403 *Error that still carries the authorization (the recorded decision,
// its reasons and messages) in its Body: read it with CheckoutRefusal. It
// carries an Idempotency-Key, so it is safe to retry.
//
// The checkout is sent as this struct encodes it; members the schema does
// not name below its top level are not kept, so pass a merchant's document
// whose every byte matters to AuthorizeCheckoutJSON instead.
func (c *Client) AuthorizeCheckout(ctx context.Context, checkout UcpCheckoutAuthorizeRequest, opts ...CallOption) (*UcpCheckoutAuthorization, error) {
	body, err := json.Marshal(checkout)
	if err != nil {
		return nil, err
	}
	return c.AuthorizeCheckoutJSON(ctx, body, opts...)
}

// AuthorizeCheckoutJSON is AuthorizeCheckout for the checkout's exact
// JSON bytes (what the checkout digest covers):
// POST /v1/ucp/checkout/authorize.
func (c *Client) AuthorizeCheckoutJSON(ctx context.Context, checkout []byte, opts ...CallOption) (*UcpCheckoutAuthorization, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/ucp/checkout/authorize", checkout, opts)
	if err == nil {
		r.withKey()
	}
	return call[UcpCheckoutAuthorization](ctx, c, r, err)
}

// CheckoutRefusal returns the authorization a refused checkout's 403
// carries, and false when err is not such a refusal.
func CheckoutRefusal(err error) (*UcpCheckoutAuthorization, bool) {
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusForbidden || e.Path != "/v1/ucp/checkout/authorize" {
		return nil, false
	}
	var a UcpCheckoutAuthorization
	if json.Unmarshal(e.Body, &a) != nil || a.CheckoutId == "" {
		return nil, false
	}
	return &a, true
}

// RegisterSigningKey registers a merchant's public key its checkout terms
// are signed with (201; 200 when registered before):
// POST /v1/ucp/signing-keys.
func (c *Client) RegisterSigningKey(ctx context.Context, req UcpSigningKeyRegistrationRequest, opts ...CallOption) (*UcpSigningKey, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/ucp/signing-keys", req, opts)
	return call[UcpSigningKey](ctx, c, r, err)
}

// SigningKeys lists the org's merchant keys: GET /v1/ucp/signing-keys.
func (c *Client) SigningKeys(ctx context.Context, opts ...CallOption) (*UcpSigningKeyList, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/ucp/signing-keys", nil, opts)
	return call[UcpSigningKeyList](ctx, c, r, err)
}

// RevokeSigningKey revokes a merchant key:
// DELETE /v1/ucp/signing-keys/{kid}.
func (c *Client) RevokeSigningKey(ctx context.Context, kid string, opts ...CallOption) (*UcpSigningKey, error) {
	r, err := c.newRequest(http.MethodDelete, "/v1/ucp/signing-keys/"+escape(kid), nil, opts)
	return call[UcpSigningKey](ctx, c, r, err)
}
