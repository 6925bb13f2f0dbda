package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/acktest"
	"github.com/clearancehq/clearance/server"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
	"github.com/clearancehq/clearance/store/pebblestore/faultfs"
)

// faultServer is a Clearance HTTP server over a pebblestore on a disk that
// fails (faultfs), with two orgs set up for acktest's load.
type faultServer struct {
	t      *testing.T
	disk   *faultfs.Disk
	opts   pebblestore.Options
	store  *pebblestore.Store
	srv    *httptest.Server
	client *http.Client
	engine *clearance.Engine
	orgs   []acktest.Org
	log    *faultLogger
}

// faultStoreOptions flush often (small memtables), so that tables and the
// manifest are written under the load.
func faultStoreOptions() pebblestore.Options {
	return pebblestore.Options{MemTableSize: 256 << 10, DiskReserve: 256 << 10}
}

func newFaultServer(t *testing.T, d *faultfs.Disk, opts pebblestore.Options) *faultServer {
	t.Helper()
	f := &faultServer{t: t, disk: d, opts: opts, log: newFaultLogger(t)}
	f.open(d)
	secret, err := f.engine.Admin.NewPlatformSecret()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.engine.Admin.EnsurePlatformKey(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	f.orgs = acktest.Setup(t, f.client, f.srv.URL, secret, 2)
	return f
}

// open serves a store on fs.
func (f *faultServer) open(fs vfs.FS) {
	t := f.t
	t.Helper()
	opts := f.opts
	opts.FS, opts.Logger = fs, f.log
	st, err := pebblestore.Open("db", opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	ring := grant.NewKeyRing(mustKey(t, 1))
	eng, err := clearance.Open(st, clearance.Options{GrantKeys: ring, LedgerKey: testLedgerKey(t), GrantTTL: time.Hour, ClaimLease: time.Hour})
	if err != nil {
		t.Fatalf("open engine: %v", err)
	}
	f.store, f.engine = st, eng
	f.srv = httptest.NewServer(server.New(eng, server.Options{RateLimit: -1, AuthRateLimit: -1}))
	tr := f.srv.Client().Transport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	f.client = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	t.Cleanup(f.close)
}

// close stops the server and closes the store (a failed store may report
// its failure; idempotent).
func (f *faultServer) close() {
	if f.srv != nil {
		f.srv.Close()
		f.client.CloseIdleConnections()
		f.srv = nil
	}
	if f.store != nil {
		_ = f.store.Close()
		f.store = nil
	}
}

// restart cuts the power, as after the fault an operator restarts the
// server on the repaired disk: the new store opens on what was synced.
func (f *faultServer) restart() {
	f.t.Helper()
	crashed := f.disk.CrashClone()
	f.close()
	f.open(crashed)
}

func (f *faultServer) get(path, key string) *acktest.Reply {
	f.t.Helper()
	r, err := acktest.Call(f.client, "GET", f.srv.URL+path, key, "")
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func (f *faultServer) post(path, key, body string) *acktest.Reply {
	f.t.Helper()
	r, err := acktest.Call(f.client, "POST", f.srv.URL+path, key, body)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

// faultLogger is the store's logger: the store's own fault reports go to
// the test's log; a fatal error that reaches it fails the test.
type faultLogger struct {
	t    *testing.T
	mu   sync.Mutex
	done bool
}

func newFaultLogger(t *testing.T) *faultLogger {
	l := &faultLogger{t: t}
	t.Cleanup(func() { l.mu.Lock(); l.done = true; l.mu.Unlock() })
	return l
}

func (*faultLogger) Infof(string, ...any) {}
func (l *faultLogger) Errorf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done && strings.HasPrefix(format, "pebblestore: the store refuses writes") {
		l.t.Logf(format, args...)
	}
}
func (l *faultLogger) Fatalf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.t.Errorf("Pebble's fatal error reached the logger: "+format, args...)
	}
}

// httpFault is one fault of the disk under a running server.
type httpFault struct {
	name   string
	inject func(d *faultfs.Disk)
	kind   string
	// transient faults end once heal has run; the others need a restart.
	transient bool
	heal      func(d *faultfs.Disk)
	// undurable: a commit failed after it was applied, so ledger reads
	// (which wait until everything visible is durable) refuse until the
	// restart.
	undurable bool
	// wal: the fault is injected as a new write-ahead log is created.
	// Pebble panics when it cannot close the log it rotates away from
	// (and Go then ends the process: docs/decisions.md), so a test that
	// breaks the log breaks it where the next rotation is far.
	wal  bool
	opts func(o *pebblestore.Options)
}

// TestPebbleFaultsOverHTTP breaks the disk under a running server while 8
// clients of 2 orgs send decisions and full agent cycles (enforce-and-bind,
// two racing claims, finalize; acktest), and checks what issue 22 asks of
// the server: every answer during and after the fault is an
// acknowledgement or a non-authorizing 503 STORE_UNAVAILABLE (never
// should_execute: true, never a token); writes are refused from the fault
// on; GET /v1/health answers 503 and says why (store_status); acknowledged
// dossiers and grants are still served, and the ledger too unless a
// commit failed after being applied. After the restart (a power cut, then
// the server reopened on what was synced) acktest.Check finds every
// acknowledged decision, grant, claim and finalization, no grant claimed
// twice, and both ledgers valid. A full disk recovers without a restart
// once space is freed.
func TestPebbleFaultsOverHTTP(t *testing.T) {
	if onPostgres(t) {
		t.Skip("Pebble's storage faults: the Pebble backend only")
	}
	t.Parallel()
	for _, c := range []httpFault{
		{name: "wal sync", kind: store.FaultWrite, undurable: true, wal: true,
			inject: func(d *faultfs.Disk) { d.Fail(faultfs.Sync, faultfs.Suffix(".log"), syscall.EIO) }},
		{name: "table sync", kind: store.FaultWrite,
			inject: func(d *faultfs.Disk) { d.Fail(faultfs.Sync, faultfs.Suffix(".sst"), syscall.EIO) }},
		{name: "manifest sync", kind: store.FaultWrite,
			inject: func(d *faultfs.Disk) { d.Fail(faultfs.Sync, faultfs.Prefix("MANIFEST"), syscall.EIO) }},
		{name: "disk full", kind: store.FaultDiskFull, transient: true,
			inject: func(d *faultfs.Disk) { d.SetCapacity(d.Used() + 64<<10) },
			heal:   func(d *faultfs.Disk) { d.SetCapacity(0) }},
		// No room for the write-ahead log even after the reserve is
		// released: a restart is needed.
		{name: "wal disk full", kind: store.FaultDiskFull, undurable: true, wal: true,
			inject: func(d *faultfs.Disk) { d.Fail(faultfs.Write, faultfs.Suffix(".log"), syscall.ENOSPC) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runHTTPFault(t, c)
		})
	}
}

// faultAnswers counts the answers of a load, by what they were.
type faultAnswers struct {
	mu       sync.Mutex
	faulted  atomic.Bool // the fault was injected
	refused  int         // 503 STORE_UNAVAILABLE after the fault
	byStatus map[int]int // every failed answer, by status
}

// onFailure accepts, once the fault is injected, a 503 STORE_UNAVAILABLE
// that authorizes nothing; anything else fails the test.
func (a *faultAnswers) onFailure(t *testing.T) func(c int, op string, rep *acktest.Reply, err error) bool {
	return func(c int, op string, rep *acktest.Reply, err error) bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		if err != nil {
			t.Errorf("client %d: %s: %v", c, op, err)
			return false
		}
		a.byStatus[rep.Status]++
		switch {
		case !a.faulted.Load():
			t.Errorf("client %d: %s failed before the fault: %s", c, op, acktest.Describe(rep, nil))
			return false
		case rep.Status != http.StatusServiceUnavailable || rep.Str("code") != clearance.CodeStoreUnavailable:
			t.Errorf("client %d: %s during the fault: %s; want 503 %s", c, op, acktest.Describe(rep, nil), clearance.CodeStoreUnavailable)
			return false
		case rep.JSON["should_execute"] == true || rep.Str("execution_token") != "" || rep.Str("claim_token") != "" || rep.Str("claim_attestation") != "":
			t.Errorf("client %d: %s: a 503 that authorizes: %s", c, op, rep.Raw)
			return false
		}
		a.refused++
		return true
	}
}

