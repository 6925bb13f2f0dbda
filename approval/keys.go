package approval

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/strictjson"
)

// Limits of the key cache.
const (
	maxKeySets = 256 // base URLs whose key sets are kept
	maxKeys    = 64  // keys read from one key set
)

// keySet is the cached JWKS of one base URL.
type keySet struct {
	keys     map[string]ed25519.PublicKey // nil until a fetch succeeded
	fetched  time.Time                    // when keys was fetched
	inflight *keyFetch                    // the fetch under way, if any
}

// keyFetch is one fetch that every caller needing it waits for.
type keyFetch struct {
	done chan struct{}
	err  error // set before done is closed
}

// PublicKey implements Service. Key sets are fetched from
// {base}/.well-known/jwks.json without the credential, cached per base URL
// for KeyTTL and fetched again, at most once per call and not within
// KeyRefetchInterval of the last fetch, when kid is not in them.
// Concurrent callers share one fetch, which runs to completion even when
// the caller that started it gives up. A kid still unknown after a fetch
// wraps grant.ErrUnknownKey; a kid unknown within the interval, and every
// failure to fetch or read the set, is ErrUnavailable.
func (h *HTTP) PublicKey(ctx context.Context, ep Endpoint, kid string) (ed25519.PublicKey, error) {
	if err := ep.Validate(); err != nil {
		return nil, err
	}
	base := ep.base()
	fetched := false // at most one fetch per call
	for {
		h.mu.Lock()
		s := h.set(base)
		now := h.now()
		age := now.Sub(s.fetched)
		if s.keys != nil && age < h.ttl {
			if k, ok := s.keys[kid]; ok {
				h.mu.Unlock()
				return append(ed25519.PublicKey(nil), k...), nil
			}
			if fetched {
				h.mu.Unlock()
				return nil, fmt.Errorf("approval: kid %q is not in the key set of %s: %w", truncate(kid), origin(base), grant.ErrUnknownKey)
			}
			if s.inflight == nil && age < h.every {
				h.mu.Unlock()
				return nil, fail(ErrUnavailable, "kid %q is not in the key set of %s fetched %s ago; it is fetched again no sooner than %s after",
					truncate(kid), origin(base), age.Round(time.Millisecond), h.every)
			}
		} else if fetched {
			// The fetch this call waited for succeeded but is already
			// stale (a clock jump): do not loop.
			h.mu.Unlock()
			return nil, fail(ErrUnavailable, "the key set of %s expired as it was fetched", origin(base))
		}
		f := s.inflight
		if f == nil {
			f = &keyFetch{done: make(chan struct{})}
			s.inflight = f
			go h.fetch(context.WithoutCancel(ctx), ep, base, s, f)
		}
		h.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, fail(ErrUnavailable, "waiting for the key set of %s: %w", origin(base), ctx.Err())
		}
		if f.err != nil {
			return nil, f.err
		}
		fetched = true
	}
}

// set returns the key set of base, making room for it when it is new.
// h.mu is held.
func (h *HTTP) set(base string) *keySet {
	if s, ok := h.sets[base]; ok {
		return s
	}
	if len(h.sets) >= maxKeySets {
		now := h.now()
		for b, s := range h.sets { // stale sets first
			if s.inflight == nil && now.Sub(s.fetched) >= h.ttl {
				delete(h.sets, b)
			}
		}
		for b, s := range h.sets { // then any idle one
			if len(h.sets) < maxKeySets {
				break
			}
			if s.inflight == nil {
				delete(h.sets, b)
			}
		}
	}
	s := &keySet{}
	h.sets[base] = s
	return s
}

// fetch reads the key set of base and stores it in s, then ends f. It is
// bounded by the outbound client's timeout.
func (h *HTTP) fetch(ctx context.Context, ep Endpoint, base string, s *keySet, f *keyFetch) {
	keys, err := h.readKeys(ctx, ep)
	h.mu.Lock()
	if err == nil {
		s.keys, s.fetched = keys, h.now()
	}
	s.inflight = nil
	f.err = err
	h.mu.Unlock()
	close(f.done)
}

func (h *HTTP) readKeys(ctx context.Context, ep Endpoint) (map[string]ed25519.PublicKey, error) {
	resp, err := h.call(ctx, ep, http.MethodGet, PathJWKS, nil, false)
	if err != nil {
		return nil, err
	}
	op := "GET " + origin(ep.BaseURL) + PathJWKS
	if resp.StatusCode != http.StatusOK {
		return nil, fail(ErrUnavailable, "%s", describe(op, ep, resp))
	}
	bad := func(format string, args ...any) (map[string]ed25519.PublicKey, error) {
		return nil, fail(ErrUnavailable, "%s: malformed key set: "+format, append([]any{op}, args...)...)
	}
	if !isJSON(resp.Header.Get("Content-Type")) {
		return bad("Content-Type %q is not JSON", truncate(resp.Header.Get("Content-Type")))
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := strictjson.Decode(resp.Body, &set, strictjson.Options{}); err != nil {
		return bad("%v", err)
	}
	if len(set.Keys) > maxKeys {
		return bad("more than %d keys", maxKeys)
	}
	keys := make(map[string]ed25519.PublicKey, len(set.Keys))
	for i, raw := range set.Keys {
		pub, kid, err := grant.ParsePublicJWK(raw)
		switch {
		case errors.Is(err, grant.ErrPrivateKeyMaterial):
			return bad("key %d carries private key material", i)
		case err != nil || kid == "":
			continue // not an Ed25519 verification key with a kid: not ours to use (RFC 7517 §5)
		}
		if _, dup := keys[kid]; dup {
			return bad("kid %q appears twice", truncate(kid))
		}
		keys[kid] = pub
	}
	if len(keys) == 0 {
		return bad("no Ed25519 key with a kid")
	}
	return keys, nil
}
