//go:build cgo && linux

package main

import (
	"os"
	"testing"
)

// TestLimitMallocArenas: serve caps glibc's arenas unless MALLOC_ARENA_MAX
// says otherwise (glibc read it at start-up).
func TestLimitMallocArenas(t *testing.T) {
	if !arenaLimitKnown() {
		t.Skip("not glibc: no M_ARENA_MAX")
	}
	t.Setenv("MALLOC_ARENA_MAX", "4")
	if limitMallocArenas() {
		t.Fatal("MALLOC_ARENA_MAX set: serve still chose its own arena count")
	}
	t.Setenv("MALLOC_ARENA_MAX", "")
	if err := os.Unsetenv("MALLOC_ARENA_MAX"); err != nil {
		t.Fatal(err)
	}
	if !limitMallocArenas() {
		t.Fatal("glibc refused M_ARENA_MAX")
	}
}
