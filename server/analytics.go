package server

import (
	"encoding/json"
	"net/http"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/analytics"
)

// The platform operator's analytics routes: the platform key only.

func (s *Server) putConsent(c *call) error {
	org, _ := c.pathName("orgId")
	res, err := s.engine.Analytics.SetConsent(c.r.Context(), org, c.body)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, res)
}

func (s *Server) classifyOrg(c *call) error {
	org, _ := c.pathName("orgId")
	res, err := s.engine.Analytics.Classify(c.r.Context(), org, c.body)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, res)
}

func (s *Server) growthScorecard(c *call) error {
	sc, err := s.engine.Analytics.Scorecard(c.r.Context())
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, sc)
}

func (s *Server) freezeBaseline(c *call) error {
	if err := c.noBody(); err != nil {
		return err
	}
	name, _ := c.pathName("name")
	b, err := s.engine.Analytics.FreezeBaseline(c.r.Context(), name)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusCreated, b)
}

// freezeBlastRadius answers 201 with the report it froze, or 200 with the
// one frozen before, byte for byte.
func (s *Server) freezeBlastRadius(c *call) error {
	if err := c.noBody(); err != nil {
		return err
	}
	month, _ := c.pathName("month")
	body, created, err := s.engine.Analytics.FreezeBlastRadius(c.r.Context(), month)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.writeRaw(status, body)
}

// reportingJWKS publishes the reporting key, which verifies growth reports.
func (s *Server) reportingJWKS(c *call) error {
	set, err := s.engine.Analytics.ReportingJWKS(c.r.Context())
	if err != nil {
		return err
	}
	if len(set.Keys) == 0 {
		return &clearance.Error{Kind: clearance.ErrNotFound, Code: analytics.CodeReportingKeyNotConfigured, Detail: "no reporting key is configured"}
	}
	c.w.Header().Set("Content-Type", "application/jwk-set+json")
	c.w.Header().Set("Cache-Control", "public, max-age=60")
	c.w.WriteHeader(http.StatusOK)
	c.status = http.StatusOK
	return json.NewEncoder(c.w).Encode(set)
}

// noBody accepts a route's absent body, or an empty JSON object; anything
// else is refused as strictly as any body.
func (c *call) noBody() error {
	if len(c.body) == 0 {
		return nil
	}
	var none struct{}
	return c.decode(&none)
}
