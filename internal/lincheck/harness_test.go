package lincheck

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/clearancehq/clearance/claim"
)

// grantRef is an issued grant as a client holds it.
type grantRef struct {
	ID         string // grant id: the partition key
	ExecToken  string
	IntentHash string
}

// result is an operation's answer as the client saw it.
type result struct {
	Answer answer
	Token  string // claim ok
}

// system is what a history is recorded against.
type system interface {
	// issue creates n fresh grants, each with its own nonce and scope.
	issue(t testing.TB, n int) []grantRef
	claim(ctx context.Context, g grantRef) result
	finalize(ctx context.Context, g grantRef, token string, outcome claim.Outcome) result
}

// config shapes a recording.
type config struct {
	ops       int           // operations in all
	clients   int           // concurrent clients
	grants    int           // grants per history
	perClient int           // operations per client per history
	cancelP   float64       // chance a call's context is cancelled at a random moment
	cancelMax time.Duration // the latest moment
	// model is what histories are checked against (zero: grantModel).
	model *porcupine.Model
}

const (
	defaultOps      = 768
	checkTimeout    = 60 * time.Second
	defaultClients  = 16
	defaultGrants   = 8
	defaultPerCycle = 8
)

func defaultConfig(t testing.TB) config {
	ops := defaultOps
	if s := os.Getenv("CLEARANCE_LIN_OPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("CLEARANCE_LIN_OPS=%q: want a positive integer", s)
		}
		ops = n
	}
	return config{ops: ops, clients: defaultClients, grants: defaultGrants, perClient: defaultPerCycle,
		cancelP: 0.15, cancelMax: 2 * time.Millisecond}
}

// seedOf returns CLEARANCE_LIN_SEED or a random seed, logged either way.
func seedOf(t testing.TB) uint64 {
	var seed uint64
	if s := os.Getenv("CLEARANCE_LIN_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CLEARANCE_LIN_SEED=%q: %v", s, err)
		}
		seed = n
	} else {
		seed = mrand.Uint64()
	}
	t.Logf("seed %d (CLEARANCE_LIN_SEED)", seed)
	return seed
}

// stats counts what a test checked.
type stats struct {
	histories, grants, ops, unknown, claimsOK, finalizesOK, violations int
}

func (s stats) String() string {
	return fmt.Sprintf("%d histories, %d grants, %d operations (%d unknown outcome; %d claims and %d finalizations succeeded), %d violations",
		s.histories, s.grants, s.ops, s.unknown, s.claimsOK, s.finalizesOK, s.violations)
}

// recorder collects one history's operations.
type recorder struct {
	start   time.Time
	clients atomic.Int64
	mu      sync.Mutex
	ops     []porcupine.Operation
}

func (r *recorder) now() int64 { return time.Since(r.start).Nanoseconds() } // monotonic

func (r *recorder) add(client int, in linInput, call int64, res result) {
	ret := r.now()
	if res.Answer == answerUnknown {
		ret = math.MaxInt64 // may take effect at any time after its call
	}
	r.mu.Lock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call,
		Output: linOutput{Answer: res.Answer, Token: res.Token}, Return: ret})
	r.mu.Unlock()
}

// tokens remembers the claim tokens clients obtained, per grant, so any
// client may finalize with them.
type tokens struct {
	mu sync.Mutex
	m  map[string][]string
}

func (k *tokens) add(grant, tok string) {
	k.mu.Lock()
	k.m[grant] = append(k.m[grant], tok)
	k.mu.Unlock()
}

func (k *tokens) pick(r *mrand.Rand, grant string) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	l := k.m[grant]
	if len(l) == 0 {
		return "", false
	}
	return l[r.IntN(len(l))], true
}

