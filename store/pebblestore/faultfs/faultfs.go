// Package faultfs is a disk for fault tests of a pebblestore that fails as
// a real one does. A Disk has a capacity: a write or preallocation beyond
// it fails with ENOSPC, and removing a file frees its space. Fail injects
// an I/O error into chosen operations on chosen files, FailAt into the
// reads or writes of chosen bytes (bad sectors). Both sit on Pebble's
// crashable in-memory filesystem, so a test can cut the power after a
// fault (CrashClone keeps only what was synced) and reopen the store on
// what is left. (Pebble's errorfs does not wrap the files it reuses for the
// write-ahead log, so errors are injected here, by the file.)
//
// It is test support: only tests import it.
package faultfs

import (
	"bytes"
	"context"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/cockroachdb/pebble/v2/vfs"
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
	vfs.FS   // mem
	mem      *vfs.MemFS
	rule     atomic.Pointer[rule]
	injected atomic.Int64
	created  atomic.Pointer[func(name string)]

	mu       sync.Mutex
	capacity int64 // 0: unlimited
	used     int64
	files    map[string]*usage
}

// usage is one file's allocated bytes.
type usage struct{ alloc int64 }

type rule struct {
	op    Op
	match func(name string) bool
	at    []int64 // a ReadAt or WriteAt fails when it touches one of these bytes (none: every one fails)
	err   error
}

// New returns an empty disk of unlimited capacity.
func New() *Disk {
	d := &Disk{mem: vfs.NewCrashableMem(), files: map[string]*usage{}}
	d.FS = d.mem
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

// FailAt is Fail for the reads or writes at an offset (ReadAt, WriteAt)
// that touch one of the bytes at of the file: bad sectors.
func (d *Disk) FailAt(op Op, match func(name string) bool, at []int64, err error) {
	d.rule.Store(&rule{op: op, match: match, at: at, err: err})
}

// OnCreate makes fn hear of each file created (or reused for writing)
// from now on, after its creation: a test can break the disk at a chosen
// moment of the store's life (nil: none).
func (d *Disk) OnCreate(fn func(name string)) {
	if fn == nil {
		d.created.Store(nil)
		return
	}
	d.created.Store(&fn)
}

func (d *Disk) hearCreate(name string) {
	if fn := d.created.Load(); fn != nil {
		(*fn)(name)
	}
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
		d.hearCreate(name)
	}
	return d.file(name, f, 0), err
}

func (d *Disk) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := d.FS.ReuseForWrite(oldname, newname, c)
	if err == nil {
		d.mu.Lock()
		d.move(oldname, newname)
		d.mu.Unlock()
		d.hearCreate(newname)
	}
	return d.file(newname, f, 0), err
}

func (d *Disk) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := d.FS.Open(name, opts...)
	return d.file(name, f, 0), err
}

func (d *Disk) OpenDir(name string) (vfs.File, error) {
	f, err := d.FS.OpenDir(name)
	return d.file(name, f, 0), err
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
	if err := f.d.inject(Write, f.name, -1, len(p)); err != nil {
		return 0, err
	}
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
	if err := f.d.inject(Write, f.name, off, len(p)); err != nil {
		return 0, err
	}
	if err := f.d.charge(f.name, off+int64(len(p))); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *file) Read(p []byte) (int, error) {
	if err := f.d.inject(Read, f.name, -1, len(p)); err != nil {
		return 0, err
	}
	return f.File.Read(p)
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if err := f.d.inject(Read, f.name, off, len(p)); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *file) Sync() error {
	if err := f.d.inject(Sync, f.name, -1, 0); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *file) SyncData() error {
	if err := f.d.inject(Sync, f.name, -1, 0); err != nil {
		return err
	}
	return f.File.SyncData()
}

func (f *file) SyncTo(length int64) (bool, error) {
	if err := f.d.inject(Sync, f.name, -1, 0); err != nil {
		return false, err
	}
	return f.File.SyncTo(length)
}

// inject returns the error a rule makes op fail with on the n bytes at
// off of the file name (off -1: no offset, as for Read, Write and syncs),
// nil when none applies.
func (d *Disk) inject(op Op, name string, off int64, n int) error {
	r := d.rule.Load()
	if r == nil || r.op != op || !r.match(name) {
		return nil
	}
	if len(r.at) > 0 {
		hit := false
		for _, b := range r.at {
			hit = hit || (off >= 0 && b >= off && b < off+int64(n))
		}
		if !hit {
			return nil
		}
	}
	d.injected.Add(1)
	return &os.PathError{Op: "faultfs", Path: name, Err: r.err}
}

func (f *file) Preallocate(off, n int64) error {
	if err := f.d.charge(f.name, off+n); err != nil {
		return err
	}
	return f.File.Preallocate(off, n)
}

// BlocksHolding returns, for each data block of the table at path that
// holds needle once decompressed, the offset of a byte in the middle of
// the block as stored: flipping it (FlipByte) or failing its read (FailAt)
// damages that block and no other.
func BlocksHolding(fs vfs.FS, path string, needle []byte) ([]int64, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	r, err := sstable.NewReader(context.Background(), readable, sstable.ReaderOptions{})
	if err != nil {
		_ = readable.Close()
		return nil, err
	}
	defer r.Close()
	layout, err := r.Layout()
	if err != nil {
		return nil, err
	}
	raw, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	var at []int64
	for _, h := range layout.Data {
		stored := make([]byte, h.Length+block.TrailerLen)
		if _, err := raw.ReadAt(stored, int64(h.Offset)); err != nil {
			return nil, err
		}
		data, ci := stored[:h.Length], block.CompressionIndicator(stored[h.Length])
		if ci != block.NoCompressionIndicator {
			n, err := block.DecompressedLen(ci, data)
			if err != nil {
				return nil, err
			}
			plain := make([]byte, n)
			if err := block.DecompressInto(ci, data, plain); err != nil {
				return nil, err
			}
			data = plain
		}
		if bytes.Contains(data, needle) {
			at = append(at, int64(h.Offset+h.Length/2))
		}
	}
	return at, nil
}
