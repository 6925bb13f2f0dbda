package server

import (
	"net/http"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/tenant"
)

// escalationStatus answers a managed escalation's status.
func (s *Server) escalationStatus(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	st, err := s.engine.Escalations.Get(c.r.Context(), org, c.r.PathValue("escalationId"))
	if err != nil {
		return err
	}
	if !c.principal.Allows(tenant.ScopeDecisionWrite) {
		// The grant is a bearer credential for the action: a read-only key
		// sees that it exists, not the token.
		st.ExecutionToken = ""
	}
	return c.writeJSON(http.StatusOK, st)
}

// cancelEscalation cancels a pending managed escalation; a final one is
// answered as it stands.
func (s *Server) cancelEscalation(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	st, err := s.engine.Escalations.Cancel(c.r.Context(), org, c.r.PathValue("escalationId"))
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, st)
}

// presenceCompletion is the PresenceAuthorityCompletion body.
type presenceCompletion struct {
	EscalationID string `json:"escalation_id"`
	RequestID    string `json:"request_id,omitempty"`
	OrgID        string `json:"org_id,omitempty"`
}

// presenceCompletion takes a completion hint: 202 once the escalation's
// approval was verified directly with the approval service (or the
// verification was queued because the service could not be reached).
func (s *Server) presenceCompletion(c *call) error {
	var req presenceCompletion
	if err := c.decode(&req); err != nil {
		return err
	}
	org, err := c.orgFor(req.OrgID)
	if err != nil {
		return err
	}
	st, err := s.engine.Escalations.Complete(c.r.Context(), clearance.Completion{OrgID: org, EscalationID: req.EscalationID,
		RequestID: req.RequestID})
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusAccepted, st)
}
