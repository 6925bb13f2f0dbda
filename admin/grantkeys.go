package admin

import (
	"context"
	"time"

	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/registry"
)

// DefaultKeyRevocationInterval is how often RunKeyRevocations rereads the
// grant keys revoked in the store.
const DefaultKeyRevocationInterval = time.Second

// RevokeGrantKey revokes the grant-signing key kid in the store, for every
// server on it: each refuses tokens signed by kid and leaves it out of its
// JWKS once it has reread the revocations (RunKeyRevocations), whatever its
// key file says; a server whose ring has kid as the active key signs nothing
// until its file is rotated (core.CodeSigningKeyRevoked). This Service applies
// it before returning. Revoking is permanent and idempotent; it changes no
// key file (rotate or revoke there too, to sign with a fresh key).
func (s *Service) RevokeGrantKey(ctx context.Context, kid string) error {
	if !registry.ValidKID(kid) {
		return errInvalidKID()
	}
	if err := s.d.Store.Backend.RevokeGrantKey(ctx, kid, s.d.Now()); err != nil {
		return core.Unavailable("revoke grant key", err)
	}
	return s.RefreshKeyRevocations(ctx)
}

// RefreshKeyRevocations rereads the grant keys revoked in the store and
// applies them. On failure the revocations already applied stay (a
// revocation is never withdrawn).
func (s *Service) RefreshKeyRevocations(ctx context.Context) error {
	list, err := s.d.Store.Backend.RevokedGrantKeys(ctx)
	if err != nil {
		return core.Unavailable("read revoked grant keys", err)
	}
	kids := make([]string, len(list))
	for i, r := range list {
		kids[i] = r.KID
	}
	added := s.d.Keys.AddRevoked(kids)
	if len(added) == 0 {
		return nil
	}
	s.d.Logger.Info("grant keys revoked in the store applied", "revoked", added)
	if s.d.Keys.ActiveRevoked() {
		s.d.Logger.Error("the active grant signing key is revoked: nothing is signed until the key file is rotated",
			"active_kid", s.d.Keys.Ring().Active().KID())
	}
	return nil
}

// RunKeyRevocations rereads the grant keys revoked in the store every
// interval (DefaultKeyRevocationInterval when interval <= 0) until ctx
// ends, so that a revocation made by any server or by `clearance keys
// revoke --store` reaches this one without a restart. A failed read is
// logged and the revocations already applied stay.
func (s *Service) RunKeyRevocations(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultKeyRevocationInterval
	}
	core.EveryTick(ctx, interval, func() {
		if err := s.RefreshKeyRevocations(ctx); err != nil && ctx.Err() == nil {
			s.d.Logger.Warn("reading the revoked grant keys failed; the revocations already applied stay", "err", err)
		}
	})
}
