package server_test

// End-to-end tests of the platform operator's analytics routes (consent,
// classification, the growth scorecard, baselines and signed blast-radius
// reports) over HTTP, on Pebble or PostgreSQL (CLEARANCE_E2E_STORE). Every
// expectation is computed from what the test itself sent, never from the
// server's answers. The bad-input suite of these routes lives elsewhere.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/server"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
)

// Analytics routes.
const (
	anConsentPath   = "/v1/analytics/growth-reports/consent/"
	anReportPath    = "/v1/analytics/growth-reports/blast-radius/"
	anScorecardPath = "/v1/analytics/growth-scorecard"
	anClassifyPath  = "/v1/analytics/growth-scorecard/orgs/"
	anBaselinePath  = "/v1/analytics/growth-scorecard/baselines/"
	anJWKSPath      = "/.well-known/clearance-reporting-jwks.json"
)

// What a growth report's JWS must say (written out here, not taken from the
// product's constants).
const (
	anTyp = "clearance-growth-report+jwt"
	anAud = "clearance-growth-reports"
	// anMinOrgs is the publication threshold of a cell.
	anMinOrgs = 5
)

const (
	anEnforcement = "ENFORCEMENT"
	anShadow      = "SHADOW"
	anAllow       = "ALLOW"
	anEscalate    = "ESCALATE"
	anReview      = "REVIEW_REQUIRED"
	anBlock       = "BLOCK"
)

var (
	anModes    = []string{anEnforcement, anShadow}
	anOutcomes = []string{anAllow, anEscalate, anReview, anBlock}
)

// anBundle is the ENFORCEMENT bundle of the orgs that enforce: workflow
// "review" is REVIEW_REQUIRED, 10,000 and up BLOCK, 1,000 and up ESCALATE,
// anything else ALLOW. A request may still ask for SHADOW.
const anBundle = `{"bundle_id":"growth","version":"g1","mode":"ENFORCEMENT","rules":[
 {"id":"review","match":[{"field":"workflow_key","op":"eq","value":"review"}],"outcome":"REVIEW_REQUIRED","reason_codes":["REVIEW"]},
 {"id":"big","match":[{"field":"amount","op":"ge","value":10000}],"outcome":"BLOCK","reason_codes":["BIG"]},
 {"id":"mid","match":[{"field":"amount","op":"ge","value":1000}],"outcome":"ESCALATE","reason_codes":["MID"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`

// anEnv is an env whose engine and store run on a clock the test moves,
// with a reporting key, and which remembers every decision it made.
type anEnv struct {
	*env
	now  *atomic.Int64 // unix nanos
	key  grant.Key
	sent []anSent // every decision made through decide, in order
	jwks *jose.JSONWebKeySet
}

// anSent is one decision the test made.
type anSent struct {
	org, month, mode, outcome string
}

// anOrg is an org with what the test sent about it.
type anOrg struct {
	org
	name      string
	consent   []bool      // every consent recorded, in order
	classes   [][2]string // every (environment, audience) recorded, in order
	surface   string      // of the first classification
	utmSource string      // of the first classification ("": none sent)
	enforcing bool        // anBundle is active
}

// eligible: consented now, and classified prod/external now.
func (o *anOrg) eligible() bool {
	return len(o.consent) > 0 && o.consent[len(o.consent)-1] &&
		len(o.classes) > 0 && o.classes[len(o.classes)-1] == [2]string{"prod", "external"}
}

