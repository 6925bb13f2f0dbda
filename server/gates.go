package server

import (
	"net/http"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/decide"
)

// Verdicts a workflow tool branches on (decide.VerdictOf).
const (
	VerdictContinue = decide.VerdictContinue
	VerdictStop     = decide.VerdictStop
	VerdictHandOff  = decide.VerdictHandOff
	VerdictReview   = decide.VerdictReview
)

func (s *Server) evaluateDecision(c *call) error {
	return s.decision(c, clearance.RouteEvaluateDecision, "")
}

func (s *Server) actionGate(c *call) error { return s.decision(c, clearance.RouteActionGate, "") }

func (s *Server) crmActionGate(c *call) error {
	return s.decision(c, clearance.RouteCRMActionGate, c.r.PathValue("orgId"))
}

func (s *Server) workspaceActionGate(c *call) error {
	return s.decision(c, clearance.RouteWorkspaceApp, "")
}

func (s *Server) cloudAgentVerify(c *call) error {
	return s.decision(c, clearance.RouteCloudAgentVerify, "")
}

// decision runs every decision route: the engine decodes the body as the
// route's request, so what it evaluates is what it records. pathOrg is the
// org the route's path names.
func (s *Server) decision(c *call, rt clearance.Route, pathOrg string) error {
	key, err := c.idempotencyKey()
	if err != nil {
		return err
	}
	corr, err := c.correlationID()
	if err != nil {
		return err
	}
	d, err := s.engine.Evaluate(c.r.Context(), clearance.EvaluateRequest{Route: rt, Body: c.body, PathOrg: pathOrg,
		IdempotencyKey: key, CorrelationID: corr, RequestID: c.requestID, Principal: c.principal,
		WantEnvelope: wantsEnvelope(c.r.Header.Get("User-Agent"))})
	if err != nil {
		return err
	}
	if d.CorrelationID != "" {
		c.w.Header().Set(HeaderCorrelationID, d.CorrelationID)
	}
	if d.Replayed {
		c.w.Header().Set(HeaderReplayed, "true")
	} else {
		s.metrics.decisions.WithLabelValues(string(d.Outcome), string(d.Mode), string(rt)).Inc()
	}
	if rt.IsGate() {
		return c.writeJSON(http.StatusOK, decide.GateAnswerOf(d))
	}
	// The answer of every decision: written without reflection, the same
	// bytes encoding/json would write.
	return c.writeRaw(http.StatusOK, append(d.AppendJSON(make([]byte, 0, 1024)), '\n'))
}
