package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/registry"
	"github.com/clearancehq/clearance/store"
)

// notFoundError is a lookup of a claim or registry record that found
// nothing. It wraps store.ErrNotFound and the domain package's own sentinel
// (claim.ErrNotFound, registry.ErrKeyNotFound, idempotency.ErrNotFound), which those packages test
// for because they cannot import store.
type notFoundError struct {
	err    error // wraps store.ErrNotFound
	domain error
}

func (e *notFoundError) Error() string   { return e.err.Error() }
func (e *notFoundError) Unwrap() []error { return []error{e.err, e.domain} }

// getOr is get whose not-found error also wraps domain.
func getOr(r kv, key []byte, domain error, what string, args ...any) ([]byte, error) {
	v, err := get(r, key, what, args...)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &notFoundError{err: err, domain: domain}
	}
	return v, err
}

func readGrant(r kv, orgID, grantID string) (claim.Grant, error) {
	var g claim.Grant
	v, err := getOr(r, grantKey(orgID, grantID), claim.ErrNotFound, "grant %q of org %q", grantID, orgID)
	if err != nil {
		return g, err
	}
	return g, decodeJSON(v, &g)
}

func readScopeClaim(r kv, orgID, scope string) (claim.ScopeClaim, error) {
	var c claim.ScopeClaim
	v, err := getOr(r, scopeKey(orgID, scope), claim.ErrNotFound, "claim of scope %q in org %q", scope, orgID)
	if err != nil {
		return c, err
	}
	return c, decodeJSON(v, &c)
}

func readRegisteredKey(r kv, orgID string, kind registry.Kind, kid string) (registry.Key, error) {
	var k registry.Key
	v, err := getOr(r, regKeyKey(orgID, string(kind), kid), registry.ErrKeyNotFound, "%s key %q of org %q", kind, kid, orgID)
	if err != nil {
		return k, err
	}
	return k, decodeJSON(v, &k)
}

// Now implements claim.Tx: the store's clock (Options.Now), read at each
// call.
func (t *tx) Now() time.Time { return t.now() }

// Grant implements claim.Tx.
func (t *tx) Grant(ctx context.Context, grantID string) (claim.Grant, error) {
	if err := t.lock(ctx); err != nil {
		return claim.Grant{}, err
	}
	defer t.mu.Unlock()
	return readGrant(t.b, t.org, grantID)
}

