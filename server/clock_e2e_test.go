package server_test

// Clock faults (issue 22): the engine's clock jumps minutes backwards and
// forwards around grant expiry and claim leases, while the store keeps a
// clock of its own: PostgreSQL's database clock, or one the test moves
// (Pebble, and the randomized run on either backend). The store's clock
// judges leases; a grant is claimable only while unexpired by both clocks;
// and a grant is issued only while the engine's clock, which writes its iat
// and exp, is within MaxClockSkew of the store's. Nothing sleeps: the
// store's time passes by moving its clock, or by polling the database
// clock under a deadline.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/store/pgstore/pgtest"
)

// clockEnv is an execEnv whose engine's clock is the store's plus a skew
// the test sets.
type clockEnv struct {
	*execEnv
	db         bool          // the store's clock is PostgreSQL's database clock
	storeNanos *atomic.Int64 // the store's clock otherwise (unix nanos)
	skew       *atomic.Int64 // the engine's clock minus the store's (nanos)
	ttl, lease time.Duration
}

// newClockEnv starts a server whose store judges by the database's clock
// (db, PostgreSQL only) or by a clock the test moves.
func newClockEnv(t *testing.T, db bool) *clockEnv {
	t.Helper()
	c := &clockEnv{db: db, storeNanos: &atomic.Int64{}, skew: &atomic.Int64{},
		ttl: clearance.DefaultGrantTTL, lease: clearance.DefaultClaimLease}
	c.storeNanos.Store(execStart.UnixNano())
	if db {
		// Real time passes: short enough to wait for, long enough that
		// one request takes a small part of it.
		c.ttl, c.lease = 8*time.Second, 5*time.Second
	}
	c.execEnv = newExecEnvWith(t, bandsBundle, func(x *execEnv) {
		x.engineClock = func() time.Time { return c.base().Add(time.Duration(c.skew.Load())) }
		x.storeClock, x.dbClock = c.injected, db
		x.tune = func(o *clearance.Options) { o.GrantTTL, o.ClaimLease = c.ttl, c.lease }
	})
	return c
}

func (c *clockEnv) injected() time.Time { return time.Unix(0, c.storeNanos.Load()).UTC() }

// base is what the engine's clock is skewed from: the store's clock (the
// database's is this machine's).
func (c *clockEnv) base() time.Time {
	if c.db {
		return time.Now().UTC()
	}
	return c.injected()
}

// jump sets the engine's clock to the store's plus d.
func (c *clockEnv) jump(d time.Duration) { c.skew.Store(int64(d)) }

// engineAt sets the engine's clock so that it reads at now.
func (c *clockEnv) engineAt(at time.Time) { c.skew.Store(int64(at.Sub(c.base()))) }

// storeNow reads the store's clock.
func (c *clockEnv) storeNow(t testing.TB) time.Time {
	t.Helper()
	if !c.db {
		return c.injected()
	}
	var now time.Time
	if err := pgtest.Admin(t).QueryRow(context.Background(), "SELECT clock_timestamp()").Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now.UTC()
}

// passStore lets the store's clock pass at: moved there, or waited for
// (polled under a deadline).
func (c *clockEnv) passStore(t testing.TB, at time.Time) {
	t.Helper()
	if !c.db {
		for cur := c.storeNanos.Load(); cur <= at.UnixNano(); cur = c.storeNanos.Load() {
			c.storeNanos.CompareAndSwap(cur, at.UnixNano()+1)
		}
		return
	}
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !c.storeNow(t).After(at) {
		if time.Now().After(deadline) {
			t.Fatalf("the database clock did not pass %s", at.Format(time.RFC3339Nano))
		}
		<-tick.C
	}
}

func mustTime(t testing.TB, r *result, member string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, r.str(member))
	if err != nil {
		t.Fatalf("%s: %v: %s", member, err, r)
	}
	return at
}

// clockJump is how far the engine's clock jumps in the scenarios: well
// past the grant's lifetime, the lease and the tolerated skew.
const clockJump = 10 * time.Minute

