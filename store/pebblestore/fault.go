package pebblestore

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance/store"
)

// guard watches the store's storage and refuses writes once it fails
// (doc.go, "Storage faults"). Everything the store writes or reads goes
// through its filesystem wrapper (faultFS), so it sees a failed write,
// sync or read in the goroutine that met it, before Pebble hands the error
// on to the commits waiting for that sync.
type guard struct {
	fault atomic.Pointer[store.Fault] // nil while writes are accepted
	// wedged counts Pebble's fatal errors and panics: after one, its
	// commit pipeline may never complete a commit in progress.
	wedged atomic.Int64
	// undurable is set when a batch was applied (readers see it) but its
	// sync failed or was not awaited: from then on nothing visible is known
	// to be durable, and Sync refuses.
	undurable atomic.Bool

	log pebble.Logger

	// The disk reserve: a file of reserve bytes (the ballast) that is
	// removed when the disk is full, so that the writes in progress (the
	// write-ahead log's above all, which Pebble cannot retry) complete;
	// writes are then refused until there is room to put it back.
	disk      vfs.FS // the filesystem under the wrappers
	dir       string
	reserve   int64
	ballastMu sync.Mutex
	probed    atomic.Int64 // unix nanos of the last look for freed space

	backoff atomic.Int64 // the pause of Pebble's retries while failing
}

// ballastName is the reserve file in the database directory; Pebble leaves
// files it does not name alone.
const ballastName = "BALLAST"

// DefaultDiskReserve is the disk reserve Open keeps: room to flush one
// memtable of the default size after the disk is full.
const DefaultDiskReserve = 64 << 20

// probeInterval spaces the looks for freed space of a full disk.
const probeInterval = time.Second

// maxBackoff bounds the pause Pebble's background retries (a flush that
// keeps failing is retried at once, without end) take while the store
// fails; they hold Pebble's mutex meanwhile, which reads do not need.
const maxBackoff = 250 * time.Millisecond

func newGuard(disk vfs.FS, dir string, reserve int64, log pebble.Logger) *guard {
	return &guard{disk: disk, dir: dir, reserve: reserve, log: log}
}

// fail records a fault. The first fault stays, except that a fault that
// needs a restart replaces a transient one.
func (g *guard) fail(kind, reason string, transient bool) {
	f := &store.Fault{Kind: kind, Reason: reason, Since: time.Now().UTC(), Transient: transient}
	for {
		old := g.fault.Load()
		if old != nil && (transient || !old.Transient) {
			return
		}
		if old != nil {
			f.Since = old.Since
		}
		if g.fault.CompareAndSwap(old, f) {
			g.log.Errorf("pebblestore: the store refuses writes: %s", reason)
			return
		}
	}
}

// current is the fault in force, after looking whether a full disk has
// room again.
func (g *guard) current() *store.Fault {
	f := g.fault.Load()
	if f != nil && f.Transient {
		g.resume(f)
		f = g.fault.Load()
	}
	return f
}

// writable returns nil when a write may be handed to Pebble, and the
// refusal otherwise.
func (g *guard) writable() error {
	f := g.current()
	if f == nil {
		return nil
	}
	return refusal(f)
}

func refusal(f *store.Fault) error {
	if f == nil { // a fault that ended in the meantime
		return fmt.Errorf("pebblestore: %w", store.ErrWritesRefused)
	}
	return fmt.Errorf("pebblestore: %w: %s", store.ErrWritesRefused, f.Reason)
}

// resume ends a disk-full fault once the filesystem has room for the
// reserve and as much again, and the reserve is back. It looks at most once
// per probeInterval.
func (g *guard) resume(f *store.Fault) {
	now := time.Now().UnixNano()
	last := g.probed.Load()
	if now-last < int64(probeInterval) || !g.probed.CompareAndSwap(last, now) {
		return
	}
	g.ballastMu.Lock()
	defer g.ballastMu.Unlock()
	if g.fault.Load() != f {
		return
	}
	if u, err := g.disk.GetDiskUsage(g.dir); err == nil && u.AvailBytes < uint64(g.need()) {
		return
	}
	if err := g.putBallast(); err != nil {
		return
	}
	if g.fault.CompareAndSwap(f, nil) {
		g.backoff.Store(0)
		g.log.Infof("pebblestore: space was freed; the store accepts writes again")
	}
}

