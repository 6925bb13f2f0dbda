package pebblestore

import (
	"bytes"
	"testing"
	"time"
)

func TestClaimKeyLayout(t *testing.T) {
	// A kind and a kid cannot be confused, nor a state and an issue time.
	if bytes.Equal(regKeyKey("o", "ab", "c"), regKeyKey("o", "a", "bc")) {
		t.Fatal("registered key keys collide")
	}
	p := grantStatePrefix("o", "CLAIMED", 0)
	for _, st := range []string{"CLAIME", "CLAIMEDX", "C"} {
		if bytes.HasPrefix(grantStateKey("o", st, at, "g"), p) {
			t.Fatalf("state %q is listed under CLAIMED", st)
		}
	}
	// Grants sort by issue time, then id, within a state.
	a, b := grantStateKey("o", "ISSUED", at, "z"), grantStateKey("o", "ISSUED", at.Add(time.Nanosecond), "a")
	if bytes.Compare(a, b) >= 0 {
		t.Fatal("state index does not sort by issue time")
	}
}