// The engine's clock jumps ten minutes either way around live and expired
// leases and grants; on PostgreSQL the store judges by the database clock.
func TestClockFaultsLeasesAndGrants(t *testing.T) {
	t.Parallel()
	c := newClockEnv(t, onPostgres(t))
	ctx := context.Background()

	t.Run("forward jump keeps a live lease", func(t *testing.T) {
		c.jump(0)
		g := c.grantFor(t, intentSpec{})
		cl := c.claimed(t, g)
		c.jump(clockJump)
		// The expiry worker picks lapsed claims by the engine's clock and
		// records only those the store's clock sees lapsed too: none.
		if n, err := c.engine.Execution.ExpireLapsed(ctx, c.o.ID); err != nil || n != 0 {
			t.Fatalf("ExpireLapsed with the engine ahead: %d recorded, %v", n, err)
		}
		f := c.finalize(t, g.token, cl.str("claim_token"), "COMMITTED", nil)
		if f.Status != http.StatusOK || f.str("outcome") != "COMMITTED" {
			t.Fatalf("finalize of a live lease with the engine %s ahead: %s", clockJump, f)
		}
		wantFailedClaim(t, c.claim(t, pathClaim, g.token, g.hash), "")
		c.jump(0)
		wantFailedClaim(t, c.claim(t, pathClaim, g.token, g.hash), "CLAIM_REPLAY")
	})

	t.Run("backward jump keeps a live lease", func(t *testing.T) {
		c.jump(0)
		g := c.grantFor(t, intentSpec{})
		cl := c.claimed(t, g)
		c.jump(-clockJump) // before the grant's nbf and iat
		f := c.finalize(t, g.token, cl.str("claim_token"), "COMMITTED", nil)
		if f.Status != http.StatusOK || f.str("outcome") != "COMMITTED" {
			t.Fatalf("finalize of a live lease with the engine %s behind: %s", clockJump, f)
		}
		wantFailedClaim(t, c.claim(t, pathClaim, g.token, g.hash), "")
	})

	t.Run("backward jump does not revive an expired lease", func(t *testing.T) {
		c.jump(0)
		g := c.grantFor(t, intentSpec{scope: "clock-scope-lease"})
		cl := c.claimed(t, g)
		c.passStore(t, mustTime(t, cl, "claim_lease_expires_at"))
		c.jump(-clockJump)
		if n, err := c.engine.Execution.ExpireLapsed(ctx, c.o.ID); err != nil || n != 0 {
			t.Fatalf("ExpireLapsed with the engine behind: %d recorded, %v", n, err)
		}
		f := c.finalize(t, g.token, cl.str("claim_token"), "COMMITTED", nil)
		if f.Status != http.StatusConflict || f.str("outcome") != "INDETERMINATE" || f.str("code") != "CLAIM_LEASE_EXPIRED" {
			t.Fatalf("finalize after the store's lease end with the engine behind: %s", f)
		}
		wantFailedClaim(t, c.claim(t, pathClaim, g.token, g.hash), "")
		// The scope stays held until the execution is reconciled.
		c.jump(0)
		next := c.grantFor(t, intentSpec{scope: "clock-scope-lease"})
		wantFailedClaim(t, c.claim(t, pathClaim, next.token, next.hash), "CLAIM_SCOPE_UNRECONCILED")
	})

	t.Run("backward jump does not revive an expired grant", func(t *testing.T) {
		c.jump(0)
		g := c.grantFor(t, intentSpec{})
		issuedAt := c.storeNow(t)
		exp := mustTime(t, g.bind, "expires_at")
		c.passStore(t, exp)
		// The engine's clock back inside the grant's lifetime: its own
		// check passes, the store's refuses.
		c.engineAt(exp.Add(-time.Second))
		r := c.claim(t, pathClaim, g.token, g.hash)
		wantFailedClaim(t, r, "GRANT_EXPIRED")
		if !strings.Contains(r.str("detail"), "expired at") {
			t.Fatalf("want the store's refusal (it names the expiry): %s", r)
		}
		c.jump(-clockJump)
		wantFailedClaim(t, c.claim(t, pathClaim, g.token, g.hash), "")
		c.engineAt(issuedAt)
		wantFailedClaim(t, c.claim(t, pathClaim, g.token, g.hash), "GRANT_EXPIRED")
		c.jump(0)
		if sg, err := c.store.GrantOf(ctx, c.o.ID, g.grantID); err != nil || sg.State != claim.StateIssued {
			t.Fatalf("the expired grant is %s (%v), want still ISSUED and never claimed", sg.State, err)
		}
	})

	t.Run("a jump at issue does not stretch or shorten a grant", func(t *testing.T) {
		for _, skew := range []time.Duration{clockJump, -clockJump} {
			c.jump(skew)
			before := c.ledgerHead(t)
			jws, _ := c.intent(t, intentSpec{})
			at := c.storeNow(t)
			r := c.bind(t, jws, nil)
			if r.Status == http.StatusOK && r.str("execution_token") != "" {
				// What the grant allows: a claim, once the engine's clock
				// is right again, well after the grant's lifetime by the
				// store's clock (with the database's clock, the wait runs
				// into passStore's deadline instead).
				c.jump(0)
				late := at.Add(max(skew, 0) + c.ttl/2)
				c.passStore(t, late)
				if cl := c.claim(t, pathClaim, r.str("execution_token"), r.str("intent_hash")); lookup(cl.JSON, "should_execute") == true {
					t.Fatalf("a grant issued with the engine %s off was claimed %s after its issue by the store's clock (it lives %s): "+
						"bind %s; claim %s", skew, late.Sub(at), c.ttl, r, cl)
				}
			}
			r.wantProblem(t, http.StatusServiceUnavailable, "CLOCK_SKEW")
			if r.str("execution_token") != "" {
				t.Fatalf("a refused bind carries a token: %s", r)
			}
			if after := c.ledgerHead(t); after != before {
				t.Fatalf("a refused bind changed the ledger: %s -> %s", before, after)
			}
		}
		// Within the tolerance the grant is issued, and lives at most its
		// lifetime plus the tolerance by the store's clock.
		c.jump(clearance.DefaultMaxClockSkew / 2)
		at := c.storeNow(t)
		g := c.grantFor(t, intentSpec{})
		if exp := mustTime(t, g.bind, "expires_at"); exp.Sub(at) > c.ttl+clearance.DefaultMaxClockSkew {
			t.Fatalf("a grant issued %s ahead expires %s after its issue by the store's clock", clearance.DefaultMaxClockSkew/2, exp.Sub(at))
		}
		// Claimed on the clock it was issued on: a grant's nbf (its iat)
		// has no leeway, so a server whose clock is behind the issuer's
		// waits for it (GRANT_INVALID until then).
		wantFailedClaim(t, func() *result { c.jump(0); return c.claim(t, pathClaim, g.token, g.hash) }(), "GRANT_INVALID")
		c.jump(clearance.DefaultMaxClockSkew / 2)
		cl := c.claimed(t, g)
		c.finalize(t, g.token, cl.str("claim_token"), "COMMITTED", nil).want(t, http.StatusOK)
	})
	c.jump(0)
	c.ledgerOK(t)
}

