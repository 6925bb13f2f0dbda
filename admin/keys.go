package admin

import (
	"context"

	"github.com/go-jose/go-jose/v4"

	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/registry"
	"github.com/clearancehq/clearance/store"
)

// RegisterKey registers an org's public agent or provider key (ledgered).
// Created is false when the same key was already active under that kid.
func (s *Service) RegisterKey(ctx context.Context, orgID string, kind registry.Kind, r registry.Registration) (Key, bool, error) {
	var (
		out     registry.Key
		created bool
	)
	err := s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		k, c, err := registry.Register(ctx, tx, orgID, kind, r, s.d.Now())
		if err != nil {
			return err
		}
		out, created = k, c
		if !c {
			return nil
		}
		return s.appendKeyEvent(ctx, tx, ledger.KindKeyRegistered, k)
	})
	if core.IsNotFound(err) { // a store not-found here is the key's
		return Key{}, false, core.New(core.ErrNotFound, registry.CodeKeyNotFound, "key not found")
	}
	if err != nil {
		return Key{}, false, core.Translate("register key", err)
	}
	return keyOf(out), created, nil
}

// RevokeKey revokes a registered key; its metadata stays listed. A kid no
// key can have (not registry.ValidKID) is 400 INVALID_KID, as registering it
// would be; an unknown one is 404 KEY_NOT_FOUND.
func (s *Service) RevokeKey(ctx context.Context, orgID string, kind registry.Kind, kid string) (Key, error) {
	if !registry.ValidKID(kid) {
		return Key{}, errInvalidKID()
	}
	var out registry.Key
	err := s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		before, err := tx.RegisteredKey(ctx, kind, kid)
		if err != nil {
			return err
		}
		k, err := registry.Revoke(ctx, tx, kind, kid, s.d.Now())
		if err != nil {
			return err
		}
		out = k
		if before.Status == registry.StatusRevoked {
			return nil
		}
		return s.appendKeyEvent(ctx, tx, ledger.KindKeyRevoked, k)
	})
	if core.IsNotFound(err) { // a store not-found here is the key's
		return Key{}, core.New(core.ErrNotFound, registry.CodeKeyNotFound, "key not found")
	}
	if err != nil {
		return Key{}, core.Translate("revoke key", err)
	}
	return keyOf(out), nil
}

// Keys lists the org's keys of a kind, revoked ones included.
func (s *Service) Keys(ctx context.Context, orgID string, kind registry.Kind) ([]Key, error) {
	ks, err := s.d.Store.RegisteredKeys(ctx, orgID, kind)
	if err != nil {
		return nil, core.Unavailable("list keys", err)
	}
	out := make([]Key, len(ks))
	for i, k := range ks {
		out[i] = keyOf(k)
	}
	return out, nil
}

// JWKS returns the public grant-signing keys of the ring in use (the active
// key and every previous key until its grants drain, never one revoked in
// the ring or in the store); ok is false when signing is not configured.
func (s *Service) JWKS() (jose.JSONWebKeySet, bool) {
	k, err := s.d.Keys.Current()
	if err != nil {
		return jose.JSONWebKeySet{}, false
	}
	return k.JWKS(s.d.Now()), true
}

// keyEvent is what the ledger records of a key change.
type keyEvent struct {
	Kind      registry.Kind   `json:"kind"`
	KID       string          `json:"kid"`
	Issuer    string          `json:"iss,omitempty"`
	Status    registry.Status `json:"status"`
	PublicJWK []byte          `json:"public_jwk"`
}

func keyEventOf(k registry.Key) keyEvent {
	return keyEvent{k.Kind, k.KID, k.Issuer, k.Status, k.PublicJWK}
}

func (s *Service) appendKeyEvent(ctx context.Context, tx store.Tx, kind string, k registry.Key) error {
	return core.AppendRecord(ctx, tx, kind, string(k.Kind)+":"+k.KID, keyEventOf(k), s.d.Now())
}

// errInvalidKID refuses a kid no key can have, before the store is asked.
func errInvalidKID() error {
	return core.Invalid(registry.CodeInvalidKID, "kid", "kid must be 1 to %d characters of [A-Za-z0-9._:-]", registry.MaxKIDLength)
}