func anReportingKey(t testing.TB, b byte) grant.Key {
	t.Helper()
	k, err := grant.KeyFromSeed(bytes.Repeat([]byte{b}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// newAnalyticsEnv starts a server over a fresh store whose engine and store
// read the test's clock, set to start, and sign reports with key (the zero
// Key: none).
func newAnalyticsEnv(t testing.TB, start time.Time, key grant.Key) *anEnv {
	t.Helper()
	x := &anEnv{now: &atomic.Int64{}, key: key}
	x.now.Store(start.UnixNano())
	x.env = &env{t: t, dbDir: filepath.Join(t.TempDir(), "db"), opts: server.Options{AuthRateLimit: -1},
		engineOpts: clearance.Options{Now: x.clock, ReportingKey: key}}
	x.open()
	t.Cleanup(x.stop)
	secret, err := x.engine.Admin.NewPlatformSecret()
	if err != nil {
		t.Fatal(err)
	}
	if err := x.engine.Admin.EnsurePlatformKey(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	x.platform = secret
	return x
}

// open is env.start with the test's clock for the store as well.
func (x *anEnv) open() {
	x.t.Helper()
	st := openBackend(x.t, x.dbDir, x.clock)
	eng, err := clearance.Open(st, x.engineOpts)
	if err != nil {
		st.Close()
		x.t.Fatalf("open engine: %v", err)
	}
	x.store, x.engine = st, eng
	x.server = server.New(eng, x.opts)
	x.srv = httptest.NewServer(x.server)
	x.client = x.srv.Client()
}

// restart stops the server and serves the same data again with key as the
// reporting key.
func (x *anEnv) restart(key grant.Key) {
	x.t.Helper()
	x.stop()
	x.key, x.engineOpts.ReportingKey = key, key
	x.jwks = nil
	x.open()
}

// peer starts a second server on the same data: on PostgreSQL its own
// store on the same schema, on Pebble (which one process cannot open twice)
// a second engine over the same store.
func (x *anEnv) peer() *env {
	x.t.Helper()
	p := &env{t: x.t, dbDir: x.dbDir, opts: x.opts, platform: x.platform, engineOpts: x.engineOpts}
	st := x.store
	if onPostgres(x.t) {
		st = openBackend(x.t, x.dbDir, x.clock)
		p.store = st // closed by p.stop
	}
	eng, err := clearance.Open(st, x.engineOpts)
	if err != nil {
		x.t.Fatalf("open a second engine: %v", err)
	}
	p.engine = eng
	p.server = server.New(eng, x.opts)
	p.srv = httptest.NewServer(p.server)
	p.client = p.srv.Client()
	x.t.Cleanup(p.stop) // before x's: cleanups run last first
	return p
}

func (x *anEnv) clock() time.Time { return time.Unix(0, x.now.Load()).UTC() }

func (x *anEnv) set(t time.Time) { x.now.Store(t.UnixNano()) }

func (x *anEnv) advance(d time.Duration) { x.now.Add(int64(d)) }

// newOrg creates an org (at the clock's time) and, when enforcing,
// publishes and activates anBundle for it.
func (x *anEnv) newOrg(name string, enforcing bool) *anOrg {
	x.t.Helper()
	o := &anOrg{org: x.createOrg(name), name: name, enforcing: enforcing}
	if enforcing {
		r := x.publish(o.Key, anBundle).want(x.t, http.StatusCreated)
		if lookup(r.JSON, "active") != true {
			x.t.Fatalf("the ENFORCEMENT bundle is not active: %s", r)
		}
	}
	return o
}

// fillers creates n consented prod/external orgs, so that a month in which
// they decide has a cohort big enough to be published (a cohort under
// anMinOrgs is 409 INSUFFICIENT_COHORT).
func (x *anEnv) fillers(prefix string, n int) []*anOrg {
	x.t.Helper()
	var out []*anOrg
	for i := range n {
		o := x.newOrg(fmt.Sprintf("%s-filler-%d", prefix, i), false)
		x.setConsent(o, true)
		x.classify(o, "prod", "external")
		out = append(out, o)
	}
	return out
}

// decideAll makes each org decide once in SHADOW/ALLOW.
func (x *anEnv) decideAll(orgs []*anOrg, rng *rand.Rand) {
	x.t.Helper()
	for _, o := range orgs {
		x.decide(o, anShadow, anAllow, rng)
	}
}

func anIDs(orgs ...*anOrg) map[string]bool {
	out := map[string]bool{}
	for _, o := range orgs {
		out[o.ID] = true
	}
	return out
}

// setConsent records o's consent and checks the answer: o's own, with o's
// whole history and nobody else's.
func (x *anEnv) setConsent(o *anOrg, optedIn bool) *result {
	x.t.Helper()
	ref := fmt.Sprintf("contract-%s-%d", o.name, len(o.consent))
	r := x.do("PUT", anConsentPath+o.ID, x.platform, map[string]any{"opted_in": optedIn, "consent_reference": ref}, nil).
		want(x.t, http.StatusOK)
	o.consent = append(o.consent, optedIn)
	hist, _ := lookup(r.JSON, "history").([]any)
	if r.str("org_id") != o.ID || lookup(r.JSON, "opted_in") != optedIn || r.str("consent_reference") != ref ||
		len(hist) != len(o.consent) {
		x.t.Fatalf("consent of %s: %s", o.name, r)
	}
	for i, want := range o.consent {
		h, _ := hist[i].(map[string]any)
		if h["opted_in"] != want || h["consent_reference"] != fmt.Sprintf("contract-%s-%d", o.name, i) {
			x.t.Fatalf("consent history of %s, entry %d: %s", o.name, i, r)
		}
	}
	return r
}

// classify records o's classification with a surface and utm source of its
// own, and checks that the first one sent is the one that stays.
func (x *anEnv) classify(o *anOrg, environment, audience string) *result {
	x.t.Helper()
	n := len(o.classes)
	body := map[string]any{"environment": environment, "audience": audience,
		"surface": fmt.Sprintf("surface_%s_%d", strings.ReplaceAll(o.name, "-", "_"), n)}
	if n%2 == 0 {
		body["source_utm"] = map[string]string{"source": fmt.Sprintf("src-%s-%d", o.name, n), "campaign": "growth"}
	}
	r := x.do("PUT", anClassifyPath+o.ID, x.platform, body, nil).want(x.t, http.StatusOK)
	if n == 0 {
		o.surface = body["surface"].(string)
		if _, ok := body["source_utm"]; ok {
			o.utmSource = fmt.Sprintf("src-%s-%d", o.name, n)
		}
	}
	o.classes = append(o.classes, [2]string{environment, audience})
	reviewed := environment == "prod" && audience == "external"
	utm := lookup(r.JSON, "first_touch.source_utm")
	if r.str("org_id") != o.ID || r.str("environment") != environment || r.str("audience") != audience ||
		lookup(r.JSON, "reviewed") != reviewed || r.str("surface") != o.surface || r.str("first_touch.surface") != o.surface ||
		(o.utmSource == "" && utm != nil) || (o.utmSource != "" && r.str("first_touch.source_utm.source") != o.utmSource) {
		x.t.Fatalf("classification %d of %s (first surface %s, utm %q): %s", n, o.name, o.surface, o.utmSource, r)
	}
	return r
}

// decide makes one decision of o meant to land in (mode, outcome), checks
// that it did, and remembers it.
func (x *anEnv) decide(o *anOrg, mode, outcome string, rng *rand.Rand) {
	x.t.Helper()
	b := map[string]any{"decision_type": "PAYMENT", "workflow_key": "ap"}
	switch outcome {
	case anAllow:
		b["amount"] = 1 + rng.Intn(998)
	case anEscalate:
		if o.enforcing || rng.Intn(3) > 0 {
			b["amount"] = 1000 + rng.Intn(8999)
		} // else no amount: the starter policy escalates
	case anBlock:
		b["amount"] = 10000 + rng.Intn(90000)
	case anReview:
		b["workflow_key"], b["amount"] = "review", 5
	}
	switch {
	case o.enforcing:
		b["mode"] = mode
	case rng.Intn(2) == 0:
		b["mode"] = anEnforcement // the starter policy is SHADOW whatever is asked
	}
	r := x.env.decide(o.Key, mustJSON(x.t, b))
	if r.str("outcome") != outcome || r.str("mode") != mode {
		x.t.Fatalf("%s meant %s/%s: %s", o.name, mode, outcome, r)
	}
	x.sent = append(x.sent, anSent{org: o.ID, month: x.clock().Format("2006-01"), mode: mode, outcome: outcome})
}

// anCell is what a report cell should count.
type anCell struct {
	orgs      int
	decisions int64
}

func (c anCell) published() bool { return c.orgs >= anMinOrgs }

// expect computes the cells of month from the decisions sent, counting the
// orgs eligible says are.
func (x *anEnv) expect(month string, eligible func(orgID string) bool) map[string]anCell {
	orgs := map[string]map[string]bool{}
	out := map[string]anCell{}
	for _, s := range x.sent {
		if s.month != month || !eligible(s.org) {
			continue
		}
		k := s.mode + "/" + s.outcome
		if orgs[k] == nil {
			orgs[k] = map[string]bool{}
		}
		orgs[k][s.org] = true
		c := out[k]
		c.decisions++
		c.orgs = len(orgs[k])
		out[k] = c
	}
	return out
}

// freeze asks server e for month's report.
func anFreeze(e *env, month string) *result {
	e.t.Helper()
	return e.do("POST", anReportPath+month, e.platform, nil, nil)
}

// reportingKeys fetches the public reporting JWKS, unauthenticated.
func (x *anEnv) reportingKeys() *jose.JSONWebKeySet {
	x.t.Helper()
	if x.jwks != nil {
		return x.jwks
	}
	r := x.do("GET", anJWKSPath, "", nil, nil).want(x.t, http.StatusOK)
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/jwk-set+json") {
		x.t.Fatalf("JWKS Content-Type %q", ct)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(r.Raw, &set); err != nil {
		x.t.Fatalf("JWKS: %v: %s", err, r)
	}
	if len(set.Keys) != 1 || !set.Keys[0].IsPublic() || !set.Keys[0].Valid() {
		x.t.Fatalf("the reporting JWKS must hold exactly one public key: %s", r)
	}
	if strings.Contains(string(r.Raw), `"d"`) {
		x.t.Fatalf("the reporting JWKS carries private key material: %s", r)
	}
	x.jwks = &set
	return x.jwks
}

// anReport is a verified blast-radius answer.
type anReport struct {
	answer  map[string]any
	payload []byte
	claims  map[string]any
	cells   map[string]map[string]any // by MODE/OUTCOME
}

// verifyReport checks a blast-radius answer of month: its artifact verified
// with go-jose against the published reporting JWKS, header and claims, the
// payload equal to the answer's report member, the cells equal to want, and
// no number in the whole answer beyond the published cells' own.
func (x *anEnv) verifyReport(r *result, month string, want map[string]anCell) anReport {
	x.t.Helper()
	t := x.t
	if r.JSON == nil {
		t.Fatalf("report of %s is not a JSON object: %s", month, r)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("report Content-Type %q", ct)
	}
	rep := anReport{answer: r.JSON}
	if got := anMembers(r.JSON); !slices.Equal(got, []string{"artifact", "kid", "month", "report"}) {
		t.Fatalf("report answer members %v: %s", got, r)
	}
	if r.str("month") != month {
		t.Fatalf("report month: %s", r)
	}

	// The artifact, verified by go-jose with the key the JWKS publishes.
	set := x.reportingKeys()
	jwk := set.Keys[0]
	sig, err := jose.ParseSigned(r.str("artifact"), []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		t.Fatalf("parse the artifact: %v", err)
	}
	if len(sig.Signatures) != 1 {
		t.Fatalf("%d signatures", len(sig.Signatures))
	}
	h := sig.Signatures[0].Protected
	if h.Algorithm != string(jose.EdDSA) || h.ExtraHeaders[jose.HeaderType] != anTyp || h.KeyID == "" ||
		h.KeyID != r.str("kid") || h.KeyID != jwk.KeyID {
		t.Fatalf("artifact header alg %q typ %v kid %q; answer kid %q, JWKS kid %q", h.Algorithm,
			h.ExtraHeaders[jose.HeaderType], h.KeyID, r.str("kid"), jwk.KeyID)
	}
	pub, ok := jwk.Key.(ed25519.PublicKey)
	if !ok {
		t.Fatalf("the reporting JWK is %T, not an Ed25519 public key", jwk.Key)
	}
	if !pub.Equal(x.key.Public()) {
		t.Fatal("the JWKS does not publish the configured reporting key")
	}
	payload, err := sig.Verify(pub)
	if err != nil {
		t.Fatalf("verify the artifact: %v", err)
	}
	rep.payload = payload
	// A changed payload does not verify.
	parts := strings.Split(r.str("artifact"), ".")
	forged := bytes.Replace(payload, []byte(`"published":true`), []byte(`"published":false`), 1)
	forged = bytes.Replace(forged, []byte(`"status":"`), []byte(`"status":"X`), 1)
	fs, err := jose.ParseSigned(parts[0]+"."+base64.RawURLEncoding.EncodeToString(forged)+"."+parts[2], []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		t.Fatalf("parse the forged artifact: %v", err)
	}
	if _, err := fs.Verify(pub); err == nil {
		t.Fatal("a forged report payload verifies")
	}

	// The payload: canonical JSON, equal to the answer's report member.
	if err := json.Unmarshal(payload, &rep.claims); err != nil {
		t.Fatalf("payload: %v", err)
	}
	if !reflect.DeepEqual(rep.claims, r.JSON["report"]) {
		t.Fatalf("the signed payload differs from the answer's report:\n%s\n%s", payload, mustJSON(t, r.JSON["report"]))
	}
	var canon bytes.Buffer
	enc := json.NewEncoder(&canon)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rep.claims); err != nil || !bytes.Equal(bytes.TrimSuffix(canon.Bytes(), []byte("\n")), payload) {
		t.Fatalf("the payload is not canonical JSON: %s", payload)
	}
	start, _ := time.Parse("2006-01", month)
	frozen, err := time.Parse(time.RFC3339Nano, anStr(rep.claims["frozen_at"]))
	if err != nil {
		t.Fatalf("frozen_at: %s", payload)
	}
	iat, _ := rep.claims["iat"].(float64)
	if rep.claims["aud"] != anAud || rep.claims["month"] != month || rep.claims["report"] != "blast_radius" ||
		rep.claims["status"] != "PENDING_EDITORIAL_REVIEW" || rep.claims["cross_cell_totals"] != "SUPPRESSED" ||
		rep.claims["min_orgs_per_cell"] != float64(anMinOrgs) || anStr(rep.claims["iss"]) == "" || anStr(rep.claims["report_id"]) == "" ||
		rep.claims["period_start"] != start.Format(time.RFC3339) || rep.claims["period_end"] != start.AddDate(0, 1, 0).Format(time.RFC3339) ||
		int64(iat) != frozen.Unix() || frozen.Before(start.AddDate(0, 1, 0)) || anStr(rep.claims["population"]) == "" {
		t.Fatalf("report claims of %s: %s", month, payload)
	}

	// The cells: exactly mode × outcome, each as computed.
	list, _ := rep.claims["cells"].([]any)
	rep.cells = map[string]map[string]any{}
	for _, v := range list {
		c, _ := v.(map[string]any)
		k := anStr(c["mode"]) + "/" + anStr(c["outcome"])
		if _, dup := rep.cells[k]; dup {
			t.Fatalf("cell %s twice: %s", k, payload)
		}
		rep.cells[k] = c
	}
	if len(list) != len(anModes)*len(anOutcomes) || len(rep.cells) != len(list) {
		t.Fatalf("want %d cells: %s", len(anModes)*len(anOutcomes), payload)
	}
	for _, m := range anModes {
		for _, o := range anOutcomes {
			k := m + "/" + o
			c, ok := rep.cells[k]
			if !ok {
				t.Fatalf("no cell %s: %s", k, payload)
			}
			w := want[k]
			got := fmt.Sprintf("published=%v members=%v", c["published"], anMembers(c))
			exp := "published=false members=[mode outcome published]"
			if w.published() {
				got += fmt.Sprintf(" organizations=%v decisions=%v", c["organizations"], c["decisions"])
				exp = fmt.Sprintf("published=true members=[decisions mode organizations outcome published] organizations=%d decisions=%d", w.orgs, w.decisions)
			}
			if got != exp {
				t.Errorf("%s cell %s (%d orgs, %d decisions sent): got %s, want %s", month, k, w.orgs, w.decisions, got, exp)
			}
		}
	}
	if t.Failed() {
		t.Fatalf("report of %s: %s", month, payload)
	}
	anNoCrossCellNumbers(t, rep.claims)
	anNoCrossCellNumbers(t, r.JSON["report"].(map[string]any))
	// The answer around the report holds no number of its own either.
	for _, k := range []string{"artifact", "kid", "month"} {
		if _, ok := r.JSON[k].(string); !ok {
			t.Fatalf("answer member %s is not a string: %s", k, r)
		}
	}
	return rep
}

func anStr(v any) string { s, _ := v.(string); return s }

// anMembers is the sorted member names of an object.
func anMembers(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// anNoCrossCellNumbers walks a whole report payload and fails unless its
// only numbers are iat, min_orgs_per_cell and the organizations and
// decisions of published cells, its members are the documented ones, and
// no string carries a bare number: nothing from which a suppressed cell
// could be computed by subtraction.
func anNoCrossCellNumbers(t testing.TB, rep map[string]any) {
	t.Helper()
	wantTop := []string{"aud", "cells", "cross_cell_totals", "frozen_at", "iat", "iss", "min_orgs_per_cell", "month",
		"period_end", "period_start", "population", "report", "report_id", "status"}
	if got := anMembers(rep); !slices.Equal(got, wantTop) {
		t.Fatalf("report members %v, want %v", got, wantTop)
	}
	published := map[string]bool{}
	for i, v := range rep["cells"].([]any) {
		if c, _ := v.(map[string]any); c["published"] == true {
			published[strconv.Itoa(i)] = true
		}
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if strings.Contains(strings.ToLower(k), "total") && k != "cross_cell_totals" {
					t.Fatalf("report member %s.%s looks like a total", path, k)
				}
				walk(strings.TrimPrefix(path+"."+k, "."), e)
			}
		case []any:
			for i, e := range x {
				walk(path+"."+strconv.Itoa(i), e)
			}
		case float64:
			p := strings.Split(path, ".")
			ok := path == "iat" || path == "min_orgs_per_cell" ||
				(len(p) == 3 && p[0] == "cells" && published[p[1]] && (p[2] == "organizations" || p[2] == "decisions"))
			if !ok {
				t.Fatalf("report number at %s (%v): only published cells carry numbers", path, x)
			}
		case string:
			if _, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
				t.Fatalf("report string at %s is a number: %q", path, x)
			}
		case bool, nil:
		default:
			t.Fatalf("report value at %s is %T", path, v)
		}
	}
	walk("", rep)
}

// anProblem checks a problem answer's status and code.
func anProblem(t testing.TB, r *result, status int, code string) {
	t.Helper()
	r.wantProblem(t, status, code)
}

// ---------------------------------------------------------------------------

// A generated population of 40 orgs with mixed consent, classification,
// policies and outcomes: the report of a month counts exactly the
// decisions the test computes, cells at exactly 4 orgs are suppressed and
// at exactly 5 published, the artifact verifies with go-jose, a second
// request gets the same bytes, and a consent revoked after the freeze
// changes the next month's report, never the frozen one.
func TestAnalyticsBlastRadiusPopulation(t *testing.T) {
	t.Parallel()
	const (
		feb, month, next = "2026-02", "2026-03", "2026-04"
		n                = 40
		forced           = 14 // orgs 0..13 end up eligible; 0..7 of them enforce
	)
	x := newAnalyticsEnv(t, time.Date(2026, 2, 20, 9, 0, 0, 0, time.UTC), anReportingKey(t, 7))
	rng := rand.New(rand.NewSource(20260301))

	var (
		prodExt   = [2]string{"prod", "external"}
		eligibleC = [][]bool{{true}, {false, true}, {true, true}}
		anyC      = [][]bool{nil, {true}, {false}, {true, false}, {false, true}, {true, true}}
		eligibleK = [][][2]string{{prodExt}, {{"staging", "external"}, prodExt}, {prodExt, {"staging", "internal"}, prodExt}}
		anyK      = [][][2]string{nil, {prodExt}, {{"prod", "internal"}}, {{"staging", "external"}}, {{"dev", "sandbox"}},
			{{"staging", "external"}, prodExt}, {prodExt, {"prod", "demo"}}, {{"dev", "external"}, {"prod", "sandbox"}}}
	)
	type plan struct {
		consent []bool
		classes [][2]string
	}
	pop := make([]*anOrg, n)
	plans := make([]plan, n)
	byID := map[string]*anOrg{}
	for i := range pop {
		var p plan
		enforcing := i < 8 || (i >= forced && rng.Intn(5) < 2)
		if i < forced {
			p = plan{eligibleC[rng.Intn(len(eligibleC))], eligibleK[rng.Intn(len(eligibleK))]}
		} else {
			p = plan{anyC[rng.Intn(len(anyC))], anyK[rng.Intn(len(anyK))]}
		}
		o := x.newOrg(fmt.Sprintf("pop-%02d", i), enforcing)
		pop[i], plans[i], byID[o.ID] = o, p, o
		// Every step but the last now; the last ones after the month's
		// decisions, before the freeze: eligibility is judged at the freeze.
		for _, c := range p.consent[:max(len(p.consent)-1, 0)] {
			x.setConsent(o, c)
		}
		for _, k := range p.classes[:max(len(p.classes)-1, 0)] {
			x.classify(o, k[0], k[1])
		}
		x.advance(time.Minute)
	}
	final := func(o *anOrg) bool { // eligible once every planned step is sent
		p := plans[slices.Index(pop, o)]
		return len(p.consent) > 0 && p.consent[len(p.consent)-1] && len(p.classes) > 0 && p.classes[len(p.classes)-1] == prodExt
	}
	var eligibleEnforcing, ineligibleEnforcing, ineligible []*anOrg
	for _, o := range pop {
		switch {
		case final(o) && o.enforcing:
			eligibleEnforcing = append(eligibleEnforcing, o)
		case !final(o) && o.enforcing:
			ineligibleEnforcing = append(ineligibleEnforcing, o)
		}
		if !final(o) {
			ineligible = append(ineligible, o)
		}
	}
	if len(eligibleEnforcing) < 8 || len(ineligibleEnforcing) < 2 || len(ineligible) < 5 {
		t.Fatalf("the generated population lacks variety: %d eligible enforcing, %d ineligible enforcing, %d ineligible",
			len(eligibleEnforcing), len(ineligibleEnforcing), len(ineligible))
	}

	// February: only orgs that will not be eligible decide, at the last
	// microsecond of the month.
	x.set(time.Date(2026, 2, 28, 23, 59, 59, 999999000, time.UTC))
	for _, o := range ineligible[:5] {
		x.decide(o, anShadow, anAllow, rng)
	}

	// March, from its first instant: random cells other than
	// REVIEW_REQUIRED for everyone...
	x.set(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	for _, o := range pop {
		for range rng.Intn(5) {
			m, out := anShadow, []string{anAllow, anEscalate, anBlock}[rng.Intn(3)]
			if o.enforcing && rng.Intn(2) == 0 {
				m = anEnforcement
			}
			x.decide(o, m, out, rng)
			x.advance(time.Minute)
		}
	}
	// ...then REVIEW_REQUIRED: exactly 5 eligible orgs in ENFORCEMENT and
	// exactly 4 in SHADOW, each cell with ineligible orgs deciding too.
	shuffled := func(list []*anOrg) []*anOrg {
		out := slices.Clone(list)
		rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		return out
	}
	reviewE := shuffled(eligibleEnforcing)[:5]
	reviewS := shuffled(eligibleEnforcing)[:4]
	for _, set := range []struct {
		mode string
		orgs []*anOrg
	}{{anEnforcement, reviewE}, {anShadow, reviewS}, {anEnforcement, ineligibleEnforcing[:2]}, {anShadow, ineligibleEnforcing[:2]}} {
		for _, o := range set.orgs {
			for range 1 + rng.Intn(2) {
				x.decide(o, set.mode, anReview, rng)
				x.advance(time.Minute)
			}
		}
	}
	// The last consent and classification steps.
	x.set(time.Date(2026, 3, 31, 12, 0, 0, 0, time.UTC))
	for i, o := range pop {
		p := plans[i]
		if len(p.consent) > 0 {
			x.setConsent(o, p.consent[len(p.consent)-1])
		}
		if len(p.classes) > 0 {
			x.classify(o, p.classes[len(p.classes)-1][0], p.classes[len(p.classes)-1][1])
		}
		if o.eligible() != final(o) {
			t.Fatalf("%s: the plan and what was sent disagree", o.name)
		}
	}

	// Not yet complete, to the last microsecond, nor within a minute (the
	// server's clock skew) after its end, while decisions stamped in it may
	// still be committing.
	x.set(time.Date(2026, 3, 31, 23, 59, 59, 999999000, time.UTC))
	anProblem(t, anFreeze(x.env, month), http.StatusBadRequest, "MONTH_NOT_COMPLETE")
	x.set(time.Date(2026, 4, 1, 0, 0, 59, 999999000, time.UTC))
	anProblem(t, anFreeze(x.env, month), http.StatusBadRequest, "MONTH_NOT_COMPLETE")

	// April, from its first instant: 6 eligible enforcing orgs ALLOW in
	// ENFORCEMENT, 5 eligible orgs ALLOW in SHADOW; the first of each is an
	// org of March's 5-org REVIEW_REQUIRED cell, whose consent is revoked
	// after March is frozen.
	revoked := reviewE[0]
	var others []*anOrg
	for _, o := range shuffled(eligibleEnforcing) {
		if o != revoked {
			others = append(others, o)
		}
	}
	x.set(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC))
	for _, o := range append([]*anOrg{revoked}, others[:5]...) {
		x.decide(o, anEnforcement, anAllow, rng)
	}
	for _, o := range append([]*anOrg{revoked}, others[1:5]...) {
		x.decide(o, anShadow, anAllow, rng)
	}
	x.decide(ineligibleEnforcing[0], anEnforcement, anAllow, rng)

	// March, frozen.
	x.set(time.Date(2026, 4, 2, 8, 0, 0, 0, time.UTC))
	eligibleNow := func(id string) bool { return byID[id].eligible() }
	wantMarch := x.expect(month, eligibleNow)
	var at4, at5, published int
	for _, c := range wantMarch {
		switch {
		case c.orgs == 4:
			at4++
		case c.orgs == 5:
			at5++
		}
		if c.published() {
			published++
		}
	}
	if at4 == 0 || at5 == 0 || published < 2 || wantMarch[anEnforcement+"/"+anReview].orgs != 5 || wantMarch[anShadow+"/"+anReview].orgs != 4 {
		t.Fatalf("the generated month lacks the cases it is for: %v", wantMarch)
	}
	frozenAt := x.clock()
	first := anFreeze(x.env, month).want(t, http.StatusCreated)
	march := x.verifyReport(first, month, wantMarch)
	if at, err := time.Parse(time.RFC3339Nano, anStr(march.claims["frozen_at"])); err != nil || !at.Equal(frozenAt) {
		t.Fatalf("frozen_at %v, want %s", march.claims["frozen_at"], frozenAt.Format(time.RFC3339))
	}
	x.advance(time.Hour)
	if again := anFreeze(x.env, month).want(t, http.StatusOK); !bytes.Equal(again.Raw, first.Raw) {
		t.Fatalf("the second request changed the report:\n%s\n%s", first.Raw, again.Raw)
	}

	// Months without an eligible decision are not published; the current
	// and future months are not complete.
	anProblem(t, anFreeze(x.env, feb), http.StatusConflict, "INSUFFICIENT_COHORT")
	anProblem(t, anFreeze(x.env, "2026-01"), http.StatusConflict, "INSUFFICIENT_COHORT")
	anProblem(t, anFreeze(x.env, next), http.StatusBadRequest, "MONTH_NOT_COMPLETE")
	anProblem(t, anFreeze(x.env, "2026-05"), http.StatusBadRequest, "MONTH_NOT_COMPLETE")

	// Consent revoked after the freeze: March stays as frozen (recomputed,
	// its 5-org cell would now be suppressed)...
	x.setConsent(revoked, false)
	eligibleNow = func(id string) bool { return byID[id].eligible() }
	if x.expect(month, eligibleNow)[anEnforcement+"/"+anReview].published() {
		t.Fatal("the revocation should matter to a recomputed March")
	}
	if again := anFreeze(x.env, month).want(t, http.StatusOK); !bytes.Equal(again.Raw, first.Raw) {
		t.Fatalf("a revocation changed the frozen report:\n%s\n%s", first.Raw, again.Raw)
	}
	// ...and April, frozen after it, leaves the org out.
	x.set(time.Date(2026, 5, 1, 0, 1, 0, 0, time.UTC))
	wantApril := x.expect(next, eligibleNow)
	withRevoked := x.expect(next, func(id string) bool { return byID[id].eligible() || id == revoked.ID })
	if wantApril[anEnforcement+"/"+anAllow] != (anCell{5, 5}) || wantApril[anShadow+"/"+anAllow] != (anCell{4, 4}) ||
		withRevoked[anEnforcement+"/"+anAllow] != (anCell{6, 6}) || withRevoked[anShadow+"/"+anAllow] != (anCell{5, 5}) {
		t.Fatalf("April's expectation is off: %v (with the revoked org %v)", wantApril, withRevoked)
	}
	x.verifyReport(anFreeze(x.env, next).want(t, http.StatusCreated), next, wantApril)
	if again := anFreeze(x.env, month).want(t, http.StatusOK); !bytes.Equal(again.Raw, first.Raw) {
		t.Fatal("freezing April changed March")
	}
}

// Suppression at the threshold and the differencing attack: in one month
// SHADOW/ALLOW has exactly 5 eligible orgs (published), SHADOW/BLOCK 6
// (published) and SHADOW/ESCALATE exactly 4 (suppressed, though ineligible
// orgs decided there too). Had the report any total, the suppressed cell
// would be the total minus the two published cells; it has none, nor any
// other number the cells do not own.
func TestAnalyticsSuppressionAndDifferencing(t *testing.T) {
	t.Parallel()
	const month = "2026-06"
	x := newAnalyticsEnv(t, time.Date(2026, 5, 30, 9, 0, 0, 0, time.UTC), anReportingKey(t, 8))
	rng := rand.New(rand.NewSource(6))
	var eligible []*anOrg
	for i := range 8 {
		o := x.newOrg(fmt.Sprintf("elig-%d", i), false)
		x.setConsent(o, true)
		x.classify(o, "prod", "external")
		eligible = append(eligible, o)
	}
	// A 5th and 6th org in the 4-org cell, neither counted: one never
	// consented, one consented but staging; a third consented then revoked.
	noConsent := x.newOrg("no-consent", false)
	x.classify(noConsent, "prod", "external")
	staging := x.newOrg("staging", false)
	x.setConsent(staging, true)
	x.classify(staging, "staging", "external")
	withdrawn := x.newOrg("withdrawn", false)
	x.setConsent(withdrawn, true)
	x.classify(withdrawn, "prod", "external")
	x.setConsent(withdrawn, false)

	x.set(time.Date(2026, 6, 10, 0, 0, 0, 0, time.UTC))
	// ALLOW: eligible 0..4, 2 each (5 orgs, 10 decisions).
	for _, o := range eligible[:5] {
		x.decide(o, anShadow, anAllow, rng)
		x.decide(o, anShadow, anAllow, rng)
	}
	// BLOCK: eligible 2..7, elig-2 six times, the others once (6 orgs, 11).
	for i, o := range eligible[2:] {
		for range map[bool]int{true: 6, false: 1}[i == 0] {
			x.decide(o, anShadow, anBlock, rng)
		}
	}
	// ESCALATE: eligible 4..7, 3 each (4 orgs, 12), and the three others.
	for _, o := range eligible[4:] {
		for range 3 {
			x.decide(o, anShadow, anEscalate, rng)
		}
	}
	for _, o := range []*anOrg{noConsent, staging, withdrawn} {
		x.decide(o, anShadow, anEscalate, rng)
	}

	x.set(time.Date(2026, 7, 1, 0, 1, 0, 0, time.UTC))
	isEligible := func(id string) bool {
		return slices.ContainsFunc(eligible, func(o *anOrg) bool { return o.ID == id })
	}
	want := x.expect(month, isEligible)
	allow, block, esc := want[anShadow+"/"+anAllow], want[anShadow+"/"+anBlock], want[anShadow+"/"+anEscalate]
	if allow != (anCell{5, 10}) || block != (anCell{6, 11}) || esc != (anCell{4, 12}) {
		t.Fatalf("the month is not what the test meant: %v", want)
	}
	everyone := x.expect(month, func(string) bool { return true })
	if everyone[anShadow+"/"+anEscalate].orgs != 7 {
		t.Fatalf("the ineligible orgs did not decide as meant: %v", everyone)
	}
	rep := x.verifyReport(anFreeze(x.env, month).want(t, http.StatusCreated), month, want)

	// Every number of the answer (the artifact's payload and the answer's
	// report member alike).
	var nums []float64
	var collect func(path string, v any)
	collect = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				collect(path+"."+k, e)
			}
		case []any:
			for i, e := range x {
				collect(path+"."+strconv.Itoa(i), e)
			}
		case float64:
			if !strings.HasSuffix(path, ".iat") {
				nums = append(nums, x)
			}
		}
	}
	collect("", rep.claims)
	collect("", rep.answer)
	slices.Sort(nums)
	nums = slices.Compact(nums)
	if !slices.Equal(nums, []float64{5, 6, 10, 11}) {
		t.Fatalf("the numbers of the answer are %v, want only the published cells' (5, 10, 6, 11) and the threshold 5", nums)
	}
	// What an attacker would need: a total of decisions (33) or of orgs
	// across cells (15), the cohort (8 orgs), or the cell itself (4, 12).
	for _, secret := range []float64{33, 15, 8, 4, 12} {
		if slices.Contains(nums, secret) {
			t.Fatalf("the answer holds %v, from which the suppressed cell follows", secret)
		}
	}
	// The suppressed cell itself, in the artifact and in the answer: its
	// names and published=false, nothing else.
	for _, cells := range []any{rep.claims["cells"], lookup(rep.answer, "report.cells")} {
		for _, v := range cells.([]any) {
			c := v.(map[string]any)
			if c["mode"] == anShadow && c["outcome"] == anEscalate &&
				!reflect.DeepEqual(c, map[string]any{"mode": anShadow, "outcome": anEscalate, "published": false}) {
				t.Fatalf("the suppressed cell carries more than its names: %v", c)
			}
		}
	}
}

