package clearance

import (
	"context"

	"github.com/go-jose/go-jose/v4"

	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/registry"
	"github.com/clearancehq/clearance/store"
)

// RegisterKey registers an org's public agent or provider key (ledgered).
// Created is false when the same key was already active under that kid.
func (e *Engine) RegisterKey(ctx context.Context, orgID string, kind registry.Kind, r registry.Registration) (registry.Key, bool, error) {
	var (
		out     registry.Key
		created bool
	)
	err := e.store.Update(ctx, orgID, func(tx store.Tx) error {
		k, c, err := registry.Register(ctx, tx, orgID, kind, r, e.now())
		if err != nil {
			return err
		}
		out, created = k, c
		if !c {
			return nil
		}
		return e.appendKeyEvent(ctx, tx, ledger.KindKeyRegistered, k)
	})
	if err != nil {
		return registry.Key{}, false, registryError("register key", err)
	}
	return out, created, nil
}

// RevokeKey revokes a registered key; its metadata stays listed. A kid no
// key can have (not registry.ValidKID) is 400 INVALID_KID, as registering it
// would be; an unknown one is 404 KEY_NOT_FOUND.
func (e *Engine) RevokeKey(ctx context.Context, orgID string, kind registry.Kind, kid string) (registry.Key, error) {
	if !registry.ValidKID(kid) {
		return registry.Key{}, invalid(registry.CodeInvalidKID, "kid", "kid must be 1 to %d characters of [A-Za-z0-9._:-]", registry.MaxKIDLength)
	}
	var out registry.Key
	err := e.store.Update(ctx, orgID, func(tx store.Tx) error {
		before, err := tx.RegisteredKey(ctx, kind, kid)
		if err != nil {
			return err
		}
		k, err := registry.Revoke(ctx, tx, kind, kid, e.now())
		if err != nil {
			return err
		}
		out = k
		if before.Status == registry.StatusRevoked {
			return nil
		}
		return e.appendKeyEvent(ctx, tx, ledger.KindKeyRevoked, k)
	})
	if err != nil {
		return registry.Key{}, registryError("revoke key", err)
	}
	return out, nil
}

// Keys lists the org's keys of a kind, revoked ones included.
func (e *Engine) Keys(ctx context.Context, orgID string, kind registry.Kind) ([]registry.Key, error) {
	ks, err := e.store.RegisteredKeys(ctx, orgID, kind)
	if err != nil {
		return nil, unavailable("list keys", err)
	}
	if ks == nil {
		ks = []registry.Key{}
	}
	return ks, nil
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

func (e *Engine) appendKeyEvent(ctx context.Context, tx store.Tx, kind string, k registry.Key) error {
	d, err := canon.DigestValue(keyEventOf(k))
	if err != nil {
		return err
	}
	_, err = ledger.Append(ctx, tx, tx.OrgID(), ledger.Record{Kind: kind, SubjectID: string(k.Kind) + ":" + k.KID, PayloadDigest: d}, e.now())
	return err
}

// registryError is the kernel's answer, a store not-found being the key's.
func registryError(op string, err error) error {
	if isNotFound(err) {
		return newError(ErrNotFound, registry.CodeKeyNotFound, "key not found")
	}
	return core.Translate(op, err)
}

// JWKS returns the public grant-signing keys of the ring in use (the active
// key and every previous key until its grants drain, never one revoked in
// the ring or in the store); ok is false when signing is not configured.
func (e *Engine) JWKS() (jose.JSONWebKeySet, bool) {
	k, err := e.signingKeys()
	if err != nil {
		return jose.JSONWebKeySet{}, false
	}
	return k.JWKS(e.now()), true
}