func (a *faultAnswers) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.refused
}

func runHTTPFault(t *testing.T, c httpFault) {
	start := time.Now()
	d := faultfs.New()
	opts := faultStoreOptions()
	if c.opts != nil {
		c.opts(&opts)
	}
	f := newFaultServer(t, d, opts)
	book := acktest.NewBook()
	ans := &faultAnswers{byStatus: map[int]int{}}
	const injectAt = 150 // acknowledgements before the fault
	load := &acktest.Load{T: t, URL: f.srv.URL, Client: f.client, Orgs: f.orgs, Book: book, Tag: "fault",
		OnAck: func(acks int) {
			switch {
			case acks != injectAt:
			case c.wal:
				var once sync.Once
				d.OnCreate(func(name string) {
					if strings.HasSuffix(name, ".log") {
						once.Do(func() {
							ans.faulted.Store(true)
							c.inject(d)
						})
					}
				})
			default:
				// Under the load's lock, with other requests in flight.
				ans.faulted.Store(true)
				c.inject(d)
			}
		},
		OnFailure: ans.onFailure(t),
	}
	done := make(chan int)
	go func() { done <- load.Run(8) }()
	waitFor(t, 30*time.Second, "50 writes refused after the fault", func() bool { return ans.count() >= 50 || t.Failed() })
	load.Stop()
	acks := <-done
	if t.Failed() {
		t.FailNow()
	}

	// The server says why, refuses writes, and serves what it can read.
	h := f.get("/v1/health", "")
	st, _ := h.JSON["store_status"].(map[string]any)
	recovery := "restart"
	if c.transient {
		recovery = "automatic"
	}
	if h.Status != http.StatusServiceUnavailable || h.Str("status") != "degraded" || st["status"] != "failing" || st["kind"] != c.kind ||
		st["recovery"] != recovery || st["reason"] == "" || st["reason"] != h.Str("store") || st["since"] == nil {
		t.Fatalf("health during the fault: %s", acktest.Describe(h, nil))
	}
	w := f.post(pathEvaluate, f.orgs[0].Key, `{"amount":1}`)
	if w.Status != http.StatusServiceUnavailable || w.Str("code") != clearance.CodeStoreUnavailable || !strings.Contains(w.Str("detail"), "refuses writes") {
		t.Fatalf("a write during the fault: %s", acktest.Describe(w, nil))
	}
	book.Lock()
	decisions := append([]acktest.Decision(nil), book.Decisions...)
	var grants []acktest.Grant
	for _, g := range book.Grants {
		grants = append(grants, *g)
	}
	book.Unlock()
	for _, dec := range decisions {
		r := f.get(pathDossiers+dec.DossierID, f.orgs[dec.Org].Key)
		if sum := sha256.Sum256(r.Raw); r.Status != http.StatusOK || "sha256:"+hex.EncodeToString(sum[:]) != dec.Digest {
			t.Fatalf("acknowledged dossier %s during the fault: %s", dec.DossierID, acktest.Describe(r, nil))
		}
	}
	for _, g := range grants {
		r := f.get(pathDossiers+g.Dossier+"/dispatches", f.orgs[g.Org].Key)
		if r.Status != http.StatusOK || r.Str("grant_id") != g.ID || (g.Final != "" && r.Str("grant_state") != g.Final) {
			t.Fatalf("acknowledged grant %s during the fault: %s", g.ID, acktest.Describe(r, nil))
		}
	}
	ledger := f.get(pathLedger, f.orgs[0].Key)
	ledgerRead := "served"
	switch {
	case c.undurable && (ledger.Status != http.StatusServiceUnavailable || ledger.Str("code") != clearance.CodeStoreUnavailable):
		t.Fatalf("the ledger after a failed commit: %s; want 503 (what it shows may not be durable)", acktest.Describe(ledger, nil))
	case c.undurable:
		ledgerRead = "refused (a commit failed after it was applied)"
	case ledger.Status != http.StatusOK:
		t.Fatalf("the ledger during the fault: %s", acktest.Describe(ledger, nil))
	}

	end := "writes refused until the restart"
	if c.transient {
		// Space is freed: the server notices by itself (health looks at
		// most once a second) and acknowledges writes again.
		freed := time.Now()
		c.heal(d)
		waitFor(t, 10*time.Second, "the server recovered from the full disk", func() bool {
			return f.get("/v1/health", "").Status == http.StatusOK
		})
		end = fmt.Sprintf("writes acknowledged again %v after space was freed", time.Since(freed).Round(10*time.Millisecond))
		var more *acktest.Load
		more = &acktest.Load{T: t, URL: f.srv.URL, Client: f.client, Orgs: f.orgs, Book: book, Tag: "recovered",
			OnAck: func(n int) {
				if n == 40 {
					go more.Stop() // OnAck runs under the load's lock
				}
			},
			OnFailure: func(c int, op string, rep *acktest.Reply, err error) bool {
				t.Errorf("client %d: %s after the recovery: %s", c, op, acktest.Describe(rep, err))
				return false
			},
		}
		acks += more.Run(4)
	}

	f.restart()
	acktest.Check(t, f.client, f.srv.URL, f.orgs, book)
	if h := f.get("/v1/health", ""); h.Status != http.StatusOK {
		t.Fatalf("health after the restart: %s", acktest.Describe(h, nil))
	}
	book.Lock()
	defer book.Unlock()
	t.Logf("%s: 1 fault injected (%d I/O errors) after %d+ acknowledgements; answers: %d acknowledged (2xx), %d refused (503 %s), %d other; "+
		"during the fault %d dossiers and %d grants served, the ledger %s, health 503 %s/%s; after the restart 0 lost of %d decisions, %d grants, %d claims, %d finalizations, 0 double claims; %s; %v",
		c.name, d.Injected(), injectAt, acks, ans.refused, clearance.CodeStoreUnavailable, others(ans.byStatus), len(decisions), len(grants), ledgerRead,
		st["kind"], st["recovery"], len(book.Decisions), len(book.Grants), book.Claims, book.Finals, end, time.Since(start).Round(time.Millisecond))
}

