//go:build cgo && linux

package main

/*
#include <malloc.h>

// trim returns the free pages of every malloc arena to the system, and
// reports whether any were (glibc only; elsewhere it does nothing).
static int trim(void) {
#ifdef __GLIBC__
	return malloc_trim(0);
#else
	return 0;
#endif
}
*/
import "C"

// Built with cgo, Pebble allocates its block cache with malloc. Blocks are
// evicted and read again all the time, and glibc keeps the pages they
// freed inside its arenas rather than giving them back: in a soak the
// server's resident memory climbed about 10 MiB a minute past the caches'
// 256 MiB (to 590 MiB in 24 minutes, with the arenas capped at two or not),
// and one malloc_trim gave 174 MiB back at once. serve trims on a timer.
const mallocTrims = true

// trimMalloc returns malloc's free pages to the system.
func trimMalloc() bool { return C.trim() == 1 }
