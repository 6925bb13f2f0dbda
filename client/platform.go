package client

import (
	"context"
	"net/http"
)

// The platform: health and metrics, the platform key's orgs and API keys,
// and the operator's growth analytics.

// Health reports the store's health and the server's version (public). A
// degraded server answers 503: a *Error whose Body is the Health:
// GET /v1/health.
func (c *Client) Health(ctx context.Context, opts ...CallOption) (*Health, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/health", nil, opts)
	return call[Health](ctx, c, r, err)
}

// Metrics is the Prometheus text exposition of every org's traffic (the
// platform key only): GET /metrics.
func (c *Client) Metrics(ctx context.Context, opts ...CallOption) (string, error) {
	r, err := c.newRequest(http.MethodGet, "/metrics", nil, opts)
	if err == nil {
		r.header.Set("Accept", "text/plain, application/problem+json")
	}
	b, err := raw(ctx, c, r, err)
	return string(b), err
}

// CreateOrg creates an org and its first API key (scope org:*), shown only
// in this answer (the platform key only): POST /v1/platform/orgs.
func (c *Client) CreateOrg(ctx context.Context, req CreateOrgRequest, opts ...CallOption) (*CreatedOrg, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/platform/orgs", req, opts)
	return call[CreatedOrg](ctx, c, r, err)
}

// CreateAPIKey issues another API key of an org, shown only in this answer
// (the platform key only): POST /v1/platform/orgs/{orgId}/api-keys.
func (c *Client) CreateAPIKey(ctx context.Context, orgID string, req CreateAPIKeyRequest, opts ...CallOption) (*IssuedKey, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/platform/orgs/"+escape(orgID)+"/api-keys", req, opts)
	return call[IssuedKey](ctx, c, r, err)
}

// PutGrowthConsent records an org's consent to be counted in growth
// reports (the platform key only):
// PUT /v1/analytics/growth-reports/consent/{orgId}.
func (c *Client) PutGrowthConsent(ctx context.Context, orgID string, req GrowthConsentRequest, opts ...CallOption) (*GrowthConsent, error) {
	r, err := c.newRequest(http.MethodPut, "/v1/analytics/growth-reports/consent/"+escape(orgID), req, opts)
	return call[GrowthConsent](ctx, c, r, err)
}

// FreezeBlastRadiusReport freezes (201) or returns (200) the signed
// blast-radius report of a completed UTC month ("2026-01"):
// POST /v1/analytics/growth-reports/blast-radius/{month}.
func (c *Client) FreezeBlastRadiusReport(ctx context.Context, month string, opts ...CallOption) (*FrozenGrowthReport, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/analytics/growth-reports/blast-radius/"+escape(month), nil, opts)
	return call[FrozenGrowthReport](ctx, c, r, err)
}

// GrowthScorecard computes the growth scorecard now:
// GET /v1/analytics/growth-scorecard.
func (c *Client) GrowthScorecard(ctx context.Context, opts ...CallOption) (*GrowthScorecard, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/analytics/growth-scorecard", nil, opts)
	return call[GrowthScorecard](ctx, c, r, err)
}

// ClassifyGrowthOrg records an org's growth classification (the first one
// also its first touch): PUT /v1/analytics/growth-scorecard/orgs/{orgId}.
func (c *Client) ClassifyGrowthOrg(ctx context.Context, orgID string, req GrowthClassificationRequest, opts ...CallOption) (*GrowthClassification, error) {
	r, err := c.newRequest(http.MethodPut, "/v1/analytics/growth-scorecard/orgs/"+escape(orgID), req, opts)
	return call[GrowthClassification](ctx, c, r, err)
}

// FreezeGrowthBaseline keeps the scorecard as it is now under name (409
// BASELINE_EXISTS for a name taken):
// POST /v1/analytics/growth-scorecard/baselines/{name}.
func (c *Client) FreezeGrowthBaseline(ctx context.Context, name string, opts ...CallOption) (*GrowthBaseline, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/analytics/growth-scorecard/baselines/"+escape(name), nil, opts)
	return call[GrowthBaseline](ctx, c, r, err)
}

// ReportingJWKS is the public key set growth reports verify against:
// GET /.well-known/clearance-reporting-jwks.json.
func (c *Client) ReportingJWKS(ctx context.Context, opts ...CallOption) (*ReportingJWKS, error) {
	r, err := c.newRequest(http.MethodGet, "/.well-known/clearance-reporting-jwks.json", nil, opts)
	return call[ReportingJWKS](ctx, c, r, err)
}
