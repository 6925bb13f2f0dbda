package server

import (
	"net/http"

	"github.com/clearancehq/clearance/internal/core"
)

// spendActor reads the actor_id query parameter: the actor whose budgets
// of per-actor gates are asked for.
func (c *call) spendActor() (string, error) {
	a, err := c.query("actor_id")
	if err != nil {
		return "", err
	}
	if len(a) > 256 || !core.ValidText(a) {
		return "", core.Invalid(core.CodeInvalidRequest, "actor_id", "actor_id must be at most 256 characters without control characters")
	}
	return a, nil
}

// listSpendGates answers the spend gates of the org's active policy with
// their budgets now.
func (s *Server) listSpendGates(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	actor, err := c.spendActor()
	if err != nil {
		return err
	}
	gates, err := s.engine.SpendGates(c.r.Context(), org, actor)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, map[string]any{"spend_gates": gates})
}

// getSpendGate answers one gate of the active policy with its budget now.
func (s *Server) getSpendGate(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	actor, err := c.spendActor()
	if err != nil {
		return err
	}
	g, err := s.engine.SpendGate(c.r.Context(), org, c.r.PathValue("gateId"), actor)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, g)
}

// getSpendReservation answers what a grant charged to spend gates.
func (s *Server) getSpendReservation(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	r, err := s.engine.SpendReservation(c.r.Context(), org, c.r.PathValue("grantId"))
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, r)
}
