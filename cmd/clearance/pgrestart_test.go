package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
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
	restartRounds = flag.Int("pgrestart.rounds", 2, "restarts of each mode (fast, then immediate, alternating) by TestPostgresRestart")
	restartAcks   = flag.Int("pgrestart.acks", 60, "acknowledgements of load before each restart of TestPostgresRestart, and again after both servers resumed")
)

const (
	restartHeld = 4 // grants bound before each restart and claimed, racing on both servers, after it
	// restartPoll is how often the watcher tries to connect while the
	// cluster restarts: the resolution of the down and up times.
	restartPoll = 5 * time.Millisecond
)

// TestPostgresRestart restarts the primary of the failover pair
// (scripts/pg-failover-clusters.sh) for real, with pg_ctlcluster, under
// load from concurrent clients on two `clearance serve` processes pointed
// at it alone: rounds of `restart -m fast` (a clean shutdown) and
// `restart -m immediate` (a crash: the start is a crash recovery), each
// confirmed by a new pg_postmaster_start_time and by the cluster's log.
// Every answer during a restart is correct or a 503 STORE_UNAVAILABLE that
// authorizes nothing; both servers resume by themselves, with no restart
// of their own (the time from the cluster accepting connections again,
// and from the restart command, to each one's first acknowledged write
// sent after that is logged); grants bound before the restart are claimed once after it;
// after each round everything acknowledged so far is read back from the
// database directly, and no grant has two claims; the synchronous standby
// is streaming in sync again before the next round. At the end, with the
// load stopped, acktest.Check runs through both servers.
//
// It is gated like TestPostgresFailover (CLEARANCE_FAILOVER=1 runs it,
// CLEARANCE_REQUIRE_FAILOVER=1 fails where it cannot run) and leaves the
// pair as made: up, with clr_primary the primary, even when it fails.
func TestPostgresRestart(t *testing.T) {
	primary, standby := failoverPair(t)
	version, logFile := restartCluster(t, primary)
	start := time.Now()
	ctx := t.Context()

	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	schema := "clearance_restart_" + hex.EncodeToString(b[:])
	if err := foExec(ctx, primary.port, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // last: after the servers stop
		restartRestore(t, version, primary, standby)
		if err := foExec(context.Background(), primary.port, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Logf("drop schema %s: %v (the next `up` that remakes the pair drops it)", schema, err)
		}
	})

	keysDir := t.TempDir()
	if _, _, err := keyfile.LoadOrCreate(keysDir, "grant"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := keyfile.LoadOrCreate(keysDir, "ledger"); err != nil {
		t.Fatal(err)
	}
	storeURL := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/test?sslmode=disable&connect_timeout=2&search_path=%s", primary.port, schema)
	common := []string{"--store", storeURL, "--rate-limit", "-1", "--grant-ttl", "1h", "--claim-lease", "1h",
		"--grant-key-file", filepath.Join(keysDir, "keys", "grant.json"), "--ledger-key-file", filepath.Join(keysDir, "keys", "ledger.json")}
	dirA := t.TempDir()
	pa := startServer(t, dirA, common...)
	pb := startServer(t, t.TempDir(), common...)
	httpc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 4 * failoverClients}}
	defer httpc.CloseIdleConnections()
	orgs := acktest.Setup(t, httpc, pa.url, platformKey(t, dirA), failoverOrgs)

	// The failover test's load: decisions, and grant cycles whose two
	// racing claims go one to each server; its failover phase is the
	// restart here (503s allowed), its promotion the moment the cluster
	// accepts connections again.
	r := &foRun{httpc: httpc, urls: [2]string{pa.url, pb.url}, orgs: orgs, book: acktest.NewBook(),
		answers: map[string]int{}, codes: map[string]int{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range failoverClients {
		wg.Go(func() { r.worker(c, stop) })
	}
	stopLoad := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopLoad()

	var (
		lines               []string
		fromUp, fromCommand []time.Duration
		modes               = map[string]int{}
		refusedTotal        int
		earlyTotal          int // writes acknowledged after a restart before the standby was back
	)
	for round := range 2 * *restartRounds {
		mode := [2]string{"fast", "immediate"}[round%2]
		r.awaitAcks(t, *restartAcks)
		held := make([]*acktest.Grant, 0, restartHeld)
		for i := range restartHeld {
			g, ok := r.bind(i%2, i/2%len(orgs), fmt.Sprintf("restart-held-%d-%d", round, i), time.Now())
			if !ok {
				t.Fatalf("round %d: binding a held grant failed while the cluster was up: %v", round+1, r.foProblems())
			}
			held = append(held, g)
		}
		foRequireSync(t, primary, standby)
		bootBefore := restartBootTime(t, primary)
		logFrom := restartLogSize(t, logFile)

		r.setPhase(foFailover)
		began := time.Now()
		w := restartWatch(primary, standby, r)
		if out, err := restartAsRoot(ctx, "pg_ctlcluster", "--skip-systemctl-redirect", version, primary.name, "restart", "-m", mode).CombinedOutput(); err != nil {
			w.cancel()
			t.Fatalf("round %d: pg_ctlcluster restart -m %s: %v\n%s", round+1, mode, err, out)
		}
		took := time.Since(began)
		if err := w.wait(); err != nil {
			t.Fatalf("round %d (%s): %v", round+1, mode, err)
		}
		if boot := restartBootTime(t, primary); !boot.After(bootBefore) {
			t.Fatalf("round %d (%s): pg_postmaster_start_time %v, before the restart %v: the cluster did not restart", round+1, mode, boot, bootBefore)
		}
		cancelled := restartRequireLog(t, logFile, logFrom, mode)

		r.await(t, "both servers to acknowledge a write sent after the restart", func() bool {
			res := r.resumedAt()
			return !res[0].IsZero() && !res[1].IsZero()
		})
		res := r.resumedAt()
		heldWon, heldUnanswered := r.claimHeld(t, held)
		r.awaitAcks(t, *restartAcks)
		refused := r.unavailableSince()
		r.setPhase(foSteady) // from here on, a 503 is wrong
		if refused[0]+refused[1] == 0 {
			t.Fatalf("round %d (%s): no request was answered 503 while the cluster restarted: the load did not meet the restart", round+1, mode)
		}

		decisions, grants := restartCheckDB(t, primary, schema, orgs, r.book)
		modes[mode]++
		refusedTotal += refused[0] + refused[1]
		early := w.ackedBeforeStandby()
		earlyTotal += early
		// Every COMMIT waits for the synchronous standby, and so does the
		// read that settles a COMMIT whose answer the restart cut off (it
		// ends in COMMIT). Reported, not yet judged: one run saw 1 such
		// acknowledgement in a fast round (where the standby has every
		// COMMIT anyway); what it was is still to be found.
		if early > 0 {
			t.Logf("round %d (%s): %d writes acknowledged before the standby was back", round+1, mode, early)
		}
		for s := range res {
			fromUp = append(fromUp, res[s].Sub(w.up))
			fromCommand = append(fromCommand, res[s].Sub(began))
		}
		ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
		lines = append(lines, fmt.Sprintf("round %d (%s): pg_ctlcluster restart took %v; connections refused from +%v, accepted again at +%v; "+
			"first acknowledged write sent after that: A %v, B %v (from the restart command: A %v, B %v); "+
			"standby connected again at +%v, in sync at +%v; %d COMMITs' wait for the standby cancelled by the shutdown, %d writes acknowledged before the standby was back; "+
			"503 answers A %d, B %d; held grants %d: %d claimed once, %d claimed with the answer lost; "+
			"database: %d acknowledged decisions and %d grants present, 0 missing, 0 claimed twice",
			round+1, mode, ms(took), ms(w.down.Sub(began)), ms(w.up.Sub(began)),
			ms(res[0].Sub(w.up)), ms(res[1].Sub(w.up)), ms(res[0].Sub(began)), ms(res[1].Sub(began)),
			ms(w.standbyBack.Sub(began)), ms(w.synced.Sub(began)), cancelled, early,
			refused[0], refused[1], len(held), heldWon, heldUnanswered, decisions, grants))
		t.Log(lines[len(lines)-1])
	}
	stopLoad()
	wrong := r.foProblems()
	if len(wrong) > 0 { // reported, and the stored state checked all the same
		slices.Sort(wrong)
		t.Errorf("answers under load: %d wrong, first:\n%s", len(wrong), strings.Join(wrong[:min(len(wrong), 10)], "\n"))
	}
	for code, n := range r.codes {
		if code != "STORE_UNAVAILABLE" {
			t.Errorf("%d answers 503 with code %q; a restart may only make the store unavailable", n, code)
		}
	}

	checkStart := time.Now()
	acktest.Check(t, httpc, pa.url, orgs, r.book)
	acktest.Check(t, httpc, pb.url, orgs, r.book)
	book := r.book
	byStatus := map[string]int{}
	for k, n := range r.answers {
		byStatus[k[strings.LastIndexByte(k, ' ')+1:]] += n
	}
	t.Logf("restart figures: %d restarts (%d fast, %d immediate) in %v (checks %v); acknowledged %d decisions, %d grants, %d claims, %d finalizations; "+
		"answers by status %s (503: %d in the restart phases); 503 codes %s; %d wrong answers, 0 lost (the database after each round, acktest through A and B at the end), 0 double claims, %d replays refused; "+
		"first write sent after the cluster accepted connections, acknowledged after: %s; after the restart command: %s; "+
		"%d writes acknowledged after a restart before the standby was back",
		modes["fast"]+modes["immediate"], modes["fast"], modes["immediate"], time.Since(start).Round(time.Millisecond), time.Since(checkStart).Round(time.Millisecond),
		len(book.Decisions), len(book.Grants), book.Claims, book.Finals,
		foCounts(byStatus), refusedTotal, foCounts(r.codes), len(wrong), book.Refused,
		restartSpread(fromUp), restartSpread(fromCommand), earlyTotal)
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

// restartCluster finds the cluster's major version and log file in
// pg_lsclusters (the script makes the pair with the newest installed
// version).
func restartCluster(t *testing.T, c foCluster) (version, logFile string) {
	t.Helper()
	out, err := exec.Command("pg_lsclusters", "-h").Output()
	if err != nil {
		t.Fatalf("pg_lsclusters: %v", err)
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		// Ver Cluster Port Status Owner Data-directory Log-file
		f := strings.Fields(line)
		if len(f) >= 7 && f[1] == c.name && f[2] == strconv.Itoa(c.port) {
			return f[0], f[6]
		}
	}
	t.Fatalf("%s is not in pg_lsclusters:\n%s", c, out)
	return "", ""
}

// restartAsRoot runs a cluster tool as root: directly when the test is
// root, else through passwordless sudo (failoverPair checked for one).
func restartAsRoot(ctx context.Context, name string, args ...string) *exec.Cmd {
	if os.Geteuid() == 0 {
		return exec.CommandContext(ctx, name, args...)
	}
	return exec.CommandContext(ctx, "sudo", append([]string{"-n", name}, args...)...)
}

// restartBootTime is when the cluster's postmaster started.
func restartBootTime(t *testing.T, c foCluster) time.Time {
	t.Helper()
	conn, err := foConnect(t.Context(), c.port)
	if err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	defer conn.Close(t.Context())
	var at time.Time
	if err := conn.QueryRow(t.Context(), "SELECT pg_postmaster_start_time()").Scan(&at); err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	return at
}

// restartLogSize is the size of the cluster's log now: what the restart
// writes comes after it.
func restartLogSize(t *testing.T, logFile string) int64 {
	t.Helper()
	out, err := restartAsRoot(t.Context(), "stat", "-c", "%s", logFile).Output()
	if err != nil {
		t.Fatalf("stat %s: %v", logFile, err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatalf("stat %s: %q", logFile, out)
	}
	return n
}

// restartRequireLog requires the server's own account of the restart in
// its log after offset: the shutdown request of mode, then a start from a
// clean shutdown (fast) or a crash recovery (immediate). It returns how
// many COMMITs the shutdown caught waiting for the synchronous standby
// (committed locally, their clients told nothing).
func restartRequireLog(t *testing.T, logFile string, from int64, mode string) int {
	t.Helper()
	out, err := restartAsRoot(t.Context(), "tail", "-c", "+"+strconv.FormatInt(from+1, 10), logFile).Output()
	if err != nil {
		t.Fatalf("read %s: %v", logFile, err)
	}
	want := []string{"received " + mode + " shutdown request", "database system is ready to accept connections"}
	if mode == "immediate" {
		want = append(want, "database system was not properly shut down; automatic recovery in progress")
	} else {
		want = append(want, "database system was shut down at")
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Fatalf("restart -m %s: the cluster's log does not say %q:\n%s", mode, w, out)
		}
	}
	return strings.Count(string(out), "canceling the wait for synchronous replication")
}

// restartWatcher follows one restart from the command on. It connects to
// the primary every restartPoll: the first refused connection is when it
// went down, the first accepted one after that when it came back. Then it
// polls pg_stat_replication until the standby streams in sync, sampling
// the acknowledgements as it goes.
type restartWatcher struct {
	cancel context.CancelFunc
	done   chan struct{}
	// Set by the watcher before done is closed.
	down, up, synced time.Time
	standbyBack      time.Time // its walsender's start: when the standby connected again
	samples          []restartSample
	err              error
}

// restartSample is the count of acknowledgements at a moment.
type restartSample struct {
	at   time.Time
	acks int
}

// restartWatch starts a watcher. When the primary accepts connections
// again it tells r at once: the next acknowledged write of each server
// sent from then on is its resumption.
func restartWatch(primary, standby foCluster, r *foRun) *restartWatcher {
	ctx, cancel := context.WithTimeout(context.Background(), failoverWait)
	w := &restartWatcher{cancel: cancel, done: make(chan struct{})}
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/test?sslmode=disable&connect_timeout=2", primary.port)
	poll := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(restartPoll): // poll interval
			return true
		}
	}
	go func() {
		defer close(w.done)
		defer cancel()
		for w.up.IsZero() {
			conn, err := pgx.Connect(ctx, dsn)
			now := time.Now()
			if err == nil {
				_ = conn.Close(ctx)
			}
			switch {
			case err != nil && w.down.IsZero():
				w.down = now
			case err == nil && !w.down.IsZero():
				w.up = now
				r.markStopped(now)
				r.markPromoting(now)
				w.samples = append(w.samples, restartSample{now, r.acked()})
				continue
			}
			if !poll() {
				w.err = fmt.Errorf("the primary did not go down and come back within %v (down at %v)", failoverWait, w.down)
				return
			}
		}
		var conn *pgx.Conn
		for w.synced.IsZero() {
			var err error
			if conn == nil {
				conn, err = pgx.Connect(ctx, dsn)
			}
			if err == nil {
				var state, sync string
				var back time.Time
				err = conn.QueryRow(ctx, "SELECT state, sync_state, backend_start FROM pg_stat_replication WHERE application_name = $1",
					standby.name).Scan(&state, &sync, &back)
				now := time.Now()
				w.samples = append(w.samples, restartSample{now, r.acked()})
				if err == nil && state == "streaming" && sync == "sync" {
					w.synced, w.standbyBack = now, back
				}
				if err != nil && !errors.Is(err, pgx.ErrNoRows) {
					_ = conn.Close(ctx)
					conn = nil
				}
			}
			if w.synced.IsZero() && !poll() {
				w.err = fmt.Errorf("the standby %s did not stream in sync within %v of the restart", standby.name, failoverWait)
				break
			}
		}
		if conn != nil {
			_ = conn.Close(ctx)
		}
	}()
	return w
}

