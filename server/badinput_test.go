package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/approval/approvaltest"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/server"
	"github.com/clearancehq/clearance/store/pgstore/pgtest"
	"github.com/clearancehq/clearance/tenant"
)

// The bad-input suite (DESIGN §6: "Bad input gets a 4xx with a clear code
// and detail, never a 5xx, and changes nothing"). It reads the route table
// from routes.go, so a new route cannot be forgotten: every route must have
// bad-input cases here, and every case must be refused with a 4xx and a
// stable code (or, on the automation connector's routes, the refusal OAuth
// prescribes: see answerKind), never authorize, and change nothing —
// checked after every case on both orgs' ledger heads, and after the
// battery on everything the API shows and on every byte of the store.

// Categories of bad input, as reported in the totals.
const (
	catMalformed = "malformed JSON"
	catTrailing  = "trailing data"
	catDuplicate = "duplicate members"
	catDepth     = "nesting deeper than 64"
	catOversize  = "oversize body"
	catNonObject = "null, array or scalar instead of an object"
	catWrongType = "wrong member types"
	catUnknown   = "unknown members"
	catAmount    = "bad amounts and numbers"
	catMedia     = "wrong Content-Type"
	catUTF8      = "invalid UTF-8"
	catIdent     = "control characters or overlong identifiers"
	catValue     = "invalid values"
	catHeader    = "bad Idempotency-Key or correlation id"
	catSigned    = "bad signed intents"
	catPath      = "bad path parameters"
	catQuery     = "bad query parameters"
	catOrg       = "org_id of another or no org, or malformed"
	catNoCred    = "missing or malformed credential"
	catForeign   = "another org's credential"
	catScope     = "credential without the scope"
	catPlatform  = "platform key where an org key is needed or vice versa"
	catMethod    = "method the path does not serve"
	catLookAlike = "look-alike names (zero-width, bidi, blank, homoglyph, case)"
	catLimits    = "too many members or elements, NUL in a string"
	catFresh     = "stale or future signed intents"
	catCSRF      = "signed-in change without the CSRF header"
)

// unknownID is a well-formed UUID that names nothing.
const unknownID = "01900000-0000-7000-8000-000000000000"

// tableRoute is one line of the route table.
type tableRoute struct {
	pattern, method, path string
	auth                  string         // authPublic, authKey or authPlatform
	scopes                []tenant.Scope // any of these admits an org key; nil: any key
}

// readRouteTable parses routes.go (go test runs in the package directory):
// every composite literal with a `pattern:` string is a route.
func readRouteTable(t *testing.T) []tableRoute {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "routes.go", nil, 0)
	if err != nil {
		t.Fatalf("parse the route table: %v", err)
	}
	scopeByName := map[string]tenant.Scope{
		"ScopeDecisionWrite": tenant.ScopeDecisionWrite, "ScopeDecisionRead": tenant.ScopeDecisionRead,
		"ScopePolicyWrite": tenant.ScopePolicyWrite, "ScopePolicyRead": tenant.ScopePolicyRead,
		"ScopeAuditRead": tenant.ScopeAuditRead, "ScopeAuditWrite": tenant.ScopeAuditWrite,
		"ScopeIntegrationWrite": tenant.ScopeIntegrationWrite, "ScopeAutomation": tenant.ScopeAutomation,
		"ScopeEscalationWrite": tenant.ScopeEscalationWrite,
		"ScopeOrgAll":          tenant.ScopeOrgAll,
	}
	sets := map[string][]tenant.Scope{} // package-level scope sets by name
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.VAR {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				cl, ok := vs.Values[i].(*ast.CompositeLit)
				if !ok {
					continue
				}
				var set []tenant.Scope
				for _, el := range cl.Elts {
					if sel, ok := el.(*ast.SelectorExpr); ok {
						sc, known := scopeByName[sel.Sel.Name]
						if !known {
							t.Fatalf("routes.go: scope %s is unknown to the bad-input suite", sel.Sel.Name)
						}
						set = append(set, sc)
					}
				}
				if len(set) > 0 {
					sets[name.Name] = set
				}
			}
		}
	}
	var routes []tableRoute
	ast.Inspect(f, func(n ast.Node) bool {
		cl, ok := n.(*ast.CompositeLit)
		if !ok {
			return true
		}
		var r tableRoute
		for _, el := range cl.Elts {
			kv, ok := el.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			key, _ := kv.Key.(*ast.Ident)
			if key == nil {
				continue
			}
			at := fset.Position(kv.Pos())
			switch key.Name {
			case "pattern":
				lit, ok := kv.Value.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Fatalf("%s: pattern is not a string literal", at)
				}
				r.pattern, _ = strconv.Unquote(lit.Value)
			case "auth":
				id, ok := kv.Value.(*ast.Ident)
				if !ok {
					t.Fatalf("%s: auth is not an identifier", at)
				}
				r.auth = id.Name
			case "scopes":
				id, ok := kv.Value.(*ast.Ident)
				if !ok || sets[id.Name] == nil {
					t.Fatalf("%s: cannot resolve the scope set", at)
				}
				r.scopes = sets[id.Name]
			}
		}
		if r.pattern != "" {
			r.method, r.path, _ = strings.Cut(r.pattern, " ")
			routes = append(routes, r)
		}
		return true
	})
	if len(routes) < 30 {
		t.Fatalf("found only %d routes in routes.go: has the table moved?", len(routes))
	}
	return routes
}

// badCase is one bad request.
type badCase struct {
	category, name string
	method, path   string // path with its query
	key            string // bearer secret; "" sends no Authorization
	body           string
	hasBody        bool
	chunked        bool              // send the body without a Content-Length
	headers        map[string]string // "" removes a header
	rawHeaders     http.Header       // set verbatim: empty values and repeats included
	status         int               // the status wanted; 0: any 4xx
	want           []string          // the codes allowed; nil: any stable code
	// answer is what the refusal is when it is not a problem (the
	// automation connector's pages, redirects and OAuth errors; want then
	// holds OAuth error codes), checked by checkAnswer.
	answer     answerKind
	redirectTo string // answerRedirect: the registered redirect URI the browser goes back to
	state      string // answerRedirect: the state it carries back ("": none)
}

// req is a route's accepted request, the base of its bad variants.
type req struct {
	method, path, query, key, body string
	headers                        map[string]string // sent with the request and its variants
}

func (q req) url() string { return q.path + q.query }

// orgSource says where a route reads the org it acts on from.
type orgSource int

const (
	orgNone orgSource = iota
	orgQuery
	orgBody
	orgPath
)

// routeSpec says how to build a route's accepted request and its bad inputs.
type routeSpec struct {
	params      map[string]string // path wildcard -> this org's value
	paramCodes  []string          // codes of a bad path parameter
	org         orgSource
	body        string            // the accepted body (POST)
	emptyOK     bool              // an empty body is accepted too (no "empty body" case)
	openUnknown []string          // member paths whose members are open
	amounts     []string          // body templates: @@ is an amount literal
	numbers     []string          // body templates: @@ is a non-amount number literal
	idents      []string          // body templates: @@ is a JSON string naming something
	grammar     []string          // body templates: @@ is a JSON string that must follow a name grammar
	idem, corr  bool              // reads the Idempotency-Key / X-Correlation-Id headers
	foreign     bool              // the accepted body names this org's resources
	query       string            // the accepted query string ("?…"), e.g. a required org_id
	headers     map[string]string // headers of the accepted request (a public route's credential)
	key         string            // the accepted request's credential ("": the one its auth takes)
	extra       func(q req) []badCase
	form        bool // the body is application/x-www-form-urlencoded: formCases, not bodyCases
	redirects   bool // the accepted answer is a 303 (a browser form), not followed
	// late runs after the route's accepted request, in its phase: refusals
	// that change something by design (a replayed code revokes a credential).
	late func(t *testing.T)
	// envelope builds the bad bodies of a route whose body the server does
	// not decode (a UCP checkout envelope, validated by the engine, which
	// answers its own codes): they replace bodyCases.
	envelope func(q req) []badCase
	// phase orders the accepted requests, sent after the battery: a route's
	// goes after every route of a lower phase, because it spoils what those
	// rely on. Routes of one phase do not depend on each other.
	phase int
}

// Phases of the accepted requests (routeSpec.phase).
const (
	phaseSpoilsGrants = 1 + iota // publishing activates a new bundle: earlier grants go stale
	phaseAfterPublish            // activation rolls back what the publish activated
	phaseRevokes                 // revoking share links fails every older link
)

// badSuite is the battery's state.
type badSuite struct {
	t      *testing.T
	x      *execEnv
	a, b   org               // this org and a foreign one
	scoped map[string]string // scope -> a key of org a with only that scope

	byCategory map[string]int
	byCode     map[string]int
	byRoute    map[string]int
	fiveXX     int
	authorized int
}

