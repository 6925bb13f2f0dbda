package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clearancehq/clearance/cmd/clearance/internal/keyfile"
	"github.com/clearancehq/clearance/internal/acktest"
)

var (
	failoverRounds = flag.Int("failover.rounds", 1, "promotions of TestPostgresFailover; after each, the failed primary is rebuilt as the new standby")
	failoverAcks   = flag.Int("failover.acks", 150, "acknowledgements of load before each failover, and again after both servers resumed")
)

const (
	failoverScript  = "../../scripts/pg-failover-clusters.sh"
	failoverClients = 8 // concurrent load clients, each on both servers
	failoverOrgs    = 2 // orgs under load
	failoverHeld    = 6 // grants bound before each failover and claimed, racing on both servers, after it
	// failoverPause is a client's pause after a 503, as a real client
	// backs off; it keeps the outage from being a busy loop.
	failoverPause = 20 * time.Millisecond
	// failoverWait bounds every wait for a condition.
	failoverWait = 3 * time.Minute
)

// foCluster is one cluster of the pair the script makes.
type foCluster struct {
	name string
	port int
}

func (c foCluster) String() string { return fmt.Sprintf("%s (port %d)", c.name, c.port) }

// TestPostgresFailover runs two `clearance serve` processes on a PostgreSQL
// primary with a synchronous hot standby (scripts/pg-failover-clusters.sh),
// through a multi-host URL with target_session_attrs=read-write. Under
// load from concurrent clients (decisions, and grant cycles whose two
// racing claims go one to each server), the primary is stopped in immediate
// mode and the standby promoted. Every answer during the failover is
// correct or a 503 that authorizes nothing; both servers resume by
// themselves (the time from the promotion to each one's first acknowledged
// write is logged); grants bound before the failover are claimed once
// after it; and afterwards everything acknowledged — before, during and
// after — is on the new primary, through either server, with no grant
// claimed twice. -failover.rounds repeats it, rebuilding the failed primary
// as the new standby each time, so the servers fail over back and forth.
//
// It creates and drops PostgreSQL clusters, so it runs only when asked:
// CLEARANCE_FAILOVER=1 runs it where the tools are, and
// CLEARANCE_REQUIRE_FAILOVER=1 (CI) fails instead of skipping.
func TestPostgresFailover(t *testing.T) {
	primary, standby := failoverPair(t)
	start := time.Now()
	ctx := t.Context()

	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	schema := "clearance_failover_" + hex.EncodeToString(b[:])
	if err := foExec(ctx, primary.port, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	// Servers reach the pair through one URL: pgx tries the hosts in
	// order and keeps the first that accepts writes.
	pairURL := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/test?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		primary.port, standby.port)
	storeURL := pairURL + "&search_path=" + schema
	t.Cleanup(func() { // after the servers stop (cleanups run last in, first out)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, pairURL)
		if err == nil {
			_, err = conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			conn.Close(ctx)
		}
		if err != nil {
			t.Logf("drop schema %s: %v (the next `up` of a failed-over pair drops it with the clusters)", schema, err)
		}
	})

	keysDir := t.TempDir()
	if _, _, err := keyfile.LoadOrCreate(keysDir, "grant"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := keyfile.LoadOrCreate(keysDir, "ledger"); err != nil {
		t.Fatal(err)
	}
	common := []string{"--store", storeURL, "--rate-limit", "-1", "--grant-ttl", "1h", "--claim-lease", "1h",
		"--grant-key-file", filepath.Join(keysDir, "keys", "grant.json"), "--ledger-key-file", filepath.Join(keysDir, "keys", "ledger.json")}
	dirA := t.TempDir()
	pa := startServer(t, dirA, common...)
	pb := startServer(t, t.TempDir(), common...)
	httpc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 4 * failoverClients}}
	defer httpc.CloseIdleConnections()
	orgs := acktest.Setup(t, httpc, pa.url, platformKey(t, dirA), failoverOrgs)

	r := &foRun{httpc: httpc, urls: [2]string{pa.url, pb.url}, orgs: orgs, book: acktest.NewBook(),
		answers: map[string]int{}, codes: map[string]int{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range failoverClients {
		wg.Go(func() { r.worker(c, stop) })
	}
	stopLoad := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopLoad()

	var lines []string
	var ackedBefore int
	for round := range *failoverRounds {
		r.awaitAcks(t, *failoverAcks)
		held := make([]*acktest.Grant, 0, failoverHeld)
		for i := range failoverHeld {
			g, ok := r.bind(i%2, i/2%len(orgs), fmt.Sprintf("held-%d-%d", round, i), time.Now())
			if !ok {
				t.Fatalf("round %d: binding a held grant failed while the pair was healthy: %v", round, r.foProblems())
			}
			held = append(held, g)
		}
		foRequireSync(t, primary, standby)
		if round == 0 {
			ackedBefore = r.acked()
		}

		// The failure: the primary stops as if it crashed, and writes fail
		// until the standby is promoted.
		r.setPhase(foFailover)
		stopping := time.Now()
		failoverScriptRun(t, "fail", primary.name)
		stopped := time.Now() // the primary is down: a write sent from now on is not its
		r.markStopped(stopped)
		r.await(t, "both servers to answer 503 after the primary stopped", func() bool {
			n := r.unavailableSince()
			return n[0] > 0 && n[1] > 0
		})
		promoted := time.Now()
		r.markPromoting(promoted)
		if err := foPromote(ctx, standby.port); err != nil {
			t.Fatalf("promote %s: %v", standby, err)
		}
		promoteTook := time.Since(promoted)
		r.await(t, "both servers to acknowledge a write after the promotion", func() bool {
			res := r.resumedAt()
			return !res[0].IsZero() && !res[1].IsZero()
		})
		res, refused := r.resumedAt(), r.unavailableSince()

		heldWon, heldUnanswered := r.claimHeld(t, held)
		r.awaitAcks(t, *failoverAcks)
		lines = append(lines, fmt.Sprintf("round %d: %s stopped (immediate) in %v, %s promoted in %v; first acknowledged write after the promotion began: A %v, B %v "+
			"(%v, %v after the stop began); 503 answers A %d, B %d; held grants %d: %d claimed once, %d claimed with the answer lost",
			round+1, primary.name, stopped.Sub(stopping).Round(time.Millisecond), standby.name, promoteTook.Round(time.Millisecond),
			res[0].Sub(promoted).Round(time.Millisecond), res[1].Sub(promoted).Round(time.Millisecond),
			res[0].Sub(stopping).Round(time.Millisecond), res[1].Sub(stopping).Round(time.Millisecond), refused[0], refused[1],
			len(held), heldWon, heldUnanswered))
		t.Log(lines[len(lines)-1])

		// From here on the pair is healthy again: no answer may be a 503.
		r.setPhase(foSteady)
		primary, standby = standby, primary
		if round+1 < *failoverRounds {
			t.Log(strings.TrimSpace(failoverScriptRun(t, "rejoin")))
		}
	}
	stopLoad()
	wrong := r.foProblems()
	if len(wrong) > 0 { // reported, and the stored state checked all the same
		slices.Sort(wrong)
		t.Errorf("answers under load: %d wrong, first:\n%s", len(wrong), strings.Join(wrong[:min(len(wrong), 10)], "\n"))
	}
	if got, err := foRole(ctx, standby.port); err != nil || got != "down" {
		t.Fatalf("the failed primary %s: %s %v, want down", standby, got, err)
	}
	if got, err := foRole(ctx, primary.port); err != nil || got != "primary" {
		t.Fatalf("the promoted standby %s: %s %v, want primary", primary, got, err)
	}

	// Everything acknowledged is on the new primary, seen through either
	// server; replayed claims and finalizations are refused by both.
	checkStart := time.Now()
	acktest.Check(t, httpc, pa.url, orgs, r.book)
	acktest.Check(t, httpc, pb.url, orgs, r.book)
	book := r.book
	t.Logf("failover figures: %d rounds in %v (checks %v); acknowledged %d decisions, %d grants, %d claims, %d finalizations (%d records before the first failover); "+
		"answers %s; 503 codes %s; %d wrong answers, 0 lost, 0 double claims, %d replays refused",
		*failoverRounds, time.Since(start).Round(time.Millisecond), time.Since(checkStart).Round(time.Millisecond),
		len(book.Decisions), len(book.Grants), book.Claims, book.Finals, ackedBefore,
		foCounts(r.answers), foCounts(r.codes), len(wrong), book.Refused)
	for _, l := range lines {
		t.Log(l)
	}

	httpc.CloseIdleConnections()
	for _, p := range []*proc{pa, pb} {
		if code := p.signal(syscall.SIGTERM); code != 0 {
			t.Fatalf("SIGTERM: exit %d (%v), stderr %s", code, p.waitErr, p.stderr.String())
		}
	}
}

// failoverPair skips (or fails, with CLEARANCE_REQUIRE_FAILOVER=1) when the
// pair cannot be made here, brings it up with the script and returns its
// primary and standby.
func failoverPair(t *testing.T) (primary, standby foCluster) {
	t.Helper()
	required := os.Getenv("CLEARANCE_REQUIRE_FAILOVER") == "1"
	if !required && os.Getenv("CLEARANCE_FAILOVER") != "1" {
		t.Skip("the failover test creates two PostgreSQL clusters (scripts/pg-failover-clusters.sh): " +
			"set CLEARANCE_FAILOVER=1 to run it, CLEARANCE_REQUIRE_FAILOVER=1 to fail where it cannot run")
	}
	cannot := func(format string, args ...any) {
		t.Helper()
		if required {
			t.Fatalf("CLEARANCE_REQUIRE_FAILOVER=1, but "+format, args...)
		}
		t.Skipf(format, args...)
	}
	for _, tool := range []string{"bash", "runuser", "pg_createcluster", "pg_ctlcluster", "pg_dropcluster", "pg_lsclusters", "pg_basebackup", "pg_isready", "psql"} {
		if _, err := exec.LookPath(tool); err != nil {
			cannot("%s is not installed: the failover test needs PostgreSQL with Debian's postgresql-common tools", tool)
		}
	}
	if os.Geteuid() != 0 && exec.Command("sudo", "-n", "true").Run() != nil {
		cannot("the failover test creates PostgreSQL clusters: run it as root or with passwordless sudo")
	}
	port := func(env string, def int) int {
		if v := os.Getenv(env); v != "" {
			p, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s=%q: %v", env, v, err)
			}
			return p
		}
		return def
	}
	primary = foCluster{"clr_primary", port("CLEARANCE_PG_PRIMARY_PORT", 5433)}
	standby = foCluster{"clr_standby", port("CLEARANCE_PG_STANDBY_PORT", 5434)}
	t.Log(strings.TrimSpace(failoverScriptRun(t, "up")))
	for _, c := range []struct {
		cl   foCluster
		want string
	}{{primary, "primary"}, {standby, "standby"}} {
		if got, err := foRole(t.Context(), c.cl.port); err != nil || got != c.want {
			t.Fatalf("after up, %s is %s (%v), want %s", c.cl, got, err, c.want)
		}
	}
	return primary, standby
}

