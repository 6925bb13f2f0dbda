package server

import (
	"encoding/json"
	"net/http"
	"strings"

	"golang.org/x/mod/semver"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/execution"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/registry"
)

// authorityRequest is the enforce-and-bind body (ExecutionAuthorityRequest).
type authorityRequest struct {
	SignedIntent     string          `json:"signed_intent"`
	Mode             policy.Mode     `json:"mode,omitempty"`
	ApprovalEvidence json.RawMessage `json:"approval_evidence,omitempty"`
	// FederatedDecisions (extension) are federated decision envelopes,
	// evidence for the evaluation as on evaluate-decision.
	FederatedDecisions []string `json:"federated_decisions,omitempty"`
}

func (s *Server) enforceAndBind(c *call) error {
	var req authorityRequest
	if err := c.decode(&req); err != nil {
		return err
	}
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	corr, err := c.correlationID()
	if err != nil {
		return err
	}
	key, err := c.idempotencyKey()
	if err != nil {
		return err
	}
	d, err := s.engine.EnforceAndBind(c.r.Context(), clearance.AuthorityRequest{
		OrgID: org, SignedIntent: req.SignedIntent, Mode: req.Mode, ApprovalEvidence: req.ApprovalEvidence,
		FederatedDecisions: req.FederatedDecisions, IdempotencyKey: key, CorrelationID: corr, RequestID: c.requestID, Principal: c.principal,
		WantEnvelope: wantsEnvelope(c.r.Header.Get("User-Agent")),
	})
	if err != nil {
		return err
	}
	if corr != "" {
		c.w.Header().Set(HeaderCorrelationID, corr)
	}
	if d.Replayed {
		c.w.Header().Set(HeaderReplayed, "true")
	} else {
		s.metrics.decisions.WithLabelValues(string(d.Outcome), string(d.Mode), string(clearance.RouteEnforceAndBind)).Inc()
	}
	return c.writeJSON(http.StatusOK, d)
}

// envelopeClient is the client that receives verification envelopes from
// this minimum version on.
const (
	envelopeClient     = "agent-safe-pipeline/"
	envelopeMinVersion = "v0.2.0"
)

// wantsEnvelope reports whether a User-Agent names agent-safe-pipeline at
// version 0.2.0 or later (semantic versions, so 0.10.0 > 0.2.0).
func wantsEnvelope(ua string) bool {
	for _, product := range strings.Fields(ua) {
		v, ok := strings.CutPrefix(product, envelopeClient)
		if !ok {
			continue
		}
		// The version core ends at a pre-release ("-") or build metadata
		// ("+"), whose own dots do not count.
		core := v
		if i := strings.IndexAny(v, "-+"); i >= 0 {
			core = v[:i]
		}
		v = "v" + v
		// Exactly MAJOR.MINOR.PATCH: semver would also accept "0.2".
		return strings.Count(core, ".") == 2 && semver.IsValid(v) && semver.Compare(v, envelopeMinVersion) >= 0
	}
	return false
}

type tokenRequest struct {
	ExecutionToken string `json:"execution_token"`
	IntentHash     string `json:"intent_hash"`
}

func (s *Server) verifyToken(c *call) error {
	var req tokenRequest
	if err := c.decode(&req); err != nil {
		return err
	}
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	st, err := s.engine.VerifyGrant(c.r.Context(), org, req.ExecutionToken, req.IntentHash)
	if err != nil {
		s.metrics.grantChecked(err)
		return err
	}
	return c.writeJSON(http.StatusOK, st)
}

type claimRequest struct {
	ExecutionToken string `json:"execution_token"`
	IntentHash     string `json:"intent_hash"`
	CorrelationID  string `json:"correlation_id,omitempty"`
}

// failedClaim is the fail-closed claim body of a 409 or 503: it never
// authorizes.
type failedClaim struct {
	ShouldExecute       bool    `json:"should_execute"`
	ClaimToken          *string `json:"claim_token"`
	ClaimLeaseExpiresAt *string `json:"claim_lease_expires_at"`
	Valid               bool    `json:"valid"`
	ClaimAttestation    *string `json:"claim_attestation"`
	GrantID             *string `json:"grant_id"`
	DecisionID          *string `json:"decision_id"`
	Code                string  `json:"code"`
	Detail              string  `json:"detail"`
	RequestID           string  `json:"request_id"`
}