// Two servers over the same store freeze the same month at the same
// moment: one freezes it (201), the other answers that very report (200),
// byte for byte; each round's freeze also catches up the month's new
// decisions on both servers at once, and none is counted twice.
func TestAnalyticsConcurrentFreezeTwoServers(t *testing.T) {
	t.Parallel()
	x := newAnalyticsEnv(t, time.Date(2025, 1, 2, 9, 0, 0, 0, time.UTC), anReportingKey(t, 9))
	rng := rand.New(rand.NewSource(2025))
	var orgs []*anOrg
	for i := range 5 {
		o := x.newOrg(fmt.Sprintf("race-%d", i), i%2 == 0)
		x.setConsent(o, true)
		x.classify(o, "prod", "external")
		orgs = append(orgs, o)
	}
	outsider := x.newOrg("outsider", false) // never consented
	x.classify(outsider, "prod", "external")
	y := x.peer()
	ids := map[string]bool{}
	for _, o := range orgs {
		ids[o.ID] = true
	}

	const rounds = 6
	for r := range rounds {
		start := time.Date(2025, time.Month(1+r), 1, 0, 0, 0, 0, time.UTC)
		month := start.Format("2006-01")
		x.set(start.Add(36 * time.Hour))
		for i, o := range orgs {
			for range 1 + (i+r)%3 {
				x.decide(o, anShadow, anAllow, rng)
			}
		}
		x.decide(outsider, anShadow, anAllow, rng)
		x.set(start.AddDate(0, 1, 0).Add(time.Hour))

		var (
			wg    sync.WaitGroup
			ready sync.WaitGroup
			gate  = make(chan struct{})
			res   [2]*result
			errs  [2]error
		)
		for i, e := range []*env{x.env, y} {
			ready.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				ready.Done()
				<-gate
				res[i], errs[i] = e.send("POST", anReportPath+month, e.platform, nil, nil)
			}()
		}
		ready.Wait()
		close(gate)
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		statuses := []int{res[0].Status, res[1].Status}
		slices.Sort(statuses)
		if !slices.Equal(statuses, []int{http.StatusOK, http.StatusCreated}) {
			t.Fatalf("round %d (%s): want one 201 and one 200:\n%s\n%s", r, month, res[0], res[1])
		}
		if !bytes.Equal(res[0].Raw, res[1].Raw) {
			t.Fatalf("round %d (%s): the two servers answered different reports:\n%s\n%s", r, month, res[0].Raw, res[1].Raw)
		}
		want := x.expect(month, func(id string) bool { return ids[id] })
		if c := want[anShadow+"/"+anAllow]; c.orgs != 5 || c.decisions < 5 {
			t.Fatalf("round %d: %v", r, want)
		}
		x.verifyReport(res[0], month, want)
		// Later requests to either server: the same bytes.
		for _, e := range []*env{x.env, y} {
			if again := anFreeze(e, month).want(t, http.StatusOK); !bytes.Equal(again.Raw, res[0].Raw) {
				t.Fatalf("round %d: a later request changed the report", r)
			}
		}
	}
}

