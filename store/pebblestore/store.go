package pebblestore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
)

// Options configures Open. The zero value is a good default.
type Options struct {
	// FS is the filesystem holding the database; nil means the OS
	// filesystem (vfs.Default). Tests pass vfs.NewMem or
	// vfs.NewCrashableMem.
	FS vfs.FS
	// Logger receives Pebble's log messages; nil drops its informational
	// chatter and sends errors to Pebble's default logger.
	Logger pebble.Logger
	// CacheSize is the room in bytes the block cache keeps for sstable
	// blocks; 0 means 64 MiB. Pebble counts its memtables against the block
	// cache, so Open sizes the cache at CacheSize plus the memtables' most
	// (three of MemTableSize): blocks and memtables together stay within
	// that sum.
	CacheSize int64
	// MemTableSize is the size of one memtable in bytes; 0 means 64 MiB
	// (DefaultMemTableSize). Pebble keeps up to two queued for flushing
	// besides the one being written.
	MemTableSize uint64
	// Now is the store's clock, which Tx.Now returns and claim leases are
	// judged by; nil means time.Now. Tests pass a clock they move.
	Now func() time.Time
	// DiskReserve is the room in bytes the store keeps in reserve on its
	// filesystem (a preallocated file, BALLAST, in its directory) and
	// gives back when the disk is full, so that the writes in progress
	// complete; writes are then refused until twice as much is free again
	// (doc.go, "Storage faults"). 0 means DefaultDiskReserve; negative,
	// none.
	DiskReserve int64
}

// Store is the embedded Pebble backend. It is safe for concurrent use.
type Store struct {
	db    *pebble.DB
	now   func() time.Time
	guard *guard // refuses writes once the storage fails (fault.go)

	cacheLimit int64 // Pebble's cache size: blocks and memtables together

	orgs  sync.Map   // org id -> *org: serializes each org's Updates
	revMu sync.Mutex // serializes grant key revocations (first one kept)

	// unsynced counts commits that are visible but whose WAL sync has not
	// completed yet (group commit). A transaction that writes nothing may
	// have read such data; it waits for a sync before it returns.
	unsynced atomic.Int64

	observer atomic.Pointer[store.CommitObserver] // ObserveCommits

	mu     sync.Mutex
	idle   sync.Cond // signalled when active drops to 0
	closed bool
	active int // calls in progress
}

var (
	_ store.Backend        = (*Store)(nil)
	_ store.FaultReporter  = (*Store)(nil)
	_ store.MemoryReporter = (*Store)(nil)
)

// Open opens (creating if needed) the store in dir.
func Open(dir string, opts Options) (*Store, error) {
	disk := opts.FS
	if disk == nil {
		disk = vfs.Default
	}
	reserve := opts.DiskReserve
	if reserve == 0 {
		reserve = DefaultDiskReserve
	}
	g := newGuard(disk, dir, reserve, loggerOr(opts.Logger))
	cacheLimit := blockCacheSize(cacheSize(opts.CacheSize), memTableSize(opts.MemTableSize))
	po := &pebble.Options{
		// The guard sees every failed operation first; under it, Pebble's
		// own disk-full handler releases the reserve and retries once.
		FS:                 &faultFS{FS: vfs.OnDiskFull(disk, g.diskFull), g: g},
		Logger:             faultLogger{Logger: g.log, g: g},
		EventListener:      g.events(),
		CacheSize:          cacheLimit,
		MemTableSize:       memTableSize(opts.MemTableSize),
		FormatMajorVersion: pebble.FormatNewest,
	}
	// Bloom filters make the negative lookups of uniqueness checks (a new
	// dossier id, a new bundle version) skip data blocks.
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		po.Levels[i].FilterType = pebble.TableFilter
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	s := &Store{now: now, guard: g, cacheLimit: cacheLimit}
	s.idle.L = &s.mu
	po.WALMinSyncInterval = s.walSyncInterval
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
	}
	if err := g.putBallast(); err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			g.diskFull()
		} else {
			g.log.Errorf("pebblestore: no disk reserve: %v", err)
		}
	}
	if err := checkFormat(db); err != nil {
		_ = db.Close()
		return nil, err
	}
	s.db = db
	return s, nil
}

// walSyncInterval spaces WAL syncs only while several commits wait for
// one: they then share it (fewer fsyncs under load: one org's decisions
// grouped 6 to a sync and many orgs' only 2.5 to 5 before), and a lone
// commit is synced at once. Update still returns only once its batch is
// synced; this only decides how many batches one fsync covers.
func (s *Store) walSyncInterval() time.Duration {
	if s.unsynced.Load() >= busySyncWaiters {
		return busySyncInterval
	}
	return 0
}