// wait returns when the watcher saw the primary down and back and the
// standby in sync again.
func (w *restartWatcher) wait() error {
	<-w.done
	return w.err
}

// ackedBeforeStandby is how many writes were acknowledged after the
// primary came back and before the standby connected again (counted
// between samples, so never more than there were). A COMMIT the restarted
// primary runs waits for the standby, so such an acknowledgement is of a
// COMMIT made before the shutdown whose client was told nothing, settled
// afterwards by reading its marker — in a transaction that ended in
// ROLLBACK once, and so did not wait for the standby. It ends in COMMIT
// now, and waits: the count must be 0.
func (w *restartWatcher) ackedBeforeStandby() int {
	first, last := -1, -1
	for _, s := range w.samples {
		if !s.at.Before(w.standbyBack) {
			break
		}
		if first < 0 {
			first = s.acks
		}
		last = s.acks
	}
	return max(last-first, 0)
}

// restartInSync reports whether the primary's synchronous standby is
// streaming and in sync: what every acknowledged COMMIT waits for.
func restartInSync(ctx context.Context, primary, standby foCluster) bool {
	conn, err := foConnect(ctx, primary.port)
	if err != nil {
		return false
	}
	defer conn.Close(ctx)
	var state, sync string
	err = conn.QueryRow(ctx, "SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1", standby.name).Scan(&state, &sync)
	return err == nil && state == "streaming" && sync == "sync"
}