// need is the free space a full disk must have again before writes resume.
func (g *guard) need() int64 {
	if g.reserve <= 0 {
		return 1
	}
	return 2 * g.reserve
}

// resumeWhen says when a full disk's writes resume.
func (g *guard) resumeWhen() string {
	if g.reserve <= 0 {
		return "writes resume once space is freed"
	}
	return "writes resume once " + mib(g.need()) + " are free"
}

// putBallast makes sure the reserve file holds reserve bytes of the disk;
// g.ballastMu is held (or the store is opening). It preallocates rather
// than writes them: fast, and allocated blocks count as used.
func (g *guard) putBallast() error {
	if g.reserve <= 0 {
		return nil
	}
	path := g.disk.PathJoin(g.dir, ballastName)
	f, err := g.disk.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	err = f.Preallocate(0, g.reserve)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = g.disk.Remove(path)
	}
	return err
}

// diskFull is vfs.OnDiskFull's callback: a write met ENOSPC. It gives the
// reserve back to the filesystem (the write is then retried once) and
// refuses writes until space is freed.
func (g *guard) diskFull() {
	g.ballastMu.Lock()
	defer g.ballastMu.Unlock()
	released := ""
	if g.reserve > 0 {
		if err := g.disk.Remove(g.disk.PathJoin(g.dir, ballastName)); err == nil {
			released = fmt.Sprintf("its reserve of %s was released for the writes in progress; ", mib(g.reserve))
		}
	}
	g.fail(store.FaultDiskFull, "disk full: no space left on the database's filesystem; "+released+g.resumeWhen(), true)
}

// ioError classifies a failed operation on the file name; nil, end of file
// and a missing file are not faults.
func (g *guard) ioError(op, name string, err error) {
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, os.ErrNotExist) {
		return
	}
	what, table := g.describe(name)
	reason := fmt.Sprintf("%s of %s failed: %s", op, what, errText(err))
	switch {
	case op == "read":
		g.fail(store.FaultRead, "read error: "+reason+"; restart once the disk is repaired", false)
	case errors.Is(err, syscall.ENOSPC) && table:
		// Pebble drops the table and retries the flush or compaction:
		// nothing acknowledged depends on it.
		g.fail(store.FaultDiskFull, "disk full: "+reason+"; "+g.resumeWhen(), true)
	case errors.Is(err, syscall.ENOSPC):
		g.fail(store.FaultDiskFull, "disk full: "+reason+"; restart once space is freed", false)
	default:
		g.fail(store.FaultWrite, "write error: "+reason+"; restart once the disk is repaired", false)
	}
}

// commit runs a call into Pebble's commit pipeline. Pebble panics when it
// cannot write the write-ahead log; the panic becomes a fault here, and no
// batch is handed to Pebble again.
func (g *guard) commit(call func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("pebble panicked: %v", r)
			g.wedged.Add(1)
			g.undurable.Store(true)
			g.fail(store.FaultWrite, "write error: the write-ahead log could not be written; restart once the disk is repaired", false)
		}
	}()
	return call()
}

// corrupt records a checksum mismatch in the file at path.
func (g *guard) corrupt(path string) {
	what, _ := g.describe(path)
	g.fail(store.FaultCorruption, "corruption: stored data of "+what+" does not match its checksum; restore the database, then restart", false)
}

// pause slows Pebble's background retries while the store fails: a flush
// whose table cannot be written is retried at once, without end.
func (g *guard) pause() {
	if g.fault.Load() == nil {
		return
	}
	d := time.Duration(g.backoff.Load())
	switch {
	case d == 0:
		d = 10 * time.Millisecond
	case d < maxBackoff:
		d = min(2*d, maxBackoff)
	}
	g.backoff.Store(int64(d))
	time.Sleep(d)
}

