package client_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/clearancehq/clearance/client"
)

// Health, metrics and the platform key's org routes.
func TestPlatform(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := t.Context()
	platform := s.client(s.platform)

	h, err := s.client("").Health(ctx)
	if err != nil || h.Status != "ok" || h.Store != "ok" || h.Version == "" || h.Keys["grant"] != seededKey(t, 1).KID() {
		t.Fatalf("health %+v: %v", h, err)
	}
	o := s.newOrg("Platform")
	issued, err := platform.CreateAPIKey(ctx, o.ID, client.CreateAPIKeyRequest{Scopes: []client.Scope{"decision:write", "audit:read"}})
	if err != nil || issued.OrgId.String() != o.ID || issued.ApiKey == "" || len(issued.Scopes) != 2 {
		t.Fatalf("create API key %+v: %v", issued, err)
	}
	decider := s.client(issued.ApiKey)
	if _, err := decider.EvaluateDecision(ctx, decisionRequest(t, 10)); err != nil {
		t.Fatal(err)
	}
	_, err = decider.PublishBundle(ctx, bundleOf(t, bandsBundle))
	wantCode(t, err, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	_, err = o.c.CreateAPIKey(ctx, o.ID, client.CreateAPIKeyRequest{Scopes: []client.Scope{"org:*"}})
	wantCode(t, err, http.StatusForbidden, "PLATFORM_KEY_REQUIRED")

	metrics, err := platform.Metrics(ctx)
	if err != nil || !strings.Contains(metrics, "clearance_decisions_total") || !strings.Contains(metrics, "# TYPE clearance_http_requests_total counter") {
		t.Fatalf("metrics: %v\n%.500s", err, metrics)
	}
	_, err = o.c.Metrics(ctx)
	wantCode(t, err, http.StatusForbidden, "PLATFORM_KEY_REQUIRED")
}

// The operator's growth analytics over a completed month: consent,
// classification, the scorecard, a baseline and the signed blast-radius
// report, verified against the reporting JWKS.
func TestGrowthAnalytics(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC()
	monthStart := time.Date(now.Year(), now.Month()-2, 1, 0, 0, 0, 0, time.UTC)
	s := newServerWith(t, serverConfig{start: monthStart.Add(10 * 24 * time.Hour)})
	ctx := t.Context()
	platform := s.client(s.platform)

	for i := range 5 {
		o := s.newOrg(fmt.Sprintf("Cohort %d", i))
		consent, err := platform.PutGrowthConsent(ctx, o.ID, client.GrowthConsentRequest{OptedIn: true, ConsentReference: fmt.Sprintf("contract-%d", i)})
		if err != nil || !consent.OptedIn || consent.OrgId.String() != o.ID || len(consent.History) != 1 {
			t.Fatalf("consent %+v: %v", consent, err)
		}
		class, err := platform.ClassifyGrowthOrg(ctx, o.ID, client.GrowthClassificationRequest{Environment: "prod", Audience: "external",
			Surface: "client_test"})
		if err != nil || !class.Reviewed || class.FirstTouch.Surface != "client_test" {
			t.Fatalf("classification %+v: %v", class, err)
		}
		o.decide(t, 10)
	}
	card, err := platform.GrowthScorecard(ctx)
	if err != nil || card.Population.Organizations != 5 || card.Population.Reviewed != 5 || len(card.Cohorts) == 0 {
		t.Fatalf("scorecard %+v: %v", card, err)
	}
	base, err := platform.FreezeGrowthBaseline(ctx, "launch")
	if err != nil || base.Name != "launch" || base.Scorecard.Population.Reviewed != 5 {
		t.Fatalf("baseline %+v: %v", base, err)
	}
	_, err = platform.FreezeGrowthBaseline(ctx, "launch")
	wantCode(t, err, http.StatusConflict, "BASELINE_EXISTS")

	month := monthStart.Format("2006-01")
	_, err = platform.FreezeBlastRadiusReport(ctx, month)
	wantCode(t, err, http.StatusBadRequest, "MONTH_NOT_COMPLETE")
	s.advance(32 * 24 * time.Hour)
	var got client.Response
	report, err := platform.FreezeBlastRadiusReport(ctx, month, client.Received(&got))
	if err != nil || got.Status != http.StatusCreated || report.Month != month || report.Report.Month != month || report.Kid != seededKey(t, 9).KID() {
		t.Fatalf("blast radius (%d) %+v: %v", got.Status, report, err)
	}
	again, err := platform.FreezeBlastRadiusReport(ctx, month, client.Received(&got))
	if err != nil || got.Status != http.StatusOK || again.Artifact != report.Artifact {
		t.Fatalf("the frozen report again (%d): %v", got.Status, err)
	}

	jwks, err := s.client("").ReportingJWKS(ctx)
	if err != nil || len(jwks.Keys) != 1 || jwks.Keys[0].Kid != report.Kid {
		t.Fatalf("reporting JWKS %+v: %v", jwks, err)
	}
	x, err := base64.RawURLEncoding.DecodeString(jwks.Keys[0].X)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(report.Artifact, ".")
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if len(parts) != 3 || err != nil || !ed25519.Verify(x, []byte(parts[0]+"."+parts[1]), sig) {
		t.Fatalf("the report does not verify against the reporting JWKS: %v", err)
	}
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var claims struct {
		Month string `json:"month"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Month != month {
		t.Fatalf("report claims %s: %v", payload, err)
	}
}
