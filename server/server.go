package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"mime"
	"net"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/tenant"
)

// Header names Clearance reads and writes.
const (
	HeaderRequestID      = "X-Request-Id"
	HeaderCorrelationID  = "X-Correlation-Id"
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderReplayed       = "Idempotent-Replayed"
)

// deprecatedSince is the RFC 9745 Deprecation value of deprecated aliases
// (2026-11-01T00:00:00Z).
const deprecatedSince = "@1793491200"

// Defaults of Options.
const (
	DefaultMaxBodyBytes = 1 << 20
	DefaultRateLimit    = 1000
	DefaultRateBurst    = 2000
)

// Options configure a Server. The zero value is a good default.
type Options struct {
	Logger *slog.Logger
	// Registerer receives the server's metrics; nil means a private registry.
	Registerer prometheus.Registerer
	// MaxBodyBytes bounds request bodies (413 beyond); 0 means 1 MiB.
	MaxBodyBytes int64
	// RateLimit is requests per second per credential; 0 means the default
	// (1,000/s), negative turns limiting off.
	RateLimit float64
	// RateBurst is the token-bucket burst; 0 means 2,000.
	RateBurst int
	// Keys names the service's signing keys by role (e.g. "ledger") with
	// their kids; /v1/health reports them, with "grant" always the active
	// key of the engine's ring in use.
	Keys map[string]string
	// PublicURL is the origin clients reach this server at
	// ("https://clearance.example.com"), for the absolute URLs answers
	// carry (a deployment bundle's webhook_url); "" means the request's
	// own scheme and Host. An https one (or any but a loopback host) also
	// makes the session cookie the Secure __Host- one.
	PublicURL string
	// AuthRateLimit is the budget of each source (client IP address; an
	// IPv6 /64) on the public auth routes that send or check e-mail codes,
	// in requests per minute, burst twice that; the automation connector's
	// public routes get 6 times it, the reader (POST /v1/reader/verify) 3
	// times. 0 means DefaultAuthRateLimit (10);
	// negative turns every public-auth budget off (tests only). RateLimit
	// does not change it (authlimit.go).
	AuthRateLimit float64
	// AuthGlobalRateLimit is the budget of those routes across every
	// source, per process, in requests per minute, burst twice that (6
	// times it for the automation routes). 0 means
	// DefaultAuthGlobalRateLimit (100); negative: no global budget.
	AuthGlobalRateLimit float64
	// TracerProvider receives a server span of each request, named by its
	// route pattern and continuing the trace of a W3C traceparent header;
	// the engine's spans are its children when the engine traces too. nil
	// means no spans at no cost.
	TracerProvider trace.TracerProvider
	// DisableAccessLog turns off the access log: the info line of each
	// request (method, route pattern, status, duration, request id, org
	// id, response bytes; never a header, a query string or a body). A
	// request answered 5xx is logged at warn level either way.
	DisableAccessLog bool
}

// Server is the HTTP API over an Engine.
type Server struct {
	engine   *clearance.Engine
	opts     Options
	log      *slog.Logger
	mux      *http.ServeMux
	metrics  *metrics
	limiters sync.Map // key id -> *rate.Limiter
	// served holds the route table's patterns (unrouted asks the mux
	// which of them a path is served with).
	served map[string]bool
	// added counts the limiters made; every sweepEvery of them, the full
	// ones are forgotten (see allow).
	added    atomic.Int64
	sweeping sync.Mutex
	json     strictjson.Options // request bodies: strict, within the engine's JSON limits
	auth     authLimits         // budgets of the public auth routes
	tracer   trace.Tracer       // nil: no spans
}

