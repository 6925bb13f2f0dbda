package apidoc

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	"github.com/pb33f/libopenapi/datamodel"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
	"gopkg.in/yaml.v3"

	"github.com/clearancehq/clearance"
)

// Paths relative to this package's directory (go test runs tests there).
const (
	moduleDir  = "../.."
	specPath   = "../../docs/openapi.yaml"
	routesPath = "../../server/routes.go"
	tenantDir  = "../../tenant"
)

// route is one line of server/routes.go, as far as the document cares.
type route struct {
	pattern    string // as written, e.g. "POST /v1/protocol/evaluate-decision"
	method     string
	path       string   // OpenAPI form of the pattern's path
	auth       string   // authPublic, authKey or authPlatform
	scopes     []string // wire scopes, any one of which admits an org key
	deprecated bool
}

func (r route) key() string { return r.method + " " + r.path }

// parseRoutes reads the route table from server/routes.go without
// compiling it: every composite literal with a `pattern:` string is a route.
func parseRoutes(t *testing.T) []route {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, routesPath, nil, 0)
	if err != nil {
		t.Fatalf("parse route table: %v", err)
	}
	scopeConsts := parseScopeConsts(t)
	// Package-level scope sets, e.g. scopeDecisionWrite = []tenant.Scope{tenant.ScopeDecisionWrite}.
	scopeVars := map[string][]string{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.VAR {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					if cl, ok := vs.Values[i].(*ast.CompositeLit); ok {
						if sc, err := scopeList(cl, scopeConsts); err == nil {
							scopeVars[name.Name] = sc
						}
					}
				}
			}
		}
	}

	var routes []route
	var problems []string
	ast.Inspect(f, func(n ast.Node) bool {
		cl, ok := n.(*ast.CompositeLit)
		if !ok {
			return true
		}
		var r route
		found := false
		for _, el := range cl.Elts {
			kv, ok := el.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			key, ok := kv.Key.(*ast.Ident)
			if !ok {
				continue
			}
			at := fset.Position(kv.Pos()).String()
			switch key.Name {
			case "pattern":
				lit, ok := kv.Value.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					problems = append(problems, at+": pattern is not a string literal")
					continue
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					problems = append(problems, at+": "+err.Error())
					continue
				}
				r.pattern, found = s, true
			case "auth":
				if id, ok := kv.Value.(*ast.Ident); ok {
					r.auth = id.Name
				} else {
					problems = append(problems, at+": auth is not an identifier")
				}
			case "deprecated":
				id, ok := kv.Value.(*ast.Ident)
				r.deprecated = ok && id.Name == "true"
			case "scopes":
				switch v := kv.Value.(type) {
				case *ast.Ident:
					sc, ok := scopeVars[v.Name]
					if !ok {
						problems = append(problems, at+": cannot resolve scope set "+v.Name)
					}
					r.scopes = sc
				case *ast.CompositeLit:
					sc, err := scopeList(v, scopeConsts)
					if err != nil {
						problems = append(problems, at+": "+err.Error())
					}
					r.scopes = sc
				default:
					problems = append(problems, at+": scopes is neither a named set nor a literal")
				}
			}
		}
		if !found {
			return true
		}
		method, path, err := splitPattern(r.pattern)
		if err != nil {
			problems = append(problems, err.Error())
			return false
		}
		r.method, r.path = method, path
		if r.auth == "" {
			r.auth = "authPublic" // the zero value of authMode
		}
		routes = append(routes, r)
		return false
	})
	for _, p := range problems {
		t.Error(p)
	}
	if len(routes) == 0 {
		t.Fatalf("no routes found in %s: has the table moved?", routesPath)
	}
	return routes
}

// parseScopeConsts maps the tenant package's Scope constant names to their
// wire strings.
func parseScopeConsts(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(tenantDir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", name, err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Scope") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if s, err := strconv.Unquote(lit.Value); err == nil {
							out[n.Name] = s
						}
					}
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no Scope constants found in %s", tenantDir)
	}
	return out
}

// scopeList resolves []tenant.Scope{tenant.ScopeX, ...} to wire strings.
func scopeList(cl *ast.CompositeLit, consts map[string]string) ([]string, error) {
	var out []string
	for _, el := range cl.Elts {
		sel, ok := el.(*ast.SelectorExpr)
		if !ok {
			return nil, errors.New("scope set element is not tenant.ScopeX")
		}
		s, ok := consts[sel.Sel.Name]
		if !ok {
			return nil, fmt.Errorf("unknown scope constant %s", sel.Sel.Name)
		}
		out = append(out, s)
	}
	return out, nil
}