// PutGrant implements claim.Tx. It replaces the stored grant and moves its
// state index entry: the entry under the old state (and issue time) is
// deleted, the one under the new state written.
func (t *tx) PutGrant(ctx context.Context, g claim.Grant) error {
	if err := t.lock(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	if err := t.checkOrg("grant", g.OrgID); err != nil {
		return err
	}
	if g.GrantID == "" || g.State == "" {
		return errors.New("pebblestore: grant needs a grant id and a state")
	}
	switch old, err := readGrant(t.b, t.org, g.GrantID); {
	case err == nil:
		if err := t.b.Delete(grantStateKey(t.org, string(old.State), old.IssuedAt, old.GrantID), nil); err != nil {
			return fmt.Errorf("pebblestore: write: %w", err)
		}
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	if err := t.set(grantKey(t.org, g.GrantID), g); err != nil {
		return err
	}
	return t.set(grantStateKey(t.org, string(g.State), g.IssuedAt, g.GrantID), []byte{})
}

// NonceGrant implements claim.Tx.
func (t *tx) NonceGrant(ctx context.Context, nonce string) (string, error) {
	if err := t.lock(ctx); err != nil {
		return "", err
	}
	defer t.mu.Unlock()
	v, err := getOr(t.b, nonceKey(t.org, nonce), claim.ErrNotFound, "nonce in org %q", t.org)
	return string(v), err
}

// PutNonce implements claim.Tx. A nonce names one grant for good: putting
// it for another grant is an error.
func (t *tx) PutNonce(ctx context.Context, nonce, grantID string) error {
	if err := t.lock(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	if nonce == "" || grantID == "" {
		return errors.New("pebblestore: nonce record needs a nonce and a grant id")
	}
	k := nonceKey(t.org, nonce)
	switch v, err := get(t.b, k, "nonce"); {
	case err == nil && string(v) != grantID:
		return fmt.Errorf("pebblestore: nonce already used by another grant in org %q", t.org)
	case err == nil:
		return nil
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	return t.set(k, []byte(grantID))
}

// ScopeClaim implements claim.Tx.
func (t *tx) ScopeClaim(ctx context.Context, scope string) (claim.ScopeClaim, error) {
	if err := t.lock(ctx); err != nil {
		return claim.ScopeClaim{}, err
	}
	defer t.mu.Unlock()
	return readScopeClaim(t.b, t.org, scope)
}

// PutScopeClaim implements claim.Tx; it replaces the scope's record.
func (t *tx) PutScopeClaim(ctx context.Context, c claim.ScopeClaim) error {
	if err := t.lock(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	if err := t.checkOrg("scope claim", c.OrgID); err != nil {
		return err
	}
	if c.Scope == "" || c.GrantID == "" {
		return errors.New("pebblestore: scope claim needs a scope and a grant id")
	}
	return t.set(scopeKey(t.org, c.Scope), c)
}

// DeleteScopeClaim implements claim.Tx; deleting a missing record is not an
// error.
func (t *tx) DeleteScopeClaim(ctx context.Context, scope string) error {
	if err := t.lock(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	if err := t.b.Delete(scopeKey(t.org, scope), nil); err != nil {
		return fmt.Errorf("pebblestore: write: %w", err)
	}
	return nil
}

// RegisteredKey implements registry.Tx.
func (t *tx) RegisteredKey(ctx context.Context, kind registry.Kind, kid string) (registry.Key, error) {
	if err := t.lock(ctx); err != nil {
		return registry.Key{}, err
	}
	defer t.mu.Unlock()
	return readRegisteredKey(t.b, t.org, kind, kid)
}

// PutRegisteredKey implements registry.Tx; it replaces the key with the
// same kind and kid.
func (t *tx) PutRegisteredKey(ctx context.Context, k registry.Key) error {
	if err := t.lock(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	if err := t.checkOrg("registered key", k.OrgID); err != nil {
		return err
	}
	if k.Kind == "" || k.KID == "" {
		return errors.New("pebblestore: registered key needs a kind and a kid")
	}
	return t.set(regKeyKey(t.org, string(k.Kind), k.KID), k)
}

// GrantOf implements claim.Reader.
func (s *Store) GrantOf(ctx context.Context, orgID, grantID string) (claim.Grant, error) {
	if err := s.enter(ctx); err != nil {
		return claim.Grant{}, err
	}
	defer s.leave()
	return readGrant(s.db, orgID, grantID)
}

// GrantsInState implements claim.Reader: a scan of the state index in
// issue order (grants issued at the same instant in grant id order), read
// from one snapshot so every grant passed to fn is in state.
func (s *Store) GrantsInState(ctx context.Context, orgID string, state claim.State, fn func(claim.Grant) bool) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.leave()
	snap := s.db.NewSnapshot()
	defer snap.Close()
	p := grantStatePrefix(orgID, string(state), 0)
	return scan(snap, p, upperBound(p), func(k, _ []byte) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if len(k) < len(p)+8 {
			return false, fmt.Errorf("pebblestore: corrupt grant state index key %q", k)
		}
		g, err := readGrant(snap, orgID, string(k[len(p)+8:]))
		if err != nil {
			return false, fmt.Errorf("pebblestore: grant state index: %w", err)
		}
		if g.State != state {
			return false, fmt.Errorf("pebblestore: grant %q indexed as %s is %s", g.GrantID, state, g.State)
		}
		return fn(g), nil
	})
}

// RegisteredKeyOf implements registry.Reader.
func (s *Store) RegisteredKeyOf(ctx context.Context, orgID string, kind registry.Kind, kid string) (registry.Key, error) {
	if err := s.enter(ctx); err != nil {
		return registry.Key{}, err
	}
	defer s.leave()
	return readRegisteredKey(s.db, orgID, kind, kid)
}

// RegisteredKeys implements registry.Reader: the org's keys of kind, active
// and revoked, in kid order.
func (s *Store) RegisteredKeys(ctx context.Context, orgID string, kind registry.Kind) ([]registry.Key, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.leave()
	var out []registry.Key
	p := regKeyPrefix(orgID, string(kind), 0)
	err := scan(s.db, p, upperBound(p), func(_, v []byte) (bool, error) {
		var k registry.Key
		if err := decodeJSON(v, &k); err != nil {
			return false, err
		}
		out = append(out, k)
		return true, nil
	})
	return out, err
}