// failoverScriptRun runs the script with args and returns its output.
func failoverScriptRun(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "bash", append([]string{failoverScript}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(failoverScript), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// foConnect connects to one cluster directly (not through the pair's URL).
func foConnect(ctx context.Context, port int) (*pgx.Conn, error) {
	return pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/test?sslmode=disable&connect_timeout=5", port))
}

func foExec(ctx context.Context, port int, sql string) error {
	conn, err := foConnect(ctx, port)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// foRole is what the cluster on port says it is: primary, standby, or down
// when it does not accept connections.
func foRole(ctx context.Context, port int) (string, error) {
	conn, err := foConnect(ctx, port)
	if err != nil {
		return "down", nil
	}
	defer conn.Close(ctx)
	var recovery bool
	if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovery); err != nil {
		return "", err
	}
	if recovery {
		return "standby", nil
	}
	return "primary", nil
}

// foPromote promotes the standby on port and waits until it accepts writes.
func foPromote(ctx context.Context, port int) error {
	conn, err := foConnect(ctx, port)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("pg_promote did not finish within 60s")
	}
	return nil
}

// foRequireSync fails t unless the primary waits for the standby on every
// commit right now: what makes an acknowledged write survive the failover.
func foRequireSync(t *testing.T, primary, standby foCluster) {
	t.Helper()
	conn, err := foConnect(t.Context(), primary.port)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var commit, names, state, sync string
	if err := conn.QueryRow(t.Context(), "SELECT current_setting('synchronous_commit'), current_setting('synchronous_standby_names')").Scan(&commit, &names); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(t.Context(), "SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1", standby.name).Scan(&state, &sync); err != nil {
		t.Fatalf("%s: no replication to %s: %v", primary, standby.name, err)
	}
	if commit != "on" || !strings.Contains(names, standby.name) || state != "streaming" || sync != "sync" {
		t.Fatalf("%s: synchronous_commit %q, synchronous_standby_names %q, %s %s %s: want a streaming synchronous standby",
			primary, commit, names, standby.name, state, sync)
	}
}

// foPhase says which answers are correct: while the pair is healthy, only
// the operation's own answers; from the primary's stop until the load after
// the resumption is done, also a 503 that authorizes nothing.
type foPhase int

const (
	foSteady foPhase = iota
	foFailover
)

func (p foPhase) String() string { return [...]string{"steady", "failover"}[p] }

// foRun is the load on both servers and what it saw.
type foRun struct {
	httpc *http.Client
	urls  [2]string // A, B
	orgs  []acktest.Org
	book  *acktest.Book

	problems acktest.Problems

	mu          sync.Mutex // guards the fields below
	phase       foPhase
	acks        int
	stopped     time.Time // the primary's stop; zero outside a failover
	promoted    time.Time // the promotion's start; zero until then
	unavailable [2]int    // 503s per server since the phase became foFailover
	resumed     [2]time.Time
	answers     map[string]int // "phase op status"
	codes       map[string]int // 503 codes
}

var foServerName = [2]string{"A", "B"}

func (r *foRun) setPhase(p foPhase) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.phase = p
	if p == foFailover {
		r.stopped, r.promoted = time.Time{}, time.Time{}
		r.unavailable, r.resumed = [2]int{}, [2]time.Time{}
	}
}