// An org key, however broad, gets 403 PLATFORM_KEY_REQUIRED on every
// analytics route, also about its own org, and changes nothing; no key is
// 401; the reporting JWKS is public. Each org's consent and classification
// stay its own.
func TestAnalyticsTenantIsolation(t *testing.T) {
	t.Parallel()
	x := newAnalyticsEnv(t, time.Date(2026, 8, 3, 9, 0, 0, 0, time.UTC), anReportingKey(t, 10))
	rng := rand.New(rand.NewSource(8))
	a := x.newOrg("org-a", false)
	b := x.newOrg("org-b", false)
	aNarrow := x.createKey(a.org, "decision:write", "decision:read", "audit:read", "audit:write", "policy:write")
	x.set(time.Date(2026, 8, 4, 0, 0, 0, 0, time.UTC))
	x.decide(a, anShadow, anAllow, rng)
	x.set(time.Date(2026, 9, 2, 0, 0, 0, 0, time.UTC))

	consent := `{"opted_in":true,"consent_reference":"self-service"}`
	classify := `{"environment":"prod","audience":"external","surface":"self_made","source_utm":{"source":"self"}}`
	routes := []struct{ method, path, body string }{
		{"PUT", anConsentPath + a.ID, consent},
		{"PUT", anConsentPath + b.ID, consent},
		{"PUT", anClassifyPath + a.ID, classify},
		{"PUT", anClassifyPath + b.ID, classify},
		{"GET", anScorecardPath, ""},
		{"POST", anBaselinePath + "mine", ""},
		{"POST", anReportPath + "2026-08", ""},
	}
	for _, key := range []string{a.Key, aNarrow, b.Key} {
		for _, rt := range routes {
			var body any
			if rt.body != "" {
				body = rt.body
			}
			anProblem(t, x.do(rt.method, rt.path, key, body, nil), http.StatusForbidden, "PLATFORM_KEY_REQUIRED")
		}
	}
	for _, rt := range routes {
		var body any
		if rt.body != "" {
			body = rt.body
		}
		if r := x.do(rt.method, rt.path, "", body, nil); r.Status != http.StatusUnauthorized {
			t.Fatalf("without a key: %s", r)
		}
	}
	for _, key := range []string{"", a.Key, x.platform} {
		if r := x.do("GET", anJWKSPath, key, nil, nil).want(t, http.StatusOK); !strings.Contains(string(r.Raw), x.key.KID()) {
			t.Fatalf("JWKS: %s", r)
		}
	}

	// Nothing of the refused calls was recorded: the consent histories
	// start now, the first touch is the platform's, the baseline name and
	// the month are free.
	sc := x.do("GET", anScorecardPath, x.platform, nil, nil).want(t, http.StatusOK)
	if sc.num("population.organizations") != 2 || sc.num("population.unclassified") != 2 || sc.num("population.reviewed") != 0 {
		t.Fatalf("refused classifications were recorded: %s", sc)
	}
	x.setConsent(a, true) // checks a history of one entry
	x.setConsent(b, false)
	x.classify(a, "prod", "external") // checks a's own first touch
	x.classify(b, "staging", "internal")
	x.setConsent(b, true)
	x.classify(b, "prod", "external") // b's first touch stays b's
	x.do("POST", anBaselinePath+"mine", x.platform, nil, nil).want(t, http.StatusCreated)
	// August: a and four other consented orgs decided (b did not).
	x.set(time.Date(2026, 8, 20, 0, 0, 0, 0, time.UTC))
	fill := x.fillers("iso", anMinOrgs-1)
	x.decideAll(fill, rng)
	x.set(time.Date(2026, 9, 2, 0, 0, 0, 0, time.UTC))
	members := anIDs(append(fill, a)...)
	x.verifyReport(anFreeze(x.env, "2026-08").want(t, http.StatusCreated), "2026-08",
		x.expect("2026-08", func(id string) bool { return members[id] }))

	// An unknown org is 404, and recorded for nobody.
	anProblem(t, x.do("PUT", anConsentPath+"00000000-0000-4000-8000-000000000000", x.platform, consent, nil), http.StatusNotFound, "ORG_NOT_FOUND")
	anProblem(t, x.do("PUT", anClassifyPath+"00000000-0000-4000-8000-000000000000", x.platform, classify, nil), http.StatusNotFound, "ORG_NOT_FOUND")
}

