package grant

import (
	"errors"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// RetiredKey is a previous signing key. It signs nothing new but stays
// published and resolvable until KeepUntil, when every grant it signed has
// expired and the longest claim lease after it has run out.
type RetiredKey struct {
	Key       Key
	RetiredAt time.Time
	KeepUntil time.Time
}

// RevokedKey is a key withdrawn before its time, because it leaked or may
// have: only its kid is kept, and the ring never publishes or accepts it.
type RevokedKey struct {
	KID       string
	RevokedAt time.Time
}

// ErrRevokeActive is returned by Revoke for the active key: rotate to a new
// key first, then revoke the old one.
var ErrRevokeActive = errors.New("grant: the active key cannot be revoked; rotate first")

// KeyRing is the active signing key plus previous keys, newest retired first,
// and the kids of revoked keys. A KeyRing never changes after construction:
// Rotate, Revoke and Prune return new rings, so a *KeyRing is safe for
// concurrent use. A nil *KeyRing is an empty ring: no active key, nothing to
// look up, an empty JWKS.
type KeyRing struct {
	active   Key
	previous []RetiredKey
	revoked  []RevokedKey
}

// NewKeyRing returns a ring whose active key is active. Previous keys are
// kept in the order given, except that the zero Key, the active key's kid and
// repeats of a kid (the entry with the later KeepUntil wins) are dropped.
// NewKeyRing panics if active is the zero Key: a ring without a signing key
// is a programming error, not a state to run in.
func NewKeyRing(active Key, previous ...RetiredKey) *KeyRing {
	if active.IsZero() {
		panic("grant: NewKeyRing with the zero Key")
	}
	r := &KeyRing{active: active}
	index := make(map[string]int, len(previous))
	for _, p := range previous {
		if p.Key.IsZero() || p.Key.kid == active.kid {
			continue
		}
		p.RetiredAt = p.RetiredAt.Round(0)
		p.KeepUntil = p.KeepUntil.Round(0)
		if i, dup := index[p.Key.kid]; dup {
			if p.KeepUntil.After(r.previous[i].KeepUntil) {
				r.previous[i] = p
			}
			continue
		}
		index[p.Key.kid] = len(r.previous)
		r.previous = append(r.previous, p)
	}
	return r
}

// Active returns the key that signs new tokens.
func (r *KeyRing) Active() Key {
	if r == nil {
		return Key{}
	}
	return r.active
}

// Previous returns a copy of the retired keys, newest retired first,
// including any whose KeepUntil has passed but that Prune has not removed.
func (r *KeyRing) Previous() []RetiredKey {
	if r == nil || len(r.previous) == 0 {
		return nil
	}
	return append([]RetiredKey(nil), r.previous...)
}

// Revoked returns a copy of the revoked keys, oldest revocation first.
func (r *KeyRing) Revoked() []RevokedKey {
	if r == nil || len(r.revoked) == 0 {
		return nil
	}
	return append([]RevokedKey(nil), r.revoked...)
}

// Lookup returns the key with this kid that may verify a token at: the
// active key, or a previous key whose KeepUntil is after at (the rule the
// JWKS applies). A revoked key is never found. A verifier still checks each
// token's own expiry.
func (r *KeyRing) Lookup(kid string, at time.Time) (Key, bool) {
	if r == nil || kid == "" {
		return Key{}, false
	}
	if r.active.kid == kid {
		return r.active, true
	}
	for _, p := range r.previous {
		if p.Key.kid == kid {
			return p.Key, p.KeepUntil.After(at)
		}
	}
	return Key{}, false
}

// Rotate returns a new ring whose active key is next. The old active key
// becomes the newest previous key, retired at now and kept until now + drain,
// where drain should be the longest grant lifetime plus the longest claim
// lease (a negative drain counts as zero). If next is already the active key,
// Rotate returns r; if next was a previous key, it is reinstated.
// Revoked keys stay revoked. Rotate panics if next is the zero Key or a
// revoked key.
func (r *KeyRing) Rotate(next Key, now time.Time, drain time.Duration) *KeyRing {
	if next.IsZero() {
		panic("grant: KeyRing.Rotate with the zero Key")
	}
	if r == nil {
		return NewKeyRing(next)
	}
	if r.isRevoked(next.kid) {
		panic("grant: KeyRing.Rotate to a revoked key")
	}
	if next.kid == r.active.kid {
		return r
	}
	drain = max(drain, 0)
	now = now.Round(0)
	prev := make([]RetiredKey, 0, len(r.previous)+1)
	prev = append(prev, RetiredKey{Key: r.active, RetiredAt: now, KeepUntil: now.Add(drain)})
	prev = append(prev, r.previous...)
	out := NewKeyRing(next, prev...)
	out.revoked = r.revoked
	return out
}

// Revoke returns a ring in which the key kid is revoked at now: it is no
// longer published nor found by Lookup, at once and without a drain, and
// only its kid is kept. Revoking a kid the ring does not hold records it all
// the same; revoking a revoked kid returns r. The active key cannot be
// revoked (ErrRevokeActive): Rotate away from it first.
func (r *KeyRing) Revoke(kid string, now time.Time) (*KeyRing, error) {
	if r == nil {
		return nil, errors.New("grant: Revoke on an empty ring")
	}
	if kid == "" {
		return nil, errors.New("grant: Revoke with an empty kid")
	}
	if kid == r.active.kid {
		return nil, ErrRevokeActive
	}
	if r.isRevoked(kid) {
		return r, nil
	}
	out := &KeyRing{active: r.active, previous: make([]RetiredKey, 0, len(r.previous))}
	for _, p := range r.previous {
		if p.Key.kid != kid {
			out.previous = append(out.previous, p)
		}
	}
	out.revoked = append(append(make([]RevokedKey, 0, len(r.revoked)+1), r.revoked...), RevokedKey{KID: kid, RevokedAt: now.Round(0)})
	return out, nil
}

func (r *KeyRing) isRevoked(kid string) bool {
	for _, k := range r.revoked {
		if k.KID == kid {
			return true
		}
	}
	return false
}

// Prune returns a ring without the previous keys whose KeepUntil is not after
// now. It returns r itself when nothing is dropped.
func (r *KeyRing) Prune(now time.Time) *KeyRing {
	if r == nil {
		return nil
	}
	kept := make([]RetiredKey, 0, len(r.previous))
	for _, p := range r.previous {
		if p.KeepUntil.After(now) {
			kept = append(kept, p)
		}
	}
	if len(kept) == len(r.previous) {
		return r
	}
	return &KeyRing{active: r.active, previous: kept, revoked: r.revoked}
}

// JWKS returns the public keys a verifier needs at now: the active key first,
// then each previous key whose KeepUntil is after now, newest retired first.
// Members are kty, crv, x, kid, alg and use; never a private member.
func (r *KeyRing) JWKS(now time.Time) jose.JSONWebKeySet {
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{}}
	if r == nil {
		return set
	}
	set.Keys = append(set.Keys, r.active.PublicJWK())
	for _, p := range r.previous {
		if p.KeepUntil.After(now) {
			set.Keys = append(set.Keys, p.Key.PublicJWK())
		}
	}
	return set
}
