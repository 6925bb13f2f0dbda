package core

import (
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/clearancehq/clearance/grant"
)

// SigningKeys is what signs and verifies tokens: the ring in use and the
// kids the store lists as revoked. It never changes once published; Keys
// swaps it whole when either part changes.
type SigningKeys struct {
	ring          *grant.KeyRing
	revoked       map[string]struct{} // revoked in the store; nil: none
	activeRevoked bool
}

// Lookup implements grant.KeySet: the ring's rule, and never a kid revoked
// in the store, whatever the ring says.
func (k *SigningKeys) Lookup(kid string, at time.Time) (grant.Key, bool) {
	if _, revoked := k.revoked[kid]; revoked {
		return grant.Key{}, false
	}
	return k.ring.Lookup(kid, at)
}

// Signer returns the active key, refused (fail closed) when the store lists
// it as revoked: a leaked key signs nothing more, even on a server whose
// key file still names it active.
func (k *SigningKeys) Signer() (grant.Key, error) {
	if k.activeRevoked {
		return grant.Key{}, New(ErrUnavailable, CodeSigningKeyRevoked,
			"the active grant signing key %s is revoked; nothing is signed until this server's key file is rotated", k.ring.Active().KID())
	}
	return k.ring.Active(), nil
}

// JWKS is the ring's JWKS without the kids revoked in the store.
func (k *SigningKeys) JWKS(now time.Time) jose.JSONWebKeySet {
	set := k.ring.JWKS(now)
	if len(k.revoked) == 0 {
		return set
	}
	kept := set.Keys[:0]
	for _, j := range set.Keys {
		if _, revoked := k.revoked[j.KeyID]; !revoked {
			kept = append(kept, j)
		}
	}
	set.Keys = kept
	return set
}

// Keys holds the SigningKeys in use. Each operation reads them once
// (Current), so it signs and verifies with one ring even while the ring is
// replaced.
type Keys struct {
	state atomic.Pointer[SigningKeys]
	mu    sync.Mutex // serialises the writers
}

// NewKeys starts with ring r (nil: signing not configured).
func NewKeys(r *grant.KeyRing) *Keys {
	k := &Keys{}
	k.publish(r, nil)
	return k
}

func (k *Keys) publish(r *grant.KeyRing, revoked map[string]struct{}) {
	_, activeRevoked := revoked[r.Active().KID()]
	k.state.Store(&SigningKeys{ring: r, revoked: revoked, activeRevoked: r != nil && activeRevoked})
}

// Current returns the keys in use, or SIGNING_NOT_CONFIGURED (503).
func (k *Keys) Current() (*SigningKeys, error) {
	s := k.state.Load()
	if s == nil || s.ring == nil {
		return nil, New(ErrUnavailable, CodeSigningNotConfigured, "grant signing is not configured")
	}
	return s, nil
}

// Ring returns the ring in use; nil when signing is not configured.
func (k *Keys) Ring() *grant.KeyRing { return k.state.Load().ring }

// ActiveRevoked reports whether the active key is revoked in the store.
func (k *Keys) ActiveRevoked() bool { return k.state.Load().activeRevoked }

// SetRing replaces the ring; the kids revoked in the store stay refused.
func (k *Keys) SetRing(r *grant.KeyRing) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.publish(r, k.state.Load().revoked)
}

// AddRevoked applies the kids revoked in the store and returns those that
// were not applied yet (none: nothing changed). A revocation is never
// withdrawn.
func (k *Keys) AddRevoked(kids []string) (added []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	cur := k.state.Load()
	for _, kid := range kids {
		if _, ok := cur.revoked[kid]; !ok {
			added = append(added, kid)
		}
	}
	if len(added) == 0 {
		return nil
	}
	revoked := make(map[string]struct{}, len(cur.revoked)+len(added))
	for kid := range cur.revoked {
		revoked[kid] = struct{}{}
	}
	for _, kid := range added {
		revoked[kid] = struct{}{}
	}
	k.publish(cur.ring, revoked)
	return added
}
