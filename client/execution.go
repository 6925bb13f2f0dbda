package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
)

// Agent-safe execution: grant → claim → finalize, the keys agents sign with
// and providers attest with, escalations, reconciliation, spend gates.

// EnforceAndBind verifies a signed intent, decides, and binds a grant to it
// (an ALLOW in ENFORCEMENT only): POST /v1/authority/enforce-and-bind. The
// server takes only the intent's intent_id as its Idempotency-Key, so the
// call sends that one (read from the signed intent) and is then safe to
// retry: the same intent gets the same answer.
func (c *Client) EnforceAndBind(ctx context.Context, req ExecutionAuthorityRequest, opts ...CallOption) (*ExecutionAuthorityDecision, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/authority/enforce-and-bind", req, opts)
	if id := intentID(req.SignedIntent); err == nil && id != "" {
		switch r.header.Get("Idempotency-Key") {
		case "":
			r.header.Set("Idempotency-Key", id)
			r.keyed = true
		case id:
			r.keyed = true
		}
	}
	return call[ExecutionAuthorityDecision](ctx, c, r, err)
}

// intentID reads the intent_id of a compact JWS's payload without verifying
// it (the server does); "" when there is none to read.
func intentID(jws string) string {
	parts := strings.Split(jws, ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var in struct {
		IntentID string `json:"intent_id"`
	}
	if json.Unmarshal(payload, &in) != nil {
		return ""
	}
	return in.IntentID
}

// Escalation reads a managed escalation's status; at GRANT_READY it carries
// the grant: GET /v1/authority/escalations/{escalationId}.
func (c *Client) Escalation(ctx context.Context, escalationID string, opts ...CallOption) (*ManagedEscalationStatus, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/authority/escalations/"+escape(escalationID), nil, opts)
	return call[ManagedEscalationStatus](ctx, c, r, err)
}

// CancelEscalation cancels a managed escalation:
// DELETE /v1/authority/escalations/{escalationId}.
func (c *Client) CancelEscalation(ctx context.Context, escalationID string, opts ...CallOption) (*ManagedEscalationStatus, error) {
	r, err := c.newRequest(http.MethodDelete, "/v1/authority/escalations/"+escape(escalationID), nil, opts)
	return call[ManagedEscalationStatus](ctx, c, r, err)
}

// CompletePresence tells Clearance that an escalation's approval may be
// complete; it never authorizes by itself:
// POST /v1/authority/presence-completions.
func (c *Client) CompletePresence(ctx context.Context, req PresenceAuthorityCompletion, opts ...CallOption) (*ManagedEscalationStatus, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/authority/presence-completions", req, opts)
	return call[ManagedEscalationStatus](ctx, c, r, err)
}

// VerifyToken checks a grant without claiming it:
// POST /v1/execution/verify-token.
func (c *Client) VerifyToken(ctx context.Context, req ExecutionTokenRequest, opts ...CallOption) (*GrantStatus, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/execution/verify-token", req, opts)
	return call[GrantStatus](ctx, c, r, err)
}

// Claim claims a grant right before the action runs:
// POST /v1/execution/claim-token. Act only on a nil error and
// ShouldExecute true; a refusal is a *Error (409 or 503). Never retried.
func (c *Client) Claim(ctx context.Context, req ExecutionClaimTokenRequest, opts ...CallOption) (*ClaimResponse, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/execution/claim-token", req, opts)
	return call[ClaimResponse](ctx, c, r, err)
}

// Consume is Claim under the spec's older name:
// POST /v1/execution/consume-token.
func (c *Client) Consume(ctx context.Context, req ExecutionClaimTokenRequest, opts ...CallOption) (*ClaimResponse, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/execution/consume-token", req, opts)
	return call[ClaimResponse](ctx, c, r, err)
}

// Finalize reports what happened after a claim:
// POST /v1/execution/finalize-token. Never retried.
func (c *Client) Finalize(ctx context.Context, req ExecutionFinalizeRequest, opts ...CallOption) (*ExecutionFinalizeResponse, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/execution/finalize-token", req, opts)
	return call[ExecutionFinalizeResponse](ctx, c, r, err)
}

// GrantJWKS is the public key set grants and claim attestations verify
// against: GET /.well-known/clearance-execution-grant-jwks.json. Its raw
// bytes are what VerifyAttestation takes.
func (c *Client) GrantJWKS(ctx context.Context, opts ...CallOption) ([]byte, error) {
	r, err := c.newRequest(http.MethodGet, "/.well-known/clearance-execution-grant-jwks.json", nil, opts)
	return raw(ctx, c, r, err)
}

// KeyKind names the two registries of public keys an org keeps.
type KeyKind string

// The key registries.
const (
	AgentKeys    KeyKind = "agent-keys"    // keys agents sign intents with
	ProviderKeys KeyKind = "provider-keys" // keys providers sign effect receipts with
)

// RegisterKey registers a public key (201; 200 when the same key was
// registered before): POST /v1/execution/{agent-keys|provider-keys}.
func (c *Client) RegisterKey(ctx context.Context, kind KeyKind, req KeyRegistrationRequest, opts ...CallOption) (*RegisteredKey, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/execution/"+string(kind), req, opts)
	return call[RegisteredKey](ctx, c, r, err)
}

// ListKeys lists an org's registered keys of one kind:
// GET /v1/execution/{agent-keys|provider-keys}.
func (c *Client) ListKeys(ctx context.Context, kind KeyKind, opts ...CallOption) (*KeyList, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/execution/"+string(kind), nil, opts)
	return call[KeyList](ctx, c, r, err)
}

// RevokeKey revokes a registered key:
// DELETE /v1/execution/{agent-keys|provider-keys}/{kid}.
func (c *Client) RevokeKey(ctx context.Context, kind KeyKind, kid string, opts ...CallOption) (*RegisteredKey, error) {
	r, err := c.newRequest(http.MethodDelete, "/v1/execution/"+string(kind)+"/"+escape(kid), nil, opts)
	return call[RegisteredKey](ctx, c, r, err)
}

// Indeterminate lists the executions waiting for reconciliation:
// GET /v1/execution/reconciliations.
func (c *Client) Indeterminate(ctx context.Context, opts ...CallOption) (*ExecutionList, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/execution/reconciliations", nil, opts)
	return call[ExecutionList](ctx, c, r, err)
}

// Reconcile settles an INDETERMINATE execution:
// POST /v1/execution/reconciliations/{grantId}.
func (c *Client) Reconcile(ctx context.Context, grantID string, req ReconcileRequest, opts ...CallOption) (*ExecutionGrant, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/execution/reconciliations/"+escape(grantID), req, opts)
	return call[ExecutionGrant](ctx, c, r, err)
}

// RecordDispatch records that a decision was handed to an executor:
// POST /v1/protocol/executions/dispatches (safe to retry: it carries an
// Idempotency-Key).
func (c *Client) RecordDispatch(ctx context.Context, req DispatchRequest, opts ...CallOption) (*Dispatch, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/protocol/executions/dispatches", req, opts)
	if err == nil {
		r.withKey()
	}
	return call[Dispatch](ctx, c, r, err)
}

// SpendGates lists the active policy's spend gates with their budgets
// (Query("actor_id", …) for per-actor gates): GET /v1/execution/spend-gates.
func (c *Client) SpendGates(ctx context.Context, opts ...CallOption) (*SpendGateList, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/execution/spend-gates", nil, opts)
	return call[SpendGateList](ctx, c, r, err)
}

// SpendGateList is the answer of SpendGates.
type SpendGateList struct {
	SpendGates []SpendGateStatus `json:"spend_gates"`
}

// SpendGate reads one spend gate's budget:
// GET /v1/execution/spend-gates/{gateId}.
func (c *Client) SpendGate(ctx context.Context, gateID string, opts ...CallOption) (*SpendGateStatus, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/execution/spend-gates/"+escape(gateID), nil, opts)
	return call[SpendGateStatus](ctx, c, r, err)
}

// SpendReservation reads what a grant's claim reserved:
// GET /v1/execution/spend-reservations/{grantId}.
func (c *Client) SpendReservation(ctx context.Context, grantID string, opts ...CallOption) (*SpendReservation, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/execution/spend-reservations/"+escape(grantID), nil, opts)
	return call[SpendReservation](ctx, c, r, err)
}