// Classification: the first one freezes surface and source_utm (the first
// touch); later ones change environment and audience only. Consent keeps
// its history.
func TestAnalyticsClassificationFirstTouchAndConsent(t *testing.T) {
	t.Parallel()
	t1 := time.Date(2026, 2, 3, 10, 0, 0, 0, time.UTC)
	x := newAnalyticsEnv(t, t1, anReportingKey(t, 11))
	c1 := x.createOrg("first-touch")
	c2 := x.createOrg("no-utm")

	r := x.do("PUT", anClassifyPath+c1.ID, x.platform, `{"environment":"staging","audience":"internal","surface":"docs_site",
		"source_utm":{"source":"newsletter","medium":"email","campaign":"spring"}}`, nil).want(t, http.StatusOK)
	wantTouch := map[string]any{"surface": "docs_site", "classified_at": t1.Format(time.RFC3339),
		"source_utm": map[string]any{"source": "newsletter", "medium": "email", "campaign": "spring"}}
	if r.str("org_id") != c1.ID || r.str("environment") != "staging" || r.str("audience") != "internal" || r.str("surface") != "docs_site" ||
		lookup(r.JSON, "reviewed") != false || !reflect.DeepEqual(lookup(r.JSON, "first_touch"), wantTouch) || r.str("updated_at") != t1.Format(time.RFC3339) {
		t.Fatalf("first classification: %s", r)
	}
	t2 := t1.Add(50 * 24 * time.Hour)
	x.set(t2)
	r = x.do("PUT", anClassifyPath+c1.ID, x.platform, `{"environment":"prod","audience":"external","surface":"web_app",
		"source_utm":{"source":"ads","medium":"cpc"}}`, nil).want(t, http.StatusOK)
	if r.str("environment") != "prod" || r.str("audience") != "external" || lookup(r.JSON, "reviewed") != true ||
		r.str("surface") != "docs_site" || !reflect.DeepEqual(lookup(r.JSON, "first_touch"), wantTouch) || r.str("updated_at") != t2.Format(time.RFC3339) {
		t.Fatalf("a later classification must change environment and audience only: %s", r)
	}
	// The change shows in the scorecard: c1 is reviewed now.
	if sc := x.do("GET", anScorecardPath, x.platform, nil, nil).want(t, http.StatusOK); sc.num("population.reviewed") != 1 ||
		sc.num("population.unclassified") != 1 {
		t.Fatalf("scorecard after reclassification: %s", sc)
	}

	// A first classification without source_utm freezes its absence.
	r = x.do("PUT", anClassifyPath+c2.ID, x.platform, `{"environment":"dev","audience":"sandbox","surface":"cli"}`, nil).want(t, http.StatusOK)
	if v, ok := lookup(r.JSON, "first_touch").(map[string]any)["source_utm"]; !ok || v != nil {
		t.Fatalf("first touch without utm: %s", r)
	}
	x.advance(time.Hour)
	r = x.do("PUT", anClassifyPath+c2.ID, x.platform, `{"environment":"prod","audience":"demo","surface":"api","source_utm":{"source":"late"}}`, nil).
		want(t, http.StatusOK)
	if lookup(r.JSON, "first_touch.source_utm") != nil || r.str("surface") != "cli" || r.str("first_touch.surface") != "cli" ||
		r.str("audience") != "demo" || lookup(r.JSON, "reviewed") != false {
		t.Fatalf("a later utm must not become the first touch: %s", r)
	}

	// Consent: every change kept, oldest first.
	steps := []struct {
		in  bool
		ref string
	}{{true, "msa-2026-001"}, {false, "email 2026-03-02: withdrawn"}, {true, "msa-2026-001 amendment"}}
	for i, s := range steps {
		x.advance(time.Hour)
		r := x.do("PUT", anConsentPath+c1.ID, x.platform, map[string]any{"opted_in": s.in, "consent_reference": s.ref}, nil).want(t, http.StatusOK)
		at := x.clock().Format(time.RFC3339)
		hist, _ := lookup(r.JSON, "history").([]any)
		if r.str("org_id") != c1.ID || lookup(r.JSON, "opted_in") != s.in || r.str("consent_reference") != s.ref ||
			r.str("recorded_at") != at || len(hist) != i+1 {
			t.Fatalf("consent %d: %s", i, r)
		}
		for j := 0; j <= i; j++ {
			if lookup(r.JSON, fmt.Sprintf("history.%d.consent_reference", j)) != steps[j].ref ||
				lookup(r.JSON, fmt.Sprintf("history.%d.opted_in", j)) != steps[j].in {
				t.Fatalf("consent history entry %d: %s", j, r)
			}
		}
	}
	// c2's history is its own.
	r = x.do("PUT", anConsentPath+c2.ID, x.platform, `{"opted_in":false,"consent_reference":"never"}`, nil).want(t, http.StatusOK)
	if r.str("org_id") != c2.ID || len(lookup(r.JSON, "history").([]any)) != 1 {
		t.Fatalf("c2 consent: %s", r)
	}
}

