package core

import "testing"

// TestOldestUnsealed: an org counts as unsealed from its first growth until
// its seal, while it is being sealed, and again with its first growth's
// time when that seal fails; growth after a take does not make it younger.
func TestOldestUnsealed(t *testing.T) {
	g := &growth{}
	if _, ok := g.oldest(); ok {
		t.Fatal("an empty set has an oldest")
	}
	g.add("a")
	first, ok := g.oldest()
	if !ok {
		t.Fatal("a grown org is not unsealed")
	}
	g.add("a") // again: keeps its first time
	g.add("b")
	if at, _ := g.oldest(); !at.Equal(first) {
		t.Fatalf("oldest %v, want a's first growth %v", at, first)
	}
	taken := g.take()
	if len(taken) != 2 {
		t.Fatalf("take = %v", taken)
	}
	if at, ok := g.oldest(); !ok || !at.Equal(first) {
		t.Fatalf("while sealing: oldest %v %v, want %v", at, ok, first)
	}
	g.add("a") // grows during its seal
	g.putBack("a")
	if at, _ := g.oldest(); !at.Equal(first) {
		t.Fatalf("after a failed seal: oldest %v, want the first growth %v", at, first)
	}
	g.sealed("b")
	if got := g.take(); len(got) != 1 || got[0] != "a" {
		t.Fatalf("take = %v, want [a]", got)
	}
	g.sealed("a")
	if at, ok := g.oldest(); ok {
		t.Fatalf("all sealed, yet oldest %v", at)
	}
}
