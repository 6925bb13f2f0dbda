package pebblestore

import "testing"

// TestWALSyncSpacedOnlyUnderLoad: a lone commit's sync is never delayed;
// once several commits wait for one, syncs are spaced so that they share
// it.
func TestWALSyncSpacedOnlyUnderLoad(t *testing.T) {
	s := &Store{}
	for waiting := int64(0); waiting < busySyncWaiters; waiting++ {
		s.unsynced.Store(waiting)
		if d := s.walSyncInterval(); d != 0 {
			t.Fatalf("%d commits waiting: sync delayed %v; want at once", waiting, d)
		}
	}
	s.unsynced.Store(busySyncWaiters)
	if d := s.walSyncInterval(); d != busySyncInterval {
		t.Fatalf("%d commits waiting: interval %v; want %v", busySyncWaiters, d, busySyncInterval)
	}
}
