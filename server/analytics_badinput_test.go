package server_test

import (
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/analytics"
)

// The platform operator's analytics routes in the bad-input suite.
//
// Their accepted requests need a reporting key and a frozen blast-radius
// report, and a report needs a completed UTC month in which a consented,
// classified prod/external org made a durable decision. The suite's clock
// stands at execStart (November 2026), so analyticsTargets opens the
// engine again with a reporting key, turns the clock back to October for
// an org of its own and one decision, and freezes October's report: the
// accepted request answers that report again (200, byte for byte), and
// every bad month is refused before anything is computed, or (a completed
// month without a cohort) after rollups that are already caught up.

// Paths of the analytics routes.
const (
	badAnalyticsConsentPath   = "/v1/analytics/growth-reports/consent/"
	badAnalyticsReportPath    = "/v1/analytics/growth-reports/blast-radius/"
	badAnalyticsScorecardPath = "/v1/analytics/growth-scorecard"
	badAnalyticsClassifyPath  = "/v1/analytics/growth-scorecard/orgs/"
	badAnalyticsBaselinePath  = "/v1/analytics/growth-scorecard/baselines/"
	badAnalyticsJWKSPath      = "/.well-known/clearance-reporting-jwks.json"
)

// badAnalyticsReportingSeed seeds the test reporting key.
const badAnalyticsReportingSeed = 100

// badAnalyticsArgs are the targets of the analytics routes' bad inputs.
type badAnalyticsArgs struct {
	org      org    // consented, classified prod/external, one decision in month
	month    string // its frozen blast-radius month
	frozen   string // the frozen report, as answered
	existing []string
}

// analyticsTargets gives the engine a reporting key, makes the analytics
// org with a decision in October 2026, consents and classifies it, freezes
// October's report and the baselines whose names the bad requests reuse.
func (s *badSuite) analyticsTargets() badAnalyticsArgs {
	t, x := s.t, s.x
	prev := x.tune
	x.tune = func(o *clearance.Options) {
		if prev != nil {
			prev(o)
		}
		o.ReportingKey = mustKey(t, badAnalyticsReportingSeed)
	}
	x.reopen(x.ring)

	now := x.now.Load()
	x.now.Store(time.Date(2026, 10, 15, 12, 0, 0, 0, time.UTC).UnixNano())
	o := x.createOrg("Analytics")
	x.req(t, "POST", pathEvaluate, o.Key, `{"amount":5}`, nil).want(t, http.StatusOK)
	// Four more consented prod/external orgs decide in October: a cohort
	// of fewer than five is never published.
	for i := range 4 {
		f := x.createOrg(fmt.Sprint("Analytics cohort ", i))
		x.req(t, "POST", pathEvaluate, f.Key, `{"amount":5}`, nil).want(t, http.StatusOK)
		x.req(t, "PUT", badAnalyticsConsentPath+f.ID, x.platform, `{"opted_in":true,"consent_reference":"contract-8"}`, nil).
			want(t, http.StatusOK)
		x.req(t, "PUT", badAnalyticsClassifyPath+f.ID, x.platform, `{"environment":"prod","audience":"external","surface":"crm"}`, nil).
			want(t, http.StatusOK)
	}
	x.now.Store(now)

	a := badAnalyticsArgs{org: o, month: "2026-10",
		// Names the path battery sends as bad segments that a baseline
		// may have: already frozen, they are 409 BASELINE_EXISTS.
		existing: []string{"existing", "not-a-uuid", unknownID}}
	x.req(t, "PUT", badAnalyticsConsentPath+o.ID, x.platform, `{"opted_in":true,"consent_reference":"contract-7 §4"}`, nil).
		want(t, http.StatusOK)
	x.req(t, "PUT", badAnalyticsClassifyPath+o.ID, x.platform, `{"environment":"prod","audience":"external","surface":"crm"}`, nil).
		want(t, http.StatusOK)
	a.frozen = string(x.req(t, "POST", badAnalyticsReportPath+a.month, x.platform, nil, nil).want(t, http.StatusCreated).Raw)
	for _, name := range a.existing {
		x.req(t, "POST", badAnalyticsBaselinePath+name, x.platform, nil, nil).want(t, http.StatusCreated)
	}
	return a
}

