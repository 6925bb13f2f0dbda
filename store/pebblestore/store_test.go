package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/storetest"
	"github.com/clearancehq/clearance/tenant"
)

// quiet discards Pebble's informational logs in tests.
type quiet struct{}

func (quiet) Infof(string, ...any)  {}
func (quiet) Errorf(string, ...any) {}
func (quiet) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

func openMem(t *testing.T) *Store {
	t.Helper()
	s, err := Open("db", Options{FS: vfs.NewMem(), Logger: quiet{}})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// TestConformance runs every storage conformance suite.
func TestConformance(t *testing.T) {
	var fss sync.Map // store.Backend -> its vfs.FS, for Reopen
	openOn := func(t *testing.T, fs vfs.FS, now func() time.Time) store.Backend {
		t.Helper()
		s, err := Open("db", Options{FS: fs, Logger: quiet{}, Now: now})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		fss.Store(store.Backend(s), fs)
		return s
	}
	storetest.All(t, storetest.Harness{
		Open: func(t *testing.T, now func() time.Time) store.Backend { return openOn(t, vfs.NewMem(), now) },
		Reopen: func(t *testing.T, b store.Backend, now func() time.Time) store.Backend {
			fs, ok := fss.Load(b)
			if !ok {
				t.Fatal("Reopen of a backend Open did not return")
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			return openOn(t, fs.(vfs.FS), now)
		},
		OverwriteEntry: func(t *testing.T, b store.Backend, orgID string, seq uint64, e ledger.Entry) {
			t.Helper()
			v, err := encodeJSON(e)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.(*Store).db.Set(entryKey(orgID, seq), v, pebble.Sync); err != nil {
				t.Fatal(err)
			}
			b.(*Store).forget(orgID)
		},
		DeleteEntry: func(t *testing.T, b store.Backend, orgID string, seq uint64) {
			t.Helper()
			if err := b.(*Store).db.Delete(entryKey(orgID, seq), pebble.Sync); err != nil {
				t.Fatal(err)
			}
			b.(*Store).forget(orgID)
		},
		SetHead: func(t *testing.T, b store.Backend, orgID string, h ledger.Head) {
			t.Helper()
			v, err := encodeJSON(h)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.(*Store).db.Set(headKey(orgID), v, pebble.Sync); err != nil {
				t.Fatal(err)
			}
			b.(*Store).forget(orgID)
		},
		DeleteCheckpoint: func(t *testing.T, b store.Backend, orgID string, size uint64) {
			t.Helper()
			if err := b.(*Store).db.Delete(checkpointKey(orgID, size), pebble.Sync); err != nil {
				t.Fatal(err)
			}
		},
		DeleteScope: func(t *testing.T, b store.Backend, orgID, scope string) {
			t.Helper()
			if err := b.(*Store).db.Delete(scopeKey(orgID, scope), pebble.Sync); err != nil {
				t.Fatal(err)
			}
		},
	})
}

var at = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// decide records dossier n of orgID and its ledger entry in one Update.
func decide(ctx context.Context, s store.Backend, orgID string, n int) error {
	id := fmt.Sprintf("dos_%s_%d", orgID, n)
	body := fmt.Appendf(nil, `{"dossier_id":%q,"n":%d}`, id, n)
	return s.Update(ctx, orgID, func(tx store.Tx) error {
		err := tx.PutDossier(ctx, dossier.Stored{
			OrgID: orgID, DossierID: id, DecisionID: "dec_" + id[4:],
			CreatedAt: at.Add(time.Duration(n) * time.Millisecond), Outcome: "ALLOW", Body: body,
		})
		if err != nil {
			return err
		}
		_, err = ledger.Append(ctx, tx, orgID, ledger.Record{
			Kind: ledger.KindDecision, SubjectID: id, PayloadDigest: canon.Digest(body),
		}, at)
		return err
	})
}

// wantDecided checks that dossiers 0..n-1 of orgID are there and its ledger
// is valid with at least n entries.
func wantDecided(t *testing.T, s *Store, orgID string, ns []int) {
	t.Helper()
	for _, n := range ns {
		id := fmt.Sprintf("dos_%s_%d", orgID, n)
		if _, err := s.Dossier(t.Context(), orgID, id); err != nil {
			t.Fatalf("acknowledged dossier %s lost: %v", id, err)
		}
	}
	rep, err := ledger.Verify(t.Context(), s, orgID)
	if err != nil || !rep.Valid || rep.HeadSeq < uint64(len(ns)) {
		t.Fatalf("Verify(%s) = %+v, %v; want valid with at least %d entries", orgID, rep, err, len(ns))
	}
}

// TestCrashLosesNothingAcknowledged crashes a store (keeping only synced
// data) after acknowledged Updates and finds them all on reopen. A write
// made without sync is lost, which shows the crash is real.
func TestCrashLosesNothingAcknowledged(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s, err := Open("db", Options{FS: fs, Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	var ns []int
	for i := range n {
		if err := decide(t.Context(), s, "org_a", i); err != nil {
			t.Fatal(err)
		}
		ns = append(ns, i)
	}
	err = s.Update(t.Context(), "org_a", func(tx store.Tx) error {
		if err := tx.PutOrg(t.Context(), tenant.Org{ID: "org_a", Name: "A", CreatedAt: at}); err != nil {
			return err
		}
		return tx.PutAPIKey(t.Context(), tenant.APIKey{ID: "key_a", OrgID: "org_a", Kind: tenant.KindOrg, Hash: "h_a"})
	})
	if err != nil {
		t.Fatal(err)
	}
	unsynced := []byte("unsynced")
	if err := s.db.Set(unsynced, []byte("x"), pebble.NoSync); err != nil {
		t.Fatal(err)
	}

	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Open("db", Options{FS: crashed, Logger: quiet{}})
	if err != nil {
		t.Fatalf("reopen after crash: %v", err)
	}
	defer r.Close()
	wantDecided(t, r, "org_a", ns)
	if _, err := r.Org(t.Context(), "org_a"); err != nil {
		t.Fatalf("org lost: %v", err)
	}
	if _, err := r.APIKeyByHash(t.Context(), "h_a"); err != nil {
		t.Fatalf("api key lost: %v", err)
	}
	if ok, err := has(r.db, unsynced); err != nil || ok {
		t.Fatalf("unsynced write survived the crash (%v, %v): the crash test proves nothing", ok, err)
	}
}

// TestGroupCommitCrash runs many concurrent writers, to one shared org and
// to their own orgs, crashes the store while they are still writing, and
// finds every Update acknowledged before the crash.
func TestGroupCommitCrash(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s, err := Open("db", Options{FS: fs, Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 16, 40
	var (
		mu    sync.Mutex
		acked = make(map[string][]int) // org -> acknowledged n
		total int
		half  = make(chan struct{})
		wg    sync.WaitGroup
	)
	for w := range writers {
		org := "org_shared"
		if w%2 == 1 {
			org = fmt.Sprintf("org_own_%d", w)
		}
		wg.Go(func() {
			for i := range each {
				n := w*each + i
				if err := decide(context.Background(), s, org, n); err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				mu.Lock()
				acked[org] = append(acked[org], n)
				total++
				if total == writers*each/2 {
					close(half)
				}
				mu.Unlock()
			}
		})
	}

	// Crash halfway: everything acknowledged so far must survive.
	<-half
	mu.Lock()
	want := make(map[string][]int, len(acked))
	for org, ns := range acked {
		want[org] = append([]int(nil), ns...)
	}
	mu.Unlock()
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})

	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Open("db", Options{FS: crashed, Logger: quiet{}})
	if err != nil {
		t.Fatalf("reopen after crash: %v", err)
	}
	defer r.Close()
	for org, ns := range want {
		wantDecided(t, r, org, ns)
	}
}

// gatedFS blocks WAL syncs while armed, to observe what happens while a
// commit waits for its fsync.
type gatedFS struct {
	vfs.FS
	mu      sync.Mutex
	armed   bool
	entered chan struct{} // receives once per blocked sync
	release chan struct{} // closed to let syncs through
	once    sync.Once
}

func newGatedFS() *gatedFS {
	return &gatedFS{FS: vfs.NewMem(), entered: make(chan struct{}), release: make(chan struct{})}
}

// open lets syncs through; deferred after Close so a failing test ends.
func (g *gatedFS) open() { g.once.Do(func() { close(g.release) }) }

func (g *gatedFS) wrap(f vfs.File, err error, category vfs.DiskWriteCategory) (vfs.File, error) {
	if err != nil || category != "pebble-wal" {
		return f, err
	}
	return &gatedFile{File: f, g: g}, nil
}

func (g *gatedFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.Create(name, c)
	return g.wrap(f, err, c)
}

func (g *gatedFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.ReuseForWrite(oldname, newname, c)
	return g.wrap(f, err, c)
}

func (g *gatedFS) arm() {
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
}

func (g *gatedFS) wait() {
	g.mu.Lock()
	armed := g.armed
	g.mu.Unlock()
	if armed {
		select {
		case g.entered <- struct{}{}:
		case <-g.release:
		}
		<-g.release
	}
}

type gatedFile struct {
	vfs.File
	g *gatedFS
}

func (f *gatedFile) Sync() error     { f.g.wait(); return f.File.Sync() }
func (f *gatedFile) SyncData() error { f.g.wait(); return f.File.SyncData() }

// TestGroupCommitReleasesOrgLockBeforeSync holds the first commit's WAL
// fsync and shows that a second Update of the same org runs (and reads the
// first one's writes) meanwhile, and that neither returns before the sync.
func TestGroupCommitReleasesOrgLockBeforeSync(t *testing.T) {
	g := newGatedFS()
	s, err := Open("db", Options{FS: g, Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defer g.open()
	g.arm()

	const org = "org_a"
	first := make(chan error, 1)
	go func() { first <- decide(context.Background(), s, org, 1) }()
	<-g.entered // the first commit is applied and waiting for its fsync

	second := make(chan error, 1)
	inFn := make(chan ledger.Head, 1)
	go func() {
		second <- s.Update(context.Background(), org, func(tx store.Tx) error {
			h, err := tx.LedgerHead(context.Background())
			inFn <- h
			if err != nil {
				return err
			}
			_, err = ledger.Append(context.Background(), tx, org, ledger.Record{Kind: ledger.KindDecision, SubjectID: "dec_2"}, at)
			return err
		})
	}()
	select {
	case h := <-inFn:
		if h.Seq != 1 {
			t.Fatalf("second Update saw head %+v, want the first commit's seq 1", h)
		}
	case err := <-first:
		t.Fatalf("first Update returned (%v) while its fsync was held", err)
	case <-time.After(10 * time.Second):
		t.Fatal("second Update of the same org did not start while the first waited for its fsync")
	}
	select {
	case err := <-first:
		t.Fatalf("first Update returned (%v) while its fsync was held", err)
	case err := <-second:
		t.Fatalf("second Update returned (%v) while the fsync was held", err)
	default:
	}
	g.open()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	rep, err := ledger.Verify(t.Context(), s, org)
	if err != nil || !rep.Valid || rep.HeadSeq != 2 {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
}

// TestReadOnlyUpdateWaitsForWhatItRead holds the fsync of a commit and
// shows that an Update that only reads that commit does not return before
// the commit is durable.
func TestReadOnlyUpdateWaitsForWhatItRead(t *testing.T) {
	g := newGatedFS()
	s, err := Open("db", Options{FS: g, Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defer g.open()
	g.arm()

	first := make(chan error, 1)
	go func() { first <- decide(context.Background(), s, "org_a", 1) }()
	<-g.entered // applied, fsync held

	read := make(chan struct{})
	reader := make(chan error, 1)
	go func() {
		reader <- s.Update(context.Background(), "org_a", func(tx store.Tx) error {
			defer close(read)
			h, err := tx.LedgerHead(context.Background())
			if err == nil && h.Seq != 1 {
				err = fmt.Errorf("head %+v, want seq 1", h)
			}
			return err
		})
	}()
	<-read
	// A correct store blocks here until the release; the window only gives
	// a wrong one the time to return early.
	select {
	case err := <-reader:
		t.Fatalf("read-only Update returned (%v) before what it read was durable", err)
	case <-time.After(100 * time.Millisecond):
	}
	g.open()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-reader; err != nil {
		t.Fatal(err)
	}
}

func TestRefusesOtherLayoutVersion(t *testing.T) {
	fs := vfs.NewMem()
	s, err := Open("db", Options{FS: fs, Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.Set(formatKey, []byte("99"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err := Open("db", Options{FS: fs, Logger: quiet{}}); err == nil {
		s.Close()
		t.Fatal("Open accepted layout version 99")
	}
}

func TestKeyLayout(t *testing.T) {
	// No org's keys start with another org's prefix.
	orgs := []string{"", "a", "ab", "a\x00", "b", "\x01a"}
	for _, x := range orgs {
		for _, y := range orgs {
			if x == y {
				continue
			}
			for _, k := range [][]byte{dossierKey(y, ""), dossierKey(y, "b"), dossierKey(y, "\x02ab"), entryKey(y, 7), headKey(y)} {
				for _, sub := range []byte{subDossier, subEntry, subHead} {
					if p := orgPrefix(x, sub, 0); bytes.HasPrefix(k, p) {
						t.Fatalf("key %q of org %q has the prefix %q of org %q", k, y, p, x)
					}
				}
			}
		}
	}
	// Idempotency scope and key cannot be confused.
	if bytes.Equal(idempotencyKey("o", "ab", "c"), idempotencyKey("o", "a", "bc")) {
		t.Fatal("idempotency keys collide")
	}
	// Times sort like instants, negative and out-of-range ones included.
	times := []time.Time{{}, time.Unix(-5, 0), time.Unix(0, 0), time.Unix(0, 1), at, time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)}
	for i := 1; i < len(times); i++ {
		if timeOrder(times[i-1]) >= timeOrder(times[i]) {
			t.Fatalf("timeOrder(%v) >= timeOrder(%v)", times[i-1], times[i])
		}
	}
	if got := upperBound([]byte{'o', 1, 'a', 0xff}); !bytes.Equal(got, []byte{'o', 1, 'b'}) {
		t.Fatalf("upperBound = %q", got)
	}
}

// A layout 1 database had no activations: its orgs' newest bundles were
// active. Open carries that over as their activations and stamps layout 2.
func TestUpgradeCarriesOverActivations(t *testing.T) {
	fs := vfs.NewMem()
	s, err := Open("db", Options{FS: fs, Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	published := map[string][]string{"org_a": {"v1", "v2"}, "org_ab": {"x"}, "org_b": {"only"}, "org_c": nil}
	storetest.SeedBundles(t, s, at, published)
	// Make it a layout 1 database.
	if err := s.db.Set(formatKey, []byte("1"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open("db", Options{FS: fs, Logger: quiet{}})
	if err != nil {
		t.Fatalf("Open of a layout 1 database: %v", err)
	}
	defer s.Close()
	want := map[string]store.Activation{
		"org_a":  {OrgID: "org_a", Version: "v2", ActivatedAt: at.Add(time.Hour)},
		"org_ab": {OrgID: "org_ab", Version: "x", ActivatedAt: at},
		"org_b":  {OrgID: "org_b", Version: "only", ActivatedAt: at},
	}
	for org := range published {
		got, err := s.Activation(ctx, org)
		w, ok := want[org]
		if !ok {
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s has no bundle: Activation = %+v, %v; want ErrNotFound", org, got, err)
			}
			continue
		}
		if err != nil || got.Version != w.Version || !got.ActivatedAt.Equal(w.ActivatedAt) || got.LedgerSeq != 0 || got.OrgID != org {
			t.Errorf("%s: Activation = %+v, %v; want %+v", org, got, err, w)
		}
	}
	if v, err := get(s.db, formatKey, "format"); err != nil || string(v) != formatVersion {
		t.Fatalf("layout after the upgrade = %q, %v; want %q", v, err, formatVersion)
	}
}

// A layout 2 database queued validation-pack builds on their artifacts,
// listed through the all-orgs artifact index. Open gives each pack still
// PENDING or RUNNING its job, drops that index and stamps layout 3.
func TestUpgradeGivesQueuedExportsJobs(t *testing.T) {
	fs := vfs.NewMem()
	s, err := Open("db", Options{FS: fs, Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	legacy := []storetest.LegacyExport{
		{OrgID: "org_a", ID: "exp_1", Status: "PENDING", CreatedAt: at},
		{OrgID: "org_a", ID: "exp_2", Status: "RUNNING", Attempts: 2, CreatedAt: at.Add(time.Second)},
		{OrgID: "org_b", ID: "exp_3", Status: "SUCCEEDED", Attempts: 1, CreatedAt: at},
		{OrgID: "org_b", ID: "exp_4", Status: "PENDING", Attempts: 1, CreatedAt: at.Add(time.Minute)},
		{OrgID: "org_b", ID: "exp_5", Status: "FAILED", Attempts: 5, CreatedAt: at},
	}
	want := storetest.SeedLegacyExports(t, s, legacy)
	// Make it a layout 2 database, with its all-orgs index entries.
	for _, x := range legacy {
		k := appendMicrosOrder(legacyExportRefPrefix(x.Status), micros(x.CreatedAt))
		k = append(append(append(k, x.OrgID...), 0), x.ID...)
		if err := s.db.Set(k, []byte{}, pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.db.Set(formatKey, []byte("2"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open("db", Options{FS: fs, Logger: quiet{}, Now: func() time.Time { return at.Add(time.Hour) }})
	if err != nil {
		t.Fatalf("Open of a layout 2 database: %v", err)
	}
	defer s.Close()
	storetest.CheckLegacyExportJobs(t, s, want)
	if _, _, found, err := firstKey(s.db, []byte{tagLegacyArtifactRef}, []byte{tagLegacyArtifactRef + 1}); found || err != nil {
		t.Fatalf("the all-orgs artifact index survived the upgrade (%v)", err)
	}
	if v, err := get(s.db, formatKey, "format"); err != nil || string(v) != formatVersion {
		t.Fatalf("layout after the upgrade = %q, %v; want %q", v, err, formatVersion)
	}
}