func TestBadInputOnEveryRoute(t *testing.T) {
	t.Parallel()
	table := readRouteTable(t)

	var fake *approvaltest.Service
	var mailbox string // where sign-up codes are mailed
	x := newExecEnvWith(t, badInputBundle, func(x *execEnv) {
		fake = approvaltest.New(t, approvaltest.Options{Now: x.clock})
		x.approvals = fakeDirectory{fake}
		x.secretsKey = testSecretsKey
		mailbox = badInputMailbox(t, x)
	})
	s := &badSuite{t: t, x: x, a: x.o, scoped: map[string]string{},
		byCategory: map[string]int{}, byCode: map[string]int{}, byRoute: map[string]int{}}
	s.b = x.createOrg("Foreign")
	for _, sc := range tenant.AllScopes {
		if sc != tenant.ScopeOrgAll {
			s.scoped[string(sc)] = x.createKey(s.a, string(sc))
		}
	}
	// Resources the bad requests aim at.
	spareAgent, spareProvider := mustKey(t, 60), mustKey(t, 61)
	x.registerKey(t, pathAgentKeys, s.a.Key, spareAgent, "").want(t, http.StatusCreated)
	x.registerKey(t, pathProvKeys, s.a.Key, spareProvider, "psp.spare").want(t, http.StatusCreated)
	dec := x.req(t, "POST", pathEvaluate, s.a.Key, `{"amount":5}`, nil).want(t, http.StatusOK)
	decB := x.req(t, "POST", pathEvaluate, s.b.Key, `{"amount":5}`, nil).want(t, http.StatusOK)
	rg := x.grantFor(t, intentSpec{}) // INDETERMINATE: the reconcile target
	rc := x.claimed(t, rg).str("claim_token")
	x.advance(30 * time.Second)
	x.finalize(t, rg.token, rc, "COMMITTED", nil).want(t, http.StatusConflict)
	g := x.grantFor(t, intentSpec{})  // ISSUED: verify-token and claim-token
	g2 := x.grantFor(t, intentSpec{}) // ISSUED: consume-token
	fg := x.grantFor(t, intentSpec{}) // CLAIMED, lease live: finalize-token
	fclaim := x.claimed(t, fg)
	fc := fclaim.str("claim_token")
	jws, _ := x.intent(t, intentSpec{}) // signed, never bound: enforce-and-bind
	// Managed escalations: one to read and complete, one to cancel.
	escalate := func() string {
		j, _ := x.intent(t, intentSpec{amount: 2000, mutate: managedIntent})
		return x.bind(t, j, nil).want(t, http.StatusOK).str("managed_escalation.escalation_id")
	}
	esc, escCancel := escalate(), escalate()
	newAgent, newProvider := mustKey(t, 62), mustKey(t, 63)
	ev := s.evidenceTargets(dec, decB) // decides and claims: before the ledgers are sealed
	exp := s.exportTargets()           // builds validation packs: before the ledgers are sealed
	hooks := s.webhookTargets()        // decides: before the ledgers are sealed
	ucpTargets := s.checkoutTargets()  // registers merchant keys: before the ledgers are sealed
	spendGrant := s.spendTargets()     // claims: before the ledgers are sealed
	// Seal both ledgers now, so that the proof routes have a checkpoint and
	// the seal route's accepted request finds nothing new to seal.
	treeSize := x.req(t, "POST", pathSeal, s.a.Key, `{}`, nil).want(t, http.StatusOK).num("tree_size")
	x.req(t, "POST", pathSeal, s.b.Key, `{}`, nil).want(t, http.StatusOK)

	specs := s.specs(specArgs{
		dossierID: dec.str("dossier_id"), decisionID: dec.str("decision_id"), dossierB: decB.str("dossier_id"),
		decisionB: decB.str("decision_id"), jws: jws, g: g, g2: g2, fg: fg, fc: fc, rg: rg,
		attestation: fclaim.str("claim_attestation"), spareAgent: spareAgent.KID(), spareProvider: spareProvider.KID(), ev: ev,
		newAgent: newAgent, newProvider: newProvider, treeSize: strconv.FormatUint(uint64(treeSize), 10),
		esc: esc, escCancel: escCancel,
	})
	for pattern, spec := range s.exportSpecs(exp) {
		specs[pattern] = spec
	}
	for pattern, spec := range s.webhookSpecs(hooks) {
		specs[pattern] = spec
	}
	for pattern, spec := range s.signalSpecs() {
		specs[pattern] = spec
	}
	for pattern, spec := range s.onboardingSpecs(mailbox) {
		specs[pattern] = spec
	}
	for pattern, spec := range s.workspaceSpecs(mailbox) {
		specs[pattern] = spec
	}
	for pattern, spec := range s.checkoutSpecs(ucpTargets) {
		specs[pattern] = spec
	}
	for pattern, spec := range s.analyticsSpecs() {
		specs[pattern] = spec
	}
	for pattern, spec := range s.spendSpecs(spendGrant) {
		specs[pattern] = spec
	}
	s.addPolicyLifecycleSpecs(specs, dec, decB)
	s.addFederationSpecs(specs, dec, decB)
	for pattern, spec := range s.policySourceSpecs() {
		specs[pattern] = spec
	}
	for pattern, spec := range s.readerSpecs(specArgs{dossierID: dec.str("dossier_id")}) {
		specs[pattern] = spec
	}
	for pattern, spec := range s.consolePageSpecs() {
		specs[pattern] = spec
	}
	for pattern, spec := range s.privacySpecs() {
		specs[pattern] = spec
	}
	for pattern, spec := range s.platformSpecs() {
		specs[pattern] = spec
	}
	for pattern, spec := range s.consoleSpecs() {
		specs[pattern] = spec
	}
	for pattern, spec := range s.shareTrioSpecs(dec.str("dossier_id"), decB.str("dossier_id")) {
		specs[pattern] = spec
	}

	// Every route has cases, and every spec is a route.
	served := map[string][]string{} // path -> methods
	for _, r := range table {
		served[r.path] = append(served[r.path], r.method)
	}
	for _, r := range table {
		if _, ok := specs[r.pattern]; !ok {
			t.Errorf("route %q has no bad-input cases: add it to the bad-input suite", r.pattern)
		}
	}
	for p := range specs {
		if !slices.ContainsFunc(table, func(r tableRoute) bool { return r.pattern == p }) {
			t.Errorf("the bad-input suite covers %q, which routes.go does not serve", p)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	before := s.snapshot(t)
	fpBefore := s.x.fingerprint(t)
	heads := s.heads(t)
	controls := make([]req, 0, len(table))
	for _, r := range table {
		spec := specs[r.pattern]
		q := s.accepted(r, spec)
		controls = append(controls, q)
		cases := s.cases(r, spec, q, served[r.path])
		if len(cases) == 0 {
			t.Errorf("route %q: no bad-input cases were generated", r.pattern)
		}
		t.Run(r.pattern, func(t *testing.T) {
			for _, c := range cases {
				res := s.send(t, c)
				s.check(t, r, c, res)
				if now := s.heads(t); now != heads {
					t.Errorf("%s / %s: the request changed the ledger head %v -> %v: %s", c.category, c.name, heads, now, res)
					heads = now
				}
			}
		})
	}

	// Nothing changed: what the API shows, and every byte of the store.
	after := s.snapshot(t)
	if d := cmp.Diff(before, after); d != "" {
		t.Errorf("bad input changed observable state (-before +after):\n%s", d)
	}
	if fp := s.x.fingerprint(t); fp != fpBefore {
		t.Errorf("bad input changed the store: %s", cmp.Diff(fpBefore, fp))
	}

	// Each route's accepted request is accepted: the bad variants were
	// refused for their defect, not for something the base already had.
	// They go by phase (see routeSpec), whatever the table's order.
	order := make([]int, len(table))
	for i := range order {
		order[i] = i
	}
	phase := func(i int) int { return specs[table[i].pattern].phase }
	sort.SliceStable(order, func(i, j int) bool { return phase(order[i]) < phase(order[j]) })
	for _, i := range order {
		r, q := table[i], controls[i]
		var body any
		if q.body != "" {
			body = q.body
		}
		// Reads do not write: an accepted GET leaves every byte of the store
		// as it found it (no sealing, no sweeping, no bookkeeping).
		var fp string
		if q.method == http.MethodGet {
			fp = s.x.fingerprint(t)
		}
		var res *result
		if specs[r.pattern].redirects {
			res = s.send(t, badCase{category: "accepted", name: r.pattern, method: q.method, path: q.url(), key: q.key,
				body: q.body, hasBody: q.body != "", headers: q.headers})
			if loc, _ := url.Parse(res.Header.Get("Location")); res.Status != http.StatusSeeOther || loc == nil ||
				loc.Query().Has("error") {
				t.Errorf("%s: the accepted request is refused: %s %v", r.pattern, res, res.Header)
			}
		} else {
			res = s.x.req(t, q.method, q.url(), q.key, body, q.headers)
			if res.Status < 200 || res.Status > 299 {
				t.Errorf("%s: the accepted request is refused: %s", r.pattern, res)
			}
		}
		if q.method == http.MethodGet && s.x.fingerprint(t) != fp {
			t.Errorf("%s: a read changed the store", r.pattern)
		}
		if late := specs[r.pattern].late; late != nil {
			late(t)
		}
	}
	s.x.ledgerOK(t)

	total := 0
	for _, n := range s.byCategory {
		total += n
	}
	t.Logf("bad-input totals: routes covered %d of %d, bad inputs tried %d, 5xx seen %d, authorizations %d",
		len(s.byRoute), len(table), total, s.fiveXX, s.authorized)
	for _, c := range sortedCounts(s.byCategory) {
		t.Logf("  %5d  %s", c.n, c.k)
	}
	codes := sortedCounts(s.byCode)
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = fmt.Sprintf("%s %d", c.k, c.n)
	}
	t.Logf("codes answered: %s", strings.Join(parts, ", "))
	if len(s.byRoute) != len(table) || s.fiveXX != 0 || s.authorized != 0 {
		t.Errorf("want every route covered, no 5xx and no authorization")
	}
}

type count struct {
	k string
	n int
}

func sortedCounts(m map[string]int) []count {
	out := make([]count, 0, len(m))
	for k, n := range m {
		out = append(out, count{k, n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].n != out[j].n {
			return out[i].n > out[j].n
		}
		return out[i].k < out[j].k
	})
	return out
}

// ---------------------------------------------------------------------------
// Sending and checking

// send sends one case without following redirects (a 3xx is an answer).
func (s *badSuite) send(t *testing.T, c badCase) *result {
	t.Helper()
	var body io.Reader
	if c.hasBody {
		body = strings.NewReader(c.body)
		if c.chunked {
			body = io.MultiReader(body) // hides the length: chunked
		}
	}
	rq, err := http.NewRequest(c.method, s.x.srv.URL+c.path, body)
	if err != nil {
		t.Fatalf("%s / %s: %v", c.category, c.name, err)
	}
	if c.hasBody {
		rq.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		rq.Header.Set("Authorization", "Bearer "+c.key)
	}
	for k, v := range c.headers {
		if v == "" {
			rq.Header.Del(k)
			continue
		}
		rq.Header.Set(k, v)
	}
	for k, vs := range c.rawHeaders {
		rq.Header[k] = vs
	}
	client := &http.Client{Transport: s.x.tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	res, err := client.Do(rq)
	if err != nil {
		t.Fatalf("%s / %s: %v", c.category, c.name, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s / %s: read body: %v", c.category, c.name, err)
	}
	r := &result{Status: res.StatusCode, Header: res.Header, Raw: raw, what: c.method + " " + shorten(c.path)}
	if len(raw) > 0 && raw[0] == '{' {
		_ = json.Unmarshal(raw, &r.JSON)
	}
	return r
}

func shorten(s string) string {
	if len(s) > 160 {
		return s[:150] + fmt.Sprintf("…(%d bytes)", len(s))
	}
	return s
}

// check asserts the answer to one bad request.
func (s *badSuite) check(t *testing.T, r tableRoute, c badCase, res *result) {
	t.Helper()
	s.byCategory[c.category]++
	s.byRoute[r.pattern]++
	what := c.category + " / " + c.name
	if res.Status >= 500 {
		s.fiveXX++
		t.Errorf("%s: server error: %s", what, res)
		return
	}
	if authorizes(res.JSON) || redirectsWithCode(res) {
		s.authorized++
		t.Errorf("%s: a bad request authorized: %s %v", what, res, res.Header.Get("Location"))
	}
	if res.Status < 400 && c.answer != answerRedirect {
		t.Errorf("%s: want a 4xx: %s", what, res)
		return
	}
	// A refused request echoes no correlation id, and the request id it
	// answers with is visible ASCII (a bad one sent is replaced).
	if corr := res.Header.Get(server.HeaderCorrelationID); corr != "" {
		t.Errorf("%s: X-Correlation-Id %q echoed on a refusal: %s", what, corr, res)
	}
	if rid := res.Header.Get(server.HeaderRequestID); !clearance.ValidToken(rid) {
		t.Errorf("%s: X-Request-Id %q is not visible ASCII: %s", what, rid, res)
	}
	if c.status != 0 && res.Status != c.status {
		t.Errorf("%s: want %d: %s", what, c.status, res)
	}
	if c.answer != answerProblem {
		s.checkAnswer(t, c, res, what)
		return
	}
	code := res.str("code")
	s.byCode[code]++
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	switch {
	case mt == "application/problem+json":
		if res.JSON == nil || int(res.num("status")) != res.Status || res.str("type") != "about:blank" || res.str("title") == "" ||
			res.str("detail") == "" || res.str("request_id") == "" || res.str("request_id") != res.Header.Get(server.HeaderRequestID) {
			t.Errorf("%s: not a complete problem: %s", what, res)
		}
	case mt == "application/json" && res.Status == http.StatusConflict &&
		(strings.HasSuffix(r.path, "/claim-token") || strings.HasSuffix(r.path, "/consume-token") || strings.HasSuffix(r.path, "/finalize-token")):
		// The documented decision-shaped 409 bodies (FailedClaim,
		// ExecutionFinalizeResponse) carry the same stable codes.
		if lookup(res.JSON, "should_execute") == true {
			t.Errorf("%s: a 409 body says should_execute: %s", what, res)
		}
	default:
		t.Errorf("%s: Content-Type %q, want application/problem+json: %s", what, res.Header.Get("Content-Type"), res)
	}
	if !validCode(code) {
		t.Errorf("%s: code %q is not a stable UPPER_SNAKE code: %s", what, code, res)
	}
	if c.want != nil && !slices.Contains(c.want, code) {
		t.Errorf("%s: want code %v: %s", what, c.want, res)
	}
}

// authorizes reports whether a body could be read as permission to act:
// should_execute true, or any token, grant or key secret.
func authorizes(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, m := range x {
			switch k {
			case "should_execute":
				if m == true {
					return true
				}
			case "execution_token", "claim_token", "claim_attestation", "grant", "api_key", "verification_envelope", "access_token":
				if m != nil && m != "" {
					return true
				}
			}
			if authorizes(m) {
				return true
			}
		}
	case []any:
		for _, m := range x {
			if authorizes(m) {
				return true
			}
		}
	}
	return false
}

// head is an org's ledger head.
type head struct{ seq, hash string }

// heads returns both orgs' ledger heads.
func (s *badSuite) heads(t *testing.T) [2]head {
	t.Helper()
	var out [2]head
	for i, o := range []org{s.a, s.b} {
		r := s.x.req(t, "GET", pathLedger+"?limit=1", o.Key, nil, nil).want(t, http.StatusOK)
		out[i] = head{fmt.Sprint(lookup(r.JSON, "head.seq")), r.str("head.entry_hash")}
	}
	return out
}

// snapshot is what the API shows of both orgs.
func (s *badSuite) snapshot(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	window := "?from=" + execStart.Add(-24*time.Hour).Format(time.RFC3339) + "&to=" + execStart.Add(24*time.Hour).Format(time.RFC3339)
	for _, o := range []org{s.a, s.b} {
		for _, p := range []string{pathVerify, pathLedger + "?limit=1000", pathBundles, pathAgentKeys, pathProvKeys,
			pathReconcile, pathShadow + window} {
			r := s.x.req(t, "GET", p, o.Key, nil, nil).want(t, http.StatusOK)
			out[o.ID+" "+p] = string(r.Raw)
		}
	}
	out["jwks"] = string(s.x.req(t, "GET", pathJWKS, "", nil, nil).want(t, http.StatusOK).Raw)
	return out
}

// fingerprint digests every record of the store: Pebble's keys and values
// (with the store closed for a moment), or every row of the PostgreSQL
// schema.
func (x *execEnv) fingerprint(t *testing.T) string {
	t.Helper()
	h := sha256.New()
	n := 0
	if onPostgres(t) {
		ctx := context.Background()
		schema := pgSchemaOf(t, x.dbDir)
		db := pgtest.Admin(t)
		rows, err := db.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`, schema)
		if err != nil {
			t.Fatal(err)
		}
		tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tb := range tables {
			var cnt int64
			var sum string
			q := fmt.Sprintf(`SELECT count(*), coalesce(md5(string_agg(t::text, E'\n' ORDER BY t::text)), '') FROM %s t`,
				pgx.Identifier{schema, tb}.Sanitize())
			if err := db.QueryRow(ctx, q).Scan(&cnt, &sum); err != nil {
				t.Fatalf("%s: %v", tb, err)
			}
			out = append(out, fmt.Sprintf("%s:%d:%s", tb, cnt, sum))
		}
		return strings.Join(out, " ")
	}
	x.stop()
	db, err := pebble.Open(x.dbDir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	for it.First(); it.Valid(); it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			t.Fatal(err)
		}
		var l [8]byte
		for _, b := range [][]byte{it.Key(), v} {
			binary.BigEndian.PutUint64(l[:], uint64(len(b)))
			h.Write(l[:])
			h.Write(b)
		}
		n++
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	x.open(x.ring)
	return fmt.Sprintf("%d records, sha256 %x", n, h.Sum(nil))
}

// ---------------------------------------------------------------------------
// The routes

type specArgs struct {
	dossierID, decisionID, dossierB, decisionB string
	treeSize                                   string // of org a's sealed ledger
	jws                                        string
	g, g2, fg, rg                              issued
	fc, attestation                            string
	spareAgent, spareProvider                  string
	newAgent, newProvider                      grant.Key
	ev                                         evidenceArgs // targets of the chain, override and dispatch routes
	esc, escCancel                             string       // pending managed escalations of org a
}

// lit is a JSON string literal.
func lit(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func jwkJSON(m map[string]any) string {
	b, _ := json.Marshal(m)
	return string(b)
}

// specs describes every route of the table by its pattern.
func (s *badSuite) specs(a specArgs) map[string]routeSpec {
	x := s.x
	const bundle = `{"bundle_id":"bad","version":"bad-1","mode":"SHADOW","rules":[{"id":"r1","match":[{"field":"amount","op":"ge","value":1000}],"outcome":"BLOCK","reason_codes":["BIG"]}],"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`
	bundleTpl := func(member string) string { // a bundle with one member replaced by @@
		return map[string]string{
			"bundle_id": `{"bundle_id":@@,"version":"bad-1","mode":"SHADOW","rules":[],"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`,
			"version":   `{"bundle_id":"bad","version":@@,"mode":"SHADOW","rules":[],"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`,
			"rule id":   `{"bundle_id":"bad","version":"bad-1","mode":"SHADOW","rules":[{"id":@@,"outcome":"BLOCK","reason_codes":["BIG"]}],"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`,
			"reason":    `{"bundle_id":"bad","version":"bad-1","mode":"SHADOW","rules":[],"default":{"outcome":"ALLOW","reason_codes":[@@]}}`,
			"field":     `{"bundle_id":"bad","version":"bad-1","mode":"SHADOW","rules":[{"id":"r1","match":[{"field":@@,"op":"eq","value":"x"}],"outcome":"BLOCK","reason_codes":["BIG"]}],"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`,
			"value":     `{"bundle_id":"bad","version":"bad-1","mode":"SHADOW","rules":[{"id":"r1","match":[{"field":"amount","op":"ge","value":@@}],"outcome":"BLOCK","reason_codes":["BIG"]}],"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`,
		}[member]
	}
	selectorTpl := func(member string) string { // a bundle whose rule selects @@ on member
		return `{"bundle_id":"bad","version":"bad-1","mode":"SHADOW","rules":[{"id":"r1","` + member +
			`":[@@],"outcome":"BLOCK","reason_codes":["BIG"]}],"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`
	}
	bundles := routeSpec{
		org: orgQuery, body: bundle, phase: phaseSpoilsGrants,
		numbers: []string{bundleTpl("value")},
		idents:  []string{bundleTpl("bundle_id"), bundleTpl("version"), bundleTpl("rule id"), bundleTpl("reason"), bundleTpl("field")},
		grammar: []string{selectorTpl("decision_types"), selectorTpl("workflow_keys"), selectorTpl("surfaces")},
		extra: func(q req) []badCase {
			return s.values(q, []string{
				strings.Replace(bundle, `"mode":"SHADOW"`, `"mode":"ENFORCE"`, 1),
				strings.Replace(bundle, `"version":"bad-1"`, `"version":"bad 1!"`, 1),
				strings.Replace(bundle, `"outcome":"BLOCK"`, `"outcome":"MAYBE"`, 1),
				strings.Replace(bundle, `"op":"ge"`, `"op":"gte"`, 1),
				strings.Replace(bundle, `"match":[{"field":"amount","op":"ge","value":1000}]`, `"when":"intent.amount >"`, 1),
				strings.Replace(bundle, `"match":[{"field":"amount","op":"ge","value":1000}]`, `"when":"intent.amount + 'x'"`, 1),
				`{"bundle_id":"bad","version":"bad-1"}`,
				`{}`,
				// The org's published v1 with other content.
				strings.Replace(bundle, `"version":"bad-1"`, `"version":"v1"`, 1),
			})
		},
	}
	bundlesGet := routeSpec{org: orgQuery}
	// The accepted activation rolls back to v1 from bad-1, which the accepted
	// publish (an earlier phase) activates; during the battery v1 is active,
	// so it could change nothing, and every bad variant is refused anyway.
	activate := routeSpec{org: orgQuery, phase: phaseAfterPublish, params: map[string]string{"version": "v1"}, paramCodes: []string{"POLICY_VERSION_NOT_FOUND"},
		body: `{"expected_active_version":"bad-1"}`, idents: []string{`{"expected_active_version":@@}`},
		extra: func(q req) []badCase {
			out := s.values(q, []string{`{"expected_active_version":""}`, `{"expected_active_version":null}`,
				`{"expected_active_version":"v 1"}`, `{"expected_active_version":"v1/../v2"}`,
				`{"expected_active_version":` + lit(strings.Repeat("v", 101)) + `}`})
			for _, c := range []struct{ name, path, code string }{
				{"unknown version", "never-published", "POLICY_VERSION_NOT_FOUND"},
				{"a version of bad grammar", "v%201", "POLICY_VERSION_NOT_FOUND"},
				{"a version that was refused", "bad-1", "POLICY_VERSION_NOT_FOUND"},
			} {
				p := q
				p.path = strings.Replace(q.path, "/v1/activate", "/"+c.path+"/activate", 1)
				out = append(out, s.variant(p, catPath, c.name, p.body, c.code))
			}
			return out
		}}
	bundleGet := routeSpec{org: orgQuery, params: map[string]string{"version": "v1"},
		paramCodes: []string{"POLICY_VERSION_NOT_FOUND"}}

	const decision = `{"amount":5,"decision_type":"REFUND","workflow_key":"refunds","actor":{"id":"agent-7","type":"agent"},"action":{"type":"refund","amount":5,"currency":"EUR","target":"order-1"}}`
	decisionIdents := []string{
		`{"amount":5,"decision_type":@@}`, `{"amount":5,"workflow_key":@@}`, `{"amount":5,"surface":@@}`,
		`{"amount":5,"vertical_pack":@@}`, `{"amount":5,"objective_profile":@@}`, `{"amount":5,"actor":{"id":@@}}`,
		`{"amount":5,"actor":{"id":"a","type":@@}}`, `{"action":{"type":@@,"amount":5}}`, `{"action":{"type":"pay","currency":@@}}`,
		`{"action":{"type":"pay","target":@@}}`,
	}
	decisionAmounts := []string{`{"amount":@@}`, `{"action":{"type":"refund","amount":@@}}`, `{"amount":@@,"workflow_key":"refunds"}`}
	decisionNumbers := []string{`{"amount":5,"risk_score":@@}`}
	decisionValues := func(q req) []badCase {
		return s.values(q, []string{
			`{"amount":5,"mode":"ENFORCE"}`, `{"amount":5,"mode":"shadow"}`, `{"amount":5,"action":{"amount":6}}`,
			`{"amount":5,"context":{"policy_version":5}}`, `{"amount":5,"context":{"policy_version":"  "}}`,
			`{"amount":5,"context":{"policy_version":"never-published"}}`, `{"amount":5,"context":[]}`,
			`{"amount":5,"context":"x"}`, `{"amount":5,"action":{"parameters":[]}}`,
		})
	}
	decisionGrammar := []string{`{"amount":5,"decision_type":@@}`, `{"amount":5,"workflow_key":@@}`, `{"amount":5,"surface":@@}`}
	evaluate := routeSpec{org: orgBody, body: decision, amounts: decisionAmounts, numbers: decisionNumbers,
		idents: decisionIdents, grammar: decisionGrammar, idem: true, corr: true, extra: decisionValues}
	gateIdents := append(slices.Clone(decisionIdents), `{"amount":5,"idempotency_key":@@}`, `{"amount":5,"correlation_id":@@}`)
	gateExtra := func(q req) []badCase {
		out := decisionValues(q)
		for _, h := range []string{server.HeaderIdempotencyKey, server.HeaderCorrelationID} {
			member := map[string]string{server.HeaderIdempotencyKey: "idempotency_key", server.HeaderCorrelationID: "correlation_id"}[h]
			out = append(out, s.variant(q, catHeader, h+" differs from the body", `{"amount":5,"`+member+`":"body-1"}`,
				"HEADER_BODY_MISMATCH").with(h, "header-1"))
		}
		return out
	}
	gate := routeSpec{org: orgBody, body: decision, amounts: decisionAmounts, numbers: decisionNumbers,
		idents: gateIdents, grammar: decisionGrammar, idem: true, corr: true, extra: gateExtra}
	crm := gate
	crm.org = orgPath
	crm.params = map[string]string{"orgId": s.a.ID}
	crm.paramCodes = []string{"ORG_MISMATCH"}
	crm.extra = func(q req) []badCase {
		out := gateExtra(q)
		out = append(out, s.variant(q, catOrg, "body org_id differs from the path", `{"org_id":`+lit(s.b.ID)+`,"amount":5}`, "PATH_BODY_MISMATCH"))
		for _, c := range []struct{ name, id, code string }{
			{"platform key, malformed path org", "not-a-uuid", "INVALID_REQUEST"},
			{"platform key, unknown path org", unknownID, "ORG_NOT_FOUND"},
			{"platform key, uppercase path org", strings.ToUpper(s.a.ID), "INVALID_REQUEST"},
		} {
			p := q
			p.path, p.key = pathCRM(c.id), x.platform
			out = append(out, s.variant(p, catOrg, c.name, p.body, c.code))
		}
		return out
	}

	const cloud = `{"intent":{"action_type":"refund","amount":5,"currency":"EUR","target":"order-1","actor":{"id":"agent-7","type":"agent"}},"decision_type":"REFUND","workflow_key":"refunds","system_of_record":"crm"}`
	cloudSpec := routeSpec{org: orgBody, body: cloud, openUnknown: []string{"intent"}, idem: true, corr: true,
		amounts: []string{`{"intent":{"action_type":"refund","amount":@@}}`},
		idents: []string{`{"decision_type":@@,"intent":{"action_type":"x"}}`, `{"workflow_key":@@,"intent":{"action_type":"x"}}`,
			`{"system_of_record":@@,"intent":{"action_type":"x"}}`, `{"intent":{"action_type":@@}}`,
			`{"intent":{"action_type":"x","currency":@@}}`, `{"intent":{"action_type":"x","target":@@}}`,
			`{"intent":{"action_type":"x","actor":{"id":@@}}}`},
		grammar: []string{`{"decision_type":@@,"intent":{"action_type":"x"}}`, `{"workflow_key":@@,"intent":{"action_type":"x"}}`},
		extra: func(q req) []badCase {
			return s.values(q, []string{`{"intent":{}}`, `{}`, `{"intent":{"action_type":""}}`, `{"mode":"ENFORCE","intent":{"action_type":"x"}}`,
				`{"intent":null}`, `{"intent":{"action_type":"x","actor":[]}}`})
		},
	}

	tokenBody := func(gr issued) string {
		return `{"execution_token":` + lit(gr.token) + `,"intent_hash":` + lit(gr.hash) + `}`
	}
	tokenIdents := func(gr issued, claim bool) []string {
		out := []string{`{"execution_token":@@,"intent_hash":` + lit(gr.hash) + `}`, `{"execution_token":` + lit(gr.token) + `,"intent_hash":@@}`}
		if claim {
			out = append(out, `{"execution_token":`+lit(gr.token)+`,"intent_hash":`+lit(gr.hash)+`,"correlation_id":@@}`)
		}
		return out
	}
	tamper := func(tok string) string { // flips the signature's last character
		last := tok[len(tok)-1]
		repl := byte('A')
		if last == 'A' {
			repl = 'B'
		}
		return tok[:len(tok)-1] + string(repl)
	}
	tokenValues := func(gr, other issued) func(q req) []badCase {
		return func(q req) []badCase {
			parts := strings.Split(gr.token, ".")
			forged := parts[0] + "." + b64([]byte(`{"org":"`+s.a.ID+`","jti":"x"}`)) + "." + parts[2]
			return s.values(q, []string{
				`{"execution_token":` + lit(tamper(gr.token)) + `,"intent_hash":` + lit(gr.hash) + `}`,
				`{"execution_token":` + lit(forged) + `,"intent_hash":` + lit(gr.hash) + `}`,
				`{"execution_token":` + lit(a.attestation) + `,"intent_hash":` + lit(gr.hash) + `}`,
				`{"execution_token":` + lit(a.jws) + `,"intent_hash":` + lit(gr.hash) + `}`,
				`{"execution_token":` + lit(gr.token) + `,"intent_hash":` + lit(other.hash) + `}`,
				`{"execution_token":` + lit(gr.token) + `,"intent_hash":"sha256:zz"}`,
				`{"execution_token":` + lit(gr.token) + `}`,
				`{"intent_hash":` + lit(gr.hash) + `}`,
				`{"execution_token":"a.b.c","intent_hash":` + lit(gr.hash) + `}`,
				`{"execution_token":"..","intent_hash":` + lit(gr.hash) + `}`,
				`{"execution_token":` + lit(strings.Repeat("A", 70000)) + `,"intent_hash":` + lit(gr.hash) + `}`,
			})
		}
	}
	verifySpec := routeSpec{org: orgQuery, foreign: true, body: tokenBody(a.g), idents: tokenIdents(a.g, false), extra: tokenValues(a.g, a.g2)}
	claimSpec := routeSpec{org: orgQuery, foreign: true, body: tokenBody(a.g), idents: tokenIdents(a.g, true), extra: tokenValues(a.g, a.g2)}
	consumeSpec := routeSpec{org: orgQuery, foreign: true, body: tokenBody(a.g2), idents: tokenIdents(a.g2, true), extra: tokenValues(a.g2, a.g)}

	ft, fcl := lit(a.fg.token), lit(a.fc)
	evidence := func(kind, status, digest string) string {
		return `{"execution_token":` + ft + `,"claim_token":` + fcl + `,"outcome":"COMMITTED","effect_evidence":{"kind":` + kind +
			`,"status":` + status + `,"effect_digest":` + digest + `}}`
	}
	okDigest := lit(sha256Digest([]byte("effect")))
	finalize := routeSpec{org: orgQuery, foreign: true, body: `{"execution_token":` + ft + `,"claim_token":` + fcl + `,"outcome":"FAILED"}`,
		idents: []string{
			`{"execution_token":@@,"claim_token":` + fcl + `,"outcome":"FAILED"}`,
			`{"execution_token":` + ft + `,"claim_token":@@,"outcome":"FAILED"}`,
			`{"execution_token":` + ft + `,"claim_token":` + fcl + `,"outcome":@@}`,
			evidence("@@", `"CONFIRMED"`, okDigest), evidence(`"psp.charge"`, "@@", okDigest), evidence(`"psp.charge"`, `"CONFIRMED"`, "@@"),
		},
		extra: func(q req) []badCase {
			return s.values(q, []string{
				`{"execution_token":` + ft + `,"claim_token":` + fcl + `,"outcome":"MAYBE"}`,
				`{"execution_token":` + ft + `,"claim_token":` + fcl + `,"outcome":"committed"}`,
				`{"execution_token":` + ft + `,"claim_token":` + fcl + `}`,
				`{"execution_token":` + ft + `,"claim_token":` + lit(tamper(a.fc)) + `,"outcome":"FAILED"}`,
				`{"execution_token":` + ft + `,"claim_token":"","outcome":"FAILED"}`,
				`{"execution_token":` + lit(tamper(a.fg.token)) + `,"claim_token":` + fcl + `,"outcome":"FAILED"}`,
				`{"execution_token":` + lit(a.g.token) + `,"claim_token":` + fcl + `,"outcome":"FAILED"}`,
				`{"execution_token":` + lit(a.attestation) + `,"claim_token":` + fcl + `,"outcome":"FAILED"}`,
				evidence(`"psp.charge"`, `""`, okDigest), evidence(`"psp.charge"`, `"CONFIRMED"`, `"md5:00"`),
				evidence(lit(strings.Repeat("k", 65)), `"CONFIRMED"`, okDigest), evidence(`"SIGNED_RECEIPT"`, `"CONFIRMED"`, okDigest),
				evidence(`"psp.charge"`, `"CONFIRMED"`, lit("sha256:"+strings.Repeat("A", 64))),
				// A receipt never refuses finalization (any profile, any
				// content is recorded as presented); only JSON that is not a
				// receipt object at all is bad input.
				`{"execution_token":` + ft + `,"claim_token":` + fcl + `,"outcome":"COMMITTED","effect_receipt":"VP-3"}`,
				`{"execution_token":` + ft + `,"claim_token":` + fcl + `,"outcome":"COMMITTED","effect_receipt":{"profile":"VP-3","receipt":7}}`,
			})
		},
	}

	keySpec := func(k grant.Key, iss string, spare string) (routeSpec, routeSpec, routeSpec) {
		jwk := jwkJSON(bareJWK(k))
		issPart := ""
		if iss != "" {
			issPart = `"iss":` + lit(iss) + `,`
		}
		body := `{"kid":` + lit(k.KID()) + `,` + issPart + `"public_jwk":` + jwk + `}`
		weak := map[string]any{"kty": "OKP", "crv": "Ed25519", "x": b64(append([]byte{1}, make([]byte, 31)...))}
		private := bareJWK(k)
		private["d"] = b64(make([]byte, 32))
		register := routeSpec{org: orgQuery, body: body, openUnknown: []string{"public_jwk"},
			idents: []string{`{"kid":@@,` + issPart + `"public_jwk":` + jwk + `}`, `{"kid":"k-1","iss":@@,"public_jwk":` + jwk + `}`},
			extra: func(q req) []badCase {
				return s.values(q, []string{
					`{"kid":"k-1",` + issPart + `"public_jwk":` + jwkJSON(private) + `}`,
					`{"kid":"k-1",` + issPart + `"public_jwk":` + jwkJSON(weak) + `}`,
					`{"kid":"k-1",` + issPart + `"public_jwk":{"kty":"OKP","crv":"X25519","x":` + lit(b64(k.Public())) + `}}`,
					`{"kid":"k-1",` + issPart + `"public_jwk":{"kty":"OKP","crv":"Ed25519","x":"AAAA"}}`,
					`{"kid":"k-1",` + issPart + `"public_jwk":{"kty":"RSA","n":"AQAB","e":"AQAB"}}`,
					`{"kid":"k-1",` + issPart + `"public_jwk":{"kty":"OKP","crv":"Ed25519","x":` + lit(b64(k.Public())) + `,"kid":"other"}}`,
					`{"kid":"k-1",` + issPart + `"public_jwk":{}}`,
					`{"kid":"k-1",` + issPart + `"public_jwk":"x"}`,
					`{"kid":"",` + issPart + `"public_jwk":` + jwk + `}`,
					// A registered kid with another key.
					`{"kid":` + lit(spare) + `,` + issPart + `"public_jwk":` + jwk + `}`,
				})
			},
		}
		register.grammar = []string{`{"kid":@@,` + issPart + `"public_jwk":` + jwk + `}`}
		list := routeSpec{org: orgQuery}
		revoke := routeSpec{org: orgQuery, params: map[string]string{"kid": spare}, paramCodes: []string{"KEY_NOT_FOUND", "INVALID_KID"},
			extra: func(q req) []badCase {
				var out []badCase
				for _, kid := range []string{strings.Repeat("k", 201), spare + "%E2%80%8B", "%E2%80%AE" + spare, spare + "%20", "cl%C3%A9"} {
					p := q
					p.path = strings.Replace(q.path, spare, kid, 1)
					c := s.variant(p, catPath, "kid "+shorten(kid), "", "INVALID_KID")
					c.status = http.StatusBadRequest
					out = append(out, c)
				}
				return out
			}}
		return register, list, revoke
	}
	agentRegister, agentList, agentRevoke := keySpec(a.newAgent, "", a.spareAgent)
	provRegister, provList, provRevoke := keySpec(a.newProvider, "psp.new", a.spareProvider)

	reconcile := routeSpec{org: orgQuery, body: `{"resolution":"FAILED","note":"late evidence"}`,
		params: map[string]string{"grantId": a.rg.grantID}, paramCodes: []string{"GRANT_NOT_FOUND"},
		idents: []string{`{"resolution":@@}`,
			`{"resolution":"COMMITTED","effect_evidence":{"kind":@@,"status":"CONFIRMED","effect_digest":` + okDigest + `}}`,
			`{"resolution":"COMMITTED","effect_evidence":{"kind":"psp.charge","status":@@,"effect_digest":` + okDigest + `}}`},
		extra: func(q req) []badCase {
			out := s.values(q, []string{`{"resolution":"MAYBE"}`, `{"resolution":"INDETERMINATE"}`, `{}`,
				`{"resolution":"FAILED","note":` + lit(strings.Repeat("n", 2001)) + `}`,
				`{"resolution":"COMMITTED","effect_evidence":{"kind":"x","status":"","effect_digest":` + okDigest + `}}`,
				`{"resolution":"COMMITTED","effect_receipt":["VP-3"]}`})
			p := q
			p.path = pathReconcile + "/" + a.g.grantID // ISSUED, not INDETERMINATE
			out = append(out, s.variant(p, catValue, "a grant that is not INDETERMINATE", p.body, "NOT_INDETERMINATE"))
			return out
		},
	}

	signedExtra := func(q req) []badCase { return s.signedIntents(q) }

	// The dossier exports require org_id.
	dossierExport := routeSpec{org: orgQuery, query: "?org_id=" + s.a.ID, params: map[string]string{"dossierId": a.dossierID},
		paramCodes: []string{"DOSSIER_NOT_FOUND"}, extra: func(q req) []badCase {
			p := q
			p.path = strings.Replace(q.path, a.dossierID, a.dossierB, 1)
			missing := q
			missing.query = ""
			c := s.variant(missing, catQuery, "no org_id", "", "ORG_ID_REQUIRED")
			c.status = http.StatusBadRequest
			return []badCase{s.variant(p, catForeign, "another org's dossier id", "", "DOSSIER_NOT_FOUND"), c}
		}}

	return map[string]routeSpec{
		"GET /v1/health": {},
		"GET /metrics":   {},

		"POST /v1/platform/orgs": {body: `{"name":"Bad Input Co"}`, idents: []string{`{"name":@@}`},
			extra: func(q req) []badCase {
				return s.values(q, []string{`{"name":""}`, `{"name":"   "}`, `{"name":` + lit(strings.Repeat("n", 201)) + `}`, `{}`})
			}},
		"POST /v1/platform/orgs/{orgId}/api-keys": {params: map[string]string{"orgId": s.a.ID}, paramCodes: []string{"ORG_NOT_FOUND"},
			body: `{"scopes":["audit:read"]}`, idents: []string{`{"scopes":[@@]}`},
			extra: func(q req) []badCase {
				return s.values(q, []string{`{"scopes":["admin"]}`, `{"scopes":["ORG:*"]}`, `{"scopes":["audit:read",""]}`,
					`{"scopes":["audit:read "]}`})
			}},

		"POST /v1/protocol/policies/bundles":                    bundles,
		"POST /v1/policies":                                     bundles,
		"GET /v1/protocol/policies/bundles":                     bundlesGet,
		"GET /v1/policies":                                      bundlesGet,
		"GET /v1/protocol/policies/bundles/{version}":           bundleGet,
		"GET /v1/policies/{version}":                            bundleGet,
		"POST /v1/protocol/policies/bundles/{version}/activate": activate,
		"POST /v1/policies/{version}/activate":                  activate,

		"POST /v1/protocol/evaluate-decision":    evaluate,
		"POST /v1/decisions/evaluate":            evaluate,
		"POST /v1/action-gate/evaluate":          gate,
		"POST /v1/orgs/{orgId}/crm/action-gate":  crm,
		"POST /v1/workspace-app/action-gate":     gate,
		"POST /v1/cloud/agent/extensions/verify": cloudSpec,
		"GET /v1/protocol/reason-codes":          {},
		"GET /v1/protocol/shadow-reports":        {org: orgQuery, extra: s.shadowQueries},

		"POST /v1/authority/enforce-and-bind": {org: orgQuery, foreign: true, body: `{"signed_intent":` + lit(a.jws) + `}`, corr: true,
			idents: []string{`{"signed_intent":@@}`},
			extra: func(q req) []badCase {
				out := s.values(q, []string{`{"signed_intent":` + lit(a.jws) + `,"mode":"ENFORCE"}`,
					`{"signed_intent":` + lit(a.jws) + `,"approval_evidence":"x"}`,
					`{"signed_intent":` + lit(a.jws) + `,"approval_evidence":5}`,
					`{"signed_intent":` + lit(a.jws) + `,"approval_evidence":{"kind":"x"}}`,
					`{"signed_intent":""}`, `{}`, `{"signed_intent":"a.b.c"}`, `{"signed_intent":` + lit(a.g.token) + `}`,
					`{"signed_intent":` + lit(strings.Repeat("A", 70000)) + `}`})
				out = append(out, s.variant(q, catHeader, "Idempotency-Key is not the intent_id", q.body, "IDEMPOTENCY_KEY_NOT_INTENT_ID").
					with(server.HeaderIdempotencyKey, "not-the-intent-id"))
				for _, v := range badTokenHeaders {
					c := s.variant(q, catHeader, "Idempotency-Key "+v.name, q.body, "INVALID_IDEMPOTENCY_KEY")
					c.rawHeaders, c.status = http.Header{server.HeaderIdempotencyKey: v.vs}, http.StatusBadRequest
					out = append(out, c)
				}
				return append(out, signedExtra(q)...)
			}},
		"GET /v1/authority/escalations/{escalationId}": {org: orgQuery, params: map[string]string{"escalationId": a.esc},
			paramCodes: []string{"ESCALATION_NOT_FOUND", "INVALID_ESCALATION_ID"}},
		"DELETE /v1/authority/escalations/{escalationId}": {org: orgQuery, params: map[string]string{"escalationId": a.escCancel},
			paramCodes: []string{"ESCALATION_NOT_FOUND", "INVALID_ESCALATION_ID"}},
		"POST /v1/authority/presence-completions": {org: orgBody, foreign: true, body: `{"escalation_id":` + lit(a.esc) + `}`,
			idents: []string{`{"escalation_id":@@}`, `{"escalation_id":` + lit(a.esc) + `,"request_id":@@}`},
			extra: func(q req) []badCase {
				out := s.values(q, []string{`{}`, `{"escalation_id":"not-a-uuid"}`, `{"escalation_id":` + lit(strings.ToUpper(a.esc)) + `}`,
					`{"escalation_id":` + lit(a.esc) + `,"request_id":"another-request"}`,
					`{"escalation_id":` + lit(a.esc) + `,"request_id":` + lit(strings.Repeat("r", 201)) + `}`,
					`{"escalation_id":` + lit(a.esc) + `,"receipt":"a.b.c"}`})
				return append(out, s.variant(q, catValue, "an unknown escalation", `{"escalation_id":`+lit(unknownID)+`}`, "ESCALATION_NOT_FOUND"))
			}},
		"POST /v1/execution/verify-token":                      verifySpec,
		"POST /v1/execution/claim-token":                       claimSpec,
		"POST /v1/execution/consume-token":                     consumeSpec,
		"POST /v1/execution/finalize-token":                    finalize,
		"GET /.well-known/clearance-execution-grant-jwks.json": {},
		"POST /v1/execution/agent-keys":                        agentRegister,
		"GET /v1/execution/agent-keys":                         agentList,
		"DELETE /v1/execution/agent-keys/{kid}":                agentRevoke,
		"POST /v1/execution/provider-keys":                     provRegister,
		"GET /v1/execution/provider-keys":                      provList,
		"DELETE /v1/execution/provider-keys/{kid}":             provRevoke,
		"GET /v1/execution/reconciliations":                    {org: orgQuery},
		"POST /v1/execution/reconciliations/{grantId}":         reconcile,

		"GET /v1/dossiers/{decisionId}": {org: orgQuery, params: map[string]string{"decisionId": a.decisionID},
			paramCodes: []string{"DOSSIER_NOT_FOUND"}, extra: func(q req) []badCase {
				p := q
				p.path = pathDossierDec + a.decisionB
				return []badCase{s.variant(p, catForeign, "another org's decision id", "", "DOSSIER_NOT_FOUND")}
			}},
		"GET /v1/protocol/dossiers/{dossierId}": {org: orgQuery, params: map[string]string{"dossierId": a.dossierID},
			paramCodes: []string{"DOSSIER_NOT_FOUND"}, extra: func(q req) []badCase {
				p := q
				p.path = pathDossiers + a.dossierB
				return []badCase{s.variant(p, catForeign, "another org's dossier id", "", "DOSSIER_NOT_FOUND")}
			}},
		"GET /v1/protocol/decision-chains/{chainId}":                    s.evidenceSpec(a, "chain"),
		"GET /v1/protocol/decision-chains/by-evaluation/{evaluationId}": s.evidenceSpec(a, "chain by evaluation"),
		"GET /v1/protocol/dossiers/{dossierId}/overrides":               s.evidenceSpec(a, "overrides"),
		"POST /v1/protocol/dossiers/{dossierId}/overrides":              s.evidenceSpec(a, "record override"),
		"GET /v1/protocol/dossiers/{dossierId}/dispatches":              s.evidenceSpec(a, "dispatches"),
		"POST /v1/protocol/executions/dispatches":                       s.evidenceSpec(a, "record dispatch"),

		"GET /v1/protocol/audit/ledger":            {org: orgQuery, extra: s.ledgerQueries},
		"GET /v1/protocol/audit/ledger/verify":     {org: orgQuery, extra: s.checkpointQueries},
		"GET /v1/protocol/audit/ledger/checkpoint": {org: orgQuery},
		"POST /v1/protocol/audit/ledger/checkpoints": {org: orgQuery, body: `{}`, extra: func(q req) []badCase {
			return s.values(q, []string{`{"tree_size":5}`, `{"org_id":` + lit(s.a.ID) + `}`, `{"":1}`})
		}},
		"GET /v1/protocol/audit/ledger/checkpoints/{size}": {org: orgQuery, params: map[string]string{"size": a.treeSize},
			paramCodes: []string{"CHECKPOINT_NOT_FOUND"}},
		"GET /v1/protocol/audit/ledger/proofs/inclusion": {org: orgQuery, query: "?seq=1",
			extra: s.proofQueries("seq", "tree_size", a.treeSize)},
		"GET /v1/protocol/audit/ledger/proofs/consistency": {org: orgQuery, query: "?old_size=" + a.treeSize,
			extra: s.proofQueries("old_size", "new_size", a.treeSize)},
		"GET /.well-known/clearance-ledger-key":                                         {},
		"GET /v1/protocol/dossiers/{dossierId}/proof-packet":                            dossierExport,
		"GET /v1/protocol/dossiers/{dossierId}/agent-action-capsule":                    dossierExport,
		"GET /v1/protocol/dossiers/{dossierId}/agent-action-capsule/producer-envelopes": dossierExport,

		"GET /v1/public/decision-dossiers/{dossierId}/verify": s.shareSpec(a, "verify"),
		"POST /v1/protocol/dossiers/{dossierId}/share-links":  s.shareSpec(a, "create"),
		"DELETE /v1/protocol/share-links":                     s.shareSpec(a, "revoke"),
	}
}

// proofQueries are bad proof parameters: first is required, second
// optional, size is the tree size.
func (s *badSuite) proofQueries(first, second, size string) func(q req) []badCase {
	return func(q req) []badCase {
		var out []badCase
		big := strconv.FormatUint(1<<62, 10)
		for _, v := range []string{first + "=0", first + "=-1", first + "=abc", first + "=1e3", first + "=1.0", first + "=%00",
			first + "=" + big, first + "=99999999999999999999", first + "=1&" + first + "=2", "x=1",
			first + "=1&" + second + "=0", first + "=1&" + second + "=abc", first + "=1&" + second + "=" + big,
			first + "=" + size + "1&" + second + "=" + size} {
			p := q
			p.query = "?" + v
			c := s.variant(p, catQuery, v, "", "INVALID_QUERY", "PROOF_OUT_OF_RANGE", "CHECKPOINT_NOT_FOUND")
			out = append(out, c)
		}
		return out
	}
}

// checkpointQueries are bad auditor checkpoints for the verify route.
func (s *badSuite) checkpointQueries(q req) []badCase {
	var out []badCase
	for _, v := range []string{"checkpoint=", "checkpoint=%%", "checkpoint=!!", "checkpoint=YQ==", "checkpoint=a&checkpoint=b"} {
		if v == "checkpoint=" {
			continue // empty is no checkpoint
		}
		p := q
		p.query = "?" + v
		c := s.variant(p, catQuery, v, "", "INVALID_QUERY")
		c.status = http.StatusBadRequest
		out = append(out, c)
	}
	return out
}

// accepted builds a route's accepted request.
func (s *badSuite) accepted(r tableRoute, spec routeSpec) req {
	path := r.path
	for name, v := range spec.params {
		path = strings.Replace(path, "{"+name+"}", v, 1)
	}
	if strings.Contains(path, "{") {
		s.t.Fatalf("%s: no value for a path parameter", r.pattern)
	}
	q := req{method: r.method, path: path, body: spec.body, query: spec.query, headers: spec.headers}
	switch r.auth {
	case "authPlatform":
		q.key = s.x.platform
	case "authKey":
		q.key = s.a.Key
	}
	if spec.key != "" {
		q.key = spec.key
	}
	return q
}

// variant is a case on q with another body ("" for none).
func (s *badSuite) variant(q req, category, name, body string, want ...string) badCase {
	c := badCase{category: category, name: name, method: q.method, path: q.url(), key: q.key, body: body, hasBody: q.method == "POST" || q.method == "PUT"}
	for k, v := range q.headers {
		c = c.with(k, v)
	}
	if len(want) > 0 {
		c.want = want
	}
	return c
}

// with sets a header of the case.
func (c badCase) with(k, v string) badCase {
	h := map[string]string{}
	for hk, hv := range c.headers {
		h[hk] = hv
	}
	h[k] = v
	c.headers = h
	return c
}

// values are route-specific bodies with invalid values.
func (s *badSuite) values(q req, bodies []string) []badCase {
	out := make([]badCase, 0, len(bodies))
	for _, b := range bodies {
		out = append(out, s.variant(q, catValue, shorten(b), b))
	}
	return out
}

// cases builds every bad request of one route.
func (s *badSuite) cases(r tableRoute, spec routeSpec, q req, methods []string) []badCase {
	var out []badCase
	switch {
	case q.method == "POST" && spec.form:
		out = append(out, s.formCases(q)...)
	case q.method == "POST" && spec.envelope != nil:
		out = append(out, spec.envelope(q)...)
	case q.method == "POST":
		out = append(out, s.bodyCases(q, spec)...)
	}
	out = append(out, s.pathCases(r, spec, q)...)
	// An account route takes a session cookie, no bearer key: its spec's
	// extra cases send the bad cookies.
	if r.auth != "authPublic" && r.auth != "authAccount" {
		out = append(out, s.credentialCases(r, spec, q)...)
	}
	out = append(out, s.orgCases(r, spec, q)...)
	if spec.extra != nil {
		out = append(out, spec.extra(q)...)
	}
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		if !slices.Contains(methods, m) {
			c := s.variant(q, catMethod, m, `{"a":`, "METHOD_NOT_ALLOWED").with("Content-Type", "application/json") // a form route's too
			c.method, c.hasBody, c.status = m, m != "GET", http.StatusMethodNotAllowed
			out = append(out, c)
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// Bodies

// member is one member of a JSON object, in order.
type member struct {
	name  string
	value jsontext.Value
}

func membersOf(t *testing.T, obj string) []member {
	t.Helper()
	dec := jsontext.NewDecoder(strings.NewReader(obj))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		t.Fatalf("not a JSON object: %s", obj)
	}
	var ms []member
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			t.Fatalf("%s: %v", obj, err)
		}
		name := tok.String()
		v, err := dec.ReadValue()
		if err != nil {
			t.Fatalf("%s: %v", obj, err)
		}
		ms = append(ms, member{name, v.Clone()})
	}
	return ms
}

func objectOf(ms []member) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(lit(m.name))
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return b.String()
}

// edit is a body derived from a base by changing the member at path.
type edit struct{ path, body string }

// walk returns, for every member at any depth (objects, and the first
// element of arrays), the bodies that fn derives from its value.
func walk(t *testing.T, obj, prefix string, skip []string, fn func(path string, v jsontext.Value) []string) []edit {
	t.Helper()
	ms := membersOf(t, obj)
	var out []edit
	for i, m := range ms {
		p := strings.TrimPrefix(prefix+"."+m.name, ".")
		if slices.Contains(skip, p) {
			continue
		}
		replace := func(v string) string {
			c := slices.Clone(ms)
			c[i].value = jsontext.Value(v)
			return objectOf(c)
		}
		for _, v := range fn(p, m.value) {
			out = append(out, edit{p, replace(v)})
		}
		switch m.value.Kind() {
		case '{':
			for _, e := range walk(t, string(m.value), p, skip, fn) {
				out = append(out, edit{e.path, replace(e.body)})
			}
		case '[':
			var elems []json.RawMessage
			if err := json.Unmarshal(m.value, &elems); err != nil || len(elems) == 0 {
				continue
			}
			arr := func(first string) string {
				parts := []string{first}
				for _, e := range elems[1:] {
					parts = append(parts, string(e))
				}
				return "[" + strings.Join(parts, ",") + "]"
			}
			ep := p + "[0]"
			if slices.Contains(skip, ep) {
				continue
			}
			for _, v := range fn(ep, jsontext.Value(elems[0])) {
				out = append(out, edit{ep, replace(arr(v))})
			}
			if jsontext.Value(elems[0]).Kind() == '{' {
				for _, e := range walk(t, string(elems[0]), ep, skip, fn) {
					out = append(out, edit{e.path, replace(arr(e.body))})
				}
			}
		}
	}
	return out
}

// wrongKinds are values of other JSON kinds than v's.
func wrongKinds(v jsontext.Value) []string {
	switch v.Kind() {
	case '"':
		return []string{`5`, `{}`, `true`}
	case '0':
		return []string{`"5"`, `[5]`, `false`}
	case '{':
		return []string{`"x"`, `[]`, `5`}
	case '[':
		return []string{`{}`, `"x"`, `5`}
	case 't', 'f':
		return []string{`"true"`, `1`}
	}
	return nil
}

// Literals of the bad-number families.
var (
	// badAmounts are refused wherever an amount is read.
	badAmounts = []string{`-1`, `-0.01`, `-0`, `-1e400`, `1e400`, `1E400`, `1e30`, `1000000000000000000000000000000`,
		`1e3`, `2.5e2`, `1E-2`, `1.0000001`, `1000000000000001`, `"100"`, `"1e3"`, `"NaN"`, `"Infinity"`, `"-Infinity"`,
		`null`, `true`, `{}`, `[]`, `[100]`}
	// badNumbers are refused wherever any number is read.
	badNumbers = []string{`1e400`, `-1e400`, `"5"`, `"NaN"`, `true`, `{}`, `[]`}
	// notJSONNumbers are number-like literals JSON does not have.
	notJSONNumbers = []string{`NaN`, `Infinity`, `-Infinity`, `0x10`, `+1`, `.5`, `01`, `1.`, `1e`, `--1`}
	// badIdents are JSON strings no identifier may be.
	badIdents = []string{`"a\u0000b"`, `"\u0007"`, `"a\nb"`, `"a\r\nb"`, `"\u001b[2J"`, `"a\u007fb"`, `"a\tb"`,
		`"a\u0085b"`, `"\u009b2J"`, "\"a\u0085b\"", lit(strings.Repeat("a", 4096))}
	// badUTF8 are strings that are not UTF-8, raw or escaped.
	badUTF8 = []string{"\"a\xffb\"", "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "\"\xe2\x82\"", `"\ud800"`, `"\udc00\ud800"`}
	// lookAlikes are JSON strings that read like a name but break every
	// name grammar (decision_type, workflow_key, surface, kid): zero-width
	// space, bidi override, trailing and leading blanks, no-break space, a
	// byte order mark, a Cyrillic letter, and too long.
	lookAlikes = []string{`"ab\u200b"`, `"\u202eab"`, `"ab "`, `" ab"`, `"a\u00a0b"`, `"\ufeffab"`, `"\u0430b"`,
		"\"ab\u200b\"", lit(strings.Repeat("A", 300))}
	// badTokenHeaders are Idempotency-Key or X-Correlation-Id values that
	// are refused, never ignored or echoed: empty, blank, sent twice, not
	// visible ASCII.
	badTokenHeaders = []struct {
		name string
		vs   []string
	}{
		{"empty", []string{""}}, {"blank", []string{"   "}}, {"twice", []string{"k-1", "k-2"}}, {"twice, equal", []string{"k-1", "k-1"}},
		{"zero-width space", []string{"k-1\u200b"}}, {"bidi override", []string{"\u202ek-1"}}, {"no-break space", []string{"k\u00a01"}},
	}
)

// bodyCases are the bad bodies of a POST route.
func (s *badSuite) bodyCases(q req, spec routeSpec) []badCase {
	t := s.t
	base := spec.body
	var out []badCase
	add := func(cat, name, body string, want ...string) *badCase {
		out = append(out, s.variant(q, cat, name, body, want...))
		return &out[len(out)-1]
	}
	ms := membersOf(t, base)
	if len(ms) == 0 {
		// A route whose body has no members yet ({}) is probed through one
		// unknown member: every defect below but the wrong types is found
		// before the members are matched against the route's.
		ms = []member{{"zz_probe", jsontext.Value("1")}}
		base = objectOf(ms)
	}

	// Malformed JSON.
	for _, b := range []string{`{"a":`, `hello`, base[:len(base)-1], `{'a':1}`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{"a":01}`,
		`{"a":.5}`, `{"a":+1}`, `{"a":0x10}`, `{"a":NaN}`, `{"a":Infinity}`, `{"a":undefined}`, `{"a":"\x"}`,
		`{"a":"unterminated}`, "{\"a\":\"raw\ttab\"}", "{\"a\":\"raw\x01\"}", `/*c*/{}`, `{,}`, `{"a":1 "b":2}`, `}`, `{"a":tru}`} {
		add(catMalformed, shorten(b), b, "MALFORMED_JSON")
	}
	add(catMalformed, "byte order mark", "\xef\xbb\xbf"+base, "MALFORMED_JSON", "INVALID_UTF8")
	add(catMalformed, "whitespace only", " \n\t", "MALFORMED_JSON", "EMPTY_BODY")
	if !spec.emptyOK {
		add(catMalformed, "empty", "", "EMPTY_BODY")
	}
	add(catMalformed, "UTF-16", "\xff\xfe{\x00}\x00", "MALFORMED_JSON", "INVALID_UTF8")

	// Trailing data.
	for _, tail := range []string{"x", " {}", base, ",", "]", "\x00", "null", "}"} {
		add(catTrailing, "followed by "+strconv.Quote(shorten(tail)), base+tail, "TRAILING_DATA", "MALFORMED_JSON")
	}

	// Duplicate members.
	first := ms[0]
	add(catDuplicate, "first member twice", "{"+lit(first.name)+":"+string(first.value)+","+base[1:], "DUPLICATE_MEMBER")
	add(catDuplicate, "first member again at the end", base[:len(base)-1]+","+lit(first.name)+":"+string(first.value)+"}", "DUPLICATE_MEMBER")
	esc := `"\u` + fmt.Sprintf("%04x", first.name[0]) + first.name[1:] + `"`
	add(catDuplicate, "first member twice, once escaped", "{"+esc+":"+string(first.value)+","+base[1:], "DUPLICATE_MEMBER")
	for _, e := range walk(t, base, "", nil, func(p string, v jsontext.Value) []string {
		if v.Kind() != '{' || len(membersOf(t, string(v))) == 0 {
			return nil
		}
		inner := membersOf(t, string(v))
		return []string{objectOf(append(slices.Clone(inner), inner[0]))}
	}) {
		add(catDuplicate, "duplicate inside "+e.path, e.body, "DUPLICATE_MEMBER")
	}

	// Depth.
	add(catDepth, "65 nested arrays", nested(65), "JSON_TOO_DEEP")
	add(catDepth, "65 nested objects", strings.Repeat(`{"a":`, 65)+"1"+strings.Repeat("}", 65), "JSON_TOO_DEEP")
	add(catDepth, "100000 nested arrays", `{"a":`+strings.Repeat("[", 100000)+strings.Repeat("]", 100000)+`}`, "JSON_TOO_DEEP")
	add(catDepth, "65 levels inside the first member",
		objectOf(append([]member{{first.name, jsontext.Value(strings.Repeat("[", 64) + strings.Repeat("]", 64))}}, ms[1:]...)), "JSON_TOO_DEEP")
	add(catDepth, "unbalanced deep opening", strings.Repeat("[", 70), "JSON_TOO_DEEP", "MALFORMED_JSON")

	// Oversize.
	pad := func(size int) string { return base[:len(base)-1] + strings.Repeat(" ", size-len(base)) + "}" }
	add(catOversize, "1 MiB + 1 byte", pad(server.DefaultMaxBodyBytes+1), "BODY_TOO_LARGE").status = http.StatusRequestEntityTooLarge
	c := add(catOversize, "1 MiB + 1 byte, chunked", pad(server.DefaultMaxBodyBytes+1), "BODY_TOO_LARGE")
	c.chunked, c.status = true, http.StatusRequestEntityTooLarge
	c = add(catOversize, "4 MiB, chunked", pad(4<<20), "BODY_TOO_LARGE")
	c.chunked, c.status = true, http.StatusRequestEntityTooLarge
	big := objectOf(append([]member{{first.name, jsontext.Value(lit(strings.Repeat("a", server.DefaultMaxBodyBytes)))}}, ms[1:]...))
	add(catOversize, "a 1 MiB string", big, "BODY_TOO_LARGE").status = http.StatusRequestEntityTooLarge

	// Not an object.
	for _, b := range []string{`null`, `[]`, `[` + base + `]`, `[{}]`, `"x"`, `5`, `true`, `false`, `""`} {
		add(catNonObject, b[:min(len(b), 12)], b, "WRONG_TYPE")
	}
	add(catNonObject, first.name+" null", objectOf(append([]member{{first.name, jsontext.Value("null")}}, ms[1:]...)))

	// Wrong types of every member.
	for _, e := range walk(t, spec.body, "", nil, func(_ string, v jsontext.Value) []string { return wrongKinds(v) }) {
		add(catWrongType, e.path+": "+shorten(e.body), e.body)
	}

	// Unknown members, wherever members are closed.
	add(catUnknown, "top level", base[:len(base)-1]+`,"zz_unknown":1}`, "UNKNOWN_MEMBER")
	add(catUnknown, "case variant of "+first.name, objectOf(append([]member{{strings.ToUpper(first.name), first.value}}, ms[1:]...)), "UNKNOWN_MEMBER")
	add(catUnknown, "grant", base[:len(base)-1]+`,"grant":true}`, "UNKNOWN_MEMBER")
	for _, e := range walk(t, base, "", spec.openUnknown, func(p string, v jsontext.Value) []string {
		if v.Kind() != '{' || slices.ContainsFunc(spec.openUnknown, func(o string) bool { return strings.HasPrefix(p, o+".") }) {
			return nil
		}
		inner := membersOf(t, string(v))
		return []string{objectOf(append(inner, member{"zz_unknown", jsontext.Value("1")}))}
	}) {
		add(catUnknown, "inside "+e.path, e.body, "UNKNOWN_MEMBER")
	}

	// Content types.
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
		"application/xml", "text/json", "application/jsonx", "json;;;", "application/json; charset", "*/*", "application/*", "json"} {
		c := add(catMedia, ct, base, "UNSUPPORTED_MEDIA_TYPE")
		*c = c.with("Content-Type", ct) // the request's other headers (a cookie) kept
		c.status = http.StatusUnsupportedMediaType
	}

	// Invalid UTF-8, in a member's value and in a member's name.
	for _, u := range badUTF8 {
		add(catUTF8, "value "+strconv.Quote(u), objectOf(append([]member{{first.name, jsontext.Value(u)}}, ms[1:]...)), "INVALID_UTF8", "MALFORMED_JSON")
	}
	add(catUTF8, "member name", "{\"\xc3\x28\":1,"+base[1:], "INVALID_UTF8", "MALFORMED_JSON")
	add(catUTF8, "escaped surrogate name", `{"\ud800":1,`+base[1:], "INVALID_UTF8", "MALFORMED_JSON")

	// Amounts and numbers.
	for _, tpl := range spec.amounts {
		for _, l := range badAmounts {
			add(catAmount, strings.ReplaceAll(tpl, "@@", l), strings.ReplaceAll(tpl, "@@", l))
		}
	}
	for _, tpl := range spec.numbers {
		for _, l := range badNumbers {
			add(catAmount, strings.ReplaceAll(tpl, "@@", l), strings.ReplaceAll(tpl, "@@", l))
		}
	}
	for _, tpl := range append(slices.Clone(spec.amounts), spec.numbers...) {
		for _, l := range notJSONNumbers {
			add(catAmount, strings.ReplaceAll(tpl, "@@", l), strings.ReplaceAll(tpl, "@@", l), "MALFORMED_JSON")
		}
	}

	// Identifiers with control characters, overlong or not UTF-8.
	for _, tpl := range spec.idents {
		for _, l := range badIdents {
			add(catIdent, shorten(strings.ReplaceAll(tpl, "@@", l)), strings.ReplaceAll(tpl, "@@", l))
		}
		for _, l := range badUTF8 {
			add(catUTF8, strings.ReplaceAll(tpl, "@@", strconv.Quote(l)), strings.ReplaceAll(tpl, "@@", l), "INVALID_UTF8", "MALFORMED_JSON")
		}
	}

	// Names with a grammar, given look-alikes.
	for _, tpl := range spec.grammar {
		for _, l := range lookAlikes {
			add(catLookAlike, shorten(strings.ReplaceAll(tpl, "@@", l)), strings.ReplaceAll(tpl, "@@", l),
				"INVALID_IDENTIFIER", "INVALID_KID", "POLICY_INVALID")
		}
	}

	// Size limits and NUL, at the top level and inside a member.
	var many strings.Builder
	many.WriteByte('{')
	for i := range clearance.DefaultMaxJSONMembers + 1 {
		if i > 0 {
			many.WriteByte(',')
		}
		fmt.Fprintf(&many, `"m%d":0`, i)
	}
	many.WriteByte('}')
	add(catLimits, "1,001 members", many.String(), "JSON_TOO_MANY_MEMBERS")
	add(catLimits, "1,001 members inside a member", base[:len(base)-1]+`,"zz":`+many.String()+`}`, "JSON_TOO_MANY_MEMBERS")
	add(catLimits, "10,001 elements", base[:len(base)-1]+`,"zz":[`+strings.TrimSuffix(strings.Repeat("0,", clearance.DefaultMaxJSONElements+1), ",")+`]}`,
		"JSON_TOO_MANY_ELEMENTS")
	add(catLimits, "NUL in a string", base[:len(base)-1]+`,"zz":"a\u0000b"}`, "JSON_NUL_CHARACTER")
	add(catLimits, "NUL in a member name", base[:len(base)-1]+`,"z\u0000":1}`, "JSON_NUL_CHARACTER")
	add(catLimits, "NUL in the first member", objectOf(append([]member{{first.name, jsontext.Value(`"\u0000"`)}}, ms[1:]...)),
		"JSON_NUL_CHARACTER")
	// A bad request with a request id that must not be echoed.
	add(catHeader, "X-Request-Id with a zero-width space", many.String(), "JSON_TOO_MANY_MEMBERS").rawHeaders =
		http.Header{server.HeaderRequestID: {"req\u200b"}}

	// Idempotency-Key and X-Correlation-Id headers.
	headerValues := []string{"a\tb", "a b", "\xff", "\xc3\x28", "a\u0085b", "\u009b2J", strings.Repeat("k", 256)}
	if spec.idem {
		for _, v := range headerValues {
			add(catHeader, "Idempotency-Key "+strconv.Quote(shorten(v)), base, "INVALID_IDEMPOTENCY_KEY").headers =
				map[string]string{server.HeaderIdempotencyKey: v}
		}
	}
	if spec.corr {
		for _, v := range headerValues {
			add(catHeader, "X-Correlation-Id "+strconv.Quote(shorten(v)), base, "INVALID_CORRELATION_ID").headers =
				map[string]string{server.HeaderCorrelationID: v}
		}
	}
	for _, h := range []struct {
		on         bool
		name, code string
	}{{spec.idem, server.HeaderIdempotencyKey, "INVALID_IDEMPOTENCY_KEY"}, {spec.corr, server.HeaderCorrelationID, "INVALID_CORRELATION_ID"}} {
		if !h.on {
			continue
		}
		for _, v := range badTokenHeaders {
			c := add(catHeader, h.name+" "+v.name, base, h.code)
			c.rawHeaders, c.status = http.Header{h.name: v.vs}, http.StatusBadRequest
		}
	}
	return out
}

// signedIntents are enforce-and-bind bodies whose signed intent is bad:
// each is signed by the org's registered agent key unless it says otherwise.
func (s *badSuite) signedIntents(q req) []badCase {
	t, x := s.t, s.x
	var out []badCase
	n := 0
	// payload returns a canonical intent with fresh ids, changed by mutate.
	payload := func(mutate func(m map[string]any)) []byte {
		n++
		m := map[string]any{
			"intent_id": fmt.Sprintf("bad-intent-%d", n), "org_id": s.a.ID, "actor": map[string]any{"id": "agent-7", "type": "agent"},
			"action":       map[string]any{"type": "refund", "amount": 123.5, "currency": "EUR", "target": "order-1"},
			"workflow_key": "refunds", "decision_type": "REFUND", "nonce": fmt.Sprintf("bad-nonce-%d", n),
			"concurrency_scope": fmt.Sprintf("bad-scope-%d", n), "escalation": map[string]any{"mode": "NONE"}, "issued_at": "2026-11-01T12:00:00Z",
		}
		if mutate != nil {
			mutate(m)
		}
		p, err := canon.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	sign := func(k grant.Key, p []byte) string {
		j, err := grant.SignIntent(k, p)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	add := func(name string, jws string, want ...string) {
		out = append(out, s.variant(q, catSigned, name, `{"signed_intent":`+lit(jws)+`}`, want...))
	}
	// Amounts, written into the signed bytes as they are.
	for _, l := range []string{`-1`, `-0.01`, `1e+30`, `1000000000000000000000000000000`, `1e400`, `1e3`, `2.5e2`, `1.0000001`,
		`1000000000000001`, `"100"`, `null`, `true`, `{}`, `NaN`} {
		p := strings.Replace(string(payload(nil)), "123.5", l, 1)
		add("amount "+l, sign(x.agent, []byte(p)))
	}
	// Identifiers with control characters, overlong or empty.
	for _, member := range []string{"intent_id", "nonce", "concurrency_scope", "workflow_key", "decision_type", "actor.id",
		"action.type", "action.target", "action.currency", "issued_at", "org_id"} {
		for _, v := range []string{"a\x00b", "\x07", "a\nb", "\x1b[2J", "a\x7fb", "a\u0085b", "\u009b2J", strings.Repeat("a", 4096), ""} {
			if v == "" && slices.Contains([]string{"workflow_key", "decision_type", "action.target", "action.currency"}, member) {
				continue // optional: empty is absent
			}
			add(fmt.Sprintf("%s %q", member, shorten(v)), sign(x.agent, payload(func(m map[string]any) {
				if outer, inner, ok := strings.Cut(member, "."); ok {
					m[outer].(map[string]any)[inner] = v
				} else {
					m[member] = v
				}
			})))
		}
	}
	// Look-alike names, another case, too long.
	for _, member := range []string{"workflow_key", "decision_type", "surface"} {
		for _, v := range []string{"refunds\u200b", "\u202eREFUND", "REFUND ", "\u00a0refunds", "\u0430", "refund", "Refund", "REFUND-2",
			strings.Repeat("W", 300)} {
			if member == "workflow_key" && (v == "refund" || v == "Refund" || v == "REFUND-2") || member == "surface" && v == "refund" {
				continue // valid names
			}
			add(fmt.Sprintf("%s %q", member, shorten(v)), sign(x.agent, payload(func(m map[string]any) { m[member] = v })),
				"INVALID_IDENTIFIER")
		}
	}
	// Stale and future intents.
	for _, c := range []struct{ at, code string }{
		{"2001-09-09T01:46:40Z", "INTENT_STALE"}, {"1970-01-01T00:00:00Z", "INTENT_STALE"},
		{"2100-01-01T00:00:00Z", "INTENT_NOT_YET_VALID"}, {"9999-12-31T23:59:59Z", "INTENT_NOT_YET_VALID"},
		{x.clock().Add(-clearance.DefaultIntentMaxAge - time.Second).Format(time.RFC3339), "INTENT_STALE"},
		{x.clock().Add(clearance.DefaultMaxClockSkew + time.Second).Format(time.RFC3339Nano), "INTENT_NOT_YET_VALID"},
	} {
		p := payload(func(m map[string]any) { m["issued_at"] = c.at })
		out = append(out, s.variant(q, catFresh, "issued_at "+c.at, `{"signed_intent":`+lit(sign(x.agent, p))+`}`, c.code))
		out[len(out)-1].status = http.StatusBadRequest
	}
	for _, c := range []struct {
		name   string
		mutate func(m map[string]any)
	}{
		{"unknown member", func(m map[string]any) { m["grant"] = true }},
		{"unknown action member", func(m map[string]any) { m["action"].(map[string]any)["force"] = true }},
		{"another org", func(m map[string]any) { m["org_id"] = s.b.ID }},
		{"escalation mode", func(m map[string]any) { m["escalation"] = map[string]any{"mode": "AUTO"} }},
		{"no escalation", func(m map[string]any) { delete(m, "escalation") }},
		{"no nonce", func(m map[string]any) { delete(m, "nonce") }},
		{"effect digest", func(m map[string]any) { m["expected_effect_digest"] = "md5:00" }},
		{"actor is a string", func(m map[string]any) { m["actor"] = "agent-7" }},
		{"action is an array", func(m map[string]any) { m["action"] = []any{} }},
		{"context is a string", func(m map[string]any) { m["context"] = "x" }},
		{"issued_at not a time", func(m map[string]any) { m["issued_at"] = "yesterday" }},
		{"context of 1,001 members", func(m map[string]any) {
			ctx := map[string]any{}
			for i := range clearance.DefaultMaxJSONMembers + 1 {
				ctx[fmt.Sprint(i)] = i
			}
			m["context"] = ctx
		}},
		{"NUL in the context", func(m map[string]any) { m["context"] = map[string]any{"note": "a\x00b"} }},
	} {
		add(c.name, sign(x.agent, payload(c.mutate)))
	}
	// Not canonical, not JSON, not an object.
	p := payload(nil)
	add("not canonical (spaces)", sign(x.agent, []byte(strings.Replace(string(p), ",", ", ", 1))), "INTENT_NOT_CANONICAL")
	add("duplicate member", sign(x.agent, []byte(`{"intent_id":"a",`+string(p[1:]))))
	add("payload not JSON", sign(x.agent, []byte("hello")))
	add("payload an array", sign(x.agent, []byte("[]")))
	add("payload invalid UTF-8", sign(x.agent, []byte(strings.Replace(string(payload(nil)), "refunds", "ref\xffunds", 1))))
	// Signatures and headers.
	other := mustKey(t, 70)
	add("unregistered key", sign(other, payload(nil)), "INTENT_SIGNATURE_INVALID")
	good := sign(x.agent, payload(nil))
	parts := strings.Split(good, ".")
	add("tampered payload", parts[0]+"."+b64(payload(nil))+"."+parts[2], "INTENT_SIGNATURE_INVALID")
	add("no signature", parts[0]+"."+parts[1]+".", "INTENT_MALFORMED", "INTENT_SIGNATURE_INVALID")
	add("two dots only", "..", "INTENT_MALFORMED")
	add("four segments", good+".x", "INTENT_MALFORMED")
	add("not base64", "!!!."+parts[1]+"."+parts[2], "INTENT_MALFORMED")
	signWith := func(h map[string]any) string {
		return compact(t, h, payload(nil), func(in []byte) []byte {
			sig, err := x.agent.Sign(in)
			if err != nil {
				t.Fatal(err)
			}
			return sig
		})
	}
	kid := x.agent.KID()
	for _, c := range []struct {
		name string
		h    map[string]any
	}{
		{"alg none", map[string]any{"alg": "none", "kid": kid, "typ": "clearance-intent+jwt"}},
		{"alg HS256", map[string]any{"alg": "HS256", "kid": kid, "typ": "clearance-intent+jwt"}},
		{"grant typ", map[string]any{"alg": "EdDSA", "kid": kid, "typ": "clearance-grant+jwt"}},
		{"no typ", map[string]any{"alg": "EdDSA", "kid": kid}},
		{"no kid", map[string]any{"alg": "EdDSA", "typ": "clearance-intent+jwt"}},
		{"jku header", map[string]any{"alg": "EdDSA", "kid": kid, "typ": "clearance-intent+jwt", "jku": "https://evil.example"}},
		{"embedded jwk", map[string]any{"alg": "EdDSA", "kid": kid, "typ": "clearance-intent+jwt", "jwk": bareJWK(x.agent)}},
		{"kid with NUL", map[string]any{"alg": "EdDSA", "kid": "a\x00b", "typ": "clearance-intent+jwt"}},
		{"kid with C1", map[string]any{"alg": "EdDSA", "kid": "a\u0085b", "typ": "clearance-intent+jwt"}},
		{"kid with newline", map[string]any{"alg": "EdDSA", "kid": kid + "\n", "typ": "clearance-intent+jwt"}},
		{"kid overlong", map[string]any{"alg": "EdDSA", "kid": strings.Repeat("k", 10000), "typ": "clearance-intent+jwt"}},
		{"kid a number", map[string]any{"alg": "EdDSA", "kid": 5, "typ": "clearance-intent+jwt"}},
		{"kid of a provider key", map[string]any{"alg": "EdDSA", "kid": x.provider.KID(), "typ": "clearance-intent+jwt"}},
	} {
		add("header "+c.name, signWith(c.h))
	}
	rawHeader := base64.RawURLEncoding.EncodeToString([]byte("{\"alg\":\"EdDSA\",\"kid\":\"\xff\",\"typ\":\"clearance-intent+jwt\"}"))
	add("header kid invalid UTF-8", rawHeader+"."+parts[1]+"."+parts[2])
	return out
}

// ---------------------------------------------------------------------------
// Paths, queries, credentials

// badSegments replace one path parameter.
var badSegments = []struct{ name, seg string }{
	{"not a UUID", "not-a-uuid"},
	{"well-formed UUID of nothing", unknownID},
	{"overlong", strings.Repeat("a", 8192)},
	{"NUL", "a%00b"},
	{"newline", "a%0Ab"},
	{"CRLF", "%0D%0ASet-Cookie:x"},
	{"escape sequence", "%1B%5B2J"},
	{"DEL", "a%7Fb"},
	{"C1 control", "a%C2%85b"},
	{"invalid UTF-8", "%FF%FE"},
	{"overlong UTF-8", "%C0%AF"},
	{"encoded traversal", "..%2F..%2F..%2Fv1%2Fhealth"},
	{"dot segment", "."},
	{"dot-dot segment", ".."},
	{"literal traversal", "../../v1/health"},
	{"empty segment", "/"},
	{"encoded dot segment", "%2E%2E"},
	{"double-encoded traversal", "%252e%252e%252f"},
	{"encoded slash", "a%2Fb"},
	{"backslash traversal", "..%5C..%5C"},
	{"semicolon", "..;"},
	{"space", "%20"},
	{"SQL", "'%20OR%20'1'='1"},
	{"percent", "%25"},
}

// pathCases replace each path parameter with bad segments; routes without
// parameters get bad suffixes.
func (s *badSuite) pathCases(r tableRoute, spec routeSpec, q req) []badCase {
	var out []badCase
	names := make([]string, 0, len(spec.params))
	for n := range spec.params {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, b := range badSegments {
			p := q
			p.path = strings.Replace(r.path, "{"+name+"}", b.seg, 1)
			for other, v := range spec.params {
				p.path = strings.Replace(p.path, "{"+other+"}", v, 1)
			}
			want := append(slices.Clone(spec.paramCodes), "ROUTE_NOT_FOUND")
			out = append(out, s.variant(p, catPath, name+" "+b.name, p.body, want...))
		}
		if v := spec.params[name]; len(v) == 36 && strings.Count(v, "-") == 4 { // a UUID: other spellings
			for _, alt := range []struct{ name, v string }{{"uppercase", strings.ToUpper(v)}, {"braced", "{" + v + "}"},
				{"no hyphens", strings.ReplaceAll(v, "-", "")}, {"urn", "urn:uuid:" + v}} {
				p := q
				p.path = strings.Replace(q.path, v, escapeSegment(alt.v), 1)
				out = append(out, s.variant(p, catPath, name+" "+alt.name, p.body, append(slices.Clone(spec.paramCodes), "ROUTE_NOT_FOUND")...))
			}
		}
	}
	if len(spec.params) == 0 {
		for _, suffix := range []string{"/x", "%00", "/..%2F", "%2F", "/%2e%2e/v1/health"} {
			p := q
			p.path += suffix
			// The suffix may land on a sibling route: any refusal will do.
			out = append(out, s.variant(p, catPath, "suffix "+suffix, p.body))
		}
		// An unclean path is no route, whatever the clean one would be.
		for _, suffix := range []string{"/.", "/..", "/../v1/health", "/./", "//", "/x/..", "/%2e/.."} {
			p := q
			p.path += suffix
			// Sent as JSON, like the method probes: the answers of paths and
			// methods the table does not serve read a body as JSON first.
			c := s.variant(p, catPath, "suffix "+suffix, p.body, "ROUTE_NOT_FOUND").with("Content-Type", "application/json")
			c.status = http.StatusNotFound
			out = append(out, c)
		}
	}
	return out
}

// escapeSegment escapes what a path segment cannot hold.
func escapeSegment(s string) string { return strings.NewReplacer("{", "%7B", "}", "%7D").Replace(s) }

// credentialCases: no key, malformed keys, another org's key, a key without
// the route's scopes, the platform key where an org is needed and org keys
// where the platform key is.
func (s *badSuite) credentialCases(r tableRoute, spec routeSpec, q req) []badCase {
	var out []badCase
	unauth := func(name string, headers map[string]string) {
		c := s.variant(q, catNoCred, name, q.body, "UNAUTHENTICATED")
		c.key, c.headers, c.status = "", headers, http.StatusUnauthorized
		out = append(out, c)
	}
	key := q.key
	unauth("no Authorization", nil)
	unauth("Bearer without a key", map[string]string{"Authorization": "Bearer"})
	unauth("Bearer and spaces", map[string]string{"Authorization": "Bearer    "})
	unauth("key without Bearer", map[string]string{"Authorization": key})
	unauth("Basic", map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+key))})
	unauth("Token scheme", map[string]string{"Authorization": "Token " + key})
	unauth("unknown org key", map[string]string{"Authorization": "Bearer " + tenant.PrefixOrg + strings.Repeat("0", 43)})
	unauth("unknown platform key", map[string]string{"Authorization": "Bearer " + tenant.PrefixPlatform + strings.Repeat("0", 43)})
	unauth("key with a character more", map[string]string{"Authorization": "Bearer " + key + "x"})
	unauth("key with a character less", map[string]string{"Authorization": "Bearer " + key[:len(key)-1]})
	unauth("key in upper case", map[string]string{"Authorization": "Bearer " + strings.ToUpper(key)})
	unauth("key twice", map[string]string{"Authorization": "Bearer " + key + " " + key})
	unauth("onboarding prefix", map[string]string{"Authorization": "Bearer clr_onb_" + strings.Repeat("0", 43)})
	unauth("overlong key", map[string]string{"Authorization": "Bearer " + tenant.PrefixOrg + strings.Repeat("a", 8000)})
	unauth("key in X-Api-Key", map[string]string{"X-Api-Key": key})
	unauth("key in the query", nil)
	out[len(out)-1].path = q.url() + sep(q.query) + "api_key=" + key

	switch r.auth {
	case "authPlatform":
		for _, k := range []struct{ name, key string }{{"this org's key", s.a.Key}, {"another org's key", s.b.Key},
			{"a scoped org key", s.scoped[string(tenant.ScopePolicyWrite)]}} {
			c := s.variant(q, catPlatform, k.name+" on a platform route", q.body, "PLATFORM_KEY_REQUIRED")
			c.key, c.status = k.key, http.StatusForbidden
			out = append(out, c)
		}
		return out
	}
	// Scopes.
	if len(r.scopes) > 0 {
		names := make([]string, 0, len(s.scoped))
		for sc := range s.scoped {
			names = append(names, sc)
		}
		sort.Strings(names)
		for _, sc := range names {
			if slices.Contains(r.scopes, tenant.Scope(sc)) {
				continue
			}
			c := s.variant(q, catScope, "only "+sc, q.body, "INSUFFICIENT_SCOPE")
			c.key, c.status = s.scoped[sc], http.StatusForbidden
			out = append(out, c)
		}
	}
	// The platform key without an org.
	if spec.org == orgQuery || spec.org == orgBody {
		p := q
		p.query = withoutOrg(q.query)
		c := s.variant(p, catPlatform, "platform key without org_id", q.body, "ORG_ID_REQUIRED")
		c.key, c.status = s.x.platform, http.StatusBadRequest
		out = append(out, c)
	}
	// Another org's key on this org's resource.
	if len(spec.params) > 0 || spec.foreign {
		want := spec.paramCodes
		if strings.Contains(q.query, "org_id=") { // the query names this org
			want = append(slices.Clone(want), "ORG_MISMATCH")
		}
		c := s.variant(q, catForeign, "another org's key on this org's request", q.body, want...)
		c.key = s.b.Key
		out = append(out, c)
	}
	return out
}

// withoutOrg drops the org_id parameter from a query string.
func withoutOrg(query string) string {
	var kept []string
	for _, kv := range strings.Split(strings.TrimPrefix(query, "?"), "&") {
		if kv != "" && !strings.HasPrefix(kv, "org_id=") {
			kept = append(kept, kv)
		}
	}
	if len(kept) == 0 {
		return ""
	}
	return "?" + strings.Join(kept, "&")
}

func sep(query string) string {
	if query == "" {
		return "?"
	}
	return "&"
}

// orgCases name the org wrongly: another org, a malformed or unknown one,
// repeated org_id parameters.
func (s *badSuite) orgCases(r tableRoute, spec routeSpec, q req) []badCase {
	var out []badCase
	switch spec.org {
	case orgQuery:
		add := func(name, key, query string, status int, want ...string) {
			p := q
			p.key, p.query = key, query
			c := s.variant(p, catOrg, name, p.body, want...)
			c.status = status
			out = append(out, c)
		}
		a, b, plat := s.a, s.b, s.x.platform
		add("org key, another org", a.Key, "?org_id="+b.ID, 403, "ORG_MISMATCH")
		add("org key, malformed org", a.Key, "?org_id=not-a-uuid", 403, "ORG_MISMATCH")
		add("org key, NUL org", a.Key, "?org_id=%00", 403, "ORG_MISMATCH")
		add("org key, overlong org", a.Key, "?org_id="+strings.Repeat("a", 4000), 403, "ORG_MISMATCH")
		add("org key, uppercase own org", a.Key, "?org_id="+strings.ToUpper(a.ID), 403, "ORG_MISMATCH")
		add("another org's key naming this org", b.Key, "?org_id="+a.ID, 403, "ORG_MISMATCH")
		out[len(out)-1].category = catForeign
		add("org key, own org then another", a.Key, "?org_id="+a.ID+"&org_id="+b.ID, 400, "INVALID_QUERY")
		add("org key, another org then own", a.Key, "?org_id="+b.ID+"&org_id="+a.ID, 0, "INVALID_QUERY", "ORG_MISMATCH")
		add("org key, own org twice", a.Key, "?org_id="+a.ID+"&org_id="+a.ID, 400, "INVALID_QUERY")
		add("org key, org_id[]", a.Key, "?org_id[]="+b.ID+"&org_id="+a.ID+"&org_id="+a.ID, 400, "INVALID_QUERY")
		add("platform key, malformed org", plat, "?org_id=not-a-uuid", 400, "INVALID_REQUEST")
		add("platform key, unknown org", plat, "?org_id="+unknownID, 404, "ORG_NOT_FOUND")
		add("platform key, NUL org", plat, "?org_id=%00", 400, "INVALID_REQUEST")
		add("platform key, uppercase org", plat, "?org_id="+strings.ToUpper(a.ID), 400, "INVALID_REQUEST")
		add("platform key, org with a newline", plat, "?org_id="+a.ID+"%0A", 400, "INVALID_REQUEST")
		add("platform key, empty org", plat, "?org_id=", 400, "ORG_ID_REQUIRED")
		add("platform key, org twice", plat, "?org_id="+a.ID+"&org_id="+b.ID, 400, "INVALID_QUERY")
		add("org key, malformed escape", a.Key, "?org_id=%zz", 400, "INVALID_QUERY")
		add("org key, semicolon", a.Key, "?org_id="+a.ID+";org_id="+b.ID, 400, "INVALID_QUERY")
		add("platform key, malformed escape", plat, "?org_id="+a.ID+"&x=%zz", 400, "INVALID_QUERY")
	case orgBody:
		withOrg := func(v string) string {
			return objectOf(append([]member{{"org_id", jsontext.Value(v)}}, membersOf(s.t, q.body)...))
		}
		add := func(name, key, body string, status int, want ...string) {
			p := q
			p.key = key
			c := s.variant(p, catOrg, name, body, want...)
			c.status = status
			out = append(out, c)
		}
		a, b, plat := s.a, s.b, s.x.platform
		add("org key, another org", a.Key, withOrg(lit(b.ID)), 403, "ORG_MISMATCH")
		add("org key, malformed org", a.Key, withOrg(`"not-a-uuid"`), 403, "ORG_MISMATCH")
		add("org key, NUL org", a.Key, withOrg(`"\u0000"`), 400, "JSON_NUL_CHARACTER")
		add("org key, org a number", a.Key, withOrg(`5`), 400, "WRONG_TYPE")
		add("org key, org an array", a.Key, withOrg(`[`+lit(a.ID)+`]`), 400, "WRONG_TYPE")
		add("another org's key naming this org", b.Key, withOrg(lit(a.ID)), 403, "ORG_MISMATCH")
		out[len(out)-1].category = catForeign
		add("platform key, malformed org", plat, withOrg(`"not-a-uuid"`), 400, "INVALID_REQUEST")
		add("platform key, unknown org", plat, withOrg(lit(unknownID)), 404, "ORG_NOT_FOUND")
		add("platform key, uppercase org", plat, withOrg(lit(strings.ToUpper(a.ID))), 400, "INVALID_REQUEST")
		add("platform key, NUL org", plat, withOrg(`"\u0000"`), 400, "JSON_NUL_CHARACTER")
	}
	return out
}

// ledgerQueries are bad paging parameters.
func (s *badSuite) ledgerQueries(q req) []badCase {
	var out []badCase
	for _, v := range []string{"limit=-1", "limit=0", "limit=abc", "limit=1.5", "limit=1e3", "limit=1001", "limit=99999999999999999999",
		"limit=%00", "limit=0x10", "limit=1%20", "limit=1&limit=2", "limit=", "after_seq=-1", "after_seq=1e3", "after_seq=abc",
		"after_seq=18446744073709551616", "after_seq=1.0", "after_seq=0x10", "after_seq=%2B", "after_seq=1&after_seq=2",
		"limit=10&limit=abc", "limit=%zz", "limit=1;after_seq=2"} {
		if v == "limit=" { // an empty value is the default
			continue
		}
		p := q
		p.query = "?" + v
		c := s.variant(p, catQuery, v, "", "INVALID_QUERY", "INVALID_REQUEST")
		c.status = http.StatusBadRequest
		out = append(out, c)
	}
	return out
}

// shadowQueries are bad report windows.
func (s *badSuite) shadowQueries(q req) []badCase {
	var out []badCase
	for _, v := range []string{"from=abc", "to=abc", "from=2026-13-01T00:00:00Z", "from=1e3", "to=2026-11-01",
		"from=2026-11-02T00:00:00Z&to=2026-11-01T00:00:00Z", "from=2026-11-01T00:00:00Z&to=2026-11-01T00:00:00Z",
		"from=2020-01-01T00:00:00Z&to=2026-01-01T00:00:00Z", "from=%00", "to=2026-11-01T00:00:00Z%0A",
		"from=2026-10-31T00:00:00Z&from=2026-10-30T00:00:00Z", "to=2026-11-01T00:00:00Z&to=abc",
		"from=0001-01-01T00:00:00Z", "from=2026-11-01T00:00:00+25:00", "from=%zz", "to=a;b"} {
		p := q
		p.query = "?" + v
		c := s.variant(p, catQuery, v, "", "INVALID_QUERY", "INVALID_REQUEST")
		c.status = http.StatusBadRequest
		out = append(out, c)
	}
	return out
}

// TestBadInputExactAnswers pins the status and code of bad inputs the
// battery above checks only as "a 4xx with a stable code": C1 control
// characters (U+0080–U+009F) in identifiers, tokens, bundle ids, effect
// evidence and key issuers; a signed intent whose header kid no key can have
// (NUL: PostgreSQL text cannot hold it, so the registry must refuse it
// before asking the store); and literal "." and ".." path segments, which
// net/http.ServeMux would answer with a 307 text/html redirect.
func TestBadInputExactAnswers(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	o := x.o
	rg := x.grantFor(t, intentSpec{})
	rc := x.claimed(t, rg).str("claim_token")
	x.advance(30 * time.Second)
	x.finalize(t, rg.token, rc, "COMMITTED", nil).want(t, http.StatusConflict)
	g := x.grantFor(t, intentSpec{})
	claimToken := x.claimed(t, g).str("claim_token")
	c1, _ := x.intent(t, intentSpec{id: "intent-\u0085"})
	body := func(v any) string { return mustJSON(t, v) }
	evidence := func(kind, status string) map[string]any {
		return map[string]any{"kind": kind, "status": status, "effect_digest": sha256Digest([]byte("effect"))}
	}
	finalize := func(ev map[string]any) string {
		return body(map[string]any{"execution_token": g.token, "claim_token": claimToken, "outcome": "COMMITTED", "effect_evidence": ev})
	}
	reconcile := func(ev map[string]any) string {
		return body(map[string]any{"resolution": "COMMITTED", "effect_evidence": ev})
	}
	good, _ := x.intent(t, intentSpec{})
	withKID := func(kid string) string {
		return compact(t, map[string]any{"alg": "EdDSA", "kid": kid, "typ": "clearance-intent+jwt"},
			payloadOf(t, good), func(in []byte) []byte {
				sig, err := x.agent.Sign(in)
				if err != nil {
					t.Fatal(err)
				}
				return sig
			})
	}
	register := func(kid, iss string, seed byte) string {
		return body(map[string]any{"kid": kid, "iss": iss, "public_jwk": bareJWK(mustKey(t, seed))})
	}
	const bundle = `{"bundle_id":"b","version":"gap-1","mode":"SHADOW","rules":[],"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`
	s := &badSuite{t: t, x: x}
	head := x.head(o.Key)
	for _, c := range []struct {
		name, method, path, body string
		headers                  map[string]string
		status                   int
		code                     string
	}{
		{"C1 in workflow_key", "POST", pathEvaluate, `{"amount":5,"workflow_key":"a\u0085b"}`, nil, 400, "INVALID_IDENTIFIER"},
		{"raw C1 in workflow_key", "POST", pathEvaluate, "{\"amount\":5,\"workflow_key\":\"a\u0085b\"}", nil, 400, "INVALID_IDENTIFIER"},
		{"C1 in actor.id", "POST", pathGate, `{"amount":5,"actor":{"id":"a\u009bb"}}`, nil, 400, "INVALID_IDENTIFIER"},
		{"C1 in Idempotency-Key", "POST", pathEvaluate, `{"amount":5}`, map[string]string{server.HeaderIdempotencyKey: "a\u0085b"}, 400, "INVALID_IDEMPOTENCY_KEY"},
		{"C1 in idempotency_key", "POST", pathGate, `{"amount":5,"idempotency_key":"a\u0085b"}`, nil, 400, "INVALID_IDEMPOTENCY_KEY"},
		{"C1 in X-Correlation-Id", "POST", pathEvaluate, `{"amount":5}`, map[string]string{server.HeaderCorrelationID: "a\u009fb"}, 400, "INVALID_CORRELATION_ID"},
		{"C1 in correlation_id", "POST", pathGate, `{"amount":5,"correlation_id":"a\u0085b"}`, nil, 400, "INVALID_CORRELATION_ID"},
		{"C1 in bundle_id", "POST", pathBundles, strings.Replace(bundle, `"b"`, `"a\u0085b"`, 1), nil, 422, "POLICY_INVALID"},
		{"C1 in a rule id", "POST", pathBundles, strings.Replace(bundle, `"rules":[]`, `"rules":[{"id":"r\u0080","outcome":"BLOCK","reason_codes":["BIG"]}]`, 1), nil, 422, "POLICY_INVALID"},
		{"C1 in intent_id", "POST", pathBind, body(map[string]any{"signed_intent": c1}), nil, 400, "INTENT_MALFORMED"},
		{"NUL in effect_evidence.kind", "POST", pathFinalize, finalize(evidence("a\x00b", "CONFIRMED")), nil, 400, "JSON_NUL_CHARACTER"},
		{"C1 in effect_evidence.kind", "POST", pathFinalize, finalize(evidence("a\u0085b", "CONFIRMED")), nil, 400, "INVALID_EFFECT_EVIDENCE"},
		{"NUL in effect_evidence.status", "POST", pathFinalize, finalize(evidence("psp.charge", "OK\x00")), nil, 400, "JSON_NUL_CHARACTER"},
		{"newline in reconciled effect_evidence.kind", "POST", pathReconcile + "/" + rg.grantID, reconcile(evidence("a\nb", "CONFIRMED")), nil, 400, "INVALID_EFFECT_EVIDENCE"},
		{"C1 in reconciled effect_evidence.status", "POST", pathReconcile + "/" + rg.grantID, reconcile(evidence("psp.charge", "OK\u009b")), nil, 400, "INVALID_EFFECT_EVIDENCE"},
		{"NUL in iss", "POST", pathProvKeys, register("gap-1", "a\x00b", 80), nil, 400, "JSON_NUL_CHARACTER"},
		{"C1 in iss", "POST", pathAgentKeys, register("gap-1", "a\u0085b", 80), nil, 400, "INVALID_REQUEST"},
		{"overlong iss", "POST", pathProvKeys, register("gap-2", strings.Repeat("i", 4096), 81), nil, 400, "INVALID_REQUEST"},
		{"513-byte iss", "POST", pathProvKeys, register("gap-3", strings.Repeat("i", 513), 82), nil, 400, "INVALID_REQUEST"},
		{"NUL in the intent's header kid", "POST", pathBind, body(map[string]any{"signed_intent": withKID("a\x00b")}), nil, 400, "INTENT_MALFORMED"},
		{"zero-width space in the intent's header kid", "POST", pathBind, body(map[string]any{"signed_intent": withKID(x.agent.KID() + "\u200b")}), nil, 403, "INTENT_SIGNATURE_INVALID"},
		{"zero-width space in workflow_key", "POST", pathEvaluate, `{"amount":5,"workflow_key":"refunds\u200b"}`, nil, 400, "INVALID_IDENTIFIER"},
		{"bidi override in surface", "POST", pathGate, `{"amount":5,"surface":"crm\u202e"}`, nil, 400, "INVALID_IDENTIFIER"},
		{"lower-case decision_type", "POST", pathCloud, `{"decision_type":"refund","intent":{"action_type":"x"}}`, nil, 400, "INVALID_IDENTIFIER"},
		{"trailing space in a selector", "POST", pathBundles, strings.Replace(bundle, `"rules":[]`, `"rules":[{"id":"r","workflow_keys":["refunds "],"outcome":"BLOCK","reason_codes":["BIG"]}]`, 1), nil, 422, "POLICY_INVALID"},
		{"zero-width space in a kid", "POST", pathAgentKeys, register("gap-4\u200b", "", 83), nil, 400, "INVALID_KID"},
		{"blank Idempotency-Key", "POST", pathEvaluate, `{"amount":5}`, map[string]string{server.HeaderIdempotencyKey: "   "}, 400, "INVALID_IDEMPOTENCY_KEY"},
		{"zero-width space in Idempotency-Key", "POST", pathEvaluate, `{"amount":5}`, map[string]string{server.HeaderIdempotencyKey: "k\u200b"}, 400, "INVALID_IDEMPOTENCY_KEY"},
		{"bidi override in X-Correlation-Id", "POST", pathEvaluate, `{"amount":5}`, map[string]string{server.HeaderCorrelationID: "\u202ec"}, 400, "INVALID_CORRELATION_ID"},
		{"empty idempotency_key", "POST", pathGate, `{"amount":5,"idempotency_key":""}`, nil, 400, "INVALID_IDEMPOTENCY_KEY"},
		{"NUL in the context", "POST", pathEvaluate, `{"amount":5,"context":{"a":"\u0000"}}`, nil, 400, "JSON_NUL_CHARACTER"},
		{"201-character kid on DELETE", "DELETE", pathAgentKeys + "/" + strings.Repeat("k", 201), "", nil, 400, "INVALID_KID"},
		{"201-character provider kid on DELETE", "DELETE", pathProvKeys + "/" + strings.Repeat("k", 201), "", nil, 400, "INVALID_KID"},
		{"C1 in the intent's header kid", "POST", pathBind, body(map[string]any{"signed_intent": withKID("a\u0085b")}), nil, 403, "INTENT_SIGNATURE_INVALID"},
		{"overlong intent header kid", "POST", pathBind, body(map[string]any{"signed_intent": withKID(strings.Repeat("k", 201))}), nil, 403, "INTENT_SIGNATURE_INVALID"},
		{"literal dot-dot segment", "GET", pathDossiers + "../../v1/health", "", nil, 404, "ROUTE_NOT_FOUND"},
		{"literal dot segment", "GET", pathBundles + "/.", "", nil, 404, "ROUTE_NOT_FOUND"},
		{"dot segment before a route", "GET", "/v1/./health", "", nil, 404, "ROUTE_NOT_FOUND"},
		{"empty segment", "GET", "/v1//health", "", nil, 404, "ROUTE_NOT_FOUND"},
		{"dot-dot into a POST route", "POST", pathEvaluate + "/../evaluate-decision", `{"amount":5}`, nil, 404, "ROUTE_NOT_FOUND"},
		{"dot segment on a DELETE route", "DELETE", pathAgentKeys + "/" + x.agent.KID() + "/.", "", nil, 404, "ROUTE_NOT_FOUND"},
	} {
		r := s.send(t, badCase{category: "exact answer", name: c.name, method: c.method, path: c.path, key: o.Key,
			body: c.body, hasBody: c.method == "POST", headers: c.headers})
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); r.Status != c.status || r.str("code") != c.code ||
			mt != "application/problem+json" {
			t.Errorf("%s: want %d %s as a problem: %s", c.name, c.status, c.code, r)
		}
	}
	if got := x.head(o.Key); got != head {
		t.Errorf("the refused requests moved the ledger head %d -> %d", head, got)
	}
}

// ---------------------------------------------------------------------------
// Decision chains, overrides and dispatches

// evidenceArgs are the targets of the evidence routes' bad inputs.
type evidenceArgs struct {
	chainID, chainB           string // of org a's and org b's accepted decisions
	evaluationID, evaluationB string
	escDossier                string // an ESCALATE dossier of org a: overridable
	dg                        issued // CLAIMED with a live lease: dispatchable
	dc                        string // dg's claim token
}

// evidenceTargets decides an ESCALATE and claims a grant in org a.
func (s *badSuite) evidenceTargets(dec, decB *result) evidenceArgs {
	t, x := s.t, s.x
	jws, _ := x.intent(t, intentSpec{amount: 1500})
	esc := x.bind(t, jws, nil).want(t, http.StatusOK)
	if esc.str("outcome") != "ESCALATE" {
		t.Fatalf("want an ESCALATE: %s", esc)
	}
	dg := x.grantFor(t, intentSpec{})
	return evidenceArgs{chainID: dec.str("chain_id"), chainB: decB.str("chain_id"), evaluationID: dec.str("evaluation_id"),
		evaluationB: decB.str("evaluation_id"), escDossier: esc.str("dossier_id"), dg: dg, dc: x.claimed(t, dg).str("claim_token")}
}

// evidenceSpec describes one route of decision chains ("chain", "chain by
// evaluation"), overrides ("overrides", "record override") or dispatches
// ("dispatches", "record dispatch").
func (s *badSuite) evidenceSpec(a specArgs, which string) routeSpec {
	ev := a.ev
	retarget := func(q req, cat, name, path string, want ...string) badCase {
		p := q
		p.path = path
		return s.variant(p, cat, name, p.body, want...)
	}
	switch which {
	case "chain", "chain by evaluation":
		param, id, idB, base, wrong := "chainId", ev.chainID, ev.chainB, pathChain, a.dossierID
		if which == "chain by evaluation" {
			param, id, idB, base, wrong = "evaluationId", ev.evaluationID, ev.evaluationB, pathChainByEval, a.decisionID
		}
		return routeSpec{org: orgQuery, query: "?org_id=" + s.a.ID, params: map[string]string{param: id},
			paramCodes: []string{"CHAIN_NOT_FOUND"}, extra: func(q req) []badCase {
				missing := q
				missing.query = ""
				c := s.variant(missing, catQuery, "no org_id", "", "ORG_ID_REQUIRED")
				c.status = http.StatusBadRequest
				own := q
				own.key, own.query = s.b.Key, "?org_id="+s.b.ID
				return []badCase{c,
					s.variant(own, catForeign, "another org's key naming its own org", "", "CHAIN_NOT_FOUND"),
					retarget(q, catForeign, "another org's "+param, base+idB, "CHAIN_NOT_FOUND"),
					retarget(q, catValue, "an id of something else", base+wrong, "CHAIN_NOT_FOUND")}
			}}
	case "overrides", "dispatches":
		id, path := ev.escDossier, pathOverrides
		if which == "dispatches" {
			id, path = ev.dg.bind.str("dossier_id"), pathDossierDisp
		}
		return routeSpec{org: orgQuery, params: map[string]string{"dossierId": id}, paramCodes: []string{"DOSSIER_NOT_FOUND"},
			extra: func(q req) []badCase {
				return []badCase{retarget(q, catForeign, "another org's dossier id", path(a.dossierB), "DOSSIER_NOT_FOUND")}
			}}
	case "record override":
		const actor = `"actor":{"id":"reviewer-1","type":"human"}`
		return routeSpec{org: orgQuery, params: map[string]string{"dossierId": ev.escDossier}, paramCodes: []string{"DOSSIER_NOT_FOUND"},
			body: `{"resolution":"APPROVED",` + actor + `,"note":"checked with the customer","reason_code":"CUSTOMER_VERIFIED"}`, idem: true,
			idents: []string{`{"resolution":@@,` + actor + `}`, `{"resolution":"APPROVED","actor":{"id":@@,"type":"human"}}`,
				`{"resolution":"APPROVED","actor":{"id":"r","type":@@}}`, `{"resolution":"APPROVED",` + actor + `,"reason_code":@@}`},
			extra: func(q req) []badCase {
				out := s.values(q, []string{
					`{"resolution":"MAYBE",` + actor + `}`, `{"resolution":"approved",` + actor + `}`, `{"resolution":"",` + actor + `}`,
					`{"resolution":"APPROVED"}`, `{` + actor + `}`, `{}`, `{"resolution":"APPROVED","actor":"reviewer-1"}`,
					`{"resolution":"APPROVED","actor":{"id":"","type":"human"}}`, `{"resolution":"APPROVED","actor":{"id":"r"}}`,
					`{"resolution":"APPROVED",` + actor + `,"note":` + lit(strings.Repeat("n", 2001)) + `}`,
					`{"resolution":"APPROVED",` + actor + `,"note":"a\u0000b"}`, `{"resolution":"APPROVED",` + actor + `,"note":"a\u0085b"}`,
					`{"resolution":"APPROVED",` + actor + `,"reason_code":"lower_case"}`, `{"resolution":"APPROVED",` + actor + `,"reason_code":"9LIVES"}`,
					`{"resolution":"APPROVED",` + actor + `,"reason_code":` + lit(strings.Repeat("R", 65)) + `}`,
				})
				return append(out, retarget(q, catValue, "an ALLOW dossier", pathOverrides(a.dossierID), "OVERRIDE_NOT_APPLICABLE"),
					retarget(q, catForeign, "another org's dossier id", pathOverrides(a.dossierB), "DOSSIER_NOT_FOUND"))
			}}
	case "record dispatch":
		tok, ct := lit(ev.dg.token), lit(ev.dc)
		digest := lit(sha256Digest([]byte("the downstream request")))
		const at = `"dispatched_at":"2026-11-01T12:00:01Z"`
		tail := `,"request_digest":` + digest + `,"target":"https://psp.example/refunds",` + at + `}`
		with := func(token, claimToken string) string {
			return `{"execution_token":` + token + `,"claim_token":` + claimToken + tail
		}
		last := ev.dg.token[len(ev.dg.token)-1]
		flipped := ev.dg.token[:len(ev.dg.token)-1] + map[bool]string{true: "B", false: "A"}[last == 'A']
		return routeSpec{org: orgQuery, foreign: true, body: with(tok, ct), idem: true,
			idents: []string{with("@@", ct), with(tok, "@@"),
				`{"execution_token":` + tok + `,"claim_token":` + ct + `,"request_digest":@@,"target":"t",` + at + `}`,
				`{"execution_token":` + tok + `,"claim_token":` + ct + `,"request_digest":` + digest + `,"target":@@,` + at + `}`,
				`{"execution_token":` + tok + `,"claim_token":` + ct + `,"request_digest":` + digest + `,"target":"t","dispatched_at":@@}`,
				`{"execution_token":` + tok + `,"grant_id":@@,"claim_token":` + ct + tail},
			extra: func(q req) []badCase {
				return s.values(q, []string{
					with(lit(a.g.token), ct), with(lit(a.rg.token), ct), with(lit(a.fg.token), ct), with(tok, lit(a.fc)),
					with(lit(flipped), ct), with(lit(a.attestation), ct), with(lit(a.jws), ct), with(`""`, ct), with(tok, `""`),
					`{"execution_token":` + tok + tail, `{"claim_token":` + ct + tail, `{}`,
					`{"grant_id":"01900000-0000-7000-8000-000000000000","claim_token":` + ct + tail,
					`{"grant_id":"g-1","claim_token":` + ct + tail, `{"grant_id":` + lit(a.g.grantID) + `,"claim_token":` + ct + tail,
					`{"execution_token":` + tok + `,"grant_id":` + lit(a.g.grantID) + `,"claim_token":` + ct + tail,
					`{"execution_token":` + tok + `,"claim_token":` + ct + `,"request_digest":"sha256:zz","target":"t",` + at + `}`,
					`{"execution_token":` + tok + `,"claim_token":` + ct + `,"request_digest":` + lit("sha256:"+strings.Repeat("A", 64)) + `,"target":"t",` + at + `}`,
					`{"execution_token":` + tok + `,"claim_token":` + ct + `,"request_digest":"md5:00","target":"t",` + at + `}`,
					`{"execution_token":` + tok + `,"claim_token":` + ct + `,"target":"t",` + at + `}`,
					`{"execution_token":` + tok + `,"claim_token":` + ct + `,"request_digest":` + digest + `,"target":"",` + at + `}`,
					`{"execution_token":` + tok + `,"claim_token":` + ct + `,"request_digest":` + digest + `,"target":` + lit(strings.Repeat("t", 2049)) + `,` + at + `}`,
					`{"execution_token":` + tok + `,"claim_token":` + ct + `,"request_digest":` + digest + `,"target":"t","dispatched_at":"2026-11-01"}`,
					`{"execution_token":` + tok + `,"claim_token":` + ct + `,"request_digest":` + digest + `,"target":"t","dispatched_at":"2026-11-01T12:00:01"}`,
					`{"execution_token":` + tok + `,"claim_token":` + ct + `,"request_digest":` + digest + `,"target":"t","dispatched_at":""}`,
					`{"execution_token":` + tok + `,"claim_token":` + ct + `,"request_digest":` + digest + `,"target":"t"}`,
				})
			}}
	}
	s.t.Fatalf("evidenceSpec: unknown route %q", which)
	return routeSpec{}
}
