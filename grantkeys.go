package clearance

import (
	"context"
	"time"

	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/registry"
)

// DefaultKeyRevocationInterval is how often RunKeyRevocations rereads the
// grant keys revoked in the store.
const DefaultKeyRevocationInterval = time.Second

// signingKeys returns the keys in use, read once per operation so that an
// operation signs and verifies with one ring even while it is replaced.
func (e *Engine) signingKeys() (*core.SigningKeys, error) { return e.keys.Current() }

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
	if err := e.store.Backend.RevokeGrantKey(ctx, kid, e.now()); err != nil {
		return unavailable("revoke grant key", err)
	}
	return e.RefreshKeyRevocations(ctx)
}

// RefreshKeyRevocations rereads the grant keys revoked in the store and
// applies them. On failure the revocations already applied stay (a
// revocation is never withdrawn).
func (e *Engine) RefreshKeyRevocations(ctx context.Context) error {
	list, err := e.store.Backend.RevokedGrantKeys(ctx)
	if err != nil {
		return unavailable("read revoked grant keys", err)
	}
	kids := make([]string, len(list))
	for i, r := range list {
		kids[i] = r.KID
	}
	added := e.keys.AddRevoked(kids)
	if len(added) == 0 {
		return nil
	}
	e.opts.Logger.Info("grant keys revoked in the store applied", "revoked", added)
	if e.keys.ActiveRevoked() {
		e.opts.Logger.Error("the active grant signing key is revoked: nothing is signed until the key file is rotated",
			"active_kid", e.keys.Ring().Active().KID())
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
	core.EveryTick(ctx, interval, func() {
		if err := e.RefreshKeyRevocations(ctx); err != nil && ctx.Err() == nil {
			e.opts.Logger.Warn("reading the revoked grant keys failed; the revocations already applied stay", "err", err)
		}
	})
}
