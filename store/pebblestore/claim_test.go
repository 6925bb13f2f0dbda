package pebblestore

import (
	"bytes"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance/claim/claimtest"
	"github.com/clearancehq/clearance/store"
)

func TestClaim(t *testing.T) {
	claimtest.Run(t, claimtest.Harness{
		Open: func(t *testing.T, now func() time.Time) store.Backend {
			t.Helper()
			s, err := Open("db", Options{FS: vfs.NewMem(), Logger: quiet{}, Now: now})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			return s
		},
		DeleteScope: func(t *testing.T, b store.Backend, orgID, scope string) {
			t.Helper()
			if err := b.(*Store).db.Delete(scopeKey(orgID, scope), pebble.Sync); err != nil {
				t.Fatal(err)
			}
		},
	})
}

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
