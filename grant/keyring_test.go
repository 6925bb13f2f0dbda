package grant

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func jwksKIDs(set jose.JSONWebKeySet) []string {
	var kids []string
	for _, k := range set.Keys {
		kids = append(kids, k.KeyID)
	}
	return kids
}

func TestRotateKeepsOldKeyUntilKeepUntil(t *testing.T) {
	k1, k2 := seedKey(t, 1), seedKey(t, 2)
	drain := 150 * time.Second // grant lifetime 120 s + lease 30 s
	r1 := NewKeyRing(k1)
	r2 := r1.Rotate(k2, t0, drain)

	if !r2.Active().Equal(k2) {
		t.Fatalf("Active after Rotate = %v, want %v", r2.Active(), k2)
	}
	if !r1.Active().Equal(k1) || len(r1.Previous()) != 0 {
		t.Fatal("Rotate changed the original ring")
	}
	prev := r2.Previous()
	if len(prev) != 1 || !prev[0].Key.Equal(k1) || !prev[0].RetiredAt.Equal(t0) || !prev[0].KeepUntil.Equal(t0.Add(drain)) {
		t.Fatalf("Previous = %+v", prev)
	}

	for _, tc := range []struct {
		at   time.Time
		want []string
	}{
		{t0, []string{k2.KID(), k1.KID()}},
		{t0.Add(drain - time.Nanosecond), []string{k2.KID(), k1.KID()}},
		{t0.Add(drain), []string{k2.KID()}},
		{t0.Add(24 * time.Hour), []string{k2.KID()}},
	} {
		if got := jwksKIDs(r2.JWKS(tc.at)); !slices.Equal(got, tc.want) {
			t.Errorf("JWKS(t0+%v) kids = %v, want %v", tc.at.Sub(t0), got, tc.want)
		}
	}

	// Lookup applies KeepUntil as the JWKS does; Prune drops the key.
	if k, ok := r2.Lookup(k1.KID(), t0.Add(drain-time.Nanosecond)); !ok || !k.Equal(k1) {
		t.Fatal("Lookup of the previous key before KeepUntil failed")
	}
	if _, ok := r2.Lookup(k1.KID(), t0.Add(drain)); ok {
		t.Fatal("Lookup found the previous key at KeepUntil")
	}
	if r2.Prune(t0.Add(drain-time.Nanosecond)) != r2 {
		t.Error("Prune before KeepUntil returned a different ring")
	}
	pruned := r2.Prune(t0.Add(drain))
	if _, ok := pruned.Lookup(k1.KID(), t0); ok {
		t.Error("Lookup found a pruned key")
	}
	if _, ok := r2.Lookup(k1.KID(), t0); !ok {
		t.Error("Prune changed the original ring")
	}
	if k, ok := pruned.Lookup(k2.KID(), t0.Add(24*time.Hour)); !ok || !k.Equal(k2) {
		t.Error("Prune lost the active key")
	}
}

