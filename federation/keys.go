package federation

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/outbound"
)

// maxCachedSets bounds the JWKS URLs whose keys are kept.
const maxCachedSets = 1024

// keyCache keeps the fetched JWKS of trusted issuers by URL. The keys are
// public, so orgs that trust the same URL share its entry.
type keyCache struct {
	client *outbound.Client
	clock  core.Clock
	mu     sync.Mutex
	sets   map[string]*cachedSet
}

// cachedSet is one URL's keys; its mutex is held while it is fetched, so
// concurrent callers share one fetch.
type cachedSet struct {
	mu      sync.Mutex
	keys    map[string]ed25519.PublicKey // nil until a fetch succeeded
	fetched time.Time                    // of keys
	tried   time.Time                    // the last fetch, successful or not
}

func newKeyCache(c *outbound.Client, clock core.Clock) *keyCache {
	return &keyCache{client: c, clock: clock, sets: map[string]*cachedSet{}}
}

// errUnavailable marks a JWKS that could not be fetched or read.
var errUnavailable = errors.New("federation: issuer keys unavailable")

// key returns the key kid of the JWKS at url: from the cache while it is
// younger than KeyTTL, else fetched again; an unknown kid fetches again
// when the last fetch is at least KeyRefetchInterval old. A kid that is
// not in the current set wraps grant.ErrUnknownKey (a key the issuer
// removed or revoked verifies nothing once the set is fetched again); a
// set that cannot be fetched or read wraps errUnavailable.
func (c *keyCache) key(ctx context.Context, url, kid string) (ed25519.PublicKey, error) {
	s := c.set(url)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := c.clock.Now()
	fresh := s.keys != nil && now.Sub(s.fetched) < KeyTTL
	if fresh {
		if k, ok := s.keys[kid]; ok {
			return k, nil
		}
		if now.Sub(s.tried) < KeyRefetchInterval {
			return nil, fmt.Errorf("kid %q is not in the issuer's key set: %w", kid, grant.ErrUnknownKey)
		}
	}
	s.tried = now
	keys, err := c.fetch(ctx, url)
	if err != nil {
		return nil, err
	}
	s.keys, s.fetched = keys, c.clock.Now()
	if k, ok := keys[kid]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("kid %q is not in the issuer's current key set: %w", kid, grant.ErrUnknownKey)
}

// set returns url's entry, making room for it when it is new.
func (c *keyCache) set(url string) *cachedSet {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.sets[url]; ok {
		return s
	}
	if len(c.sets) >= maxCachedSets {
		for u := range c.sets { // any one: it is fetched again when needed
			delete(c.sets, u)
			break
		}
	}
	s := &cachedSet{}
	c.sets[url] = s
	return s
}

// fetch reads the JWKS at url through the outbound client.
func (c *keyCache) fetch(ctx context.Context, url string) (map[string]ed25519.PublicKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUnavailable, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUnavailable, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: the JWKS answered %d", errUnavailable, resp.StatusCode)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" && mt != "application/jwk-set+json" {
		return nil, fmt.Errorf("%w: the JWKS is served as %q, not JSON", errUnavailable, mt)
	}
	keys, err := parseJWKS(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%w: the JWKS %v", errUnavailable, err)
	}
	return keys, nil
}