// record runs one history against sys: cfg.clients clients issuing random
// claim and finalize calls on cfg.grants fresh grants.
func record(t testing.TB, sys system, cfg config, seed uint64, round int) ([]porcupine.Operation, stats) {
	grants := sys.issue(t, cfg.grants)
	rec := &recorder{start: time.Now()}
	rec.clients.Store(int64(cfg.clients))
	known := &tokens{m: map[string][]string{}}
	var (
		wg                         sync.WaitGroup
		unknown, claims, finalizes atomic.Int64
	)
	outcomes := []claim.Outcome{claim.OutcomeCommitted, claim.OutcomeFailed, claim.OutcomeIndeterminate}
	for c := range cfg.clients {
		wg.Go(func() {
			r := mrand.New(mrand.NewPCG(seed, uint64(round)<<32|uint64(c)))
			client := c
			for range cfg.perClient {
				g := grants[r.IntN(len(grants))]
				in := linInput{Op: opClaim, Grant: g.ID}
				if p := r.Float64(); p >= 0.4 {
					in = linInput{Op: opFinalize, Grant: g.ID, Outcome: outcomes[r.IntN(len(outcomes))]}
					tok, ok := known.pick(r, g.ID)
					if p >= 0.8 || !ok {
						tok = wrongToken(r, known, grants, g)
					}
					in.Token = tok
				}
				ctx, cancel := context.WithCancel(context.Background())
				if r.Float64() < cfg.cancelP {
					time.AfterFunc(time.Duration(r.Int64N(int64(cfg.cancelMax)+1)), cancel)
				}
				call := rec.now()
				var res result
				if in.Op == opClaim {
					res = sys.claim(ctx, g)
				} else {
					res = sys.finalize(ctx, g, in.Token, in.Outcome)
				}
				cancel()
				rec.add(client, in, call, res)
				switch {
				case res.Answer == answerUnknown:
					unknown.Add(1)
					// A client with a call in flight forever is a new client.
					client = int(rec.clients.Add(1) - 1)
				case res.Answer == answerOK && in.Op == opClaim:
					claims.Add(1)
					known.add(g.ID, res.Token)
				case res.Answer == answerOK:
					finalizes.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return rec.ops, stats{histories: 1, grants: len(grants), ops: len(rec.ops), unknown: int(unknown.Load()),
		claimsOK: int(claims.Load()), finalizesOK: int(finalizes.Load())}
}

// wrongToken is another grant's claim token when one is known, else a
// well-formed token nobody was given.
func wrongToken(r *mrand.Rand, known *tokens, grants []grantRef, g grantRef) string {
	if o := grants[r.IntN(len(grants))]; o.ID != g.ID && r.IntN(2) == 0 {
		if tok, ok := known.pick(r, o.ID); ok {
			return tok
		}
	}
	return "clr_claim_" + randHex(16)
}

func randHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// check checks a history; on anything but Ok it writes the visualization
// and returns its paths.
func check(t testing.TB, model porcupine.Model, name string, ops []porcupine.Operation) (porcupine.CheckResult, []string) {
	t.Helper()
	res, info := porcupine.CheckOperationsVerbose(model, ops, checkTimeout)
	if res == porcupine.Ok {
		return res, nil
	}
	file := sanitize(t.Name()+"-"+name) + ".html"
	paths := []string{filepath.Join(t.TempDir(), file)}
	if dir := os.Getenv("CLEARANCE_LIN_OUT"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Errorf("CLEARANCE_LIN_OUT: %v", err)
		} else {
			paths = append(paths, filepath.Join(dir, file))
		}
	}
	for _, p := range paths {
		if err := porcupine.VisualizePath(model, info, p); err != nil {
			t.Errorf("visualize %s: %v", p, err)
			continue
		}
		t.Logf("history %s is %s; visualization: %s", name, res, p)
	}
	return res, paths
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' || r == ':' {
			return '_'
		}
		return r
	}, s)
}

// runLin records histories against sys until cfg.ops operations were
// issued, checks each, and fails the test on a violation (or a check that
// did not finish).
func runLin(t *testing.T, sys system, cfg config) stats {
	t.Helper()
	seed := seedOf(t)
	var total stats
	for round := 0; total.ops < cfg.ops; round++ {
		ops, s := record(t, sys, cfg, seed, round)
		model := grantModel
		if cfg.model != nil {
			model = *cfg.model
		}
		res, _ := check(t, model, fmt.Sprintf("history-%d", round), ops)
		if res != porcupine.Ok {
			s.violations = 1
			t.Errorf("history %d (%d operations) is %s: not shown linearizable", round, len(ops), res)
		}
		total.histories++
		total.grants += s.grants
		total.ops += s.ops
		total.unknown += s.unknown
		total.claimsOK += s.claimsOK
		total.finalizesOK += s.finalizesOK
		total.violations += s.violations
	}
	t.Logf("checked: %s", total)
	return total
}