// The scorecard counts reviewed (prod/external) orgs only, by UTC month of
// creation, with their decisions and measured durations; unclassified
// orgs are excluded and listed apart, other classified orgs excluded;
// empty cohorts have null rates. A baseline is a snapshot that a later
// decision does not change: the same name again is 409 BASELINE_EXISTS.
func TestAnalyticsScorecardAndBaselines(t *testing.T) {
	t.Parallel()
	jan := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	x := newAnalyticsEnv(t, jan, anReportingKey(t, 12))
	rng := rand.New(rand.NewSource(12))
	day := 24 * time.Hour

	sc := x.do("GET", anScorecardPath, x.platform, nil, nil).want(t, http.StatusOK)
	if sc.num("population.organizations") != 0 || len(lookup(sc.JSON, "cohorts").([]any)) != 0 || sc.num("unclassified.organizations") != 0 {
		t.Fatalf("the scorecard of no orgs: %s", sc)
	}

	// January: three reviewed orgs, one staging, one unclassified.
	at := func(d time.Duration) { x.set(jan.Add(d)) }
	r1 := x.newOrg("r1", false)
	x.classify(r1, "prod", "external")
	at(time.Hour)
	r2 := x.newOrg("r2", false)
	x.classify(r2, "prod", "external")
	at(2 * time.Hour)
	r3 := x.newOrg("r3", false)
	x.classify(r3, "prod", "external")
	at(3 * time.Hour)
	s1 := x.newOrg("s1", false)
	x.classify(s1, "staging", "external")
	at(4 * time.Hour)
	u1 := x.newOrg("u1", false)

	at(day) // r1: first decision after 1 day, SHADOW
	x.decide(r1, anShadow, anAllow, rng)
	at(time.Hour + 2*day) // r2: first decision after 2 days
	x.decide(r2, anShadow, anEscalate, rng)
	at(3 * time.Hour)
	for range 3 {
		x.decide(s1, anShadow, anBlock, rng) // excluded
	}
	x.decide(u1, anShadow, anAllow, rng) // excluded
	x.decide(u1, anShadow, anAllow, rng)
	at(3*day - time.Hour)
	r1.enforcing = true
	x.publish(r1.Key, anBundle).want(t, http.StatusCreated)
	at(3 * day) // r1: first ENFORCEMENT decision after 3 days
	x.decide(r1, anEnforcement, anBlock, rng)
	at(4 * day)
	x.decide(r1, anShadow, anReview, rng)
	at(10 * day)
	x.decide(r2, anShadow, anAllow, rng)

	// February: nobody. March: r4 (staging first, prod/external later), r5
	// (prod/external first, internal later), u2.
	mar := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	x.set(mar)
	r4 := x.newOrg("r4", false)
	x.classify(r4, "staging", "external")
	r5 := x.newOrg("r5", false)
	x.classify(r5, "prod", "external")
	u2 := x.newOrg("u2", false)
	x.set(mar.Add(day))
	x.decide(r4, anShadow, anBlock, rng)
	x.decide(r5, anShadow, anAllow, rng) // excluded once r5 is internal
	x.decide(r5, anShadow, anAllow, rng)
	x.decide(u2, anShadow, anAllow, rng)
	x.set(mar.Add(18 * day))
	x.classify(r4, "prod", "external")
	x.classify(r5, "prod", "internal")

	now := time.Date(2026, 4, 10, 0, 0, 0, 0, time.UTC)
	x.set(now)
	f := func(v float64) any { return v }
	durs := func(count int, median, p90 any) map[string]any {
		return map[string]any{"count": float64(count), "median": median, "p90": p90}
	}
	none := durs(0, nil, nil)
	cohort := func(m string, orgs, activated, enforcing int, decisions, enf int64, ar, er any, ttfd, ttfe map[string]any) map[string]any {
		return map[string]any{"cohort": m, "organizations": float64(orgs), "activated": float64(activated), "enforcing": float64(enforcing),
			"decisions": float64(decisions), "enforcement_decisions": float64(enf), "activation_rate": ar, "enforcement_rate": er,
			"time_to_first_decision_seconds": ttfd, "time_to_first_enforcement_seconds": ttfe}
	}
	d := day.Seconds()
	// Only reviewed orgs' decisions: r1 3 (1 ENFORCEMENT), r2 2, r4 1.
	wantCohorts := []any{
		cohort("2026-01", 3, 2, 1, 5, 1, f(2.0/3.0), f(1.0/3.0), durs(2, f(d), f(2*d)), durs(1, f(3*d), f(3*d))),
		cohort("2026-02", 0, 0, 0, 0, 0, nil, nil, none, none),
		cohort("2026-03", 1, 1, 0, 1, 0, f(1.0), f(0.0), durs(1, f(d), f(d)), none),
		cohort("2026-04", 0, 0, 0, 0, 0, nil, nil, none, none),
	}
	wantUnclassified := map[string]any{"organizations": float64(2), "cohorts": []any{
		map[string]any{"cohort": "2026-01", "organizations": float64(1)},
		map[string]any{"cohort": "2026-03", "organizations": float64(1)}}}
	wantPopulation := map[string]any{"organizations": float64(8), "reviewed": float64(4), "other_classified": float64(2), "unclassified": float64(2)}
	check := func(what string, sc map[string]any, cohorts []any) {
		t.Helper()
		got, _ := json.MarshalIndent(sc, "", " ")
		if !reflect.DeepEqual(sc["population"], wantPopulation) || !reflect.DeepEqual(sc["unclassified"], wantUnclassified) ||
			sc["generated_at"] != x.clock().Format(time.RFC3339) {
			t.Fatalf("%s: population or unclassified: %s", what, got)
		}
		if !reflect.DeepEqual(sc["cohorts"], cohorts) {
			want, _ := json.MarshalIndent(cohorts, "", " ")
			t.Fatalf("%s: cohorts\n%s\nwant\n%s", what, got, want)
		}
		if defs, _ := sc["definitions"].(map[string]any); defs["activation_rate"] == nil || defs["reviewed"] == nil {
			t.Fatalf("%s: definitions: %s", what, got)
		}
	}
	sc = x.do("GET", anScorecardPath, x.platform, nil, nil).want(t, http.StatusOK)
	check("scorecard", sc.JSON, wantCohorts)

	// Baseline q1: the scorecard as it is now.
	q1 := x.do("POST", anBaselinePath+"q1", x.platform, nil, nil).want(t, http.StatusCreated)
	if q1.str("name") != "q1" || q1.str("created_at") != now.Format(time.RFC3339) || !reflect.DeepEqual(q1.JSON["scorecard"], sc.JSON) {
		t.Fatalf("baseline q1 is not the scorecard of now:\n%s\n%s", q1, sc)
	}
	stored := anStoredBaseline(t, x.store, "q1")

	// A later decision: r3 activates. q1 cannot be frozen again, and what
	// it stored is unchanged; q2 shows the decision.
	x.set(now.Add(time.Hour))
	x.decide(r3, anShadow, anAllow, rng)
	x.advance(time.Hour)
	anProblem(t, x.do("POST", anBaselinePath+"q1", x.platform, nil, nil), http.StatusConflict, "BASELINE_EXISTS")
	anProblem(t, x.do("POST", anBaselinePath+"q1", x.platform, "{}", nil), http.StatusConflict, "BASELINE_EXISTS")
	if again := anStoredBaseline(t, x.store, "q1"); !bytes.Equal(again, stored) {
		t.Fatalf("a refused re-freeze changed baseline q1:\n%s\n%s", stored, again)
	}
	q2 := x.do("POST", anBaselinePath+"q2", x.platform, "{}", nil).want(t, http.StatusCreated)
	after := slices.Clone(wantCohorts)
	ttfd := (now.Add(time.Hour).Sub(jan.Add(2 * time.Hour))).Seconds()
	after[0] = cohort("2026-01", 3, 3, 1, 6, 1, f(1.0), f(1.0/3.0), durs(3, f(2*d), f(ttfd)), durs(1, f(3*d), f(3*d)))
	check("baseline q2", q2.JSON["scorecard"].(map[string]any), after)
	if reflect.DeepEqual(q1.JSON["scorecard"], q2.JSON["scorecard"]) {
		t.Fatal("q2 equals q1")
	}
	check("scorecard after q2", x.do("GET", anScorecardPath, x.platform, nil, nil).want(t, http.StatusOK).JSON, after)
	var b1 struct {
		Scorecard map[string]any `json:"scorecard"`
	}
	if err := json.Unmarshal(stored, &b1); err != nil || !reflect.DeepEqual(b1.Scorecard, sc.JSON) {
		t.Fatalf("stored baseline q1 is not the answer it gave: %v\n%s", err, stored)
	}
}

