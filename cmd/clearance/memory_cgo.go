//go:build cgo

package main

// storeCachesOnGoHeap: built with cgo, Pebble allocates its block cache
// and memtables with malloc, outside the Go heap.
const storeCachesOnGoHeap = false
