package clearance

import (
	"context"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/registry"
)

// DefaultKeyRevocationInterval is how often RunKeyRevocations rereads the
// grant keys revoked in the store.
const DefaultKeyRevocationInterval = time.Second

// signingKeys is what signs and verifies tokens: the ring in use and the
// kids the store lists as revoked. It never changes once published; the
// Engine swaps it whole when either part changes.
type signingKeys struct {
	ring          *grant.KeyRing
	revoked       map[string]struct{} // revoked in the store; nil: none
	activeRevoked bool
}

func newSigningKeys(r *grant.KeyRing, revoked map[string]struct{}) *signingKeys {
	_, activeRevoked := revoked[r.Active().KID()]
	return &signingKeys{ring: r, revoked: revoked, activeRevoked: r != nil && activeRevoked}
}

// Lookup implements grant.KeySet: the ring's rule, and never a kid revoked
// in the store, whatever the ring says.
func (k *signingKeys) Lookup(kid string, at time.Time) (grant.Key, bool) {
	if _, revoked := k.revoked[kid]; revoked {
		return grant.Key{}, false
	}
	return k.ring.Lookup(kid, at)
}

// signer returns the active key, refused (fail closed) when the store lists
// it as revoked: a leaked key signs nothing more, even on a server whose
// key file still names it active.
func (k *signingKeys) signer() (grant.Key, error) {
	if k.activeRevoked {
		return grant.Key{}, newError(ErrUnavailable, CodeSigningKeyRevoked,
			"the active grant signing key %s is revoked; nothing is signed until this server's key file is rotated", k.ring.Active().KID())
	}
	return k.ring.Active(), nil
}

// jwks is the ring's JWKS without the kids revoked in the store.
func (k *signingKeys) jwks(now time.Time) jose.JSONWebKeySet {
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

// signingKeys returns the keys in use, read once per operation so that an
// operation signs and verifies with one ring even while it is replaced.
func (e *Engine) signingKeys() (*signingKeys, error) {
	k := e.keyState.Load()
	if k == nil || k.ring == nil {
		return nil, newError(ErrUnavailable, CodeSigningNotConfigured, "grant signing is not configured")
	}
	return k, nil
}

// publishKeys makes (ring, revoked) the keys in use; callers hold keyMu.
func (e *Engine) publishKeys(r *grant.KeyRing, revoked map[string]struct{}) {
	e.keyState.Store(newSigningKeys(r, revoked))
}

// RevokeGrantKey revokes the grant-signing key kid in the store, for every
// server on it: each refuses tokens signed by kid and leaves it out of its
// JWKS once it has reread the revocations (RunKeyRevocations), whatever its
// key file says; a server whose ring has kid as the active key signs nothing
// until its file is rotated (CodeSigningKeyRevoked). This Engine applies it
// before returning. Revoking is permanent and idempotent; it changes no
// key file (rotate or revoke there too, to sign with a fresh key).
func (e *Engine) RevokeGrantKey(ctx context.Context, kid string) error {
	if !registry.ValidKID(kid) {
		return invalid(registry.CodeInvalidKID, "kid", "kid must be 1 to %d characters of [A-Za-z0-9._:-]", registry.MaxKIDLength)
	}
	if err := e.raw.RevokeGrantKey(ctx, kid, e.now()); err != nil {
		return unavailable("revoke grant key", err)
	}
	return e.RefreshKeyRevocations(ctx)
}

// RefreshKeyRevocations rereads the grant keys revoked in the store and
// applies them. On failure the revocations already applied stay (a
// revocation is never withdrawn).
func (e *Engine) RefreshKeyRevocations(ctx context.Context) error {
	list, err := e.raw.RevokedGrantKeys(ctx)
	if err != nil {
		return unavailable("read revoked grant keys", err)
	}
	e.keyMu.Lock()
	defer e.keyMu.Unlock()
	cur := e.keyState.Load()
	if len(list) == len(cur.revoked) {
		same := true
		for _, r := range list {
			if _, ok := cur.revoked[r.KID]; !ok {
				same = false
				break
			}
		}
		if same {
			return nil
		}
	}
	revoked := make(map[string]struct{}, len(list)+len(cur.revoked))
	for kid := range cur.revoked {
		revoked[kid] = struct{}{}
	}
	var added []string
	for _, r := range list {
		if _, ok := revoked[r.KID]; !ok {
			added = append(added, r.KID)
		}
		revoked[r.KID] = struct{}{}
	}
	e.publishKeys(cur.ring, revoked)
	e.opts.Logger.Info("grant keys revoked in the store applied", "revoked", added)
	if k := e.keyState.Load(); k.activeRevoked {
		e.opts.Logger.Error("the active grant signing key is revoked: nothing is signed until the key file is rotated",
			"active_kid", k.ring.Active().KID())
	}
	return nil
}

// RunKeyRevocations rereads the grant keys revoked in the store every
// interval (DefaultKeyRevocationInterval when interval <= 0) until ctx
// ends, so that a revocation made by any server or by `clearance keys
// revoke --store` reaches this one without a restart. A failed read is
// logged and the revocations already applied stay.
func (e *Engine) RunKeyRevocations(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultKeyRevocationInterval
	}
	everyTick(ctx, interval, func() {
		if err := e.RefreshKeyRevocations(ctx); err != nil && ctx.Err() == nil {
			e.opts.Logger.Warn("reading the revoked grant keys failed; the revocations already applied stay", "err", err)
		}
	})
}
