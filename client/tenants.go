package client

import (
	"context"
	"net/http"
	"strconv"
)

// The platform operator's tenants: orgs listed, API keys listed and
// revoked (platform key; creating them is in platform.go).

// Orgs lists organizations by id, at most limit (0: the server's default of
// 100) after the org id after ("" from the start): GET /v1/platform/orgs.
// NextAfter names the next page's start; "" on the last page.
func (c *Client) Orgs(ctx context.Context, after string, limit int, opts ...CallOption) (*OrgPage, error) {
	if after != "" {
		opts = append(opts, Query("after", after))
	}
	if limit > 0 {
		opts = append(opts, Query("limit", strconv.Itoa(limit)))
	}
	r, err := c.newRequest(http.MethodGet, "/v1/platform/orgs", nil, opts)
	return call[OrgPage](ctx, c, r, err)
}

// APIKeys lists an org's API keys, revoked ones included (never a secret):
// GET /v1/platform/orgs/{orgId}/api-keys.
func (c *Client) APIKeys(ctx context.Context, orgID string, opts ...CallOption) (*APIKeyList, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/platform/orgs/"+escape(orgID)+"/api-keys", nil, opts)
	return call[APIKeyList](ctx, c, r, err)
}

// RevokeAPIKey revokes one API key of an org at once (ledgered; revoking it
// again changes nothing): DELETE /v1/platform/orgs/{orgId}/api-keys/{keyId}.
func (c *Client) RevokeAPIKey(ctx context.Context, orgID, keyID string, opts ...CallOption) (*APIKeyInfo, error) {
	r, err := c.newRequest(http.MethodDelete, "/v1/platform/orgs/"+escape(orgID)+"/api-keys/"+escape(keyID), nil, opts)
	return call[APIKeyInfo](ctx, c, r, err)
}
