package server

import (
	"container/list"
	"math"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/clearancehq/clearance"
)

// The public auth routes (sign-up and sign-in by e-mail code, the
// automation connector's authorize and token endpoints, and the other
// public routes that name throttleSignUp) have budgets of their own, apart
// from the per-credential bucket (Options.RateLimit, which --rate-limit -1
// turns off, and whose 1,000/s would not slow a guesser): a small budget
// per source (a client IP address; an IPv6 /64, what one host is normally
// given) and one across every source, per process. The per-address limits
// of the codes themselves (sends, wrong tries, failures per day) are the
// engine's, in the store, for every server alike; these budgets bound how
// fast one client spends them (locking an address's owner out included)
// and how much mail and work the routes cost in all.

// Defaults of Options.AuthRateLimit and Options.AuthGlobalRateLimit, in
// requests per minute; the burst is twice the rate.
const (
	DefaultAuthRateLimit       = 10  // per source, the routes that send or check codes
	DefaultAuthGlobalRateLimit = 100 // every source together, per process
)

// authAutomationFactor is how many times the code routes' budgets the
// automation connector's public routes get (per source 60/min, in all
// 600/min by default): an authorization is three requests and checks no
// guessable secret, and a platform's servers exchange the codes of all
// its users from few addresses.
const authAutomationFactor = 6

// authReaderFactor is how many times the code routes' budgets the reader
// (POST /v1/reader/verify) gets (per source 30/min, in all 300/min by
// default): an auditor checks a handful of files at a time, and each
// check costs CPU (a pack is hashed and parsed whole), never mail.
const authReaderFactor = 3

// maxAuthSources bounds the sources each budget tracks.
const maxAuthSources = 10_000

// authPathAutomation starts the paths of the automation connector's
// public routes.
const authPathAutomation = "/v1/public/auth/automation/"

// authLimiter is one budget: a token bucket per source, least recently
// used first out, and a global one.
type authLimiter struct {
	mu         sync.Mutex
	now        func() time.Time
	perSource  rate.Limit
	burst      int
	global     *rate.Limiter // nil: no global budget
	maxSources int
	sources    map[string]*list.Element // source -> element of lru
	lru        list.List                // of *authSource, most recent first
}

type authSource struct {
	key string
	lim *rate.Limiter
}

// newAuthLimiter returns a budget of perMinute per source and globalPerMinute
// in all (<= 0: none), each with a burst of twice the rate.
func newAuthLimiter(perMinute, globalPerMinute float64, maxSources int, now func() time.Time) *authLimiter {
	l := &authLimiter{now: now, perSource: rate.Limit(perMinute / 60), burst: authBurst(perMinute),
		maxSources: maxSources, sources: map[string]*list.Element{}}
	if globalPerMinute > 0 {
		l.global = rate.NewLimiter(rate.Limit(globalPerMinute/60), authBurst(globalPerMinute))
	}
	return l
}

func authBurst(perMinute float64) int {
	return int(max(1, math.Ceil(2*perMinute)))
}

// Scopes of a refusal: which budget was spent.
const (
	authScopeSource = "source"
	authScopeGlobal = "global"
)

// allow takes one request of source from both budgets, or none: it
// answers the wait until both have room and which was spent ("" when the
// request is allowed).
func (l *authLimiter) allow(source string) (time.Duration, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	lim := l.source(source, now)
	var wait time.Duration
	scope := ""
	if tokens := lim.TokensAt(now); tokens < 1 {
		wait, scope = tokenWait(tokens, lim.Limit()), authScopeSource
	}
	if l.global != nil {
		if tokens := l.global.TokensAt(now); tokens < 1 {
			wait = max(wait, tokenWait(tokens, l.global.Limit()))
			if scope == "" {
				scope = authScopeGlobal
			}
		}
	}
	if scope != "" {
		return wait, scope
	}
	// Both have a token, under the lock: take one of each.
	lim.AllowN(now, 1)
	if l.global != nil {
		l.global.AllowN(now, 1)
	}
	return 0, ""
}

