package client

import (
	"context"
	"net/http"
)

// Personal data: which members of the org's decisions are personal (sealed
// under per-subject keys), and erasure by destroying those keys.

// PutDataProtection names the data subject and the personal members of the
// org's decisions (org:* only): PUT /v1/orgs/{orgId}/data-protection.
func (c *Client) PutDataProtection(ctx context.Context, orgID string, req DataProtectionRequest, opts ...CallOption) (*DataProtectionSetting, error) {
	r, err := c.newRequest(http.MethodPut, "/v1/orgs/"+escape(orgID)+"/data-protection", req, opts)
	return call[DataProtectionSetting](ctx, c, r, err)
}

// DataProtection reads the org's data-protection setting:
// GET /v1/orgs/{orgId}/data-protection.
func (c *Client) DataProtection(ctx context.Context, orgID string, opts ...CallOption) (*DataProtectionSetting, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/orgs/"+escape(orgID)+"/data-protection", nil, opts)
	return call[DataProtectionSetting](ctx, c, r, err)
}

// DeleteDataProtection stops sealing new decisions' personal members (those
// sealed stay sealed); the answer is the empty setting now in force:
// DELETE /v1/orgs/{orgId}/data-protection.
func (c *Client) DeleteDataProtection(ctx context.Context, orgID string, opts ...CallOption) (*DataProtectionSetting, error) {
	r, err := c.newRequest(http.MethodDelete, "/v1/orgs/"+escape(orgID)+"/data-protection", nil, opts)
	return call[DataProtectionSetting](ctx, c, r, err)
}

// EraseSubject erases one data subject's personal data of the org and
// answers a signed receipt (201; 200 Replayed when it was erased before):
// POST /v1/orgs/{orgId}/erasures.
func (c *Client) EraseSubject(ctx context.Context, orgID string, req ErasureRequest, opts ...CallOption) (*ErasureReceipt, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/orgs/"+escape(orgID)+"/erasures", req, opts)
	return call[ErasureReceipt](ctx, c, r, err)
}

// EraseOrgPersonalData erases every personal member of an org, a
// marketplace's deletion notice (the platform key only):
// POST /v1/platform/orgs/{orgId}/erasures.
func (c *Client) EraseOrgPersonalData(ctx context.Context, orgID string, req ErasureRequest, opts ...CallOption) (*ErasureReceipt, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/platform/orgs/"+escape(orgID)+"/erasures", req, opts)
	return call[ErasureReceipt](ctx, c, r, err)
}