// others counts the failed answers other than 503, which must be none.
func others(byStatus map[int]int) int {
	o := 0
	for s, n := range byStatus {
		if s != http.StatusServiceUnavailable {
			o += n
		}
	}
	return o
}

// waitFor polls cond until it holds, failing t after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPebbleReadFaultsOverHTTP damages the blocks of a table that hold an
// acknowledged dossier's id (its record, index entries, ledger entry) (their bytes flipped: checksum
// mismatches; or their reads failing: bad sectors) and restarts the server
// on it. Every dossier is then either served byte for byte as acknowledged
// or refused with 503 STORE_UNAVAILABLE (never other bytes): the damaged
// one is refused, the others are served; health answers 503 with the
// fault, and writes are refused.
func TestPebbleReadFaultsOverHTTP(t *testing.T) {
	if onPostgres(t) {
		t.Skip("Pebble's storage faults: the Pebble backend only")
	}
	t.Parallel()
	for _, c := range []struct {
		name   string
		kind   string
		damage func(d *faultfs.Disk, table string, at []int64) error
	}{
		{"corrupted block", store.FaultCorruption, func(d *faultfs.Disk, table string, at []int64) error {
			for _, off := range at {
				if err := faultfs.FlipByte(d, table, off); err != nil {
					return err
				}
			}
			return nil
		}},
		{"read error", store.FaultRead, func(d *faultfs.Disk, table string, at []int64) error {
			d.FailAt(faultfs.Read, faultfs.Suffix(table), at, syscall.EIO)
			return nil
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := faultfs.New()
			f := newFaultServer(t, d, faultStoreOptions())
			book := acktest.NewBook()
			var load *acktest.Load
			load = &acktest.Load{T: t, URL: f.srv.URL, Client: f.client, Orgs: f.orgs, Book: book, Tag: "read",
				OnAck: func(n int) {
					if n == 600 {
						go load.Stop() // OnAck runs under the load's lock
					}
				},
				OnFailure: func(c int, op string, rep *acktest.Reply, err error) bool {
					t.Errorf("client %d: %s: %s", c, op, acktest.Describe(rep, err))
					return false
				},
			}
			load.Run(8)
			if t.Failed() {
				t.FailNow()
			}

			// A dossier in the middle of org 0's: the blocks that hold its
			// records are damaged while the server is down.
			f.close()
			var victim acktest.Decision
			n := 0
			for _, dec := range book.Decisions {
				if dec.Org == 0 {
					if n++; n == 100 {
						victim = dec
					}
				}
			}
			table, at := findInTables(t, d, victim.DossierID)
			if err := c.damage(d, table, at); err != nil {
				t.Fatal(err)
			}
			f.open(d)

			served, refused, victimRefused := 0, 0, false
			for _, dec := range book.Decisions {
				r := f.get(pathDossiers+dec.DossierID, f.orgs[dec.Org].Key)
				sum := sha256.Sum256(r.Raw)
				switch {
				case r.Status == http.StatusOK && "sha256:"+hex.EncodeToString(sum[:]) == dec.Digest:
					served++
				case r.Status == http.StatusServiceUnavailable && r.Str("code") == clearance.CodeStoreUnavailable:
					refused++
					victimRefused = victimRefused || dec.DossierID == victim.DossierID
				default:
					t.Fatalf("dossier %s after the damage: %s; want it as acknowledged, or 503", dec.DossierID, acktest.Describe(r, nil))
				}
			}
			if !victimRefused || served == 0 {
				t.Fatalf("%d served, %d refused, the damaged one refused: %v", served, refused, victimRefused)
			}
			h := f.get("/v1/health", "")
			st, _ := h.JSON["store_status"].(map[string]any)
			if h.Status != http.StatusServiceUnavailable || st["status"] != "failing" || st["kind"] != c.kind || st["recovery"] != "restart" {
				t.Fatalf("health after the damage: %s", acktest.Describe(h, nil))
			}
			if w := f.post(pathEvaluate, f.orgs[1].Key, `{"amount":1}`); w.Status != http.StatusServiceUnavailable || w.Str("code") != clearance.CodeStoreUnavailable {
				t.Fatalf("a write after the damage: %s", acktest.Describe(w, nil))
			}
			t.Logf("%s: 1 fault injected (%d blocks of %s, %d I/O errors); %d acknowledged dossiers: %d served as acknowledged, %d refused (503 %s), 0 other answers; writes refused; health %q",
				c.name, len(at), table, d.Injected(), len(book.Decisions), served, refused, clearance.CodeStoreUnavailable, st["reason"])
		})
	}
}

// findInTables returns the table of d whose data blocks hold the id s,
// and a byte of each of those blocks.
func findInTables(t *testing.T, d *faultfs.Disk, s string) (string, []int64) {
	t.Helper()
	for _, name := range d.Files("db", ".sst") {
		at, err := faultfs.BlocksHolding(d, "db/"+name, []byte(s))
		if err != nil {
			t.Fatal(err)
		}
		if len(at) > 0 {
			return "db/" + name, at
		}
	}
	t.Fatalf("no table holds %q", s)
	return "", nil
}