func (s *Server) claimToken(c *call) error {
	var req claimRequest
	if err := c.decode(&req); err != nil {
		return err
	}
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	res, err := s.engine.Claim(c.r.Context(), clearance.ClaimRequest{OrgID: org, ExecutionToken: req.ExecutionToken,
		IntentHash: req.IntentHash, CorrelationID: req.CorrelationID})
	s.metrics.claimed(err)
	if err != nil {
		return err // the route's refusal body: failedClaim
	}
	return c.writeJSON(http.StatusOK, res)
}

type finalizeRequest struct {
	ExecutionToken string                    `json:"execution_token"`
	ClaimToken     string                    `json:"claim_token"`
	Outcome        claim.Outcome             `json:"outcome"`
	EffectEvidence *clearance.EffectEvidence `json:"effect_evidence,omitempty"`
	EffectReceipt  *clearance.EffectReceipt  `json:"effect_receipt,omitempty"`
}

func (s *Server) finalizeToken(c *call) error {
	var req finalizeRequest
	if err := c.decode(&req); err != nil {
		return err
	}
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	res, err := s.engine.Finalize(c.r.Context(), clearance.FinalizeRequest{OrgID: org, ExecutionToken: req.ExecutionToken,
		ClaimToken: req.ClaimToken, Outcome: req.Outcome, Evidence: req.EffectEvidence, Receipt: req.EffectReceipt})
	s.metrics.finalized(res, err)
	if err != nil {
		return err // the route's refusal body: a refused finalization's result
	}
	return c.writeJSON(http.StatusOK, res)
}

func (s *Server) jwks(c *call) error {
	set, ok := s.engine.Admin.JWKS()
	if !ok {
		return &clearance.Error{Kind: clearance.ErrNotFound, Code: clearance.CodeSigningNotConfigured, Detail: "grant signing is not configured"}
	}
	c.w.Header().Set("Content-Type", "application/jwk-set+json")
	c.w.Header().Set("Cache-Control", "public, max-age=60") // short: a rotated-in key must reach caches quickly
	c.w.WriteHeader(http.StatusOK)
	c.status = http.StatusOK
	return json.NewEncoder(c.w).Encode(set)
}

// keyRoutes serves one registry (agent or provider keys).
type keyRoutes struct{ kind registry.Kind }

type keyList struct {
	OrgID string                    `json:"org_id"`
	Keys  []clearance.RegisteredKey `json:"keys"`
}

func (k keyRoutes) register(s *Server, c *call) error {
	var req registry.Registration
	if err := c.decode(&req); err != nil {
		return err
	}
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	key, created, err := s.engine.Admin.RegisterKey(c.r.Context(), org, k.kind, req)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
	}
	return c.writeJSON(status, key)
}

func (k keyRoutes) list(s *Server, c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	keys, err := s.engine.Admin.Keys(c.r.Context(), org, k.kind)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, keyList{OrgID: org, Keys: keys})
}

func (k keyRoutes) revoke(s *Server, c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	key, err := s.engine.Admin.RevokeKey(c.r.Context(), org, k.kind, c.r.PathValue("kid"))
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, key)
}

type executionList struct {
	OrgID      string                `json:"org_id"`
	Executions []execution.Execution `json:"executions"`
}

func (s *Server) listIndeterminate(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	gs, err := s.engine.Execution.Indeterminate(c.r.Context(), org, 0)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, executionList{OrgID: org, Executions: gs})
}

type reconcileRequest struct {
	Resolution     claim.Outcome             `json:"resolution"`
	EffectEvidence *clearance.EffectEvidence `json:"effect_evidence,omitempty"`
	EffectReceipt  *clearance.EffectReceipt  `json:"effect_receipt,omitempty"`
	Note           string                    `json:"note,omitempty"`
}

func (s *Server) reconcile(c *call) error {
	var req reconcileRequest
	if err := c.decode(&req); err != nil {
		return err
	}
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	grantID := c.r.PathValue("grantId")
	if !clearance.ValidID(grantID) { // grant ids are UUIDs
		return &clearance.Error{Kind: clearance.ErrNotFound, Code: claim.CodeGrantNotFound, Detail: "grant not found"}
	}
	g, err := s.engine.Execution.Reconcile(c.r.Context(), clearance.ReconcileRequest{OrgID: org, GrantID: grantID,
		Resolution: req.Resolution, Evidence: req.EffectEvidence, Receipt: req.EffectReceipt, Note: req.Note})
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, g)
}
