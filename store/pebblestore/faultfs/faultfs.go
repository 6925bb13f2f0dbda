// Package faultfs is a disk for fault tests of a pebblestore that fails as
// a real one does. A Disk has a capacity: a write or preallocation beyond
// it fails with ENOSPC, and removing a file frees its space. Fail injects
// an I/O error into chosen operations on chosen files (through Pebble's
// errorfs). Both sit on Pebble's crashable in-memory filesystem, so a test
// can cut the power after a fault (CrashClone keeps only what was synced)
// and reopen the store on what is left.
//
// It is test support: only tests import it.
package faultfs

import (
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// Op is a kind of file operation Fail can make fail.
type Op int

const (
	Write Op = iota // Write and WriteAt
	Sync            // Sync, SyncData and SyncTo
	Read            // Read and ReadAt
)

// Disk is a vfs.FS of limited capacity with injectable I/O errors. It is
// safe for concurrent use.
type Disk struct {
	vfs.FS   // errorfs over mem
	mem      *vfs.MemFS
	rule     atomic.Pointer[rule]
	injected atomic.Int64

	mu       sync.Mutex
	capacity int64 // 0: unlimited
	used     int64
	files    map[string]*usage
}

// usage is one file's allocated bytes.
type usage struct{ alloc int64 }

type rule struct {
	op       Op
	match    func(name string) bool
	from, to int64 // the bytes of a ReadAt or WriteAt that fail (to 0: all)
	err      error
}

// New returns an empty disk of unlimited capacity.
func New() *Disk {
	d := &Disk{mem: vfs.NewCrashableMem(), files: map[string]*usage{}}
	d.FS = errorfs.Wrap(d.mem, injector{d})
	return d
}

// SetCapacity makes the disk hold n bytes (0: unlimited). Files already
// beyond it stay; the next write that needs room fails.
func (d *Disk) SetCapacity(n int64) {
	d.mu.Lock()
	d.capacity = n
	d.mu.Unlock()
}

// Used returns the bytes allocated to files.
func (d *Disk) Used() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.used
}

// Fail makes op fail with err on every file whose name match accepts,
// until Heal.
func (d *Disk) Fail(op Op, match func(name string) bool, err error) {
	d.rule.Store(&rule{op: op, match: match, err: err})
}

// FailRange is Fail for the reads or writes at an offset (ReadAt,
// WriteAt) that touch the bytes [from, to) of the file: a bad sector.
func (d *Disk) FailRange(op Op, match func(name string) bool, from, to int64, err error) {
	d.rule.Store(&rule{op: op, match: match, from: from, to: to, err: err})
}

// Heal ends Fail's errors.
func (d *Disk) Heal() { d.rule.Store(nil) }

// Injected counts the errors the disk answered: Fail's, and ENOSPC.
func (d *Disk) Injected() int { return int(d.injected.Load()) }

// CrashClone cuts the power: the returned filesystem holds only what was
// synced.
func (d *Disk) CrashClone() *vfs.MemFS {
	return d.mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
}

