package server

import (
	"net/http"
	"strings"
)

// The platform operator's view of tenants: orgs and their API keys
// (extensions; `clearance admin` uses them).

// maxOrgsPage bounds one page of GET /v1/platform/orgs.
const maxOrgsPage = 1000

func (s *Server) listOrgs(c *call) error {
	after, err := c.query("after")
	if err != nil {
		return err
	}
	if len(after) > 255 || strings.ContainsFunc(after, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
		return badQuery("after", "after must be an org id: 1 to 255 visible ASCII characters")
	}
	limit, err := c.limitQuery(maxOrgsPage)
	if err != nil {
		return err
	}
	if limit == 0 {
		limit = 100
	}
	orgs, err := s.engine.Admin.Orgs(c.r.Context(), after, limit+1)
	if err != nil {
		return err
	}
	next := ""
	if len(orgs) > limit {
		orgs = orgs[:limit]
		next = orgs[limit-1].ID
	}
	out := map[string]any{"orgs": orgs}
	if next != "" {
		out["next_after"] = next
	}
	return c.writeJSON(http.StatusOK, out)
}

func (s *Server) listAPIKeys(c *call) error {
	org := c.r.PathValue("orgId")
	keys, err := s.engine.Admin.APIKeys(c.r.Context(), org)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, map[string]any{"org_id": org, "api_keys": keys})
}

func (s *Server) revokeAPIKey(c *call) error {
	k, err := s.engine.Admin.RevokeAPIKey(c.r.Context(), c.r.PathValue("orgId"), c.r.PathValue("keyId"), "platform:"+c.principal.KeyID)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, k)
}
