package client_test

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance/client"
)

// Every route of the server's route table has a method whose doc names it.
func TestEveryRouteHasAMethod(t *testing.T) {
	t.Parallel()
	table, err := os.ReadFile(filepath.Join("..", "server", "routes.go"))
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for _, m := range regexp.MustCompile(`pattern: "([A-Z]+ [^"]+)"`).FindAllStringSubmatch(string(table), -1) {
		routes = append(routes, m[1])
	}
	named, methods := documentedRoutes(t)
	for _, r := range routes {
		if !named[r] {
			t.Errorf("no method of the client names the route %s", r)
		}
	}
	routeSet := map[string]bool{}
	for _, r := range routes {
		routeSet[r] = true
	}
	for r := range named {
		if !routeSet[r] {
			t.Errorf("a method names %s, which the server does not serve", r)
		}
	}
	t.Logf("%d routes, %d methods of *Client", len(routes), methods)
}

// documentedRoutes reads the routes the docs of the exported *Client
// methods name ("GET /path", with {a|b} alternatives), and counts them.
func documentedRoutes(t *testing.T) (map[string]bool, int) {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	route := regexp.MustCompile(`\b(GET|POST|PUT|DELETE) (/[^\s,;?]*)`)
	named, methods := map[string]bool{}, 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || !fn.Name.IsExported() || fn.Doc == nil {
				continue
			}
			if star, ok := fn.Recv.List[0].Type.(*ast.StarExpr); !ok || star.X.(*ast.Ident).Name != "Client" {
				continue
			}
			methods++
			for _, m := range route.FindAllStringSubmatch(strings.Join(strings.Fields(fn.Doc.Text()), " "), -1) {
				path := strings.TrimRight(m[2], ".")
				for _, p := range expand(path) {
					named[m[1]+" "+p] = true
				}
			}
		}
	}
	return named, methods
}

// expand spells out "/a/{b|c}" as "/a/b" and "/a/c".
func expand(path string) []string {
	alt := regexp.MustCompile(`\{([^{}|]+\|[^{}]+)\}`)
	m := alt.FindStringSubmatchIndex(path)
	if m == nil {
		return []string{path}
	}
	var out []string
	for _, choice := range strings.Split(path[m[2]:m[3]], "|") {
		out = append(out, expand(path[:m[0]]+choice+path[m[1]:])...)
	}
	return out
}

// A problem answer is a *client.Error with its status, code, request id
// and field errors.
func TestProblemErrors(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	o := s.newOrg("Problems")
	ctx := t.Context()

	_, err := o.c.Dossier(ctx, "01900000-0000-7000-8000-000000000000", client.WithRequestID("req-404"))
	e := wantCode(t, err, http.StatusNotFound, "DOSSIER_NOT_FOUND")
	if e.RequestID != "req-404" || e.Method != http.MethodGet || e.Path != "/v1/protocol/dossiers/01900000-0000-7000-8000-000000000000" ||
		e.Title != "Not Found" || e.Detail == "" || e.ShouldExecute {
		t.Fatalf("404: %+v", e)
	}
	if !strings.Contains(e.Error(), "404 DOSSIER_NOT_FOUND") || client.IsCode(err, "POLICY_INVALID") {
		t.Fatalf("404 error text %q", e.Error())
	}

	_, err = s.client(s.platform).RegisterAutomationClient(ctx, client.AutomationClientRequest{Name: "Flows",
		RedirectUris: []string{"https://flows.example/callback", "ftp://flows.example/callback"}})
	e = wantCode(t, err, http.StatusBadRequest, "INVALID_REQUEST")
	if len(e.Errors) != 1 || e.Errors[0].Field != "redirect_uris[1]" || e.Errors[0].Message == "" {
		t.Fatalf("field errors %+v", e.Errors)
	}

	// A wrapped error is still found.
	if wrapped := errors.Join(errors.New("refund 7"), err); !client.IsCode(wrapped, "INVALID_REQUEST") {
		t.Fatal("IsCode does not unwrap")
	}
	_, err = s.client("wrong-key").ReasonCodes(ctx)
	wantCode(t, err, http.StatusUnauthorized, "UNAUTHENTICATED")
}

// lossy forwards requests to the server; the answer to the first request
// to path is lost and replaced by a 503, as a proxy in between would.
type lossy struct {
	next http.RoundTripper
	path string

	mu   sync.Mutex
	keys []string // the Idempotency-Key of every attempt to path
}

func (l *lossy) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path != l.path {
		return l.next.RoundTrip(req)
	}
	l.mu.Lock()
	l.keys = append(l.keys, req.Header.Get("Idempotency-Key"))
	first := len(l.keys) == 1
	l.mu.Unlock()
	resp, err := l.next.RoundTrip(req)
	if err != nil || !first {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	body := `{"type":"about:blank","title":"Service Unavailable","status":503,"code":"UPSTREAM_UNAVAILABLE","detail":"the answer was lost"}`
	return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable",
		Header: http.Header{"Content-Type": {"application/problem+json"}}, Body: io.NopCloser(strings.NewReader(body)),
		Request: req}, nil
}

func (l *lossy) attempts() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.keys...)
}

