package server

import (
	"net/http"

	"github.com/clearancehq/clearance"
)

// Personal data and erasure (docs/privacy.md).

func (s *Server) putDataProtection(c *call) error {
	org, err := c.orgFor(c.r.PathValue("orgId"))
	if err != nil {
		return err
	}
	st, err := s.engine.Privacy.PutSetting(c.r.Context(), org, c.body)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, st)
}

func (s *Server) getDataProtection(c *call) error {
	org, err := c.orgFor(c.r.PathValue("orgId"))
	if err != nil {
		return err
	}
	st, err := s.engine.Privacy.Setting(c.r.Context(), org)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, st)
}

func (s *Server) deleteDataProtection(c *call) error {
	org, err := c.orgFor(c.r.PathValue("orgId"))
	if err != nil {
		return err
	}
	st, err := s.engine.Privacy.DeleteSetting(c.r.Context(), org)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, st)
}

// eraseSubject answers 201 with a new receipt, or 200 with the one given
// before when nothing was left to destroy.
func (s *Server) eraseSubject(c *call) error {
	org, err := c.orgFor(c.r.PathValue("orgId"))
	if err != nil {
		return err
	}
	r, err := s.engine.Privacy.Erase(c.r.Context(), clearance.ErasureRequest{OrgID: org, Body: c.body, Requester: c.requester()})
	if err != nil {
		return err
	}
	return c.writeReceipt(r)
}

// eraseOrgPersonalData is a marketplace's deletion notice, with the
// platform key: one subject ({"subject_id"}) or, with no body or {}, every
// subject of the org.
func (s *Server) eraseOrgPersonalData(c *call) error {
	org, err := c.orgFor(c.r.PathValue("orgId"))
	if err != nil {
		return err
	}
	var r clearance.ErasureReceipt
	if len(c.body) == 0 || isEmptyObject(c.body) {
		r, err = s.engine.Privacy.EraseOrg(c.r.Context(), org, c.body, c.requester())
	} else {
		r, err = s.engine.Privacy.Erase(c.r.Context(), clearance.ErasureRequest{OrgID: org, Body: c.body, Requester: c.requester()})
	}
	if err != nil {
		return err
	}
	return c.writeReceipt(r)
}

func (c *call) writeReceipt(r clearance.ErasureReceipt) error {
	if r.Replayed {
		c.w.Header().Set(HeaderReplayed, "true")
		return c.writeJSON(http.StatusOK, r)
	}
	return c.writeJSON(http.StatusCreated, r)
}

func (c *call) requester() clearance.ErasureRequester {
	return clearance.ErasureRequester{CredentialID: c.principal.KeyID, CredentialKind: string(c.principal.Kind)}
}

// isEmptyObject reports whether body is {} (with any white space).
func isEmptyObject(body []byte) bool {
	n := 0
	for _, b := range body {
		switch b {
		case ' ', '\t', '\n', '\r':
		default:
			if (n == 0 && b != '{') || (n == 1 && b != '}') || n > 1 {
				return false
			}
			n++
		}
	}
	return n == 2
}
