package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore/faultfs"
)

// faultLog keeps Pebble's errors for the test's log and counts fatal
// errors that reached it: none may, while the guard explains them. It
// stops logging when the test ends (a store left open may still log).
type faultLog struct {
	t     *testing.T
	fatal atomic.Int64
	mu    sync.Mutex
	done  bool
}

func newFaultLog(t *testing.T) *faultLog {
	l := &faultLog{t: t}
	t.Cleanup(func() {
		l.mu.Lock()
		l.done = true
		l.mu.Unlock()
	})
	return l
}

func (l *faultLog) log(fail bool, format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.done:
	case fail:
		l.t.Errorf(format, args...)
	default:
		l.t.Logf(format, args...)
	}
}

func (*faultLog) Infof(string, ...any) {}
func (l *faultLog) Errorf(format string, args ...any) {
	if strings.HasPrefix(format, "pebblestore: the store refuses writes") {
		l.log(false, format, args...)
	}
}
func (l *faultLog) Fatalf(format string, args ...any) {
	l.fatal.Add(1)
	l.log(true, "Pebble's fatal error reached the logger: "+format, args...)
}

// faultBook is what writers were told: acknowledged (Update returned
// nil), refused (ErrWritesRefused: nothing written) or failed (another
// error: the outcome is unknown).
type faultBook struct {
	mu      sync.Mutex
	acked   map[string][]int
	failed  map[string][]int
	refused int
	errs    []string // failures, for the log
}

func (b *faultBook) count() (acked, failed, refused int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, ns := range b.acked {
		acked += len(ns)
	}
	for _, ns := range b.failed {
		failed += len(ns)
	}
	return acked, failed, b.refused
}

// faultWriters runs writers that record decisions (decide) in orgs until
// stop is closed, and books every answer.
func faultWriters(s *Store, orgs []string, writers int, stop <-chan struct{}, b *faultBook) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range writers {
		org := orgs[w%len(orgs)]
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				n := w*1_000_000 + i
				err := decide(context.Background(), s, org, n)
				b.mu.Lock()
				switch {
				case err == nil:
					b.acked[org] = append(b.acked[org], n)
				case errors.Is(err, store.ErrWritesRefused):
					b.refused++
				default:
					b.failed[org] = append(b.failed[org], n)
					b.errs = append(b.errs, err.Error())
				}
				b.mu.Unlock()
			}
		})
	}
	return &wg
}

