package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/policy"
)

// healthResponse is the engine's health plus the service's key ids.
type healthResponse struct {
	clearance.Health
	Keys map[string]string `json:"keys"`
}

func (s *Server) health(c *call) error {
	h := healthResponse{Health: s.engine.Health(c.r.Context()), Keys: s.keyIDs()}
	return c.writeJSON(healthStatus(h.Health), h)
}

// keyIDs names the signing keys in use: Options.Keys, with "grant" the
// active key of the engine's ring now (it changes when the ring is
// replaced).
func (s *Server) keyIDs() map[string]string {
	ids := make(map[string]string, len(s.opts.Keys)+1)
	for role, kid := range s.opts.Keys {
		ids[role] = kid
	}
	if r := s.engine.GrantKeys(); r != nil {
		ids["grant"] = r.Active().KID()
	}
	return ids
}

func (s *Server) metricsPage(c *call) error {
	g, ok := s.opts.Registerer.(prometheus.Gatherer)
	if !ok {
		return errNoRoute
	}
	promhttp.HandlerFor(g, promhttp.HandlerOpts{}).ServeHTTP(c.w, c.r)
	c.status = http.StatusOK
	return nil
}

// MetricsHandler serves the Prometheus metrics page without authentication,
// for a listener of its own (clearance serve --metrics-addr): the counts
// cover every org, so bind that listener to a private address. Every other
// path is 404. On the API listener /metrics needs the platform key.
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.wrap(route{pattern: "GET /metrics", auth: authPublic, handle: (*Server).metricsPage}))
	mux.Handle("/", s.wrap(noRoute))
	return mux
}

// decode strictly decodes the call's body into v, refusing unknown members,
// within the engine's JSON limits.
func (c *call) decode(v any) error {
	return strictjson.Decode(c.body, v, c.json)
}

// headerToken returns the value of a header that carries a client token,
// "" when the header is absent. A header that is present must be sent once
// and hold a clearance.ValidToken: an empty or blank value (an ignored key
// would let a retry be recorded twice), two values (which one would count?)
// and anything but visible ASCII (never echoed) are refused with code.
func (c *call) headerToken(name, code string) (string, error) {
	vs := c.r.Header.Values(name)
	switch {
	case len(vs) == 0:
		return "", nil
	case len(vs) > 1:
		return "", tokenError(code, name, name+" must be sent at most once")
	case !clearance.ValidToken(vs[0]):
		return "", tokenError(code, name, fmt.Sprintf("%s must be 1 to %d visible ASCII characters", name, clearance.MaxKeyLength))
	}
	return vs[0], nil
}

// idempotencyKey is the call's Idempotency-Key header (see headerToken).
func (c *call) idempotencyKey() (string, error) {
	return c.headerToken(HeaderIdempotencyKey, clearance.CodeInvalidIdempotencyKey)
}

// correlationID is the call's X-Correlation-Id header (see headerToken).
func (c *call) correlationID() (string, error) {
	return c.headerToken(HeaderCorrelationID, clearance.CodeInvalidCorrelationID)
}

func tokenError(code, field, msg string) error {
	return &clearance.Error{Kind: clearance.ErrInvalidRequest, Code: code, Detail: msg,
		Fields: []clearance.FieldError{{Field: field, Message: msg}}}
}

// orgFor resolves the org the call acts on from an explicit org_id. The
// platform key may name any org, which must then exist.
func (c *call) orgFor(explicit string) (string, error) {
	org, err := c.principal.ResolveOrg(explicit)
	if err != nil || !c.principal.IsPlatform() {
		return org, err
	}
	if _, err := c.engine.Admin.Org(c.r.Context(), org); err != nil {
		return "", err
	}
	return org, nil
}

// queryOrg resolves the org from the org_id query parameter.
func (c *call) queryOrg() (string, error) {
	org, err := c.query("org_id")
	if err != nil {
		return "", err
	}
	return c.orgFor(org)
}

// query returns the value of a query parameter ("" when absent). A query
// string that does not parse, or a parameter given more than once, is
// INVALID_QUERY: which of two org_id values a proxy checked and which one
// the handler acts on must never be left to chance.
func (c *call) query(name string) (string, error) {
	q, err := url.ParseQuery(c.r.URL.RawQuery)
	if err != nil {
		return "", &clearance.Error{Kind: clearance.ErrInvalidRequest, Code: codeInvalidQuery, Detail: "the query string is malformed"}
	}
	switch v := q[name]; len(v) {
	case 0:
		return "", nil
	case 1:
		return v[0], nil
	default:
		return "", badQuery(name, name+" must be given at most once")
	}
}