const (
	busySyncWaiters  = 4
	busySyncInterval = 150 * time.Microsecond
)

// checkFormat stamps a new database with the layout version, upgrades a
// version 1 or 2 database, and refuses a database written with another layout.
func checkFormat(db *pebble.DB) error {
	v, err := get(db, formatKey, "format")
	switch {
	case errors.Is(err, store.ErrNotFound):
		if err := db.Set(formatKey, []byte(formatVersion), pebble.Sync); err != nil {
			return fmt.Errorf("pebblestore: write format: %w", err)
		}
		return nil
	case err != nil:
		return err
	case string(v) == "1":
		if err := upgradeActivations(db); err != nil {
			return err
		}
		return upgradeExportJobs(db)
	case string(v) == "2":
		return upgradeExportJobs(db)
	case string(v) != formatVersion:
		return fmt.Errorf("pebblestore: unsupported layout version %q (want %q)", v, formatVersion)
	}
	return nil
}

// upgradeActivations takes a version 1 database to version 2: layout 1 had
// no activations, and an org's newest published bundle was its active one,
// so each org with bundles gets that version as its activation (ledger seq
// 0: no entry recorded it). One synced batch with the new format stamp, so
// the upgrade happens completely or not at all; a build that knows only
// layout 1, and would ignore activations, then refuses the database.
func upgradeActivations(db *pebble.DB) error {
	b := db.NewBatch()
	defer b.Close()
	lower, upper := []byte{tagOrg}, []byte{tagOrg + 1}
	for {
		k, _, found, err := firstKey(db, lower, upper)
		if err != nil {
			return err
		}
		if !found {
			break
		}
		n, w := binary.Uvarint(k[1:])
		if w <= 0 || uint64(len(k)-1-w) < n {
			return fmt.Errorf("pebblestore: upgrade: malformed org key %x", k)
		}
		orgID := string(k[1+w : 1+w+int(n)])
		switch latest, err := readLatestBundle(db, orgID); {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return err
		default:
			a, err := encodeJSON(store.Activation{OrgID: orgID, Version: latest.Version, ActivatedAt: latest.PublishedAt})
			if err != nil {
				return err
			}
			if err := b.Set(activationKey(orgID), a, nil); err != nil {
				return fmt.Errorf("pebblestore: upgrade: %w", err)
			}
		}
		lower = upperBound(k[:1+w+int(n)])
	}
	if err := b.Set(formatKey, []byte("2"), nil); err != nil {
		return fmt.Errorf("pebblestore: upgrade: %w", err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("pebblestore: upgrade to layout 2: %w", err)
	}
	return nil
}

// enter registers a call in progress; it fails once the store is closed or
// when ctx is done. Every successful enter is paired with leave.
func (s *Store) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	s.active++
	return nil
}

func (s *Store) leave() {
	s.mu.Lock()
	s.active--
	if s.active == 0 {
		s.idle.Broadcast()
	}
	s.mu.Unlock()
}

// org is one org's in-process state: the mutex its Updates run under, and
// what they keep in memory between them. This process is the store's only
// writer, and an org's records change only under its mutex, so what is
// kept here (read or written under the mutex, updated when a batch is
// applied) is what the store holds.
type org struct {
	mu sync.Mutex
	// The org's activation and ledger head once an Update has read or
	// written them (known): every decision needs both, and reading and
	// decoding them each time made the org's serial section longer (and
	// slower with many orgs, whose records are not all hot in the cache).
	activeKnown, hasActive bool
	active                 store.Activation
	headKnown              bool
	head                   ledger.Head
	// How many outbox subscribers the org has, once counted: whether a
	// decision owes an event, without a read.
	subscribersKnown bool
	subscribers      int
	// The org's data-protection setting (nil: none), once read: every
	// decision needs it (store.Tx.DataProtectionInTx).
	protectionKnown bool
	protection      []byte
	// ceil bounds the keys of the write-once ranges (ceiling.go).
	ceil ceilings
}

// forget drops what is kept in memory of an org, as a restart would: for
// tests that change the store behind its back.
func (s *Store) forget(orgID string) {
	o := s.org(orgID)
	o.mu.Lock()
	o.activeKnown, o.headKnown, o.subscribersKnown, o.protectionKnown, o.ceil = false, false, false, false, nil
	o.mu.Unlock()
}

func (s *Store) org(orgID string) *org {
	if o, ok := s.orgs.Load(orgID); ok {
		return o.(*org)
	}
	o, _ := s.orgs.LoadOrStore(orgID, new(org))
	return o.(*org)
}