// until polls cond every millisecond until it holds, failing t after d.
func until(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// faultCase is one fault injected under load.
type faultCase struct {
	name string
	// inject starts the fault on disk d under the running store s.
	inject func(t *testing.T, d *faultfs.Disk, s *Store)
	kind   string
	// transient: the fault ends by itself (heal ends it).
	transient bool
	// undurable: a batch applied before the fault may not be durable, so
	// Sync refuses until a restart.
	undurable bool
	// heal ends a transient fault's cause.
	heal func(d *faultfs.Disk)
	opts Options
}

// walFault fails op on the write-ahead log with EIO.
func walFault(op faultfs.Op) func(t *testing.T, d *faultfs.Disk, s *Store) {
	return func(t *testing.T, d *faultfs.Disk, s *Store) { d.Fail(op, faultfs.Suffix(".log"), syscall.EIO) }
}

// flushFault fails op on the files match accepts with EIO, and starts a
// flush that writes them (a table, the manifest's next record).
func flushFault(op faultfs.Op, match func(string) bool) func(t *testing.T, d *faultfs.Disk, s *Store) {
	return func(t *testing.T, d *faultfs.Disk, s *Store) {
		d.Fail(op, match, syscall.EIO)
		if _, err := s.db.AsyncFlush(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStorageFaultsUnderLoad injects each write-path fault into a store
// that 8 writers of 4 orgs are writing to, and checks the design of
// doc.go ("Storage faults"): from the fault on, every write is refused
// (ErrWritesRefused) and Fault says why; what was acknowledged stays
// readable; no refusal hands Pebble a batch (Pebble's fatal errors never
// reach the logger); and after a power cut, the store reopened on what was
// synced holds every acknowledged write. A full disk recovers by itself
// once space is freed, and writes are acknowledged again.
func TestStorageFaultsUnderLoad(t *testing.T) {
	for _, c := range []faultCase{
		{name: "wal sync", inject: walFault(faultfs.Sync), kind: store.FaultWrite, undurable: true},
		{name: "wal write", inject: walFault(faultfs.Write), kind: store.FaultWrite, undurable: true},
		{name: "table sync", inject: flushFault(faultfs.Sync, faultfs.Suffix(".sst")), kind: store.FaultWrite},
		{name: "table write", inject: flushFault(faultfs.Write, faultfs.Suffix(".sst")), kind: store.FaultWrite},
		{name: "manifest sync", inject: flushFault(faultfs.Sync, faultfs.Prefix("MANIFEST")), kind: store.FaultWrite},
		{name: "manifest write", inject: flushFault(faultfs.Write, faultfs.Prefix("MANIFEST")), kind: store.FaultWrite},
		{name: "disk full", kind: store.FaultDiskFull, transient: true, opts: Options{DiskReserve: 64 << 10},
			inject: func(t *testing.T, d *faultfs.Disk, s *Store) { d.SetCapacity(d.Used() + 16<<10) },
			heal:   func(d *faultfs.Disk) { d.SetCapacity(0) }},
		{name: "disk full without reserve", kind: store.FaultDiskFull, undurable: true, opts: Options{DiskReserve: -1},
			inject: func(t *testing.T, d *faultfs.Disk, s *Store) { d.SetCapacity(d.Used() + 16<<10) }},
	} {
		t.Run(c.name, func(t *testing.T) { runFault(t, c) })
	}
}

func runFault(t *testing.T, c faultCase) {
	start := time.Now()
	d := faultfs.New()
	log := newFaultLog(t)
	opts := c.opts
	opts.FS, opts.Logger = d, log
	s, err := Open("db", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() }) // closing again is a no-op
	orgs := []string{"org_a", "org_b", "org_c", "org_d"}
	b := &faultBook{acked: map[string][]int{}, failed: map[string][]int{}}
	stop := make(chan struct{})
	wg := faultWriters(s, orgs, 8, stop, b)
	stopped := false
	halt := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer halt()

	until(t, 10*time.Second, "writers acknowledged 200 writes", func() bool { a, _, _ := b.count(); return a >= 200 })
	ackedBefore, _, _ := b.count()
	c.inject(t, d, s)
	until(t, 10*time.Second, "the store reported the fault", func() bool { return s.Fault() != nil })
	_, _, r0 := b.count()
	until(t, 10*time.Second, "writers were refused", func() bool { _, _, r := b.count(); return r >= r0+50 })
	halt()

	f := s.Fault()
	if f == nil || f.Kind != c.kind || f.Transient != c.transient || f.Reason == "" || strings.Contains(f.Reason, "db/") {
		t.Fatalf("fault %+v; want kind %s, transient %v, a reason without paths", f, c.kind, c.transient)
	}
	if err := decide(t.Context(), s, "org_a", -1); !errors.Is(err, store.ErrWritesRefused) {
		t.Fatalf("a write after the fault: %v; want refused", err)
	}
	if err := s.RevokeGrantKey(t.Context(), "kid-after-the-fault", time.Now()); !errors.Is(err, store.ErrWritesRefused) {
		t.Fatalf("a key revocation after the fault: %v; want refused", err)
	}
	acked, failed, refused := b.count()
	for _, org := range orgs {
		for _, n := range b.acked[org] {
			if _, err := s.Dossier(t.Context(), org, fmt.Sprintf("dos_%s_%d", org, n)); err != nil {
				t.Fatalf("acknowledged dossier %d of %s unreadable after the fault: %v", n, org, err)
			}
		}
	}
	switch err := s.Sync(t.Context()); {
	case c.undurable && !errors.Is(err, store.ErrWritesRefused):
		t.Fatalf("Sync after a failed sync of the write-ahead log: %v; want refused", err)
	case !c.undurable && err != nil:
		t.Fatalf("Sync with nothing visible undurable: %v", err)
	}

	if c.transient {
		// Space comes back: the next look finds it and writes resume.
		c.heal(d)
		until(t, 5*time.Second, "the full disk recovered", func() bool { return s.Fault() == nil })
		for i := range 20 {
			if err := decide(t.Context(), s, "org_a", 10_000_000+i); err != nil {
				t.Fatalf("a write after space was freed: %v", err)
			}
			b.acked["org_a"] = append(b.acked["org_a"], 10_000_000+i)
		}
		acked += 20
	}

	// Cut the power, reopen on what was synced: every acknowledged write
	// is there; a write answered as failed may or may not be.
	crashed := d.CrashClone()
	_ = s.Close() // may report the failed write-ahead log
	r, err := Open("db", Options{FS: crashed, Logger: quiet{}})
	if err != nil {
		t.Fatalf("reopen after the fault: %v", err)
	}
	defer r.Close()
	for _, org := range orgs {
		sort.Ints(b.acked[org])
		wantDecided(t, r, org, b.acked[org])
	}
	onDisk := 0
	for org, ns := range b.failed {
		for _, n := range ns {
			if _, err := r.Dossier(t.Context(), org, fmt.Sprintf("dos_%s_%d", org, n)); err == nil {
				onDisk++
			}
		}
	}
	if log.fatal.Load() != 0 {
		t.Fatalf("%d fatal errors reached the logger", log.fatal.Load())
	}
	if len(b.errs) > 0 {
		t.Logf("first failure: %s", b.errs[0])
	}
	t.Logf("%s: 1 fault injected (%d errors) after %d acknowledged writes; answers: %d acknowledged, %d refused (ErrWritesRefused), %d failed (outcome unknown; %d of them on disk after the cut); acknowledged lost 0; %s; %v",
		c.name, d.Injected(), ackedBefore, acked, refused, failed, onDisk, faultEnd(c), time.Since(start).Round(time.Millisecond))
}

func faultEnd(c faultCase) string {
	if c.transient {
		return "writes resumed once space was freed"
	}
	return "writes refused until the restart"
}

// TestStorageFaultsOnRead: a table whose block no longer matches its
// checksum, and a table whose reads fail, make the store refuse writes
// with the fault's kind, while every record outside the damaged data is
// still served.
func TestStorageFaultsOnRead(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, d *faultfs.Disk, table string)
		kind   string
	}{
		{"corrupted block", func(t *testing.T, d *faultfs.Disk, table string) {
			st, err := d.Stat(table)
			if err != nil {
				t.Fatal(err)
			}
			if err := faultfs.FlipByte(d, table, st.Size()/3); err != nil {
				t.Fatal(err)
			}
		}, store.FaultCorruption},
		{"read error", func(t *testing.T, d *faultfs.Disk, table string) {
			// One range of the file fails, as a bad sector does.
			st, err := d.Stat(table)
			if err != nil {
				t.Fatal(err)
			}
			d.FailAt(faultfs.Read, faultfs.Suffix(table), []int64{st.Size() / 3}, syscall.EIO)
		}, store.FaultRead},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := faultfs.New()
			log := newFaultLog(t)
			s, err := Open("db", Options{FS: d, Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			const n = 600
			for i := range n {
				if err := decide(t.Context(), s, "org_a", i); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.db.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			tables := d.Files("db", ".sst")
			if len(tables) != 1 {
				t.Fatalf("tables %v; want one", tables)
			}
			if c.kind == store.FaultCorruption {
				c.damage(t, d, "db/"+tables[0])
			}

			// Reopened (a cold cache), with fresh records in the memtable.
			s, err = Open("db", Options{FS: d, Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for i := range 10 {
				if err := decide(t.Context(), s, "org_b", i); err != nil {
					t.Fatal(err)
				}
			}
			if c.kind == store.FaultRead {
				c.damage(t, d, "db/"+tables[0])
			}
			// Every record of org_a: its dossier (by id and by decision)
			// and its ledger entry.
			unreadable := 0
			for i := range n {
				id := fmt.Sprintf("dos_org_a_%d", i)
				_, err1 := s.Dossier(t.Context(), "org_a", id)
				_, err2 := s.DossierByDecision(t.Context(), "org_a", "dec_"+id[4:])
				_, err3 := s.LedgerEntries(t.Context(), "org_a", uint64(i), 1)
				if err1 != nil || err2 != nil || err3 != nil {
					unreadable++
				}
			}
			if unreadable == 0 || unreadable == n {
				t.Fatalf("%d of %d records unreadable: the damage must hit some, not all", unreadable, n)
			}
			f := s.Fault()
			if f == nil || f.Kind != c.kind || f.Transient {
				t.Fatalf("fault %+v; want %s until a restart", f, c.kind)
			}
			if err := decide(t.Context(), s, "org_b", 100); !errors.Is(err, store.ErrWritesRefused) {
				t.Fatalf("a write after the damage: %v; want refused", err)
			}
			for i := range 10 {
				if _, err := s.Dossier(t.Context(), "org_b", fmt.Sprintf("dos_org_b_%d", i)); err != nil {
					t.Fatalf("a record outside the damage is not served: %v", err)
				}
			}
			if h, err := s.LedgerHeadOf(t.Context(), "org_b"); err != nil || h.Seq != 10 {
				t.Fatalf("org_b's ledger head %+v, %v", h, err)
			}
			if _, err := ledger.Verify(t.Context(), s, "org_b"); err != nil {
				t.Fatalf("org_b's ledger: %v", err)
			}
			t.Logf("%s: 1 fault injected (%d errors); %d of %d decisions unreadable, the other %d and org_b's 10 served; writes refused (%s)",
				c.name, d.Injected(), unreadable, n, n-unreadable, f.Reason)
		})
	}
}

// TestDiskReserveIsKept: Open keeps the reserve on a filesystem that can
// allocate it, and a disk without room for it opens refusing writes.
func TestDiskReserveIsKept(t *testing.T) {
	d := faultfs.New()
	s, err := Open("db", Options{FS: d, Logger: quiet{}, DiskReserve: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if d.Used() < 1<<20 || s.Fault() != nil {
		t.Fatalf("%d bytes used, fault %v; want the 1 MiB reserve allocated", d.Used(), s.Fault())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	full := faultfs.New()
	s, err = Open("db", Options{FS: full, Logger: quiet{}, DiskReserve: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	full.SetCapacity(full.Used() + 64<<10)
	s, err = Open("db", Options{FS: full, Logger: quiet{}, DiskReserve: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if f := s.Fault(); f == nil || f.Kind != store.FaultDiskFull || !f.Transient {
		t.Fatalf("fault %+v; want a transient full disk", f)
	}
	if err := decide(t.Context(), s, "org_a", 1); !errors.Is(err, store.ErrWritesRefused) {
		t.Fatalf("a write on a disk without room for the reserve: %v", err)
	}
	var _ vfs.FS = full
}

// fatalLog counts the fatal errors handed to it.
type fatalLog struct {
	quiet
	fatals int
}

func (l *fatalLog) Fatalf(string, ...any) { l.fatals++ }

// TestFatalErrorsOfAFailedStorage: a fatal error of Pebble that a storage
// fault explains is not handed to the logger's Fatalf (which would end the
// process); one no fault explains is, and is recorded as a fault. A fatal
// error other than a failed manifest write may have stopped Pebble's commit
// pipeline.
func TestFatalErrorsOfAFailedStorage(t *testing.T) {
	next := &fatalLog{}
	g := newGuard(vfs.NewMem(), "db", 0, next)
	l := faultLogger{Logger: next, g: g}

	l.Fatalf("pebble: fatal commit error: %v", syscall.EIO)
	if next.fatals != 1 || g.fault.Load() == nil || g.wedged.Load() != 1 {
		t.Fatalf("an unexplained fatal error: %d handed on, fault %v, wedged %d", next.fatals, g.fault.Load(), g.wedged.Load())
	}

	next.fatals = 0
	g = newGuard(vfs.NewMem(), "db", 0, next)
	l = faultLogger{Logger: next, g: g}
	g.ioError("sync", "db/MANIFEST-000001", syscall.EIO)
	l.Fatalf("MANIFEST sync failed: %v", syscall.EIO)
	if next.fatals != 0 || g.wedged.Load() != 0 {
		t.Fatalf("a failed manifest sync: %d handed on, wedged %d", next.fatals, g.wedged.Load())
	}
	l.Fatalf("pebble: fatal commit error: %v", syscall.EIO)
	if next.fatals != 0 || g.wedged.Load() != 1 {
		t.Fatalf("a failed commit after a fault: %d handed on, wedged %d", next.fatals, g.wedged.Load())
	}
	if f := g.fault.Load(); f.Kind != store.FaultWrite || !strings.Contains(f.Reason, "the manifest (MANIFEST-000001)") {
		t.Fatalf("the first fault stays: %+v", f)
	}
	if what, _ := g.describe("db"); what != "the database directory" {
		t.Fatalf("a sync of the directory is described as %q", what)
	}
}