// analyticsSpecs are the bad-input specs of the analytics routes.
func (s *badSuite) analyticsSpecs() map[string]routeSpec {
	a := s.analyticsTargets()
	o := a.org
	const (
		invalidConsent = analytics.CodeInvalidConsent
		invalidClass   = analytics.CodeInvalidClassification
		missing        = "MISSING_FIELD"
	)
	// exact is a case with the status and code it must get.
	exact := func(q req, category, name, body string, status int, code ...string) badCase {
		c := s.variant(q, category, name, body, code...)
		c.status = status
		return c
	}
	// atPath is a case on q with path p (the body kept).
	atPath := func(q req, name, path string, status int, code ...string) badCase {
		p := q
		p.path = path
		return exact(p, catPath, name, p.body, status, code...)
	}
	// unknownOrgs are orgId values that name no org.
	unknownOrgs := func(q req, prefix string) []badCase {
		var out []badCase
		for _, v := range []struct{ name, seg string }{
			{"the platform's pseudo-org", "platform"}, {"a UUID of nothing", unknownID},
			{"uppercase", strings.ToUpper(o.ID)}, {"a trailing space", o.ID + "%20"},
			{"a zero-width space", o.ID + "%E2%80%8B"}, {"NUL", o.ID + "%00"}, {"truncated", o.ID[:35]},
			{"UUID with braces", "%7B" + o.ID + "%7D"}, {"urn", "urn:uuid:" + o.ID},
		} {
			out = append(out, atPath(q, "orgId "+v.name, prefix+v.seg, http.StatusNotFound, "ORG_NOT_FOUND"))
		}
		return out
	}

	// Consent.
	const consentBody = `{"opted_in":true,"consent_reference":"dpa-2026-11 signed by the customer"}`
	consent := routeSpec{params: map[string]string{"orgId": o.ID}, paramCodes: []string{"ORG_NOT_FOUND"},
		body: consentBody, idents: []string{`{"opted_in":true,"consent_reference":@@}`}}
	consent.extra = func(q req) []badCase {
		out := s.bodyCases(q, consent) // PUT: the suite sends bodies with POST only
		out = append(out, unknownOrgs(q, badAnalyticsConsentPath)...)
		for _, v := range []struct {
			name, body string
			status     int
			code       string
		}{
			{"no members", `{}`, 400, missing},
			{"opted_in only", `{"opted_in":true}`, 400, missing},
			{"consent_reference only", `{"consent_reference":"x"}`, 400, missing},
			{"opted_in null", `{"opted_in":null,"consent_reference":"x"}`, 400, missing},
			{"consent_reference null", `{"opted_in":false,"consent_reference":null}`, 400, missing},
			{"both null", `{"opted_in":null,"consent_reference":null}`, 400, missing},
			{"opted_in a string", `{"opted_in":"true","consent_reference":"x"}`, 400, "WRONG_TYPE"},
			{"opted_in a number", `{"opted_in":1,"consent_reference":"x"}`, 400, "WRONG_TYPE"},
			{"consent_reference a number", `{"opted_in":true,"consent_reference":7}`, 400, "WRONG_TYPE"},
			{"consent_reference an array", `{"opted_in":true,"consent_reference":["x"]}`, 400, "WRONG_TYPE"},
			{"empty consent_reference", `{"opted_in":true,"consent_reference":""}`, 400, invalidConsent},
			{"501-character consent_reference", `{"opted_in":true,"consent_reference":` + lit(strings.Repeat("r", 501)) + `}`, 400, invalidConsent},
			{"501 two-byte characters", `{"opted_in":true,"consent_reference":` + lit(strings.Repeat("é", 501)) + `}`, 400, invalidConsent},
			{"BEL in consent_reference", `{"opted_in":true,"consent_reference":"a\u0007b"}`, 400, invalidConsent},
			{"newline in consent_reference", `{"opted_in":true,"consent_reference":"a\nb"}`, 400, invalidConsent},
			{"tab in consent_reference", `{"opted_in":true,"consent_reference":"a\tb"}`, 400, invalidConsent},
			{"DEL in consent_reference", `{"opted_in":true,"consent_reference":"a\u007fb"}`, 400, invalidConsent},
			{"C1 in consent_reference", `{"opted_in":true,"consent_reference":"a\u0085b"}`, 400, invalidConsent},
			{"escape sequence in consent_reference", `{"opted_in":true,"consent_reference":"\u001b[2J"}`, 400, invalidConsent},
			{"NUL in consent_reference", `{"opted_in":true,"consent_reference":"a\u0000b"}`, 400, "JSON_NUL_CHARACTER"},
			{"an extra member", `{"opted_in":true,"consent_reference":"x","org_id":` + lit(o.ID) + `}`, 400, "UNKNOWN_MEMBER"},
			{"an extra member recorded_at", `{"opted_in":true,"consent_reference":"x","recorded_at":"2026-01-01T00:00:00Z"}`, 400, "UNKNOWN_MEMBER"},
			{"an extra member history", `{"opted_in":true,"consent_reference":"x","history":[]}`, 400, "UNKNOWN_MEMBER"},
			{"opted_in in another case", `{"Opted_In":true,"consent_reference":"x"}`, 400, "UNKNOWN_MEMBER"},
			{"opted_in twice", `{"opted_in":true,"opted_in":false,"consent_reference":"x"}`, 400, "DUPLICATE_MEMBER"},
		} {
			out = append(out, exact(q, catValue, v.name, v.body, v.status, v.code))
		}
		return out
	}

	// Classification.
	const classifyBody = `{"environment":"prod","audience":"external","surface":"crm","source_utm":{"source":"newsletter","medium":"email","campaign":"launch"}}`
	classBody := func(env, aud, surface, utm string) string {
		b := `{"environment":` + env + `,"audience":` + aud + `,"surface":` + surface
		if utm != "" {
			b += `,"source_utm":` + utm
		}
		return b + "}"
	}
	classify := routeSpec{params: map[string]string{"orgId": o.ID}, paramCodes: []string{"ORG_NOT_FOUND"}, body: classifyBody,
		idents: []string{classBody(`@@`, `"external"`, `"crm"`, ""), classBody(`"prod"`, `@@`, `"crm"`, ""),
			classBody(`"prod"`, `"external"`, `@@`, ""), classBody(`"prod"`, `"external"`, `"crm"`, `{"source":@@}`),
			classBody(`"prod"`, `"external"`, `"crm"`, `{"medium":@@}`), classBody(`"prod"`, `"external"`, `"crm"`, `{"campaign":@@}`)}}
	classify.extra = func(q req) []badCase {
		out := s.bodyCases(q, classify) // PUT: the suite sends bodies with POST only
		out = append(out, unknownOrgs(q, badAnalyticsClassifyPath)...)
		p, e, c := `"prod"`, `"external"`, `"crm"`
		for _, v := range []struct {
			name, body string
			code       string
		}{
			{"no members", `{}`, missing},
			{"no environment", `{"audience":"external","surface":"crm"}`, missing},
			{"no audience", `{"environment":"prod","surface":"crm"}`, missing},
			{"no surface", `{"environment":"prod","audience":"external"}`, missing},
			{"source_utm only", `{"source_utm":{"source":"x"}}`, missing},
			{"environment null", classBody(`null`, e, c, ""), missing},
			{"audience null", classBody(p, `null`, c, ""), missing},
			{"surface null", classBody(p, e, `null`, ""), missing},
			{"environment production", classBody(`"production"`, e, c, ""), invalidClass},
			{"environment PROD", classBody(`"PROD"`, e, c, ""), invalidClass},
			{"environment empty", classBody(`""`, e, c, ""), invalidClass},
			{"environment with a space", classBody(`"prod "`, e, c, ""), invalidClass},
			{"environment with a zero-width space", classBody(`"prod\u200b"`, e, c, ""), invalidClass},
			{"environment Cyrillic", classBody(`"pr\u043ed"`, e, c, ""), invalidClass},
			{"audience public", classBody(p, `"public"`, c, ""), invalidClass},
			{"audience External", classBody(p, `"External"`, c, ""), invalidClass},
			{"audience empty", classBody(p, `""`, c, ""), invalidClass},
			{"surface empty", classBody(p, e, `""`, ""), invalidClass},
			{"surface 81 characters", classBody(p, e, lit("c"+strings.Repeat("r", 80)), ""), invalidClass},
			{"surface uppercase", classBody(p, e, `"CRM"`, ""), invalidClass},
			{"surface capitalized", classBody(p, e, `"Crm"`, ""), invalidClass},
			{"surface starting with a digit", classBody(p, e, `"1crm"`, ""), invalidClass},
			{"surface starting with an underscore", classBody(p, e, `"_crm"`, ""), invalidClass},
			{"surface with a hyphen", classBody(p, e, `"crm-app"`, ""), invalidClass},
			{"surface with a dot", classBody(p, e, `"crm.app"`, ""), invalidClass},
			{"surface with a space", classBody(p, e, `"crm app"`, ""), invalidClass},
			{"surface with a trailing newline", classBody(p, e, `"crm\n"`, ""), invalidClass},
			{"surface with a tab", classBody(p, e, `"crm\t"`, ""), invalidClass},
			{"surface with a C1 control", classBody(p, e, `"crm\u0085"`, ""), invalidClass},
			{"surface with an accent", classBody(p, e, `"cr\u00e9"`, ""), invalidClass},
			{"surface a number", classBody(p, e, `5`, ""), "WRONG_TYPE"},
			{"environment a boolean", classBody(`true`, e, c, ""), "WRONG_TYPE"},
			{"audience an array", classBody(p, `["external"]`, c, ""), "WRONG_TYPE"},
			{"source_utm a string", classBody(p, e, c, `"newsletter"`), "WRONG_TYPE"},
			{"source_utm an array", classBody(p, e, c, `[]`), "WRONG_TYPE"},
			{"source_utm.source a number", classBody(p, e, c, `{"source":5}`), "WRONG_TYPE"},
			{"source_utm.medium an object", classBody(p, e, c, `{"medium":{}}`), "WRONG_TYPE"},
			{"source_utm.term", classBody(p, e, c, `{"source":"x","term":"y"}`), "UNKNOWN_MEMBER"},
			{"source_utm.content", classBody(p, e, c, `{"content":"y"}`), "UNKNOWN_MEMBER"},
			{"source_utm.Source", classBody(p, e, c, `{"Source":"y"}`), "UNKNOWN_MEMBER"},
			{"utm_source beside source_utm", `{"environment":"prod","audience":"external","surface":"crm","utm_source":"x"}`, "UNKNOWN_MEMBER"},
			{"an extra member reviewed", `{"environment":"prod","audience":"external","surface":"crm","reviewed":true}`, "UNKNOWN_MEMBER"},
			{"an extra member first_touch", `{"environment":"prod","audience":"external","surface":"crm","first_touch":{}}`, "UNKNOWN_MEMBER"},
			{"source_utm.source 121 characters", classBody(p, e, c, `{"source":`+lit(strings.Repeat("s", 121))+`}`), invalidClass},
			{"source_utm.medium 121 characters", classBody(p, e, c, `{"medium":`+lit(strings.Repeat("m", 121))+`}`), invalidClass},
			{"source_utm.campaign 121 two-byte characters", classBody(p, e, c, `{"campaign":`+lit(strings.Repeat("é", 121))+`}`), invalidClass},
			{"source_utm.source with BEL", classBody(p, e, c, `{"source":"a\u0007b"}`), invalidClass},
			{"source_utm.medium with a newline", classBody(p, e, c, `{"medium":"a\nb"}`), invalidClass},
			{"source_utm.campaign with C1", classBody(p, e, c, `{"campaign":"a\u009bb"}`), invalidClass},
			{"source_utm.campaign with DEL", classBody(p, e, c, `{"campaign":"a\u007f"}`), invalidClass},
			{"source_utm.source with NUL", classBody(p, e, c, `{"source":"a\u0000"}`), "JSON_NUL_CHARACTER"},
			{"source_utm.source twice", classBody(p, e, c, `{"source":"a","source":"b"}`), "DUPLICATE_MEMBER"},
		} {
			out = append(out, exact(q, catValue, v.name, v.body, http.StatusBadRequest, v.code))
		}
		for _, l := range lookAlikes {
			out = append(out, exact(q, catLookAlike, "surface "+shorten(l), classBody(p, e, l, ""), http.StatusBadRequest, invalidClass))
		}
		return out
	}

	// The blast-radius report: no body; the month in the path.
	report := routeSpec{params: map[string]string{"month": a.month}, body: `{}`, emptyOK: true,
		paramCodes: []string{analytics.CodeInvalidMonth, analytics.CodeMonthNotComplete},
		// After the battery and the accepted requests, the month still
		// answers the report frozen before it, byte for byte.
		late: func(t *testing.T) {
			r := s.x.req(t, "POST", badAnalyticsReportPath+a.month, s.x.platform, nil, nil).want(t, http.StatusOK)
			if string(r.Raw) != a.frozen {
				t.Errorf("the frozen report changed:\n%s\nwas\n%s", r.Raw, a.frozen)
			}
		}}
	report.extra = func(q req) []badCase {
		var out []badCase
		for _, v := range []struct{ name, seg string }{
			{"month 13", "2026-13"}, {"month 00", "2026-00"}, {"a 19xx year", "1999-01"}, {"a 21xx year", "2100-01"},
			{"a one-digit month", "2026-1"}, {"a two-digit year", "26-01"}, {"a day", "2026-01-01"},
			{"a timestamp", "2026-01-01T00:00:00Z"}, {"slash", "2026%2F01"}, {"no separator", "202601"},
			{"a leading space", "%202026-01"}, {"a trailing space", "2026-01%20"}, {"a trailing newline", "2026-01%0A"},
			{"a trailing NUL", "2026-01%00"}, {"fullwidth digits", "%EF%BC%92%EF%BC%90%EF%BC%92%EF%BC%96-01"},
			{"a zero-width space", "2026-01%E2%80%8B"}, {"a name", "october"}, {"a signed year", "+2026-01"},
			{"a five-digit year", "02026-01"}, {"an underscore", "2026_01"}, {"overlong", strings.Repeat("2", 300)},
		} {
			out = append(out, atPath(q, "month "+v.name, badAnalyticsReportPath+v.seg, http.StatusBadRequest, analytics.CodeInvalidMonth))
		}
		for _, v := range []struct{ name, month string }{
			{"the current month", "2026-11"}, {"next month", "2026-12"}, {"a far month", "2099-12"},
		} {
			out = append(out, atPath(q, "month "+v.name, badAnalyticsReportPath+v.month, http.StatusBadRequest, analytics.CodeMonthNotComplete))
		}
		for _, v := range []struct{ name, month string }{
			{"a completed month without a cohort", "2026-09"}, {"the first month", "2000-01"},
		} {
			out = append(out, atPath(q, "month "+v.name, badAnalyticsReportPath+v.month, http.StatusConflict, analytics.CodeInsufficientCohort))
		}
		for _, b := range []string{`{"month":"2026-10"}`, `{"force":true}`, `{"publish":true}`, `[]`, `null`, `"2026-10"`} {
			out = append(out, exact(q, catUnknown, "a body "+b, b, http.StatusBadRequest, "UNKNOWN_MEMBER", "WRONG_TYPE"))
		}
		// A body on a bad month: refused for either defect, never computed.
		p := q
		p.path = badAnalyticsReportPath + "2026-11"
		out = append(out, exact(p, catValue, "a body on the current month", `{"force":true}`, http.StatusBadRequest,
			"UNKNOWN_MEMBER", analytics.CodeMonthNotComplete))
		return out
	}

	// Baselines: no body; the name in the path.
	baseline := routeSpec{params: map[string]string{"name": "q4-2026_final"}, body: `{}`, emptyOK: true,
		paramCodes: []string{analytics.CodeInvalidBaselineName, analytics.CodeBaselineExists}}
	baseline.extra = func(q req) []badCase {
		var out []badCase
		for _, v := range []struct{ name, seg string }{
			{"with a space", "q4%202026"}, {"a leading space", "%20q4"}, {"a trailing space", "q4%20"},
			{"81 characters", strings.Repeat("b", 81)}, {"a dot", "q4.2026"}, {"a colon", "q4:2026"},
			{"an encoded slash", "q4%2F2026"}, {"a plus", "q4+2026"}, {"an accented letter", "caf%C3%A9"},
			{"a Greek letter", "%CE%B1lpha"}, {"a Cyrillic look-alike", "%D0%B0bc"}, {"fullwidth letters", "%EF%BD%91%EF%BC%94"},
			{"a zero-width space", "q4%E2%80%8B"}, {"a bidi override", "%E2%80%AEq4"}, {"a no-break space", "q4%C2%A0"},
			{"NUL", "q4%00"}, {"a newline", "q4%0A"}, {"a tab", "q4%09"}, {"C1", "q4%C2%85"}, {"a tilde", "q4~"},
			{"a quote", "q4%22"}, {"an apostrophe", "q4'"}, {"a percent", "q4%25"}, {"an asterisk", "q4*"},
		} {
			out = append(out, atPath(q, "name "+v.name, badAnalyticsBaselinePath+v.seg, http.StatusBadRequest, analytics.CodeInvalidBaselineName))
		}
		for _, name := range a.existing {
			out = append(out, atPath(q, "name already frozen: "+name, badAnalyticsBaselinePath+url.PathEscape(name), http.StatusConflict,
				analytics.CodeBaselineExists))
		}
		out = append(out, atPath(q, "name empty", badAnalyticsBaselinePath, http.StatusNotFound, "ROUTE_NOT_FOUND"))
		for _, b := range []string{`{"name":"q4"}`, `{"scorecard":{}}`, `{"created_at":"2026-01-01T00:00:00Z"}`, `[]`, `null`, `"q4"`} {
			out = append(out, exact(q, catUnknown, "a body "+b, b, http.StatusBadRequest, "UNKNOWN_MEMBER", "WRONG_TYPE"))
		}
		// A body on an existing name: refused, and the baseline unchanged.
		p := q
		p.path = badAnalyticsBaselinePath + "existing"
		out = append(out, exact(p, catValue, "a body on an existing name", `{"name":"existing"}`, 0,
			"UNKNOWN_MEMBER", analytics.CodeBaselineExists))
		return out
	}

	return map[string]routeSpec{
		"PUT /v1/analytics/growth-reports/consent/{orgId}":       consent,
		"POST /v1/analytics/growth-reports/blast-radius/{month}": report,
		"GET /v1/analytics/growth-scorecard":                     {},
		"PUT /v1/analytics/growth-scorecard/orgs/{orgId}":        classify,
		"POST /v1/analytics/growth-scorecard/baselines/{name}":   baseline,
		"GET /.well-known/clearance-reporting-jwks.json":         {},
	}
}