// Files lists the names in dir that end with suffix, sorted.
func (d *Disk) Files(dir, suffix string) []string {
	names, _ := d.mem.List(dir)
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, suffix) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// FlipByte inverts the byte at off of the file name (no error injected):
// stored data that no longer matches its checksum.
func FlipByte(fs vfs.FS, name string, off int64) error {
	f, err := fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		_ = f.Close()
		return err
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// Name matchers for Fail.
func Suffix(s string) func(string) bool {
	return func(n string) bool { return strings.HasSuffix(n, s) }
}
func Prefix(s string) func(string) bool {
	return func(n string) bool {
		if i := strings.LastIndexByte(n, '/'); i >= 0 {
			n = n[i+1:]
		}
		return strings.HasPrefix(n, s)
	}
}

// injector is the errorfs side of Fail.
type injector struct{ d *Disk }

func (injector) String() string { return "faultfs" }

func (i injector) MaybeError(op errorfs.Op) error {
	r := i.d.rule.Load()
	if r == nil || !r.match(op.Path) {
		return nil
	}
	var kind Op
	switch op.Kind {
	case errorfs.OpFileWrite, errorfs.OpFileWriteAt:
		kind = Write
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
		kind = Sync
	case errorfs.OpFileRead, errorfs.OpFileReadAt:
		kind = Read
	default:
		return nil
	}
	if kind != r.op {
		return nil
	}
	if r.to > 0 {
		// errorfs gives the offset, not the length: a block's read starts
		// in the range or covers it (blocks are 4 KiB or larger).
		at := op.Offset
		if (op.Kind != errorfs.OpFileReadAt && op.Kind != errorfs.OpFileWriteAt) || at >= r.to || at+4096 <= r.from {
			return nil
		}
	}
	i.d.injected.Add(1)
	return &os.PathError{Op: "faultfs", Path: op.Path, Err: r.err}
}

// charge allocates name's bytes up to end, or fails with ENOSPC.
func (d *Disk) charge(name string, end int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	u := d.files[name]
	if u == nil {
		u = &usage{}
		d.files[name] = u
	}
	if end <= u.alloc {
		return nil
	}
	if d.capacity > 0 && d.used+end-u.alloc > d.capacity {
		d.injected.Add(1)
		return &os.PathError{Op: "write", Path: name, Err: syscall.ENOSPC}
	}
	d.used += end - u.alloc
	u.alloc = end
	return nil
}

func (d *Disk) drop(name string) {
	if u := d.files[name]; u != nil {
		d.used -= u.alloc
		delete(d.files, name)
	}
}

func (d *Disk) file(name string, f vfs.File, off int64) vfs.File {
	if f == nil {
		return nil
	}
	return &file{File: f, d: d, name: name, off: off}
}

func (d *Disk) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := d.FS.Create(name, c)
	if err == nil {
		d.mu.Lock()
		d.drop(name)
		d.files[name] = &usage{}
		d.mu.Unlock()
	}
	return d.file(name, f, 0), err
}

func (d *Disk) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := d.FS.ReuseForWrite(oldname, newname, c)
	if err == nil {
		d.mu.Lock()
		d.move(oldname, newname)
		d.mu.Unlock()
	}
	return d.file(newname, f, 0), err
}

func (d *Disk) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := d.FS.OpenReadWrite(name, c, opts...)
	var off int64
	if err == nil {
		if st, serr := f.Stat(); serr == nil {
			off = st.Size()
		}
	}
	return d.file(name, f, off), err
}

func (d *Disk) Remove(name string) error {
	err := d.FS.Remove(name)
	if err == nil {
		d.mu.Lock()
		d.drop(name)
		d.mu.Unlock()
	}
	return err
}

func (d *Disk) Rename(oldname, newname string) error {
	err := d.FS.Rename(oldname, newname)
	if err == nil {
		d.mu.Lock()
		d.move(oldname, newname)
		d.mu.Unlock()
	}
	return err
}

func (d *Disk) move(oldname, newname string) {
	u := d.files[oldname]
	if u == nil {
		return
	}
	d.drop(newname)
	delete(d.files, oldname)
	d.files[newname] = u
}

// GetDiskUsage reports the capacity left (unlimited: 1 TiB).
func (d *Disk) GetDiskUsage(string) (vfs.DiskUsage, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	total := d.capacity
	if total == 0 {
		total = 1 << 40
	}
	avail := max(total-d.used, 0)
	return vfs.DiskUsage{AvailBytes: uint64(avail), TotalBytes: uint64(total), UsedBytes: uint64(d.used)}, nil
}

func (d *Disk) Unwrap() vfs.FS { return d.FS }

// file charges its writes and preallocations to the disk.
type file struct {
	vfs.File
	d    *Disk
	name string
	mu   sync.Mutex
	off  int64 // where Write appends
}

func (f *file) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.d.charge(f.name, f.off+int64(len(p))); err != nil {
		return 0, err
	}
	n, err := f.File.Write(p)
	f.off += int64(n)
	return n, err
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	if err := f.d.charge(f.name, off+int64(len(p))); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *file) Preallocate(off, n int64) error {
	if err := f.d.charge(f.name, off+n); err != nil {
		return err
	}
	return f.File.Preallocate(off, n)
}