func (r *foRun) markStopped(at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = at
}

func (r *foRun) markPromoting(at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.promoted = at
}

func (r *foRun) unavailableSince() [2]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unavailable
}

func (r *foRun) resumedAt() [2]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.resumed
}

func (r *foRun) acked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.acks
}

// await polls cond until it holds, failing t after failoverWait.
func (r *foRun) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(failoverWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; problems so far: %v", failoverWait, what, r.foProblems())
		}
		<-time.After(10 * time.Millisecond) // poll interval
	}
}

// awaitAcks waits for n more acknowledgements.
func (r *foRun) awaitAcks(t *testing.T, n int) {
	t.Helper()
	base := r.acked()
	r.await(t, fmt.Sprintf("%d acknowledgements", n), func() bool { return r.acked() >= base+n })
}

// worker alternates decisions and grant cycles until stop is closed.
func (r *foRun) worker(c int, stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		ok := true
		if i%2 == 0 {
			ok = r.decide(c%2, c%len(r.orgs), c, i)
		} else {
			ok = r.cycle(c%len(r.orgs), fmt.Sprintf("c%d-i%d", c, i), i)
		}
		if !ok {
			select {
			case <-stop:
				return
			case <-time.After(failoverPause):
			}
		}
	}
}

func (r *foRun) post(s, org int, path string, body any) (*acktest.Reply, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return acktest.Call(r.httpc, "POST", r.urls[s]+path, r.orgs[org].Key, string(raw))
}

