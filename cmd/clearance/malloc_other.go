//go:build !cgo || !linux

package main

// limitMallocArenas does nothing without cgo (Pebble's caches are then on
// the Go heap: memoryLimit) or off Linux.
func limitMallocArenas() bool { return false }