// boolQuery returns a true/false query parameter, def when absent; any
// other value, an empty one included, is INVALID_QUERY.
func (c *call) boolQuery(name string, def bool) (bool, error) {
	v, err := c.query(name)
	if err != nil {
		return false, err
	}
	switch {
	case v == "true":
		return true, nil
	case v == "false":
		return false, nil
	case v == "" && !c.r.URL.Query().Has(name):
		return def, nil
	}
	return false, badQuery(name, name+" must be true or false")
}

// pathName returns the path wildcard name; ok is false when the value
// cannot name anything stored (it is not UTF-8, or holds a control
// character: PostgreSQL text cannot even hold NUL), and the caller answers
// its not-found without asking the store.
func (c *call) pathName(name string) (v string, ok bool) {
	v = c.r.PathValue(name)
	return v, utf8.ValidString(v) && !strings.ContainsFunc(v, unicode.IsControl)
}

type createOrgRequest struct {
	Name string `json:"name"`
}

type createOrgResponse struct {
	OrgID  string   `json:"org_id"`
	Name   string   `json:"name"`
	APIKey string   `json:"api_key"`
	Scopes []string `json:"scopes"`
	KeyID  string   `json:"key_id"`
}

func (s *Server) createOrg(c *call) error {
	var req createOrgRequest
	if err := c.decode(&req); err != nil {
		return err
	}
	res, err := s.engine.Admin.CreateOrg(c.r.Context(), req.Name)
	if err != nil {
		return err
	}
	scopes := make([]string, len(res.Key.Scopes))
	for i, sc := range res.Key.Scopes {
		scopes[i] = string(sc)
	}
	return c.writeJSON(http.StatusCreated, createOrgResponse{OrgID: res.Org.ID, Name: res.Org.Name,
		APIKey: res.Key.Secret, Scopes: scopes, KeyID: res.Key.KeyID})
}

type createKeyRequest struct {
	Scopes []string `json:"scopes"`
}

func (s *Server) createAPIKey(c *call) error {
	var req createKeyRequest
	if err := c.decode(&req); err != nil {
		return err
	}
	k, err := s.engine.Admin.CreateAPIKey(c.r.Context(), c.r.PathValue("orgId"), req.Scopes)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusCreated, k)
}

func (s *Server) publishBundle(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	activate, err := c.boolQuery("activate", true)
	if err != nil {
		return err
	}
	publish := s.engine.Policies.PublishBundle
	if !activate {
		publish = s.engine.Policies.StageBundle
	}
	p, err := publish(c.r.Context(), org, c.body)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if !p.Created {
		status = http.StatusOK
	}
	return c.writeJSON(status, p.BundleInfo)
}

type bundleList struct {
	OrgID         string                 `json:"org_id"`
	ActiveVersion string                 `json:"active_version,omitempty"`
	Bundles       []clearance.BundleInfo `json:"bundles"`
}

func (s *Server) listBundles(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	list, err := s.engine.Policies.Bundles(c.r.Context(), org)
	if err != nil {
		return err
	}
	out := bundleList{OrgID: org, Bundles: list}
	for _, b := range list {
		if b.Active {
			out.ActiveVersion = b.Version
		}
	}
	return c.writeJSON(http.StatusOK, out)
}

func (s *Server) getBundle(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	version, ok := c.pathName("version")
	if !ok {
		return &clearance.Error{Kind: clearance.ErrNotFound, Code: clearance.CodePolicyNotFound, Detail: "policy version not found"}
	}
	b, err := s.engine.Policies.Bundle(c.r.Context(), org, version)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, b)
}

// activateRequest is the activation body ({} for no precondition).
type activateRequest struct {
	// A value, not a pointer: its UnmarshalJSON then sees null too.
	ExpectedActiveVersion versionName `json:"expected_active_version"`
}

// versionName is a bundle version on the wire: a JSON string of the
// version grammar. null, "" and the rest are refused, so that they never
// mean "no precondition".
type versionName struct {
	v   string
	set bool
}