// Update implements store.Backend.
//
// Updates of one org run one at a time under that org's mutex; fn's writes go
// to an indexed batch that its reads see. On success the batch is applied
// inside the mutex without waiting for the WAL sync, and the sync is awaited
// after the mutex is released, so concurrent commits share one fsync (group
// commit). Update returns nil only once the batch is durable.
func (s *Store) Update(ctx context.Context, orgID string, fn func(tx store.Tx) error) error {
	if orgID == "" {
		return errors.New("pebblestore: update needs an org id")
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.leave()
	observe := s.observer.Load()
	var c *store.Commit
	if observe != nil {
		c = new(store.Commit)
	}
	b, wedged, err := s.apply(ctx, orgID, fn, c)
	if err != nil {
		return err
	}
	if b == nil {
		// fn wrote nothing, but it may have read commits that are visible
		// and not yet durable; do not let it act on them before they are.
		if s.unsynced.Load() > 0 || s.guard.undurable.Load() {
			return s.syncWAL()
		}
		return nil
	}
	if wedged {
		// Pebble failed fatally while the batch was applied: after a fatal
		// commit error it never completes the batch's sync, so it is not
		// awaited here, and the write is answered as failed (it may still
		// become durable: its outcome is unknown, as after any failure).
		s.guard.undurable.Store(true)
		go func() {
			_ = b.SyncWait()
			s.unsynced.Add(-1)
			_ = b.Close()
		}()
		return refusal(s.guard.fault.Load())
	}
	err = b.SyncWait()
	if err != nil {
		// Visible but not durable (set before unsynced drops: Sync reads
		// them in the other order).
		s.guard.undurable.Store(true)
		s.guard.fail(store.FaultWrite, "write error: a sync of the write-ahead log failed: "+errText(err)+"; restart once the disk is repaired", false)
	}
	s.unsynced.Add(-1)
	if cerr := b.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("pebblestore: sync: %w", err)
	}
	if observe != nil {
		c.End = time.Now()
		(*observe)(ctx, *c)
	}
	return nil
}

// ObserveCommits implements store.Observable. A commit is one Update's
// batch, from its apply to its WAL sync; its Batch is how many applied
// batches (this one included) were waiting for a sync when it was applied.
// Every commit is its own Lead.
func (s *Store) ObserveCommits(o store.CommitObserver) {
	if o == nil {
		s.observer.Store(nil)
		return
	}
	s.observer.Store(&o)
}

// apply runs fn under the org's mutex and applies its batch without waiting
// for the sync. It returns the applied batch (the caller must SyncWait and
// Close it), or nil when fn wrote nothing, and whether Pebble failed
// fatally meanwhile (its sync may then never complete). A non-nil c
// receives the commit's start and batch.
func (s *Store) apply(ctx context.Context, orgID string, fn func(tx store.Tx) error, c *store.Commit) (*pebble.Batch, bool, error) {
	o := s.org(orgID)
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	b := s.db.NewIndexedBatch()
	t := &tx{org: orgID, b: b, now: s.now, state: o}
	applied := false
	defer func() {
		t.finish()
		if !applied {
			_ = b.Close()
		}
	}()
	if err := fn(t); err != nil {
		return nil, false, err
	}
	t.finish()
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if b.Empty() {
		return nil, false, nil
	}
	if err := s.guard.writable(); err != nil {
		return nil, false, err
	}
	waiting := s.unsynced.Add(1)
	if c != nil {
		*c = store.Commit{Backend: store.BackendPebble, Start: time.Now(), Batch: int(waiting), Lead: true}
	}
	fatals := s.guard.wedged.Load()
	if err := s.applyBatch(b); err != nil {
		s.unsynced.Add(-1)
		return nil, false, fmt.Errorf("pebblestore: commit: %w", err)
	}
	applied = true
	if t.activeSet {
		o.active, o.hasActive, o.activeKnown = t.active, true, true
	}
	if t.appended {
		o.head, o.headKnown = t.head, t.headKnown
	}
	if t.subscribersSet {
		o.subscribers, o.subscribersKnown = t.subscribers, true
	}
	if t.protectionSet {
		o.protection, o.protectionKnown = t.protection, true
	}
	return b, s.guard.wedged.Load() != fatals, nil
}

// applyBatch applies b without waiting for its sync. Pebble panics when it
// cannot write the write-ahead log; the panic becomes a fault here, and no
// batch is applied again.
func (s *Store) applyBatch(b *pebble.Batch) error {
	return s.guard.commit(func() error { return s.db.ApplyNoSyncWait(b, pebble.Sync) })
}