// ledgerHead is the org's ledger head: "seq hash".
func (x *execEnv) ledgerHead(t testing.TB) string {
	t.Helper()
	r := x.req(t, "GET", pathLedger+"?limit=1", x.o.Key, nil, nil).want(t, http.StatusOK)
	return fmt.Sprint(lookup(r.JSON, "head.seq"), " ", r.str("head.entry_hash"))
}

// envInt is a positive integer from the environment, or def.
func envInt(t testing.TB, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// clockGrant is what the randomized run knows of one grant.
type clockGrant struct {
	token, hash, id, claimToken string
	exp, leaseEnd               time.Time
	wins                        int
	final                       string // the acknowledged finalization, "" if none
}

// Many grants through bind, racing claims, finalize and late claims, with
// the engine's clock jumping before every step and the store's moving
// forward: no grant is claimed twice or after its finalization or its
// expiry by the store's clock, no grant is issued under a skew above the
// tolerance, a lease is judged by the store's clock alone, and every
// acknowledged claim and finalization is stored. The store's clock is
// injected on both backends so that its time passes without waiting.
// CLEARANCE_CLOCK_GRANTS sets the number of grants (default 40),
// CLEARANCE_CLOCK_SEED the seed (logged).
func TestClockFaultsNoGrantTwice(t *testing.T) {
	t.Parallel()
	c := newClockEnv(t, false)
	ctx := context.Background()
	n := envInt(t, "CLEARANCE_CLOCK_GRANTS", 40)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("CLEARANCE_CLOCK_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CLEARANCE_CLOCK_SEED=%q: %v", v, err)
		}
		seed = s
	}
	t.Logf("seed %d (CLEARANCE_CLOCK_SEED replays it)", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	skews := []time.Duration{-clockJump, -3 * time.Minute, -45 * time.Second, 0, 0, 30 * time.Second, 3 * time.Minute, clockJump}
	tolerance := clearance.DefaultMaxClockSkew
	var jumps int
	jump := func() time.Duration {
		d := skews[rng.IntN(len(skews))]
		c.jump(d)
		jumps++
		return d
	}
	wait := func(choices ...time.Duration) { c.passStore(t, c.storeNow(t).Add(choices[rng.IntN(len(choices))])) }
	answers := map[string]int{}
	count := func(step string, r *result) {
		key := strconv.Itoa(r.Status)
		if code := r.str("code"); code != "" {
			key += " " + code
		}
		answers[step+" "+key]++
	}
	var grants []*clockGrant
	violations := 0
	fail := func(format string, args ...any) {
		violations++
		t.Errorf(format, args...)
	}
	for range n {
		skew := jump()
		jws, _ := c.intent(t, intentSpec{})
		at := c.storeNow(t)
		r := c.bind(t, jws, nil)
		count("bind", r)
		off := skew > tolerance || skew < -tolerance
		switch {
		case r.Status == http.StatusOK && r.str("execution_token") != "":
			g := &clockGrant{token: r.str("execution_token"), hash: r.str("intent_hash"), id: r.str("grant_id"), exp: mustTime(t, r, "expires_at")}
			if off {
				fail("a grant was issued with the engine %s off the store: %s", skew, r)
			}
			if g.exp.Sub(at) > c.ttl+tolerance {
				fail("a grant expires %s after its issue by the store's clock", g.exp.Sub(at))
			}
			grants = append(grants, g)
		case r.Status == http.StatusServiceUnavailable && r.str("code") == "CLOCK_SKEW" && off:
			continue
		default:
			fail("bind with the engine %s off: %s", skew, r)
			continue
		}
		g := grants[len(grants)-1]
		wait(0, 0, c.ttl/2, c.ttl+time.Second)
		for range 2 {
			engineSkew := jump()
			r := c.claim(t, pathClaim, g.token, g.hash)
			count("claim", r)
			now := c.storeNow(t)
			if lookup(r.JSON, "should_execute") != true {
				continue
			}
			g.wins++
			g.claimToken, g.leaseEnd = r.str("claim_token"), mustTime(t, r, "claim_lease_expires_at")
			if g.wins > 1 {
				fail("grant %s claimed %d times", g.id, g.wins)
			}
			if !now.Before(g.exp) || !now.Add(engineSkew).Before(g.exp) {
				fail("grant %s claimed at %s (engine %s off), expired at %s", g.id, now, engineSkew, g.exp)
			}
		}
		if g.wins == 0 {
			continue
		}
		wait(0, 0, c.lease/2, c.lease+time.Second)
		if rng.IntN(3) == 0 {
			jump()
			if _, err := c.engine.Execution.ExpireLapsed(ctx, c.o.ID); err != nil {
				t.Fatal(err)
			}
		}
		jump()
		now := c.storeNow(t)
		f := c.finalize(t, g.token, g.claimToken, "COMMITTED", nil)
		count("finalize", f)
		live := now.Before(g.leaseEnd)
		switch {
		case f.Status == http.StatusOK && live:
			g.final = f.str("outcome")
		case f.Status == http.StatusConflict && !live && f.str("outcome") == "INDETERMINATE":
			g.final = "INDETERMINATE"
		default:
			fail("finalize with the lease %s by the store's clock: %s", map[bool]string{true: "live", false: "passed"}[live], f)
		}
		jump()
		late := c.claim(t, pathClaim, g.token, g.hash)
		count("late claim", late)
		if lookup(late.JSON, "should_execute") == true {
			fail("grant %s claimed after its finalization: %s", g.id, late)
		}
	}
	// Nothing acknowledged is lost: every grant is stored as answered.
	lost, wins := 0, 0
	for _, g := range grants {
		wins += g.wins
		sg, err := c.store.GrantOf(ctx, c.o.ID, g.id)
		if err != nil {
			t.Fatalf("grant %s: %v", g.id, err)
		}
		want := map[bool]claim.State{false: claim.StateIssued, true: claim.StateClaimed}[g.wins > 0]
		if g.final != "" {
			want = claim.State(g.final)
		}
		if sg.State != want && !(g.final == "" && g.wins > 0 && sg.State == claim.StateIndeterminate) {
			lost++
			t.Errorf("grant %s is %s, acknowledged %s", g.id, sg.State, want)
		}
	}
	c.jump(0)
	c.ledgerOK(t)
	keys := make([]string, 0, len(answers))
	for k := range answers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var by []string
	for _, k := range keys {
		by = append(by, fmt.Sprintf("%s ×%d", k, answers[k]))
	}
	t.Logf("clock faults (%s): %d bind attempts, %d clock jumps, %d grants issued, %d claims won; answers: %s; "+
		"double 0 expected, got %d violations; lost %d", e2eBackend(t), n, jumps, len(grants), wins, strings.Join(by, ", "), violations, lost)
}
