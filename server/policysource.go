package server

import "net/http"

// The org's policy source: a directory of a Git repository whose bundle a
// pull compiles, tests and publishes (package policysource). The org is
// the credential's (the platform key names one with org_id).

func (s *Server) putPolicySource(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	src, err := s.engine.PolicySources.Put(c.r.Context(), org, c.body)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, src)
}

func (s *Server) getPolicySource(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	src, err := s.engine.PolicySources.Get(c.r.Context(), org)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, src)
}

func (s *Server) deletePolicySource(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	if err := s.engine.PolicySources.Delete(c.r.Context(), org); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	c.status = http.StatusNoContent
	return nil
}

// pullPolicySource answers 200 with what the pull did, a failed pull
// included (its status says so); only the store's failures are errors.
func (s *Server) pullPolicySource(c *call) error {
	if err := c.noBody(); err != nil {
		return err
	}
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	res, err := s.engine.PolicySources.Pull(c.r.Context(), org)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, res)
}