// answered counts an answer of server s to op and reports whether the
// caller should judge it: false for a transport error or a 503, which are
// judged here (a 503 must authorize nothing and come during a failover).
func (r *foRun) answered(s int, op string, rep *acktest.Reply, err error) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.problems.Add("%s (%s): server %s: %v (the servers never stop in this test)", op, r.phase, foServerName[s], err)
		return false
	}
	r.answers[fmt.Sprintf("%s %s %d", r.phase, op, rep.Status)]++
	if rep.Status != http.StatusServiceUnavailable {
		return true
	}
	code := rep.Str("code")
	switch {
	case rep.JSON == nil || code == "":
		r.problems.Add("%s: server %s: a 503 without a code: %s", op, foServerName[s], rep.Raw)
	case rep.JSON["should_execute"] == true || rep.Str("execution_token") != "" ||
		rep.Str("claim_token") != "" || rep.Str("claim_attestation") != "":
		r.problems.Add("%s: server %s: a 503 that authorizes: %s", op, foServerName[s], rep.Raw)
	case r.phase == foSteady:
		r.problems.Add("%s: server %s: 503 while the pair was healthy: %s", op, foServerName[s], rep.Raw)
	}
	r.codes[code]++
	r.unavailable[s]++
	return false
}

// ack records an acknowledged write of server s, sent at sent, with rec.
// A write sent after the primary stopped was committed by the promoted
// standby: the first one of each server after the promotion started is
// when that server resumed.
func (r *foRun) ack(s int, sent time.Time, rec func(b *acktest.Book)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.book.Lock()
	rec(r.book)
	r.book.Unlock()
	r.acks++
	if !r.stopped.IsZero() && sent.After(r.stopped) && !r.promoted.IsZero() && r.resumed[s].IsZero() {
		r.resumed[s] = time.Now()
	}
}

