package server

import "net/http"

// issueFederationEnvelope signs a federated decision envelope of one of
// the org's recorded decisions, for another deployment's org.
func (s *Server) issueFederationEnvelope(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	out, err := s.engine.Federation.IssueEnvelope(c.r.Context(), org, c.body)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, out)
}

// listTrustedIssuers lists the org's trust list and the audience its
// envelopes must name.
func (s *Server) listTrustedIssuers(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	out, err := s.engine.Federation.Issuers(c.r.Context(), org)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, out)
}

// getTrustedIssuer reads one entry of the org's trust list.
func (s *Server) getTrustedIssuer(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	out, err := s.engine.Federation.Issuer(c.r.Context(), org, c.r.PathValue("issuerId"))
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, out)
}

// putTrustedIssuer trusts an issuer or replaces its entry: 201 when new.
func (s *Server) putTrustedIssuer(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	out, created, err := s.engine.Federation.PutIssuer(c.r.Context(), org, c.r.PathValue("issuerId"), c.body)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.writeJSON(status, out)
}

// deleteTrustedIssuer takes an issuer off the org's trust list and answers
// the entry removed.
func (s *Server) deleteTrustedIssuer(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	out, err := s.engine.Federation.DeleteIssuer(c.r.Context(), org, c.r.PathValue("issuerId"))
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, out)
}