// describe names a file of the database for a reason (no directory: the
// health answer is public) and tells whether it is a table, whose failed
// write Pebble retries with another file.
func (g *guard) describe(name string) (what string, table bool) {
	if strings.TrimRight(name, `/\`) == strings.TrimRight(g.dir, `/\`) {
		return "the database directory", false
	}
	base := name
	if i := strings.LastIndexAny(base, `/\`); i >= 0 {
		base = base[i+1:]
	}
	switch {
	case strings.HasSuffix(base, ".sst") || strings.HasSuffix(base, ".blob"):
		return "table " + base, true
	case strings.HasSuffix(base, ".log"):
		return "the write-ahead log (" + base + ")", false
	case strings.HasPrefix(base, "MANIFEST") || strings.HasPrefix(base, "marker."):
		return "the manifest (" + base + ")", false
	}
	return base, false
}

// errText is the system's words for err, without the paths an
// *fs.PathError carries.
func errText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	var pe *iofs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

func mib(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

// faultFS passes every operation to the filesystem under it and tells the
// guard of the ones that fail.
type faultFS struct {
	vfs.FS
	g *guard
}

func (fs *faultFS) Unwrap() vfs.FS { return fs.FS }

func (fs *faultFS) file(name string, f vfs.File) vfs.File {
	if f == nil {
		return nil
	}
	return &faultFile{File: f, name: name, g: fs.g}
}

func (fs *faultFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	fs.g.ioError("creation", name, err)
	return fs.file(name, f), err
}

func (fs *faultFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	fs.g.ioError("creation", newname, err)
	return fs.file(newname, f), err
}

func (fs *faultFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.Open(name, opts...)
	return fs.file(name, f), err
}

func (fs *faultFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	return fs.file(name, f), err
}

func (fs *faultFS) OpenDir(name string) (vfs.File, error) {
	f, err := fs.FS.OpenDir(name)
	return fs.file(name, f), err
}

func (fs *faultFS) Rename(oldname, newname string) error {
	err := fs.FS.Rename(oldname, newname)
	fs.g.ioError("rename", newname, err)
	return err
}

func (fs *faultFS) Link(oldname, newname string) error {
	err := fs.FS.Link(oldname, newname)
	fs.g.ioError("link", newname, err)
	return err
}

func (fs *faultFS) MkdirAll(dir string, perm os.FileMode) error {
	err := fs.FS.MkdirAll(dir, perm)
	fs.g.ioError("creation", dir, err)
	return err
}

// faultFile is a file of faultFS. Preallocate, Prefetch and Close are not
// watched: Pebble ignores the first two's errors, and a file's data is
// safe only once synced.
type faultFile struct {
	vfs.File
	name string
	g    *guard
}

func (f *faultFile) Read(p []byte) (int, error) {
	n, err := f.File.Read(p)
	f.g.ioError("read", f.name, err)
	return n, err
}

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.g.ioError("read", f.name, err)
	return n, err
}

func (f *faultFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.g.ioError("write", f.name, err)
	return n, err
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	f.g.ioError("write", f.name, err)
	return n, err
}

func (f *faultFile) Sync() error {
	err := f.File.Sync()
	f.g.ioError("sync", f.name, err)
	return err
}

func (f *faultFile) SyncData() error {
	err := f.File.SyncData()
	f.g.ioError("sync", f.name, err)
	return err
}

func (f *faultFile) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	f.g.ioError("sync", f.name, err)
	return full, err
}

// faultLogger hands Pebble's messages to the store's logger, except that a
// fatal error does not end the process once the guard knows the storage
// failed: the store then refuses writes and keeps serving reads (Pebble
// calls Fatalf on a failed write of its manifest or write-ahead log, and
// would otherwise exit). A fatal error the guard cannot explain is a fault
// in Pebble, which the logger's Fatalf handles as before.
type faultLogger struct {
	pebble.Logger
	g *guard
}

func (l faultLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	// A failed manifest write belongs to a flush or compaction in the
	// background; any other fatal error may have stopped Pebble's commit
	// pipeline (a commit that failed is never completed).
	if !strings.HasPrefix(msg, "MANIFEST") {
		l.g.wedged.Add(1)
	}
	if f := l.g.fault.Load(); f != nil && !f.Transient {
		l.Logger.Errorf("pebblestore: pebble: %s (the store refuses writes until it is restarted)", msg)
		return
	}
	l.g.fail(store.FaultWrite, "pebble failed: "+msg, false)
	l.Logger.Fatalf(format, args...)
}

// events is the store's Pebble event listener: corruption and background
// errors.
func (g *guard) events() *pebble.EventListener {
	return &pebble.EventListener{
		DataCorruption: func(info pebble.DataCorruptionInfo) { g.corrupt(info.Path) },
		BackgroundError: func(err error) {
			g.log.Errorf("pebblestore: background error: %v", err)
			if pebble.IsCorruptionError(err) {
				g.fail(store.FaultCorruption, "corruption: a flush or compaction found stored data that does not match its checksum; restore the database, then restart", false)
			}
			g.pause()
		},
	}
}
