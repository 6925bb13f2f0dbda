package server

import (
	"net"
	"net/http"
)

// provisionWorkspace starts a provisional workspace for an agent (public,
// budgeted per source address and in all).
func (s *Server) provisionWorkspace(c *call) error {
	addr, _, err := net.SplitHostPort(c.r.RemoteAddr)
	if err != nil {
		addr = c.r.RemoteAddr
	}
	out, err := s.engine.Onboarding.Provision(c.r.Context(), addr, c.body)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusCreated, out)
}

// claimWorkspace makes a provisional workspace the signed-in account's.
func (s *Server) claimWorkspace(c *call) error {
	out, err := s.engine.Onboarding.Claim(c.r.Context(), c.account, c.body)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, out)
}