// lossyClient is a client of o whose answers to path are lost once.
func (s *testServer) lossyClient(key, path string) (*client.Client, *lossy) {
	l := &lossy{next: http.DefaultTransport, path: path}
	return s.client(key, client.WithHTTPClient(&http.Client{Transport: l}), client.WithRetries(2, time.Millisecond)), l
}

// A decision whose answer was lost is asked again with the same
// Idempotency-Key, and the server answers the decision it recorded.
func TestRetryOfAnIdempotentRoute(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	o := s.newOrg("Retries")
	ctx := t.Context()
	head := func() int64 {
		page, err := o.c.Ledger(ctx, client.Query("limit", "1"))
		if err != nil {
			t.Fatal(err)
		}
		return page.Head.Seq
	}
	before := head()

	c, l := s.lossyClient(o.Key, "/v1/protocol/evaluate-decision")
	var got client.Response
	d, err := c.EvaluateDecision(ctx, decisionRequest(t, 50), client.Received(&got))
	if err != nil {
		t.Fatal(err)
	}
	keys := l.attempts()
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
		t.Fatalf("want two attempts with one Idempotency-Key, got %q", keys)
	}
	if got.Status != http.StatusOK || got.Header.Get("Idempotent-Replayed") != "true" || d.IdempotencyKey == nil || *d.IdempotencyKey != keys[0] {
		t.Fatalf("the retry was not answered the recorded decision: %d %v %+v", got.Status, got.Header, d)
	}
	if after := head(); after != before+1 || d.LedgerSeq != after {
		t.Fatalf("one decision must be recorded: ledger %d -> %d, decision at %d", before, after, d.LedgerSeq)
	}

	// The caller's key is the one sent.
	c, l = s.lossyClient(o.Key, "/v1/protocol/evaluate-decision")
	if _, err := c.EvaluateDecision(ctx, decisionRequest(t, 60), client.WithIdempotencyKey("refund-60")); err != nil {
		t.Fatal(err)
	}
	if keys := l.attempts(); len(keys) != 2 || keys[0] != "refund-60" || keys[1] != "refund-60" {
		t.Fatalf("attempts %q", keys)
	}
}

// A claim or a finalization whose answer was lost is not sent again: the
// caller gets the 503 and decides.
func TestNoRetryOfClaimOrFinalize(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	o := s.newOrg("Once")
	o.publish(t, bandsBundle)
	ctx := t.Context()
	d := s.bind(o, 100)

	c, l := s.lossyClient(o.Key, "/v1/execution/claim-token")
	_, err := c.Claim(ctx, client.ExecutionClaimTokenRequest{ExecutionToken: *d.ExecutionToken, IntentHash: d.IntentHash})
	wantCode(t, err, http.StatusServiceUnavailable, "UPSTREAM_UNAVAILABLE")
	if keys := l.attempts(); len(keys) != 1 || keys[0] != "" {
		t.Fatalf("a claim was sent %d times (keys %q)", len(keys), keys)
	}
	// The server did claim it: asking again is a replay, refused.
	_, err = o.c.Claim(ctx, client.ExecutionClaimTokenRequest{ExecutionToken: *d.ExecutionToken, IntentHash: d.IntentHash})
	wantCode(t, err, http.StatusConflict, "CLAIM_REPLAY")

	d2 := s.bind(o, 100)
	claim, err := o.c.Claim(ctx, client.ExecutionClaimTokenRequest{ExecutionToken: *d2.ExecutionToken, IntentHash: d2.IntentHash})
	if err != nil {
		t.Fatal(err)
	}
	c, l = s.lossyClient(o.Key, "/v1/execution/finalize-token")
	_, err = c.Finalize(ctx, client.ExecutionFinalizeRequest{ExecutionToken: *d2.ExecutionToken, ClaimToken: claim.ClaimToken, Outcome: "COMMITTED"})
	wantCode(t, err, http.StatusServiceUnavailable, "UPSTREAM_UNAVAILABLE")
	if keys := l.attempts(); len(keys) != 1 {
		t.Fatalf("a finalization was sent %d times", len(keys))
	}
}

// The same Idempotency-Key with the same body gets the same answer;
// another body is refused.
func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	o := s.newOrg("Keys")
	ctx := t.Context()

	first := o.decide(t, 70, client.WithIdempotencyKey("refund-70"))
	var got client.Response
	again := o.decide(t, 70, client.WithIdempotencyKey("refund-70"), client.Received(&got))
	if again.DecisionId != first.DecisionId || again.DossierDigest != first.DossierDigest || again.LedgerSeq != first.LedgerSeq ||
		got.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("same key, same body: %+v then %+v (%v)", first, again, got.Header)
	}
	other := o.decide(t, 70, client.WithIdempotencyKey("refund-70b"))
	if other.DecisionId == first.DecisionId {
		t.Fatal("another key answered the same decision")
	}
	_, err := o.c.EvaluateDecision(ctx, decisionRequest(t, 71), client.WithIdempotencyKey("refund-70"))
	wantCode(t, err, http.StatusConflict, "IDEMPOTENCY_KEY_REUSED")
}

func TestNewRefusesABadBaseURL(t *testing.T) {
	t.Parallel()
	for _, base := range []string{"", "127.0.0.1:8080", "ftp://example.com", "http://"} {
		if _, err := client.New(base, "key"); err == nil {
			t.Errorf("New(%q) accepted", base)
		}
	}
}