// A revoked key is neither published nor found, at once, and stays revoked
// across rotations and pruning; the active key cannot be revoked.
func TestRevokedKeyIsRefusedAtOnce(t *testing.T) {
	k1, k2, k3 := seedKey(t, 1), seedKey(t, 2), seedKey(t, 3)
	r := NewKeyRing(k1).Rotate(k2, t0, time.Hour)
	revoked, err := r.Revoke(k1.KID(), t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := revoked.Lookup(k1.KID(), t0.Add(time.Minute)); ok {
		t.Fatal("Lookup found a revoked key within its KeepUntil")
	}
	if _, ok := r.Lookup(k1.KID(), t0.Add(time.Minute)); !ok {
		t.Fatal("Revoke changed the original ring")
	}
	if got := jwksKIDs(revoked.JWKS(t0.Add(time.Minute))); !slices.Equal(got, []string{k2.KID()}) {
		t.Fatalf("JWKS after revocation = %v, want only the active key", got)
	}
	if got := revoked.Revoked(); len(got) != 1 || got[0].KID != k1.KID() || !got[0].RevokedAt.Equal(t0.Add(time.Minute)) || len(revoked.Previous()) != 0 {
		t.Fatalf("Revoked = %+v, Previous = %+v", got, revoked.Previous())
	}
	if again, err := revoked.Revoke(k1.KID(), t0.Add(time.Hour)); err != nil || again != revoked {
		t.Fatalf("revoking again: %v (same ring %v)", err, again == revoked)
	}
	if _, err := revoked.Revoke(k2.KID(), t0); !errors.Is(err, ErrRevokeActive) {
		t.Fatalf("revoking the active key: %v, want ErrRevokeActive", err)
	}
	later := revoked.Rotate(k3, t0.Add(2*time.Minute), time.Hour).Prune(t0.Add(3 * time.Hour))
	if got := later.Revoked(); len(got) != 1 || got[0].KID != k1.KID() {
		t.Fatalf("Revoked after Rotate and Prune = %+v", got)
	}
	// The leaked active key: rotate away (no drain), then revoke it.
	fresh, err := later.Rotate(k2, t0.Add(4*time.Hour), 0).Revoke(k3.KID(), t0.Add(4*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fresh.Lookup(k3.KID(), t0.Add(4*time.Hour)); ok || !fresh.Active().Equal(k2) {
		t.Fatal("the revoked former active key is still found")
	}
	defer func() {
		if recover() == nil {
			t.Error("Rotate to a revoked key did not panic")
		}
	}()
	fresh.Rotate(k1, t0.Add(5*time.Hour), 0)
}

func TestRotateChain(t *testing.T) {
	k1, k2, k3 := seedKey(t, 1), seedKey(t, 2), seedKey(t, 3)
	r := NewKeyRing(k1).
		Rotate(k2, t0, time.Hour).
		Rotate(k3, t0.Add(time.Minute), time.Hour)
	if got, want := jwksKIDs(r.JWKS(t0.Add(2*time.Minute))), []string{k3.KID(), k2.KID(), k1.KID()}; !slices.Equal(got, want) {
		t.Fatalf("JWKS kids = %v, want %v (active, then newest retired first)", got, want)
	}
	if got, want := jwksKIDs(r.JWKS(t0.Add(time.Hour))), []string{k3.KID(), k2.KID()}; !slices.Equal(got, want) {
		t.Fatalf("JWKS at k1's KeepUntil = %v, want %v", got, want)
	}

	if r.Rotate(k3, t0.Add(time.Hour), time.Hour) != r {
		t.Error("rotating to the active key changed the ring")
	}
	// Reinstating a previous key removes it from the previous list.
	back := r.Rotate(k1, t0.Add(2*time.Minute), time.Hour)
	if !back.Active().Equal(k1) {
		t.Fatal("reinstate failed")
	}
	if got, want := jwksKIDs(back.JWKS(t0.Add(2*time.Minute))), []string{k1.KID(), k3.KID(), k2.KID()}; !slices.Equal(got, want) {
		t.Fatalf("after reinstating: %v, want %v", got, want)
	}

	// Negative drain retires at once.
	neg := NewKeyRing(k1).Rotate(k2, t0, -time.Hour)
	if got := jwksKIDs(neg.JWKS(t0)); !slices.Equal(got, []string{k2.KID()}) {
		t.Fatalf("negative drain: JWKS = %v", got)
	}
}

func TestNewKeyRingNormalizesPrevious(t *testing.T) {
	k1, k2, k3 := seedKey(t, 1), seedKey(t, 2), seedKey(t, 3)
	r := NewKeyRing(k1,
		RetiredKey{Key: k2, RetiredAt: t0, KeepUntil: t0.Add(time.Minute)},
		RetiredKey{Key: k1, RetiredAt: t0, KeepUntil: t0.Add(time.Hour)}, // the active key
		RetiredKey{Key: Key{}, KeepUntil: t0.Add(time.Hour)},             // zero
		RetiredKey{Key: k2, RetiredAt: t0, KeepUntil: t0.Add(time.Hour)}, // repeat, later wins
		RetiredKey{Key: k3, RetiredAt: t0, KeepUntil: t0.Add(time.Second)},
	)
	prev := r.Previous()
	if len(prev) != 2 || !prev[0].Key.Equal(k2) || !prev[0].KeepUntil.Equal(t0.Add(time.Hour)) || !prev[1].Key.Equal(k3) {
		t.Fatalf("Previous = %+v", prev)
	}
	prev[0].Key = k3 // a copy
	if !r.Previous()[0].Key.Equal(k2) {
		t.Fatal("Previous returned the ring's own slice")
	}
}

func TestJWKSHasNoPrivateMembers(t *testing.T) {
	r := NewKeyRing(rfcKey(t)).Rotate(seedKey(t, 9), t0, time.Hour)
	raw, err := json.Marshal(r.JWKS(t0))
	if err != nil {
		t.Fatal(err)
	}
	var set struct {
		Keys []map[string]json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(raw, &set); err != nil {
		t.Fatal(err)
	}
	if len(set.Keys) != 2 {
		t.Fatalf("JWKS has %d keys, want 2: %s", len(set.Keys), raw)
	}
	for _, k := range set.Keys {
		for name := range k {
			for _, p := range privateMembers {
				if strings.EqualFold(name, p) {
					t.Errorf("JWKS key has private member %q: %s", name, raw)
				}
			}
		}
	}
	// Parsed back with go-jose, every key is public.
	var parsed jose.JSONWebKeySet
	if err := json.Unmarshal(raw, &parsed); err != nil {
		t.Fatal(err)
	}
	for _, k := range parsed.Keys {
		if !k.IsPublic() {
			t.Errorf("key %s is not public", k.KeyID)
		}
	}
	if strings.Contains(string(raw), rfcD) {
		t.Fatal("JWKS contains the seed")
	}
}

func TestNilAndZeroRing(t *testing.T) {
	var r *KeyRing
	if !r.Active().IsZero() || r.Previous() != nil || r.Prune(t0) != nil {
		t.Fatal("nil ring is not empty")
	}
	if _, ok := r.Lookup("x", t0); ok {
		t.Fatal("nil ring Lookup found a key")
	}
	raw, _ := json.Marshal(r.JWKS(t0))
	if string(raw) != `{"keys":[]}` {
		t.Fatalf("nil ring JWKS = %s", raw)
	}
	if got := r.Rotate(seedKey(t, 1), t0, time.Hour); !got.Active().Equal(seedKey(t, 1)) {
		t.Fatal("Rotate on a nil ring")
	}
	if _, ok := NewKeyRing(seedKey(t, 1)).Lookup("", t0); ok {
		t.Fatal(`Lookup("") found a key`)
	}
	for name, f := range map[string]func(){
		"NewKeyRing": func() { NewKeyRing(Key{}) },
		"Rotate":     func() { NewKeyRing(seedKey(t, 1)).Rotate(Key{}, t0, 0) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s with the zero Key did not panic", name)
				}
			}()
			f()
		}()
	}
}

func TestKeyRingConcurrentReaders(t *testing.T) {
	r := NewKeyRing(seedKey(t, 1)).Rotate(seedKey(t, 2), t0, time.Hour)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 100 {
				_ = r.JWKS(t0)
				_, _ = r.Lookup(seedKey(t, 1).KID(), t0)
				_ = r.Prune(t0.Add(time.Duration(i) * time.Hour))
				_, _ = r.Active().Sign([]byte("m"))
			}
		})
	}
	wg.Wait()
}
