package pebblestore

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestBlockCacheKeepsBlocksBesideMemtables: with memtables as large as the
// block cache, lookups of flushed keys still hit the cache (Pebble reserves
// each memtable's size in it; before the cache was sized for them, every
// read went to the file).
func TestBlockCacheKeepsBlocksBesideMemtables(t *testing.T) {
	const size = 1 << 20
	s, err := Open("", Options{FS: vfs.NewMem(), CacheSize: size, MemTableSize: size})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	b := s.db.NewBatch()
	for i := range 2000 {
		if err := b.Set(fmt.Appendf(nil, "k%05d", i), make([]byte, 100), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(nil); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	// Fill the next memtable so that its reservation is in place.
	b = s.db.NewBatch()
	for i := range 2000 {
		if err := b.Set(fmt.Appendf(nil, "m%05d", i), make([]byte, 100), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(nil); err != nil {
		t.Fatal(err)
	}
	before := s.db.Metrics().BlockCache
	for range 3 {
		for i := 0; i < 2000; i += 100 {
			if _, err := get(s.db, fmt.Appendf(nil, "k%05d", i), "key"); err != nil {
				t.Fatal(err)
			}
		}
	}
	after := s.db.Metrics().BlockCache
	hits, misses := after.Hits-before.Hits, after.Misses-before.Misses
	if hits == 0 || misses > hits {
		t.Fatalf("block cache: %d hits, %d misses over repeated lookups; blocks are not kept", hits, misses)
	}
}