// syncWAL makes every applied batch durable. While the storage fails it
// does not touch the write-ahead log: it returns nil when everything
// visible is known to be durable, and the refusal otherwise.
func (s *Store) syncWAL() error {
	if f := s.guard.fault.Load(); f != nil {
		if s.guard.undurable.Load() || s.unsynced.Load() > 0 {
			return refusal(f)
		}
		return nil
	}
	err := s.guard.commit(func() error { return s.db.LogData(nil, pebble.Sync) })
	if err != nil {
		s.guard.undurable.Store(true)
		s.guard.fail(store.FaultWrite, "write error: a sync of the write-ahead log failed: "+errText(err)+"; restart once the disk is repaired", false)
		return fmt.Errorf("pebblestore: sync: %w", err)
	}
	return nil
}

// Fault implements store.FaultReporter: nil while the store accepts
// writes. A full disk that has room again ends its fault here.
func (s *Store) Fault() *store.Fault { return s.guard.current() }

// Memory implements store.MemoryReporter from Pebble's metrics. Memtables
// take their room in the block cache while they live, so the two stay
// within the cache size Open gave Pebble. A closed store holds none.
func (s *Store) Memory() store.Memory {
	if s.enter(context.Background()) != nil {
		return store.Memory{}
	}
	defer s.leave()
	m := s.db.Metrics()
	return store.Memory{
		BlockCache: m.BlockCache.Size,
		Memtables:  int64(m.MemTable.Size + m.MemTable.ZombieSize),
		Limit:      s.cacheLimit,
	}
}

// Sync implements store.Backend.
func (s *Store) Sync(ctx context.Context) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.leave()
	return s.syncWAL()
}

// Ping implements store.Backend: it reads the layout version.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.leave()
	_, err := get(s.db, formatKey, "format")
	return err
}

// Close waits for calls in progress, then closes the database. Later calls
// return store.ErrClosed; closing again returns nil. Close must not be
// called from inside an Update's fn (it would wait for that Update).
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	// After a fatal commit error Pebble may never finish a call in
	// progress: then wait only closeWait for them.
	deadline := time.Now().Add(closeWait)
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(closeWait / 10)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				s.mu.Lock()
				s.idle.Broadcast()
				s.mu.Unlock()
			}
		}
	}()
	for s.active > 0 && (s.guard.wedged.Load() == 0 || time.Now().Before(deadline)) {
		s.idle.Wait()
	}
	close(done)
	s.mu.Unlock()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("pebblestore: close: %w", err)
	}
	return nil
}

// closeWait bounds Close's wait for calls in progress once Pebble failed
// fatally.
const closeWait = 5 * time.Second

// defaultCacheSize keeps the hot index, filter and data blocks (ledger
// heads, latest bundles, recent dossiers) in memory.
const defaultCacheSize = 64 << 20

// DefaultCacheLimit is the memory the block cache and the memtables share
// with the default CacheSize and MemTableSize (256 MiB): what the store's
// caches grow to as the data does (Store.Memory).
const DefaultCacheLimit = defaultCacheSize + 3*DefaultMemTableSize

// DefaultMemTableSize is the memtable size Open uses: 16 times Pebble's
// default. Every flush of a decision's records (dossier, summary, ledger
// entry, chain member, indexes) spans the org's whole key range, so each
// compaction from L0 into the base level rewrites every base-level table
// of the org; a larger memtable makes those compactions rarer for the same
// data. With 4 MiB, 400,000 decisions were written 4.9 times over (8 times
// into the base level) and throughput fell by 14%; with 64 MiB, 2.2 times
// (docs/performance.md).
const DefaultMemTableSize = 64 << 20

func memTableSize(n uint64) uint64 {
	if n == 0 {
		return DefaultMemTableSize
	}
	return n
}

// blockCacheSize is the size to give Pebble's block cache so that blocks
// keep the room they were given: every memtable, the one being written and
// those queued for flushing (at most MemTableStopWritesThreshold, 2), holds
// a reservation of its size in the cache while it lives. Sized at blocks
// alone, two 64 MiB memtables left a 64 MiB cache with no room at all:
// every lookup read its index, filter and data blocks from the file again
// (a quarter of the server's CPU under load; docs/performance.md).
func blockCacheSize(blocks int64, memTable uint64) int64 {
	const memTables = 3
	return blocks + memTables*int64(memTable)
}

func cacheSize(n int64) int64 {
	if n <= 0 {
		return defaultCacheSize
	}
	return n
}

// quietLogger drops Pebble's informational messages ("Found 0 WALs") but
// keeps its errors.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Errorf(format string, args ...any) {
	pebble.DefaultLogger.Errorf(format, args...)
}
func (quietLogger) Fatalf(format string, args ...any) {
	pebble.DefaultLogger.Fatalf(format, args...)
}

func loggerOr(l pebble.Logger) pebble.Logger {
	if l == nil {
		return quietLogger{}
	}
	return l
}
