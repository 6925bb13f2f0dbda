//go:build !cgo

package main

// storeCachesOnGoHeap: built without cgo, Pebble takes its block cache and
// memtables from the Go heap (memoryLimit).
const storeCachesOnGoHeap = true