// TestBadInputAnalyticsExactAnswers pins the answers of the analytics
// routes to what the battery checks as "a 4xx with a stable code", with a
// server that has a reporting key and one that has none: statuses, codes,
// the member errors[] names, and that no refused request changes the store.
func TestBadInputAnalyticsExactAnswers(t *testing.T) {
	t.Parallel()
	x := newExecEnvWith(t, "", func(x *execEnv) {
		x.tune = func(o *clearance.Options) { o.ReportingKey = mustKey(t, badAnalyticsReportingSeed) }
	})
	bare := newExecEnv(t, "") // no reporting key
	o := x.o
	orgKey := o.Key
	for _, e := range []*execEnv{x, bare} {
		e.req(t, "PUT", badAnalyticsConsentPath+e.o.ID, e.platform, `{"opted_in":true,"consent_reference":"ref-1"}`, nil).
			want(t, http.StatusOK)
		e.req(t, "PUT", badAnalyticsClassifyPath+e.o.ID, e.platform, `{"environment":"prod","audience":"external","surface":"crm"}`, nil).
			want(t, http.StatusOK)
		e.req(t, "POST", badAnalyticsBaselinePath+"taken", e.platform, nil, nil).want(t, http.StatusCreated)
		// The scorecard catches the reviewed org's rollup up to its ledger
		// head: a report's computation then finds nothing to count.
		e.req(t, "GET", badAnalyticsScorecardPath, e.platform, nil, nil).want(t, http.StatusOK)
	}

	type exactCase struct {
		name, method, path, key, body string
		status                        int
		code, field                   string
	}
	run := func(e *execEnv, cases []exactCase) {
		t.Helper()
		s := &badSuite{t: t, x: e}
		before := e.fingerprint(t)
		for _, c := range cases {
			r := s.send(t, badCase{category: "exact answer", name: c.name, method: c.method, path: c.path, key: c.key,
				body: c.body, hasBody: c.body != ""})
			if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); r.Status != c.status || r.str("code") != c.code ||
				mt != "application/problem+json" {
				t.Errorf("%s: want %d %s as a problem: %s", c.name, c.status, c.code, r)
				continue
			}
			if c.field != "" && r.str("errors.0.field") != c.field {
				t.Errorf("%s: want errors[0].field %q: %s", c.name, c.field, r)
			}
		}
		if after := e.fingerprint(t); after != before {
			t.Errorf("the refused requests changed the store: %s -> %s", before, after)
		}
	}
	plat := x.platform
	consent := badAnalyticsConsentPath + o.ID
	classify := badAnalyticsClassifyPath + o.ID
	cb := func(members string) string {
		return `{"environment":"prod","audience":"external","surface":"crm"` + members + `}`
	}
	run(x, []exactCase{
		{"consent without a key", "PUT", consent, "", `{"opted_in":true,"consent_reference":"r"}`, 401, "UNAUTHENTICATED", ""},
		{"consent with an org key", "PUT", consent, orgKey, `{"opted_in":true,"consent_reference":"r"}`, 403, "PLATFORM_KEY_REQUIRED", ""},
		{"consent of an unknown org", "PUT", badAnalyticsConsentPath + unknownID, plat, `{"opted_in":true,"consent_reference":"r"}`, 404, "ORG_NOT_FOUND", ""},
		{"consent of a non-UUID org", "PUT", badAnalyticsConsentPath + "acme", plat, `{"opted_in":true,"consent_reference":"r"}`, 404, "ORG_NOT_FOUND", ""},
		{"consent of an unknown org, bad body", "PUT", badAnalyticsConsentPath + unknownID, plat, `{"x":1}`, 404, "ORG_NOT_FOUND", ""},
		{"consent without opted_in", "PUT", consent, plat, `{"consent_reference":"r"}`, 400, "MISSING_FIELD", "opted_in"},
		{"consent without consent_reference", "PUT", consent, plat, `{"opted_in":false}`, 400, "MISSING_FIELD", "consent_reference"},
		{"consent_reference empty", "PUT", consent, plat, `{"opted_in":true,"consent_reference":""}`, 400, "INVALID_CONSENT", "consent_reference"},
		{"consent_reference 501 characters", "PUT", consent, plat, `{"opted_in":true,"consent_reference":` + lit(strings.Repeat("r", 501)) + `}`, 400, "INVALID_CONSENT", "consent_reference"},
		{"consent_reference with a newline", "PUT", consent, plat, `{"opted_in":true,"consent_reference":"a\nb"}`, 400, "INVALID_CONSENT", "consent_reference"},
		{"consent_reference with C1", "PUT", consent, plat, `{"opted_in":true,"consent_reference":"a\u0085b"}`, 400, "INVALID_CONSENT", "consent_reference"},
		{"consent missing one, invalid other", "PUT", consent, plat, `{"consent_reference":""}`, 400, "INVALID_CONSENT", ""},
		{"consent with an extra member", "PUT", consent, plat, `{"opted_in":true,"consent_reference":"r","note":"x"}`, 400, "UNKNOWN_MEMBER", ""},
		{"consent opted_in a string", "PUT", consent, plat, `{"opted_in":"yes","consent_reference":"r"}`, 400, "WRONG_TYPE", ""},
		{"consent with an empty body", "PUT", consent, plat, "", 400, "EMPTY_BODY", ""},

		{"classify with an org key", "PUT", classify, orgKey, cb(""), 403, "PLATFORM_KEY_REQUIRED", ""},
		{"classify an unknown org", "PUT", badAnalyticsClassifyPath + unknownID, plat, cb(""), 404, "ORG_NOT_FOUND", ""},
		{"classify without surface", "PUT", classify, plat, `{"environment":"prod","audience":"external"}`, 400, "MISSING_FIELD", "surface"},
		{"classify environment live", "PUT", classify, plat, `{"environment":"live","audience":"external","surface":"crm"}`, 400, "INVALID_CLASSIFICATION", "environment"},
		{"classify audience partner", "PUT", classify, plat, `{"environment":"prod","audience":"partner","surface":"crm"}`, 400, "INVALID_CLASSIFICATION", "audience"},
		{"classify surface 81 characters", "PUT", classify, plat, `{"environment":"prod","audience":"external","surface":` + lit("c"+strings.Repeat("r", 80)) + `}`, 400, "INVALID_CLASSIFICATION", "surface"},
		{"classify surface uppercase", "PUT", classify, plat, `{"environment":"prod","audience":"external","surface":"CRM"}`, 400, "INVALID_CLASSIFICATION", "surface"},
		{"classify utm source 121 characters", "PUT", classify, plat, cb(`,"source_utm":{"source":` + lit(strings.Repeat("s", 121)) + `}`), 400, "INVALID_CLASSIFICATION", "source_utm.source"},
		{"classify utm campaign with a tab", "PUT", classify, plat, cb(`,"source_utm":{"campaign":"a\tb"}`), 400, "INVALID_CLASSIFICATION", "source_utm.campaign"},
		{"classify utm with an unknown member", "PUT", classify, plat, cb(`,"source_utm":{"term":"x"}`), 400, "UNKNOWN_MEMBER", ""},
		{"classify with an extra member", "PUT", classify, plat, cb(`,"reviewed":true`), 400, "UNKNOWN_MEMBER", ""},

		{"scorecard with an org key", "GET", badAnalyticsScorecardPath, orgKey, "", 403, "PLATFORM_KEY_REQUIRED", ""},
		{"scorecard without a key", "GET", badAnalyticsScorecardPath, "", "", 401, "UNAUTHENTICATED", ""},

		{"baseline with an org key", "POST", badAnalyticsBaselinePath + "q4", orgKey, "", 403, "PLATFORM_KEY_REQUIRED", ""},
		{"baseline without a key", "POST", badAnalyticsBaselinePath + "q4", "", "", 401, "UNAUTHENTICATED", ""},
		{"baseline name with a space", "POST", badAnalyticsBaselinePath + "q4%202026", plat, "", 400, "INVALID_BASELINE_NAME", "name"},
		{"baseline name 81 characters", "POST", badAnalyticsBaselinePath + strings.Repeat("b", 81), plat, "", 400, "INVALID_BASELINE_NAME", "name"},
		{"baseline name unicode", "POST", badAnalyticsBaselinePath + "caf%C3%A9", plat, "", 400, "INVALID_BASELINE_NAME", "name"},
		{"baseline taken", "POST", badAnalyticsBaselinePath + "taken", plat, "", 409, "BASELINE_EXISTS", ""},
		{"baseline with a member", "POST", badAnalyticsBaselinePath + "q4", plat, `{"name":"q4"}`, 400, "UNKNOWN_MEMBER", ""},
		{"baseline with a malformed body", "POST", badAnalyticsBaselinePath + "q4", plat, `{`, 400, "MALFORMED_JSON", ""},

		{"report with an org key", "POST", badAnalyticsReportPath + "2026-10", orgKey, "", 403, "PLATFORM_KEY_REQUIRED", ""},
		{"report without a key", "POST", badAnalyticsReportPath + "2026-10", "", "", 401, "UNAUTHENTICATED", ""},
		{"report month 13", "POST", badAnalyticsReportPath + "2026-13", plat, "", 400, "INVALID_MONTH", "month"},
		{"report month 1999", "POST", badAnalyticsReportPath + "1999-01", plat, "", 400, "INVALID_MONTH", "month"},
		{"report month one digit", "POST", badAnalyticsReportPath + "2026-1", plat, "", 400, "INVALID_MONTH", "month"},
		{"report month two-digit year", "POST", badAnalyticsReportPath + "26-01", plat, "", 400, "INVALID_MONTH", "month"},
		{"report month with a day", "POST", badAnalyticsReportPath + "2026-01-01", plat, "", 400, "INVALID_MONTH", "month"},
		{"report current month", "POST", badAnalyticsReportPath + "2026-11", plat, "", 400, "MONTH_NOT_COMPLETE", "month"},
		{"report future month", "POST", badAnalyticsReportPath + "2027-01", plat, "", 400, "MONTH_NOT_COMPLETE", "month"},
		{"report month without a cohort", "POST", badAnalyticsReportPath + "2026-10", plat, "", 409, "INSUFFICIENT_COHORT", ""},
		{"report with a member", "POST", badAnalyticsReportPath + "2026-10", plat, `{"force":true}`, 400, "UNKNOWN_MEMBER", ""},
	})

	// Without a reporting key: the JWKS is 404, a report not frozen yet 503,
	// and a bad month is still 400 first.
	run(bare, []exactCase{
		{"reporting JWKS without a key", "GET", badAnalyticsJWKSPath, "", "", 404, "REPORTING_KEY_NOT_CONFIGURED", ""},
		{"report without a reporting key", "POST", badAnalyticsReportPath + "2026-10", bare.platform, "", 503, "REPORTING_KEY_NOT_CONFIGURED", ""},
		{"bad month without a reporting key", "POST", badAnalyticsReportPath + "2026-13", bare.platform, "", 400, "INVALID_MONTH", "month"},
		{"current month without a reporting key", "POST", badAnalyticsReportPath + "2026-11", bare.platform, "", 400, "MONTH_NOT_COMPLETE", "month"},
	})

	// With a key the JWKS is the reporting key's public half only.
	r := x.req(t, "GET", badAnalyticsJWKSPath, "", nil, nil).want(t, http.StatusOK)
	if ct := r.Header.Get("Content-Type"); ct != "application/jwk-set+json" {
		t.Errorf("reporting JWKS Content-Type %q", ct)
	}
	want := mustKey(t, badAnalyticsReportingSeed)
	if got := r.str("keys.0.kid"); got != want.KID() || r.str("keys.0.d") != "" || len(lookup(r.JSON, "keys").([]any)) != 1 {
		t.Errorf("reporting JWKS: want the one public key %s: %s", want.KID(), r)
	}
}