// splitPattern turns a ServeMux pattern into an OpenAPI method and path:
// {name...} becomes {name} and a trailing {$} is dropped.
func splitPattern(p string) (method, path string, err error) {
	method, path, ok := strings.Cut(p, " ")
	if !ok || method == "" || strings.ContainsAny(method, "/{") {
		return "", "", fmt.Errorf("route %q has no method: the API document needs one", p)
	}
	path = strings.TrimSpace(path)
	if !strings.HasPrefix(path, "/") {
		return "", "", fmt.Errorf("route %q: only host-less patterns can be documented", p)
	}
	path = strings.TrimSuffix(path, "{$}")
	path = strings.ReplaceAll(path, "...}", "}")
	return method, path, nil
}

// buildModel parses spec and builds its OpenAPI 3.1 model. Any build error,
// unresolved reference, resolver or rolodex error is returned.
func buildModel(spec []byte) (*libopenapi.DocumentModel[v3.Document], error) {
	cfg := datamodel.NewDocumentConfiguration()
	cfg.Logger = slog.New(slog.DiscardHandler) // problems come back as errors
	doc, err := libopenapi.NewDocumentWithConfiguration(spec, cfg)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if v := doc.GetVersion(); !strings.HasPrefix(v, "3.1") {
		return nil, fmt.Errorf("openapi version is %q, want 3.1.x", v)
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		return m, fmt.Errorf("build v3 model: %w", err)
	}
	if m == nil {
		return nil, errors.New("build v3 model: no model")
	}
	var errs []error
	if idx := m.Index; idx != nil {
		errs = append(errs, idx.GetReferenceIndexErrors()...)
		if res := idx.GetResolver(); res != nil {
			for _, e := range res.GetResolvingErrors() {
				errs = append(errs, e)
			}
		}
	}
	if m.Model.Rolodex != nil {
		errs = append(errs, m.Model.Rolodex.GetCaughtErrors()...)
	}
	return m, errors.Join(errs...)
}

// refProblems checks, independently of libopenapi, that every $ref in spec
// is a local JSON pointer that names an existing node.
func refProblems(spec []byte) (refs int, problems []string, err error) {
	var root yaml.Node
	if err := yaml.Unmarshal(spec, &root); err != nil {
		return 0, nil, err
	}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if k.Value == "$ref" && v.Kind == yaml.ScalarNode {
					refs++
					if msg := resolvePointer(&root, v.Value); msg != "" {
						problems = append(problems, fmt.Sprintf("line %d: $ref %q: %s", v.Line, v.Value, msg))
					}
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&root)
	return refs, problems, nil
}

func resolvePointer(root *yaml.Node, ref string) string {
	ptr, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return "not a local reference (the document must be self-contained)"
	}
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	for _, tok := range strings.Split(ptr, "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		var next *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == tok {
					next = n.Content[i+1]
					break
				}
			}
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
			}
		}
		if next == nil {
			return "no node " + strconv.Quote(tok)
		}
		n = next
	}
	return ""
}

// documented lists the document's operations as "METHOD /path".
func documented(m *libopenapi.DocumentModel[v3.Document]) map[string]*v3.Operation {
	out := map[string]*v3.Operation{}
	if m.Model.Paths == nil || m.Model.Paths.PathItems == nil {
		return out
	}
	for path, item := range m.Model.Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			out[strings.ToUpper(method)+" "+path] = op
		}
	}
	return out
}

