package pebblestore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance/ledger/ledgertest"
	"github.com/clearancehq/clearance/store"
)

// countingFS counts WAL syncs, to show how many commits share one fsync.
type countingFS struct {
	vfs.FS
	syncs atomic.Int64
}

func (c *countingFS) wrap(f vfs.File, err error, category vfs.DiskWriteCategory) (vfs.File, error) {
	if err != nil || category != "pebble-wal" {
		return f, err
	}
	return &countingFile{File: f, c: c}, nil
}

func (c *countingFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := c.FS.Create(name, cat)
	return c.wrap(f, err, cat)
}

func (c *countingFS) ReuseForWrite(oldname, newname string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := c.FS.ReuseForWrite(oldname, newname, cat)
	return c.wrap(f, err, cat)
}

type countingFile struct {
	vfs.File
	c *countingFS
}

func (f *countingFile) Sync() error     { f.c.syncs.Add(1); return f.File.Sync() }
func (f *countingFile) SyncData() error { f.c.syncs.Add(1); return f.File.SyncData() }

// openDisk opens a store on real disk in a temporary directory.
func openDisk(b *testing.B) (*Store, *countingFS) {
	b.Helper()
	fs := &countingFS{FS: vfs.Default}
	s, err := Open(b.TempDir(), Options{FS: fs, Logger: quiet{}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s, fs
}

func reportSyncs(b *testing.B, fs *countingFS, before int64) {
	b.ReportMetric(float64(fs.syncs.Load()-before)/float64(b.N), "fsyncs/op")
}

// BenchmarkUpdateSync records one dossier and its ledger entry per Update,
// sequentially, on real disk: one fsync per Update.
func BenchmarkUpdateSync(b *testing.B) {
	s, fs := openDisk(b)
	ctx := context.Background()
	before := fs.syncs.Load()
	n := 0
	for b.Loop() {
		if err := decide(ctx, s, "org_a", n); err != nil {
			b.Fatal(err)
		}
		n++
	}
	reportSyncs(b, fs, before)
}

// BenchmarkUpdateSyncParallel runs the same Update from many goroutines,
// each on its own org or all on one org; group commit lets concurrent
// commits share an fsync (fsyncs/op < 1).
func BenchmarkUpdateSyncParallel(b *testing.B) {
	for _, orgs := range []int{16, 1} {
		b.Run(fmt.Sprintf("orgs=%d", orgs), func(b *testing.B) {
			s, fs := openDisk(b)
			ctx := context.Background()
			var workers, seq atomic.Int64
			before := fs.syncs.Load()
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				org := fmt.Sprintf("org_%d", workers.Add(1)%int64(orgs))
				for pb.Next() {
					if err := decide(ctx, s, org, int(seq.Add(1))); err != nil {
						b.Error(err)
						return
					}
				}
			})
			reportSyncs(b, fs, before)
		})
	}
}

// BenchmarkLedgerTree runs ledgertest's benchmarks (Seal of 1,000 new
// entries, an inclusion proof at size 100,000) on real disk.
func BenchmarkLedgerTree(b *testing.B) {
	ledgertest.Benchmark(b, func(b *testing.B) store.Backend {
		s, _ := openDisk(b)
		return s
	})
}