// New builds the HTTP API.
func New(e *clearance.Engine, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.RateLimit == 0 {
		opts.RateLimit = DefaultRateLimit
	}
	if opts.RateBurst <= 0 {
		opts.RateBurst = DefaultRateBurst
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	if opts.AuthRateLimit == 0 {
		opts.AuthRateLimit = DefaultAuthRateLimit
	}
	if opts.AuthGlobalRateLimit == 0 {
		opts.AuthGlobalRateLimit = DefaultAuthGlobalRateLimit
	}
	s := &Server{engine: e, opts: opts, log: opts.Logger, mux: http.NewServeMux(), metrics: newMetrics(opts.Registerer, e),
		auth: newAuthLimits(opts, time.Now)}
	if opts.TracerProvider != nil {
		s.tracer = opts.TracerProvider.Tracer(tracerName)
	}
	s.json.RejectUnknown = true
	s.json.MaxMembers, s.json.MaxElements = e.JSONLimits()
	allowed := map[string][]string{} // path -> methods served
	var paths []string
	s.served = map[string]bool{}
	for _, rt := range s.routes() {
		s.mux.Handle(rt.pattern, s.wrap(rt))
		s.served[rt.pattern] = true
		method, path, _ := strings.Cut(rt.pattern, " ")
		if allowed[path] == nil {
			paths = append(paths, path)
		}
		allowed[path] = append(allowed[path], method)
	}
	// A served path asked with another method is a 405 naming the methods
	// it serves. Each is a pattern of its own, so that a sibling's wildcard
	// does not take it (GET /v1/policies/dry-run is not the version
	// "dry-run"); one that would conflict with a served route in
	// net/http.ServeMux (GET /v1/policies/{version}/activate against
	// GET /v1/policies/drafts/{name}) is left to unrouted, which asks the
	// mux which methods the path is served with.
	for _, path := range paths {
		refuse := s.wrap(route{pattern: path, auth: authPublic, handle: methodNotAllowed(strings.Join(allowed[path], ", "))})
		for _, m := range methods {
			if !slices.Contains(allowed[path], m) && !(m == http.MethodHead && slices.Contains(allowed[path], http.MethodGet)) {
				handleUnlessConflicting(s.mux, m+" "+path, refuse)
			}
		}
	}
	s.mux.Handle("/", s.wrap(route{pattern: "/", auth: authPublic, handle: (*Server).unrouted}))
	return s
}

func methodNotAllowed(allow string) func(*Server, *call) error {
	return func(_ *Server, c *call) error {
		c.w.Header().Set("Allow", allow)
		return errMethod
	}
}

// handleUnlessConflicting registers pattern unless net/http.ServeMux finds
// it conflicting with one already registered (it panics then, and offers no
// way to ask first).
func handleUnlessConflicting(mux *http.ServeMux, pattern string, h http.Handler) {
	defer func() { _ = recover() }()
	mux.Handle(pattern, h)
}

// unrouted answers a request no route serves: 405 with Allow when the
// path is served with other methods, 404 ROUTE_NOT_FOUND otherwise.
func (s *Server) unrouted(c *call) error {
	var allow []string
	for _, m := range methods {
		if m == http.MethodHead {
			continue // served with GET
		}
		probe := *c.r
		probe.Method = m
		if _, pattern := s.mux.Handler(&probe); s.served[pattern] {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		return errNoRoute
	}
	c.w.Header().Set("Allow", strings.Join(allow, ", "))
	return errMethod
}

// methods are those a path answers 405 to when it does not serve them
// (HEAD is served with GET); an unlisted method reaches unrouted.
var methods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace}

// ServeHTTP serves the route table. A path that is not clean (a "." or
// ".." segment, an empty segment) is 404 ROUTE_NOT_FOUND like any unknown
// route: it is refused before net/http.ServeMux, which would answer it with
// a 307 text/html redirect to the clean path.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !cleanPath(r.URL.EscapedPath()) {
		s.wrap(noRoute).ServeHTTP(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// noRoute answers a path the route table does not serve: 404 ROUTE_NOT_FOUND.
var noRoute = route{pattern: "/", auth: authPublic, handle: func(*Server, *call) error { return errNoRoute }}

// cleanPath reports whether p is a path net/http.ServeMux serves without
// redirecting: rooted, without "." or ".." segments or empty segments
// (a trailing slash is kept by the mux, so it is clean here too).
func cleanPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	c := path.Clean(p)
	return c == p || c+"/" == p && c != "/"
}

type authMode int

const (
	authPublic   authMode = iota // no credential
	authKey                      // any org key (or the platform key acting for an org)
	authPlatform                 // the platform key only
	// authOnboarding: an onboarding grant or an org key (the feature checks
	// which); the only routes an onboarding grant opens.
	authOnboarding
	// authAccount: an account session (the session cookie); a request that
	// changes anything also carries HeaderCSRF, which a cross-site form or
	// a simple cross-site fetch cannot send.
	authAccount
)

// route is one line of the route table.
type route struct {
	pattern    string
	auth       authMode
	scopes     []tenant.Scope // any of these (org:* always)
	deprecated bool
	// refusal is the body the route answers a refusal with (problemBody
	// unless the route keeps a fail-closed shape of its own).
	refusal refusalBody
	// throttle runs before the body is read: a public route's own rate
	// limits (the per-credential one needs a credential).
	throttle func(*Server, *call) error
	// form: the body is application/x-www-form-urlencoded (OAuth's token
	// endpoint, an HTML form) instead of JSON.
	form   bool
	handle func(*Server, *call) error
}

// call is one request in flight.
type call struct {
	engine    *clearance.Engine
	w         http.ResponseWriter // &out
	out       countingWriter
	r         *http.Request
	requestID string
	principal clearance.Principal
	account   clearance.AccountSession // authAccount routes
	body      []byte
	json      strictjson.Options // how decode reads body
	status    int
}

func (s *Server) wrap(rt route) http.Handler {
	method, routePath, ok := strings.Cut(rt.pattern, " ")
	if !ok {
		method, routePath = "", rt.pattern // any method
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		var span trace.Span
		if s.tracer != nil {
			var ctx context.Context
			ctx, span = s.startSpan(r, method, routePath)
			r = r.WithContext(ctx)
		}
		c := &call{engine: s.engine, r: r, requestID: requestID(r), json: s.json}
		c.out.ResponseWriter = w
		c.w = &c.out
		w.Header().Set(HeaderRequestID, c.requestID)
		if rt.deprecated {
			w.Header().Set("Deprecation", deprecatedSince)
			w.Header().Set("Link", `</v1/protocol/evaluate-decision>; rel="successor-version"`)
		}
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("panic", "route", rt.pattern, "panic", p, "request_id", c.requestID)
				c.status = writeProblem(c.w, errors.New("panic"), c.requestID)
			}
			d := time.Since(start)
			s.metrics.observe(rt.pattern, r.Method, c.status, d)
			if span != nil {
				endSpan(span, c)
			}
			s.logAccess(rt.pattern, c, d, span)
		}()
		if err := s.serve(rt, c); err != nil && c.status == 0 {
			c.status = writeRefusal(c, rt.refusal, err)
		}
	})
}