// restartCheckDB reads what the book holds back from the primary's tables
// directly, while the load goes on: every acknowledged decision is the
// ledger entry at its seq with its dossier stored, every acknowledged
// grant is stored in a state its acknowledgements allow (states only move
// forward, so a snapshot of the book taken first is safe), and no grant
// has two claim entries. It returns how many decisions and grants it
// checked.
func restartCheckDB(t *testing.T, c foCluster, schema string, orgs []acktest.Org, book *acktest.Book) (decisions, grants int) {
	t.Helper()
	book.Lock()
	ds := slices.Clone(book.Decisions)
	gs := make([]acktest.Grant, len(book.Grants))
	for i, g := range book.Grants {
		gs[i] = *g
	}
	book.Unlock()

	ctx := t.Context()
	conn, err := foConnect(ctx, c.port)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	table := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	type key struct{ org, id string }
	type entry struct{ subject, digest string }
	ledger := map[key]entry{} // (org, seq) -> decision entry
	rows, err := conn.Query(ctx, "SELECT org_id, seq, subject_id, payload_digest FROM "+table("ledger_entries")+" WHERE kind = 'decision.recorded'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k key
		var seq int64
		var e entry
		if err := rows.Scan(&k.org, &seq, &e.subject, &e.digest); err != nil {
			t.Fatal(err)
		}
		k.id = strconv.FormatInt(seq, 10)
		ledger[k] = e
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	dossiers := map[key]bool{}
	rows, err = conn.Query(ctx, "SELECT org_id, dossier_id FROM "+table("dossiers"))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k key
		if err := rows.Scan(&k.org, &k.id); err != nil {
			t.Fatal(err)
		}
		dossiers[k] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	states := map[key]string{}
	rows, err = conn.Query(ctx, "SELECT org_id, grant_id, state FROM "+table("grants"))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k key
		var st string
		if err := rows.Scan(&k.org, &k.id, &st); err != nil {
			t.Fatal(err)
		}
		states[k] = st
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var double []string
	rows, err = conn.Query(ctx, "SELECT subject_id FROM "+table("ledger_entries")+" WHERE kind = 'execution.claimed' GROUP BY org_id, subject_id HAVING count(*) > 1")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		double = append(double, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	var bad acktest.Problems
	for _, d := range ds {
		org := orgs[d.Org].ID
		if e, ok := ledger[key{org, strconv.FormatUint(d.Seq, 10)}]; !ok || e != (entry{d.DossierID, d.Digest}) {
			bad.Add("decision %s (org %s, seq %d): the ledger entry at its seq is %+v (present %v)", d.DossierID, org, d.Seq, e, ok)
		}
		if !dossiers[key{org, d.DossierID}] {
			bad.Add("decision %s (org %s): no dossier stored", d.DossierID, org)
		}
	}
	for _, g := range gs {
		st, ok := states[key{orgs[g.Org].ID, g.ID}]
		switch {
		case !ok:
			bad.Add("grant %s: not stored", g.ID)
		case g.Final != "" && st != g.Final:
			bad.Add("grant %s: finalized %s acknowledged, state %s", g.ID, g.Final, st)
		case g.ClaimToken != "" && st == "ISSUED":
			bad.Add("grant %s: claim acknowledged, state ISSUED", g.ID)
		}
	}
	for _, id := range double {
		bad.Add("grant %s: two execution.claimed entries", id)
	}
	book.Lock()
	for id, n := range book.Winners {
		if n > 1 {
			bad.Add("grant %s: %d claims answered should_execute", id, n)
		}
	}
	book.Unlock()
	bad.Fatal(t, "the database after the restart")
	return len(ds), len(gs)
}

// restartRestore leaves the pair as made whatever happened: the primary
// started if a failure left it stopped, then (once the standby had its
// chance to catch up) the script's `up`, which remakes a pair that is not
// healthy and does nothing to one that is.
func restartRestore(t *testing.T, version string, primary, standby foCluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if got, _ := foRole(ctx, primary.port); got == "down" {
		if out, err := restartAsRoot(ctx, "pg_ctlcluster", "--skip-systemctl-redirect", version, primary.name, "start").CombinedOutput(); err != nil {
			t.Logf("start %s: %v\n%s", primary, err, out)
		}
	}
	for !restartInSync(ctx, primary, standby) && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond): // poll interval
		}
	}
	failoverScriptRun(t, "up")
}

// restartSpread is the minimum, median and maximum of ds.
func restartSpread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("min %v, median %v, max %v", s[0].Round(time.Millisecond), s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}