func (r *foRun) decide(s, org, c, i int) bool {
	sent := time.Now()
	rep, err := r.post(s, org, "/v1/protocol/evaluate-decision", map[string]any{"decision_type": "PAYMENT", "workflow_key": "failover",
		"amount": (c*1000 + i*37) % 20000, "context": map[string]any{"client": c, "i": i}})
	if !r.answered(s, "decision", rep, err) {
		return false
	}
	d, ok := acktest.DecisionOf(org, rep)
	if rep.Status != http.StatusOK || !ok {
		r.problems.Add("decision: server %s: %s", foServerName[s], acktest.Describe(rep, nil))
		return false
	}
	r.ack(s, sent, func(b *acktest.Book) { b.Decisions = append(b.Decisions, d) })
	return true
}

// cycle binds a grant through one server, claims it through both at once
// and finalizes the winning claim through the other server.
func (r *foRun) cycle(org int, id string, i int) bool {
	s := i / 2 % 2
	g, ok := r.bind(s, org, id, time.Now())
	if !ok {
		return false
	}
	winner, token, _ := r.claimRace(org, g, false)
	if winner < 0 {
		return false
	}
	outcome := "COMMITTED"
	if i%4 == 3 {
		outcome = "FAILED"
	}
	done, _ := r.finalize(1-winner, org, g, token, outcome)
	return done
}

// bind sends a signed intent through server s; a grant it answers is
// recorded as acknowledged.
func (r *foRun) bind(s, org int, id string, sent time.Time) (*acktest.Grant, bool) {
	jws, err := acktest.Intent(r.orgs[org], id)
	if err != nil {
		r.problems.Add("sign intent: %v", err)
		return nil, false
	}
	rep, err := r.post(s, org, "/v1/authority/enforce-and-bind", map[string]string{"signed_intent": jws})
	if !r.answered(s, "bind", rep, err) {
		return nil, false
	}
	g, d, ok := acktest.GrantOf(org, rep)
	if rep.Status != http.StatusOK || !ok {
		r.problems.Add("bind: server %s: not a grant: %s", foServerName[s], acktest.Describe(rep, nil))
		return nil, false
	}
	r.ack(s, sent, func(b *acktest.Book) {
		b.Decisions = append(b.Decisions, d)
		b.Grants = append(b.Grants, g)
	})
	return g, true
}