// diffRoutes returns the served routes the document lacks and the
// documented operations the table does not serve, both sorted.
func diffRoutes(served []string, docs []string) (missing, extra []string) {
	for _, s := range served {
		if !slices.Contains(docs, s) {
			missing = append(missing, s)
		}
	}
	for _, d := range docs {
		if !slices.Contains(served, d) {
			extra = append(extra, d)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	return missing, extra
}

func loadSpec(t *testing.T) ([]byte, *libopenapi.DocumentModel[v3.Document]) {
	t.Helper()
	spec, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatalf("read %s: %v", specPath, err)
	}
	m, err := buildModel(spec)
	if err != nil {
		t.Fatalf("%s does not build as OpenAPI 3.1:\n%v", specPath, err)
	}
	return spec, m
}

func TestSpecIsOpenAPI31(t *testing.T) {
	_, m := loadSpec(t)
	if !strings.HasPrefix(m.Model.Version, "3.1") {
		t.Fatalf("model version %q, want 3.1.x", m.Model.Version)
	}
	if m.Model.Info == nil || m.Model.Info.Title == "" || m.Model.Info.Version == "" {
		t.Error("info.title and info.version are required")
	}
}

// TestVersionsMatchTheBuild: info.version is the service interface the
// document describes, x-clearance-version our release; both are the
// build's constants, so neither can drift from what /v1/health reports.
func TestVersionsMatchTheBuild(t *testing.T) {
	spec, _ := loadSpec(t)
	var doc struct {
		Info struct {
			Version          string `yaml:"version"`
			ClearanceVersion string `yaml:"x-clearance-version"`
		} `yaml:"info"`
	}
	if err := yaml.Unmarshal(spec, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Info.Version != clearance.InterfaceVersion {
		t.Errorf("info.version = %q, want the interface version %q", doc.Info.Version, clearance.InterfaceVersion)
	}
	if doc.Info.ClearanceVersion != clearance.Version {
		t.Errorf("info.x-clearance-version = %q, want the release %q", doc.Info.ClearanceVersion, clearance.Version)
	}
}

func TestEveryRefResolves(t *testing.T) {
	spec, _ := loadSpec(t) // libopenapi reports broken refs while building
	n, problems, err := refProblems(spec)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no $ref found: is the document the right one?")
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestBrokenRefIsCaught proves the checks above fail on a broken reference.
func TestBrokenRefIsCaught(t *testing.T) {
	spec := []byte(`openapi: 3.1.0
info: {title: t, version: "1"}
paths:
  /x:
    get:
      responses:
        '200':
          description: ok
          content:
            application/json:
              schema:
                $ref: '#/components/schemas/Missing'
components:
  schemas:
    Present: {type: string}
`)
	if _, err := buildModel(spec); err == nil {
		t.Error("buildModel accepted a document with a broken $ref")
	}
	_, problems, err := refProblems(spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 {
		t.Errorf("refProblems found %d problems, want 1: %v", len(problems), problems)
	}
	if _, err := buildModel([]byte(strings.Replace(string(spec), "3.1.0", "3.0.3", 1))); err == nil {
		t.Error("buildModel accepted an OpenAPI 3.0 document")
	}
}

func TestEveryRouteDocumented(t *testing.T) {
	_, m := loadSpec(t)
	routes := parseRoutes(t)
	var served []string
	for _, r := range routes {
		if slices.Contains(served, r.key()) {
			t.Errorf("route table serves %s twice", r.key())
		}
		served = append(served, r.key())
	}
	if !slices.Contains(served, "POST /v1/protocol/evaluate-decision") {
		t.Fatalf("route table parse looks wrong: POST /v1/protocol/evaluate-decision not among %v", served)
	}
	ops := documented(m)
	var docs []string
	for k := range ops {
		docs = append(docs, k)
	}
	missing, extra := diffRoutes(served, docs)
	for _, k := range missing {
		t.Errorf("served but not documented in docs/openapi.yaml: %s", k)
	}
	for _, k := range extra {
		t.Errorf("documented but not served by server/routes.go: %s", k)
	}
}

func TestDiffRoutes(t *testing.T) {
	missing, extra := diffRoutes([]string{"GET /a", "POST /b"}, []string{"POST /b", "GET /c"})
	if !slices.Equal(missing, []string{"GET /a"}) || !slices.Equal(extra, []string{"GET /c"}) {
		t.Fatalf("diffRoutes: missing %v extra %v", missing, extra)
	}
	for p, want := range map[string]string{
		"GET /v1/files/{path...}": "GET /v1/files/{path}",
		"GET /v1/{$}":             "GET /v1/",
	} {
		m, path, err := splitPattern(p)
		if err != nil || m+" "+path != want {
			t.Errorf("splitPattern(%q) = %q %q %v, want %q", p, m, path, err, want)
		}
	}
	if _, _, err := splitPattern("/v1/health"); err == nil {
		t.Error("splitPattern accepted a pattern without a method")
	}
}

func TestSecurityMatchesRouteTable(t *testing.T) {
	_, m := loadSpec(t)
	ops := documented(m)
	for _, r := range parseRoutes(t) {
		op := ops[r.key()]
		if op == nil {
			continue // reported by TestEveryRouteDocumented
		}
		sec := op.Security
		if sec == nil {
			sec = m.Model.Security
		}
		if r.auth == "authPublic" {
			if op.Security == nil || len(op.Security) != 0 {
				t.Errorf("%s is public: document it with `security: []`", r.key())
			}
			continue
		}
		if len(sec) == 0 {
			t.Errorf("%s needs a key but documents no security requirement", r.key())
			continue
		}
		if r.auth == "authAccount" { // the session cookie, never a bearer key
			for _, req := range sec {
				scopes, ok := req.Requirements.Get("sessionCookie")
				if req.Requirements.Len() != 1 || !ok || len(scopes) != 0 {
					t.Errorf("%s takes the session cookie: document it with `security: [{sessionCookie: []}]`", r.key())
				}
			}
			continue
		}
		var got []string
		for _, req := range sec {
			if req.Requirements == nil || req.Requirements.Len() != 1 {
				t.Errorf("%s: each security requirement must name bearerAuth alone", r.key())
				continue
			}
			scopes, ok := req.Requirements.Get("bearerAuth")
			if !ok {
				t.Errorf("%s: security requirement without bearerAuth", r.key())
				continue
			}
			got = append(got, scopes...)
		}
		want := slices.Clone(r.scopes)
		if r.auth == "authPlatform" {
			want = nil
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: documented scopes %v, route table requires one of %v", r.key(), got, want)
		}
		if r.auth == "authPlatform" {
			ext := ""
			if op.Extensions != nil {
				if n, ok := op.Extensions.Get("x-clearance-extension"); ok && n != nil {
					ext = n.Value
				}
			}
			if ext != "true" {
				t.Errorf("%s is a platform extension: mark it `x-clearance-extension: true`", r.key())
			}
		}
	}
}

func TestDeprecationMatchesRouteTable(t *testing.T) {
	_, m := loadSpec(t)
	ops := documented(m)
	for _, r := range parseRoutes(t) {
		op := ops[r.key()]
		if op == nil {
			continue
		}
		dep := op.Deprecated != nil && *op.Deprecated
		if dep != r.deprecated {
			t.Errorf("%s: deprecated is %v in the document, %v in the route table", r.key(), dep, r.deprecated)
		}
		if !r.deprecated || op.Responses == nil || op.Responses.Codes == nil {
			continue
		}
		ok, _ := op.Responses.Codes.Get("200")
		if ok == nil || ok.Headers == nil {
			t.Errorf("%s: its 200 response must document the Deprecation header", r.key())
			continue
		}
		if _, has := ok.Headers.Get("Deprecation"); !has {
			t.Errorf("%s: its 200 response must document the Deprecation header", r.key())
		}
	}
}

func TestOperationsAreWellFormed(t *testing.T) {
	_, m := loadSpec(t)
	ids := map[string]string{}
	for path, item := range m.Model.Paths.PathItems.FromOldest() {
		var pathParams []string
		for _, seg := range strings.Split(path, "/") {
			if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
				pathParams = append(pathParams, seg[1:len(seg)-1])
			}
		}
		for method, op := range item.GetOperations().FromOldest() {
			key := strings.ToUpper(method) + " " + path
			if op.OperationId == "" {
				t.Errorf("%s: operationId missing", key)
			} else if prev, dup := ids[op.OperationId]; dup {
				t.Errorf("%s: operationId %q already used by %s", key, op.OperationId, prev)
			} else {
				ids[op.OperationId] = key
			}
			declared := map[string]bool{}
			for _, p := range append(slices.Clone(item.Parameters), op.Parameters...) {
				if p != nil && p.In == "path" {
					declared[p.Name] = true
				}
			}
			for _, name := range pathParams {
				if !declared[name] {
					t.Errorf("%s: path parameter %q not declared", key, name)
				}
			}
			if op.Responses == nil || op.Responses.Codes == nil || op.Responses.Codes.Len() == 0 {
				t.Errorf("%s: no responses", key)
				continue
			}
			for code, resp := range op.Responses.Codes.FromOldest() {
				status, err := strconv.Atoi(code)
				if err != nil || status < 400 {
					continue
				}
				if key == "GET /v1/health" && status == 503 {
					continue // health answers its Health body when degraded
				}
				if resp.Content == nil {
					t.Errorf("%s %s: no content", key, code)
					continue
				}
				_, problem := resp.Content.Get("application/problem+json")
				_, page := resp.Content.Get("text/html") // a page a browser is shown instead
				if !problem && !page {
					t.Errorf("%s %s: error responses are application/problem+json (or a text/html page)", key, code)
				}
				if status == 429 {
					if resp.Headers == nil {
						t.Errorf("%s 429: Retry-After header not documented", key)
					} else if _, ok := resp.Headers.Get("Retry-After"); !ok {
						t.Errorf("%s 429: Retry-After header not documented", key)
					}
				}
			}
		}
	}
}

func TestProblemListsStableCodes(t *testing.T) {
	_, m := loadSpec(t)
	if m.Model.Components == nil || m.Model.Components.Schemas == nil {
		t.Fatal("no components.schemas")
	}
	proxy, ok := m.Model.Components.Schemas.Get("Problem")
	if !ok || proxy == nil {
		t.Fatal("components.schemas.Problem missing")
	}
	s := proxy.Schema()
	if s == nil {
		t.Fatalf("Problem schema does not build: %v", proxy.GetBuildError())
	}
	codes := stableCodes(t, moduleDir)
	if len(codes) < 10 {
		t.Fatalf("found only %d codes (%v): have the sources moved?", len(codes), codes)
	}
	for _, c := range codes {
		if !strings.Contains(s.Description, "`"+c+"`") {
			t.Errorf("stable code %s is not listed in the Problem schema description", c)
		}
	}
}
