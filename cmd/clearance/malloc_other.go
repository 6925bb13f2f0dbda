//go:build !cgo || !linux

package main

// Without cgo, Pebble's caches are on the Go heap (memoryLimit) and there
// is no malloc to trim.
const mallocTrims = false

func trimMalloc() bool { return false }