// claimRace claims g through both servers at once. It returns the server
// whose claim won (-1 for none), its claim token, and how many of the two
// claims were answered 503 (either may have committed unanswered). Both
// claims refused is wrong unless an earlier claim's answer was lost.
func (r *foRun) claimRace(org int, g *acktest.Grant, earlierLost bool) (winner int, token string, unavailable int) {
	sent := time.Now()
	var (
		reps [2]*acktest.Reply
		errs [2]error
		wg   sync.WaitGroup
	)
	body := map[string]string{"execution_token": g.Token, "intent_hash": g.IntentHash}
	for s := range reps {
		wg.Go(func() { reps[s], errs[s] = r.post(s, org, "/v1/execution/claim-token", body) })
	}
	wg.Wait()
	winner, answered := -1, 0
	for s, rep := range reps {
		if !r.answered(s, "claim", rep, errs[s]) {
			if errs[s] == nil {
				unavailable++
			}
			continue
		}
		switch {
		case rep.Status == http.StatusOK && rep.JSON["should_execute"] == true && rep.Str("claim_token") != "":
			answered++
			if winner >= 0 {
				r.problems.Add("grant %s: the claims through A and B both won", g.ID)
			}
			winner, token = s, rep.Str("claim_token")
			r.ack(s, sent, func(b *acktest.Book) {
				b.Winners[g.ID]++
				b.Claims++
				g.ClaimToken = token
			})
		case rep.Status == http.StatusConflict && rep.JSON["should_execute"] == false && rep.Str("code") == "CLAIM_REPLAY":
			answered++
		default:
			r.problems.Add("claim: server %s: %s", foServerName[s], acktest.Describe(rep, nil))
		}
	}
	if answered == len(reps) && winner < 0 && !earlierLost {
		r.problems.Add("grant %s: both racing claims were refused: %s / %s", g.ID, reps[0].Raw, reps[1].Raw)
	}
	return winner, token, unavailable
}

// finalize finalizes g's claim through server s. done: acknowledged;
// unavailable: answered 503 (it may have committed).
func (r *foRun) finalize(s, org int, g *acktest.Grant, token, outcome string) (done, unavailable bool) {
	sent := time.Now()
	rep, err := r.post(s, org, "/v1/execution/finalize-token", map[string]string{"execution_token": g.Token, "claim_token": token, "outcome": outcome})
	if !r.answered(s, "finalize", rep, err) {
		return false, err == nil
	}
	if rep.Status != http.StatusOK || rep.Str("outcome") != outcome {
		r.problems.Add("finalize %s: server %s: %s", outcome, foServerName[s], acktest.Describe(rep, nil))
		return false, false
	}
	r.ack(s, sent, func(b *acktest.Book) {
		b.Finals++
		g.Final = outcome
	})
	return true, false
}

// claimHeld claims each grant bound before the failover, racing on both
// servers, until a claim wins, or until both are refused as replays after a
// claim whose answer was lost (a 503 that committed); a winner is then
// finalized once. It returns
// how many were won and how many were claimed with the answer lost.
func (r *foRun) claimHeld(t *testing.T, held []*acktest.Grant) (won, unanswered int) {
	t.Helper()
	for _, g := range held {
		lost, winner, token := false, -1, ""
		r.await(t, "an answered claim of held grant "+g.ID, func() bool {
			var n int
			winner, token, n = r.claimRace(g.Org, g, lost)
			lost = lost || n > 0
			return winner >= 0 || n == 0
		})
		if winner < 0 {
			if lost {
				unanswered++
			}
			continue
		}
		won++
		r.finalize(1-winner, g.Org, g, token, "COMMITTED") // after a 503, acktest.Check finalizes it or sees it final
	}
	return won, unanswered
}

// foProblems copies the problems recorded so far.
func (r *foRun) foProblems() []string {
	return r.problems.List()
}

// foCounts prints a count map in key order.
func foCounts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
