//go:build cgo && linux

package main

/*
#include <stdlib.h>
#include <malloc.h>

// limitArenas caps glibc's malloc arenas at n, and reports whether it did:
// not where M_ARENA_MAX is unknown (musl), nor when MALLOC_ARENA_MAX is
// set (glibc applied it already).
static int limitArenas(int n) {
#ifdef M_ARENA_MAX
	if (getenv("MALLOC_ARENA_MAX") != NULL) return 0;
	return mallopt(M_ARENA_MAX, n) == 1;
#else
	return 0;
#endif
}

static int arenaLimitKnown(void) {
#ifdef M_ARENA_MAX
	return 1;
#else
	return 0;
#endif
}
*/
import "C"

// mallocArenas is how many malloc arenas serve lets glibc keep. Built with
// cgo, Pebble allocates its block cache with malloc from whichever thread
// reads a block, and glibc gives threads arenas of their own (up to eight
// per core): each arena grew toward the whole cache, and a one-hour soak
// saw resident memory climb past twice the 256 MiB the caches are bounded
// by. Two arenas keep it at the caches plus a little; contention on them
// is negligible next to the reads that fill them.
const mallocArenas = 2

// limitMallocArenas applies mallocArenas; serve calls it before the store
// opens.
func limitMallocArenas() bool { return C.limitArenas(mallocArenas) == 1 }

// arenaLimitKnown reports whether the C library has M_ARENA_MAX (glibc).
func arenaLimitKnown() bool { return C.arenaLimitKnown() == 1 }
