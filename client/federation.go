package client

import (
	"context"
	"net/http"
)

// Decision federation: signed envelopes of the org's decisions for other
// deployments, and the org's trust list of theirs.

// IssueFederationEnvelope signs an envelope of one of the org's recorded
// decisions for another deployment's audience:
// POST /v1/federation/envelopes.
func (c *Client) IssueFederationEnvelope(ctx context.Context, req IssueFederationEnvelopeJSONBody, opts ...CallOption) (*FederationEnvelope, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/federation/envelopes", req, opts)
	return call[FederationEnvelope](ctx, c, r, err)
}

// TrustedIssuerList is the org's trust list and the audience envelopes for
// the org must name.
type TrustedIssuerList struct {
	Audience string          `json:"audience"`
	Issuers  []TrustedIssuer `json:"issuers"`
}

// TrustedIssuers reads the org's trust list: GET /v1/federation/issuers.
func (c *Client) TrustedIssuers(ctx context.Context, opts ...CallOption) (*TrustedIssuerList, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/federation/issuers", nil, opts)
	return call[TrustedIssuerList](ctx, c, r, err)
}

// TrustedIssuer reads one entry of the trust list by the issuer's exact
// iss: GET /v1/federation/issuers/{issuerId}.
func (c *Client) TrustedIssuer(ctx context.Context, issuer string, opts ...CallOption) (*TrustedIssuer, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/federation/issuers/"+escape(issuer), nil, opts)
	return call[TrustedIssuer](ctx, c, r, err)
}

// PutTrustedIssuer trusts an issuer's federated decisions (201) or replaces
// its entry (200): PUT /v1/federation/issuers/{issuerId}.
func (c *Client) PutTrustedIssuer(ctx context.Context, issuer string, req PutTrustedIssuerJSONBody, opts ...CallOption) (*TrustedIssuer, error) {
	r, err := c.newRequest(http.MethodPut, "/v1/federation/issuers/"+escape(issuer), req, opts)
	return call[TrustedIssuer](ctx, c, r, err)
}

// DeleteTrustedIssuer removes an issuer from the trust list:
// DELETE /v1/federation/issuers/{issuerId}.
func (c *Client) DeleteTrustedIssuer(ctx context.Context, issuer string, opts ...CallOption) (*TrustedIssuer, error) {
	r, err := c.newRequest(http.MethodDelete, "/v1/federation/issuers/"+escape(issuer), nil, opts)
	return call[TrustedIssuer](ctx, c, r, err)
}
