package federation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/outbound"
)

// jwksServer serves the JWKS of the keys it is set to and counts fetches.
type jwksServer struct {
	mu      sync.Mutex
	keys    []grant.Key
	status  int
	fetches atomic.Int32
	srv     *httptest.Server
}

func newJWKSServer(t *testing.T, keys ...grant.Key) *jwksServer {
	j := &jwksServer{keys: keys, status: http.StatusOK}
	j.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		j.fetches.Add(1)
		j.mu.Lock()
		defer j.mu.Unlock()
		if j.status != http.StatusOK {
			w.WriteHeader(j.status)
			return
		}
		set := map[string]any{"keys": []any{}}
		var ks []any
		for _, k := range j.keys {
			ks = append(ks, k.PublicJWK())
		}
		set["keys"] = ks
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(j.srv.Close)
	return j
}

func (j *jwksServer) set(status int, keys ...grant.Key) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.status, j.keys = status, keys
}

func key(t *testing.T, b byte) grant.Key {
	t.Helper()
	k, err := grant.KeyFromSeed(bytes.Repeat([]byte{b}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// The cache serves a fetched set for KeyTTL, fetches again on an unknown
// kid no sooner than KeyRefetchInterval after the last fetch, and drops a
// key the issuer stopped publishing once it fetched again; an issuer that
// does not answer is unavailable, never "no such key". All by the clock
// it is given: no sleeps.
func TestKeyCache(t *testing.T) {
	k1, k2 := key(t, 1), key(t, 2)
	j := newJWKSServer(t, k1)
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	c := newKeyCache(outbound.New(outbound.Options{AllowPrivate: true}), core.Clock(func() time.Time { return now }))
	ctx, url := context.Background(), j.srv.URL+"/jwks.json"
	get := func(kid string) error {
		_, err := c.key(ctx, url, kid)
		return err
	}
	if err := get(k1.KID()); err != nil || j.fetches.Load() != 1 {
		t.Fatalf("first: %v, %d fetches", err, j.fetches.Load())
	}
	if err := get(k1.KID()); err != nil || j.fetches.Load() != 1 {
		t.Fatalf("cached: %v, %d fetches", err, j.fetches.Load())
	}
	// The issuer rotates to k2: an unknown kid within the interval is
	// unknown without a fetch; after it, fetched again and found.
	j.set(http.StatusOK, k2)
	if err := get(k2.KID()); !errors.Is(err, grant.ErrUnknownKey) || j.fetches.Load() != 1 {
		t.Fatalf("within the refetch interval: %v, %d fetches", err, j.fetches.Load())
	}
	now = now.Add(KeyRefetchInterval)
	if err := get(k2.KID()); err != nil || j.fetches.Load() != 2 {
		t.Fatalf("after the interval: %v, %d fetches", err, j.fetches.Load())
	}
	// k1 is gone from the fetched set: refused without asking again.
	if err := get(k1.KID()); !errors.Is(err, grant.ErrUnknownKey) || j.fetches.Load() != 2 {
		t.Fatalf("a key no longer published: %v, %d fetches", err, j.fetches.Load())
	}
	// After KeyTTL the set is fetched again even for a known kid; an
	// issuer that fails then is unavailable.
	j.set(http.StatusBadGateway)
	now = now.Add(KeyTTL)
	if err := get(k2.KID()); !errors.Is(err, errUnavailable) || j.fetches.Load() != 3 {
		t.Fatalf("an issuer that fails: %v, %d fetches", err, j.fetches.Load())
	}
	// The issuer answers again: its keys are fetched and used again.
	j.set(http.StatusOK, k2)
	now = now.Add(KeyRefetchInterval)
	if err := get(k2.KID()); err != nil {
		t.Fatal(err)
	}
}

// The outbound guard applies: without AllowPrivate a loopback JWKS is
// never fetched.
func TestKeyCacheGuard(t *testing.T) {
	j := newJWKSServer(t, key(t, 1))
	c := newKeyCache(outbound.New(outbound.Options{}), core.Clock(time.Now))
	if _, err := c.key(context.Background(), j.srv.URL, key(t, 1).KID()); !errors.Is(err, errUnavailable) || j.fetches.Load() != 0 {
		t.Fatalf("a loopback JWKS: %v, %d fetches", err, j.fetches.Load())
	}
}

func TestParseJWKS(t *testing.T) {
	k := key(t, 1)
	pub, _ := json.Marshal(k.PublicJWK())
	for name, c := range map[string]struct {
		raw  string
		ok   bool
		priv bool
	}{
		"one key":        {`{"keys":[` + string(pub) + `]}`, true, false},
		"private member": {`{"keys":[` + string(pub[:len(pub)-1]) + `,"d":"AAAA"}]}`, false, true},
		"no keys":        {`{"keys":[]}`, false, false},
		"not Ed25519":    {`{"keys":[{"kty":"EC","kid":"e"}]}`, false, false},
		"twice":          {`{"keys":[` + string(pub) + `,` + string(pub) + `]}`, false, false},
		"not a set":      {`[]`, false, false},
	} {
		_, err := parseJWKS([]byte(c.raw))
		if (err == nil) != c.ok || errors.Is(err, grant.ErrPrivateKeyMaterial) != c.priv {
			t.Errorf("%s: %v", name, err)
		}
	}
}