func (n *versionName) UnmarshalJSON(b []byte) error {
	var s string
	if len(b) == 0 || b[0] != '"' || json.Unmarshal(b, &s) != nil || !policy.ValidVersion(s) {
		return errVersionName
	}
	n.v, n.set = s, true
	return nil
}

// versionNameError is a refused version name; strictjson reports its code.
type versionNameError struct{}

var errVersionName = versionNameError{}

func (versionNameError) Error() string {
	return "expected_active_version must be a policy version: 1 to " + strconv.Itoa(policy.MaxVersionLen) +
		" characters of [A-Za-z0-9._-]"
}
func (versionNameError) ErrorCode() string { return policy.CodeInvalidPin }

func (s *Server) activateBundle(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	var req activateRequest
	if err := c.decode(&req); err != nil {
		return err
	}
	version, ok := c.pathName("version")
	if !ok {
		return &clearance.Error{Kind: clearance.ErrNotFound, Code: clearance.CodePolicyNotFound, Detail: "policy version not found"}
	}
	a, err := s.engine.Policies.ActivateBundle(c.r.Context(), clearance.ActivateRequest{OrgID: org, Version: version,
		ExpectedActiveVersion: req.ExpectedActiveVersion.v})
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, a)
}

func (s *Server) reasonCodes(c *call) error {
	return c.writeJSON(http.StatusOK, map[string]any{"reason_codes": clearance.ReasonCodes()})
}

func (s *Server) shadowReport(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	w, err := c.queryWindow()
	if err != nil {
		return err
	}
	rep, err := s.engine.Evidence.ShadowReport(c.r.Context(), org, w)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, rep)
}

func badQuery(field, msg string) error {
	return &clearance.Error{Kind: clearance.ErrInvalidRequest, Code: codeInvalidQuery, Detail: msg,
		Fields: []clearance.FieldError{{Field: field, Message: msg}}}
}

func (s *Server) dossier(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	explain, err := c.boolQuery("explain", false)
	if err != nil {
		return err
	}
	d, err := s.engine.Evidence.Dossier(c.r.Context(), org, c.r.PathValue("dossierId"))
	if err != nil {
		return err
	}
	if explain {
		return s.explainDossier(c, d, org)
	}
	return c.writeDossier(org, d)
}

func (s *Server) dossierByDecision(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	d, err := s.engine.Evidence.DossierByDecision(c.r.Context(), org, c.r.PathValue("decisionId"))
	if err != nil {
		return err
	}
	return c.writeDossier(org, d)
}

// HeaderDossierDigest carries the SHA-256 of the dossier body, which equals
// the payload_digest of its ledger entry.
const HeaderDossierDigest = "X-Clearance-Dossier-Digest"

// HeaderPersonalData says, on a dossier whose personal data is sealed
// (docs/privacy.md), whether the body shows it restored (OPEN) or erased
// (ERASED). The body is then the reader's view, and HeaderDossierDigest
// stays the digest of the stored form (the one a proof packet carries).
const HeaderPersonalData = "X-Clearance-Personal-Data"

func (c *call) writeDossier(org string, d clearance.DossierRecord) error {
	v, err := c.engine.Privacy.Open(c.r.Context(), org, d.Body)
	if err != nil {
		return err
	}
	c.w.Header().Set(HeaderDossierDigest, d.Digest)
	if v.Status != "" {
		c.w.Header().Set(HeaderPersonalData, v.Status)
	}
	return c.writeRaw(http.StatusOK, v.Body)
}

func (s *Server) ledger(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	afterQ, err := c.query("after_seq")
	if err != nil {
		return err
	}
	limitQ, err := c.query("limit")
	if err != nil {
		return err
	}
	var after uint64
	if afterQ != "" {
		if after, err = strconv.ParseUint(afterQ, 10, 64); err != nil {
			return badQuery("after_seq", "after_seq must be a non-negative integer")
		}
	}
	limit := 0
	if limitQ != "" {
		if limit, err = strconv.Atoi(limitQ); err != nil || limit < 1 {
			return badQuery("limit", "limit must be a positive integer")
		}
	}
	p, err := s.engine.Audit.Ledger(c.r.Context(), org, after, limit)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, p)
}

func (s *Server) verifyLedger(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	cp, err := c.auditorCheckpoint()
	if err != nil {
		return err
	}
	rep, err := s.engine.Audit.VerifyLedgerAgainst(c.r.Context(), org, cp)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, rep)
}
