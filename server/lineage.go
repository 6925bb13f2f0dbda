package server

import (
	"net/http"

	"github.com/clearancehq/clearance"
)

// Handlers of the evidence that follows a decision: decision chains,
// human overrides and execution dispatches.

func (s *Server) decisionChain(c *call) error {
	org, err := c.requiredOrg()
	if err != nil {
		return err
	}
	ch, err := s.engine.Evidence.Chain(c.r.Context(), org, c.r.PathValue("chainId"))
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, ch)
}

func (s *Server) decisionChainByEvaluation(c *call) error {
	org, err := c.requiredOrg()
	if err != nil {
		return err
	}
	ch, err := s.engine.Evidence.ChainByEvaluation(c.r.Context(), org, c.r.PathValue("evaluationId"))
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, ch)
}

// overrideRequest is the body of POST …/dossiers/{dossierId}/overrides.
type overrideRequest struct {
	Resolution clearance.OverrideResolution `json:"resolution"`
	Actor      clearance.OverrideActor      `json:"actor"`
	Note       string                       `json:"note,omitempty"`
	ReasonCode string                       `json:"reason_code,omitempty"`
}

func (s *Server) recordOverride(c *call) error {
	var req overrideRequest
	if err := c.decode(&req); err != nil {
		return err
	}
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	key, err := c.idempotencyKey()
	if err != nil {
		return err
	}
	o, err := s.engine.Evidence.RecordOverride(c.r.Context(), clearance.OverrideRequest{OrgID: org, DossierID: c.r.PathValue("dossierId"),
		Resolution: req.Resolution, Actor: req.Actor, Note: req.Note, ReasonCode: req.ReasonCode,
		IdempotencyKey: key, Principal: c.principal, RequestID: c.requestID})
	if err != nil {
		return err
	}
	if o.Replayed {
		c.w.Header().Set(HeaderReplayed, "true")
	}
	return c.writeJSON(http.StatusCreated, o)
}

func (s *Server) overrides(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	trail, err := s.engine.Evidence.Overrides(c.r.Context(), org, c.r.PathValue("dossierId"))
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, trail)
}

// dispatchRequest is the body of POST /v1/protocol/executions/dispatches.
type dispatchRequest struct {
	ExecutionToken string `json:"execution_token,omitempty"`
	GrantID        string `json:"grant_id,omitempty"`
	ClaimToken     string `json:"claim_token"`
	RequestDigest  string `json:"request_digest"`
	Target         string `json:"target"`
	DispatchedAt   string `json:"dispatched_at"`
}

func (s *Server) recordDispatch(c *call) error {
	var req dispatchRequest
	if err := c.decode(&req); err != nil {
		return err
	}
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	key, err := c.idempotencyKey()
	if err != nil {
		return err
	}
	d, err := s.engine.Execution.RecordDispatch(c.r.Context(), clearance.DispatchRequest{OrgID: org, ExecutionToken: req.ExecutionToken,
		GrantID: req.GrantID, ClaimToken: req.ClaimToken, RequestDigest: req.RequestDigest, Target: req.Target,
		DispatchedAt: req.DispatchedAt, IdempotencyKey: key, Principal: c.principal,
		RequestID: c.requestID})
	if err != nil {
		s.metrics.grantChecked(err)
		return err
	}
	if d.Replayed {
		c.w.Header().Set(HeaderReplayed, "true")
	}
	return c.writeJSON(http.StatusCreated, d)
}

func (s *Server) dispatches(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	list, err := s.engine.Execution.Dispatches(c.r.Context(), org, c.r.PathValue("dossierId"))
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, list)
}