// tokenWait is how long a bucket of limit holding tokens (< 1) takes to
// hold one.
func tokenWait(tokens float64, limit rate.Limit) time.Duration {
	if limit <= 0 {
		return time.Hour
	}
	return time.Duration((1 - tokens) / float64(limit) * float64(time.Second))
}

// idleChecks bounds the idle sources forgotten per request.
const idleChecks = 4

// source returns the bucket of key, made full when it is new, and bounds
// the map: idle sources (a full bucket, which a new one would be too, so
// forgetting it changes nothing for its client) are forgotten from the
// least recently used end as requests come, and beyond maxSources the
// least recently used source is forgotten whatever its bucket (it starts
// full again if it comes back; the global budget still holds).
func (l *authLimiter) source(key string, now time.Time) *rate.Limiter {
	l.forgetIdle(now)
	if e, ok := l.sources[key]; ok {
		l.lru.MoveToFront(e)
		return e.Value.(*authSource).lim
	}
	for len(l.sources) >= l.maxSources {
		l.forget(l.lru.Back())
	}
	s := &authSource{key: key, lim: rate.NewLimiter(l.perSource, l.burst)}
	l.sources[key] = l.lru.PushFront(s)
	return s.lim
}

func (l *authLimiter) forgetIdle(now time.Time) {
	for range idleChecks {
		e := l.lru.Back()
		if e == nil || e.Value.(*authSource).lim.TokensAt(now) < float64(l.burst) {
			return
		}
		l.forget(e)
	}
}

func (l *authLimiter) forget(e *list.Element) {
	delete(l.sources, e.Value.(*authSource).key)
	l.lru.Remove(e)
}

// tracked is how many sources the budget holds.
func (l *authLimiter) tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sources)
}

// authSourceOf is the source a request's remote address counts for: the
// IP address (an IPv4-mapped IPv6 one as IPv4, without a zone), an IPv6
// address as its /64.
func authSourceOf(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return "?" + host
	}
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// authLimits are the server's budgets of the public auth routes; nil
// members: off.
type authLimits struct {
	codes      *authLimiter // register and login start/verify, and the other public routes of throttleSignUp
	automation *authLimiter // the automation connector's authorize and token endpoints
	reader     *authLimiter // the reader's verification route
}

func newAuthLimits(opts Options, now func() time.Time) authLimits {
	if opts.AuthRateLimit < 0 {
		return authLimits{}
	}
	global := max(0, opts.AuthGlobalRateLimit) // negative: none
	return authLimits{
		codes:      newAuthLimiter(opts.AuthRateLimit, global, maxAuthSources, now),
		automation: newAuthLimiter(authAutomationFactor*opts.AuthRateLimit, authAutomationFactor*global, maxAuthSources, now),
		reader:     newAuthLimiter(authReaderFactor*opts.AuthRateLimit, authReaderFactor*global, maxAuthSources, now),
	}
}

// throttleSignUp applies the public auth budgets before the body is read:
// 429 RATE_LIMITED with Retry-After beyond them. Options.RateLimit does not
// change them; Options.AuthRateLimit does.
func (s *Server) throttleSignUp(c *call) error {
	l := s.auth.codes
	if strings.HasPrefix(c.r.URL.Path, authPathAutomation) {
		l = s.auth.automation
	}
	return l.refuse(c, "requests to the public auth routes")
}

// refuse spends one request of c's client address from l (nil: no limit)
// and answers 429 RATE_LIMITED with Retry-After beyond the budget; what
// names what was limited ("requests to …").
func (l *authLimiter) refuse(c *call, what string) error {
	if l == nil {
		return nil
	}
	wait, scope := l.allow(authSourceOf(c.r.RemoteAddr))
	if scope == "" {
		return nil
	}
	where := "from this address"
	if scope == authScopeGlobal {
		where = "on this server"
	}
	return &clearance.Error{Kind: clearance.ErrTooManyRequests, Code: codeRateLimited,
		Detail: "too many " + what + " " + where + "; retry after the Retry-After delay", RetryAfter: max(time.Second, wait)}
}