func (s *Server) serve(rt route, c *call) error {
	if rt.auth == authAccount {
		as, err := s.engine.Onboarding.Session(c.r.Context(), s.sessionSecret(c.r))
		if err != nil {
			return err
		}
		if c.r.Method != http.MethodGet && c.r.Method != http.MethodHead && c.r.Header.Get(HeaderCSRF) != "1" {
			return &clearance.Error{Kind: clearance.ErrForbidden, Code: codeCSRFHeaderRequired,
				Detail: "a signed-in change needs the header " + HeaderCSRF + ": 1"}
		}
		if err := s.allow(c.w, "account:"+as.AccountID); err != nil {
			return err
		}
		c.account = as
	} else if rt.auth != authPublic {
		p, err := s.engine.Admin.Authenticate(c.r.Context(), bearer(c.r))
		if err != nil {
			return err
		}
		switch {
		case rt.auth == authOnboarding && p.IsPlatform():
			return &clearance.Error{Kind: clearance.ErrForbidden, Code: clearance.CodeInsufficientScope,
				Detail: "this route takes an onboarding grant or an org key"}
		case rt.auth != authOnboarding && p.Kind == tenant.KindOnboarding:
			return &clearance.Error{Kind: clearance.ErrForbidden, Code: clearance.CodeInsufficientScope,
				Detail: "an onboarding grant works only on the onboarding routes"}
		case rt.auth == authPlatform && !p.IsPlatform():
			return &clearance.Error{Kind: clearance.ErrForbidden, Code: clearance.CodePlatformKeyRequired, Detail: "this route needs the platform key"}
		case rt.auth == authKey && !p.IsPlatform() && len(rt.scopes) > 0 && !p.Allows(rt.scopes...):
			return &clearance.Error{Kind: clearance.ErrForbidden, Code: clearance.CodeInsufficientScope,
				Detail: "the API key lacks a required scope: one of " + joinScopes(rt.scopes)}
		}
		if err := s.allow(c.w, p.KeyID); err != nil {
			return err
		}
		c.principal = p
	}
	if rt.throttle != nil {
		if err := rt.throttle(s, c); err != nil {
			return err
		}
	}
	if c.r.Method == http.MethodPost || c.r.Method == http.MethodPut {
		if err := readBody(c, s.opts.MaxBodyBytes, rt.form); err != nil {
			return err
		}
	}
	return rt.handle(s, c)
}