// anStoredBaseline reads baseline name as the store holds it (the
// analytics feature's record in the platform's pseudo-org), to show that it
// does not change.
func anStoredBaseline(t testing.TB, st store.Backend, name string) []byte {
	t.Helper()
	rec, err := st.Artifact(context.Background(), tenant.PlatformOrgID, "analytics.baseline", name)
	if err != nil {
		t.Fatalf("read stored baseline %s: %v", name, err)
	}
	return rec.Body
}

// Without a reporting key a new report is 503 REPORTING_KEY_NOT_CONFIGURED
// and nothing is frozen, while a month frozen before is still served as it
// was; once a key is configured again the month freezes.
func TestAnalyticsReportingKeyNotConfigured(t *testing.T) {
	t.Parallel()
	x := newAnalyticsEnv(t, time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC), anReportingKey(t, 13))
	rng := rand.New(rand.NewSource(13))
	o := x.newOrg("keyless", false)
	x.setConsent(o, true)
	x.classify(o, "prod", "external")
	fill := x.fillers("keyless", anMinOrgs-1)
	x.set(time.Date(2026, 9, 15, 0, 0, 0, 0, time.UTC))
	x.decide(o, anShadow, anAllow, rng)
	x.decideAll(fill, rng)
	x.set(time.Date(2026, 10, 15, 0, 0, 0, 0, time.UTC))
	x.decide(o, anShadow, anBlock, rng)
	x.decideAll(fill, rng)
	x.set(time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC))
	members := anIDs(append(fill, o)...)
	only := func(id string) bool { return members[id] }
	sep := anFreeze(x.env, "2026-09").want(t, http.StatusCreated)
	x.verifyReport(sep, "2026-09", x.expect("2026-09", only))

	x.restart(grant.Key{})
	// The key that signed September stays published, so September verifies.
	if r := x.do("GET", anJWKSPath, "", nil, nil).want(t, http.StatusOK); r.str("keys.0.kid") != anReportingKey(t, 13).KID() {
		t.Fatalf("JWKS without a reporting key: %s", r)
	}
	if r := anFreeze(x.env, "2026-09").want(t, http.StatusOK); !bytes.Equal(r.Raw, sep.Raw) {
		t.Fatal("a frozen report changed when the key went away")
	}
	anProblem(t, anFreeze(x.env, "2026-10"), http.StatusServiceUnavailable, "REPORTING_KEY_NOT_CONFIGURED")
	anProblem(t, anFreeze(x.env, "2026-11"), http.StatusBadRequest, "MONTH_NOT_COMPLETE")

	x.restart(anReportingKey(t, 13))
	x.verifyReport(anFreeze(x.env, "2026-10").want(t, http.StatusCreated), "2026-10", x.expect("2026-10", only))
}
