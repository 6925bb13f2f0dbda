package client

import (
	"context"
	"net/http"
)

// Decisions: one evaluation path behind every entry point. Every decision
// route honours Idempotency-Key, so each call carries one and is safe to
// retry; WithIdempotencyKey makes a retry across processes answer the
// recorded decision again.

// EvaluateDecision evaluates a decision request and records its dossier and
// ledger entry: POST /v1/protocol/evaluate-decision.
func (c *Client) EvaluateDecision(ctx context.Context, req DecisionRequest, opts ...CallOption) (*Decision, error) {
	return c.decide(ctx, "/v1/protocol/evaluate-decision", req, opts)
}

// EvaluateDecisionDeprecated is EvaluateDecision on the deprecated alias,
// whose Idempotency-Keys are scoped apart: POST /v1/decisions/evaluate.
//
// Deprecated: use EvaluateDecision.
func (c *Client) EvaluateDecisionDeprecated(ctx context.Context, req DecisionRequest, opts ...CallOption) (*Decision, error) {
	return c.decide(ctx, "/v1/decisions/evaluate", req, opts)
}

func (c *Client) decide(ctx context.Context, path string, req DecisionRequest, opts []CallOption) (*Decision, error) {
	r, err := c.newRequest(http.MethodPost, path, req, opts)
	if err == nil {
		r.withKey()
	}
	return call[Decision](ctx, c, r, err)
}

// ActionGate is the universal HTTP action gate (surface "http" unless the
// body names one): POST /v1/action-gate/evaluate.
func (c *Client) ActionGate(ctx context.Context, req HookRequest, opts ...CallOption) (*GateEnvelope, error) {
	return c.gate(ctx, "/v1/action-gate/evaluate", req, opts)
}

// CRMActionGate is the CRM action gate of the org orgID (surface "crm"):
// POST /v1/orgs/{orgId}/crm/action-gate.
func (c *Client) CRMActionGate(ctx context.Context, orgID string, req HookRequest, opts ...CallOption) (*GateEnvelope, error) {
	return c.gate(ctx, "/v1/orgs/"+escape(orgID)+"/crm/action-gate", req, opts)
}

// WorkspaceActionGate is the issue-tracker app's action gate (surface
// "workspace_app"): POST /v1/workspace-app/action-gate.
func (c *Client) WorkspaceActionGate(ctx context.Context, req HookRequest, opts ...CallOption) (*GateEnvelope, error) {
	return c.gate(ctx, "/v1/workspace-app/action-gate", req, opts)
}

// CloudAgentVerify is the cloud agent extension's gate (surface
// "cloud_agent"): POST /v1/cloud/agent/extensions/verify.
func (c *Client) CloudAgentVerify(ctx context.Context, req AgentVerifyRequest, opts ...CallOption) (*GateEnvelope, error) {
	return c.gate(ctx, "/v1/cloud/agent/extensions/verify", req, opts)
}

func (c *Client) gate(ctx context.Context, path string, body any, opts []CallOption) (*GateEnvelope, error) {
	r, err := c.newRequest(http.MethodPost, path, body, opts)
	if err == nil {
		r.withKey()
	}
	return call[GateEnvelope](ctx, c, r, err)
}

// ReasonCodes is the documented reason-code vocabulary (any valid key):
// GET /v1/protocol/reason-codes.
func (c *Client) ReasonCodes(ctx context.Context, opts ...CallOption) (*ReasonCodeList, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/protocol/reason-codes", nil, opts)
	return call[ReasonCodeList](ctx, c, r, err)
}

// ShadowReport counts the org's SHADOW decisions in [from, to) by outcome
// and workflow (Query("from", …), Query("to", …) as RFC 3339; the default
// is the last 24 hours): GET /v1/protocol/shadow-reports.
func (c *Client) ShadowReport(ctx context.Context, opts ...CallOption) (*ShadowReport, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/protocol/shadow-reports", nil, opts)
	return call[ShadowReport](ctx, c, r, err)
}
