package store

import (
	"context"
	"errors"
	"time"
)

// ErrWritesRefused is returned (wrapped) by every Update that would write,
// and by Sync, while a backend's storage is failing (FaultReporter says
// why). Nothing is written; reads go on as long as the storage can serve
// them.
var ErrWritesRefused = errors.New("store: writes refused: the storage is failing")

// Fault kinds.
const (
	// FaultDiskFull: no space is left for the database. It ends by
	// itself once space is freed.
	FaultDiskFull = "disk_full"
	// FaultWrite: the disk failed a write or a sync (fsync) of the
	// write-ahead log, a table or the manifest. What it held may or may not
	// have reached the disk, so it ends only with a restart, which recovers
	// from what the disk holds (as PostgreSQL does after a failed fsync).
	FaultWrite = "write_error"
	// FaultRead: the disk failed a read. It ends with a restart.
	FaultRead = "read_error"
	// FaultCorruption: stored bytes no longer match their checksum. It ends
	// with a restart once the data is restored.
	FaultCorruption = "corruption"
)

// Fault is why a backend refuses writes.
type Fault struct {
	Kind   string    // a Fault kind above
	Reason string    // what failed, for operators (no secrets, no absolute paths)
	Since  time.Time // when it was first seen
	// Transient is true when the fault ends by itself (disk full: once
	// space is freed); false when it needs a restart of the server, after
	// the storage is repaired.
	Transient bool
}

// FaultReporter is a Backend that tells why it refuses writes.
type FaultReporter interface {
	// Fault returns the fault that makes the backend refuse writes, nil
	// when it accepts them. It may look whether a transient fault has
	// ended (and end it).
	Fault() *Fault
}

// Memory is what a backend holds in caches of its own, in bytes. Pebble
// allocates them outside the Go heap when built with cgo, so they count in
// the process's resident memory but not in Go's memory statistics.
type Memory struct {
	// BlockCache is the block cache in use; Memtables the memtables
	// (active, queued for flushing and kept by readers).
	BlockCache, Memtables int64
	// Limit is what the two may reach together by the store's
	// configuration (a memtable kept by a long read may exceed it briefly).
	Limit int64
}

// MemoryReporter is a Backend that can tell the memory its caches hold.
type MemoryReporter interface {
	Memory() Memory
}

type longCallKey struct{}

// WithLongCall allows the calls made with ctx up to d, in place of the
// backend's own bound on a call (store/pgstore's Options.Timeout, a few
// seconds): for the few transactions that are long by nature, such as an
// org-wide erasure with one read and two deletes per subject key. The
// caller's own deadline still applies. store/pgstore runs such an Update
// in a transaction of its own, never grouped with others.
func WithLongCall(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, longCallKey{}, d)
}

// LongCall returns the bound WithLongCall set on ctx.
func LongCall(ctx context.Context) (time.Duration, bool) {
	d, ok := ctx.Value(longCallKey{}).(time.Duration)
	return d, ok && d > 0
}