// allow applies the per-credential token bucket.
func (s *Server) allow(w http.ResponseWriter, keyID string) error {
	if s.opts.RateLimit < 0 {
		return nil
	}
	v, ok := s.limiters.Load(keyID)
	if !ok {
		var loaded bool
		v, loaded = s.limiters.LoadOrStore(keyID, rate.NewLimiter(rate.Limit(s.opts.RateLimit), s.opts.RateBurst))
		if !loaded && s.added.Add(1)%sweepEvery == 0 {
			s.sweepLimiters()
		}
	}
	lim := v.(*rate.Limiter)
	res := lim.Reserve()
	if d := res.Delay(); !res.OK() || d > 0 {
		res.Cancel()
		secs := max(1, int(math.Ceil(d.Seconds())))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		return errRateLimited
	}
	return nil
}

// sweepEvery is how many new limiters trigger a sweep.
const sweepEvery = 4096

// sweepLimiters forgets the limiters whose bucket is full again: one
// made afresh would be the same, so nothing changes for any client,
// while keys a client makes up (connector ids, addresses on the public
// signal route) cannot grow the map without bound.
func (s *Server) sweepLimiters() {
	if !s.sweeping.TryLock() {
		return
	}
	defer s.sweeping.Unlock()
	burst := float64(s.opts.RateBurst)
	s.limiters.Range(func(k, v any) bool {
		if v.(*rate.Limiter).Tokens() >= burst {
			s.limiters.CompareAndDelete(k, v)
		}
		return true
	})
}

func readBody(c *call, limit int64, form bool) error {
	if ct := c.r.Header.Get("Content-Type"); ct != "" || form {
		mt, _, err := mime.ParseMediaType(ct)
		switch {
		case form && (err != nil || mt != "application/x-www-form-urlencoded"):
			return errFormMediaType
		case !form && (err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json"))):
			return errMediaType
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.w, c.r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errTooLarge
		}
		return &clearance.Error{Kind: clearance.ErrInvalidRequest, Code: codeBodyUnreadable, Detail: "the request body could not be read"}
	}
	c.body = body
	return nil
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// maxRequestIDLen bounds an X-Request-Id the server echoes.
const maxRequestIDLen = 128

// requestID is the client's X-Request-Id when it sent exactly one that is a
// clearance.ValidToken of at most maxRequestIDLen bytes; otherwise a new
// one. The id is ours to give, so a bad one is replaced, not refused, and
// never echoed.
func requestID(r *http.Request) string {
	if ids := r.Header.Values(HeaderRequestID); len(ids) == 1 && len(ids[0]) <= maxRequestIDLen && clearance.ValidToken(ids[0]) {
		return ids[0]
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func joinScopes(sc []tenant.Scope) string {
	parts := make([]string, len(sc))
	for i, s := range sc {
		parts[i] = string(s)
	}
	return strings.Join(parts, ", ")
}

// writeJSON encodes v with status.
func (c *call) writeJSON(status int, v any) error {
	c.w.Header().Set("Content-Type", "application/json")
	c.w.Header().Set("Cache-Control", "no-store")
	c.w.WriteHeader(status)
	c.status = status
	enc := json.NewEncoder(c.w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// writeRaw sends stored JSON bytes unchanged.
func (c *call) writeRaw(status int, body []byte) error {
	c.w.Header().Set("Content-Type", "application/json")
	c.w.Header().Set("Cache-Control", "no-store")
	c.w.WriteHeader(status)
	c.status = status
	_, err := c.w.Write(body)
	return err
}

// Shutdown helpers for cmd: a configured *http.Server.
func (s *Server) HTTPServer(addr string) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(_ net.Listener) context.Context { return context.Background() },
	}
}
