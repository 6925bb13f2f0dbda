package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

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

// orDomain adds domain to a not-found err.
func orDomain(err, domain error) error {
	if errors.Is(err, store.ErrNotFound) {
		return &notFoundError{err: err, domain: domain}
	}
	return err
}

func readGrant(ctx context.Context, q querier, orgID, grantID string) (claim.Grant, error) {
	var raw []byte
	err := scanOne(q.QueryRow(ctx, `SELECT record FROM grants WHERE org_id = $1 AND grant_id = $2`, orgID, grantID),
		[]any{&raw}, "grant %q of org %q", grantID, orgID)
	if err != nil {
		return claim.Grant{}, orDomain(err, claim.ErrNotFound)
	}
	var g claim.Grant
	return g, decodeJSON(raw, &g)
}

func readScopeClaim(ctx context.Context, q querier, orgID, scope string) (claim.ScopeClaim, error) {
	c := claim.ScopeClaim{OrgID: orgID, Scope: scope}
	err := scanOne(q.QueryRow(ctx, `SELECT grant_id, lease_expires_at FROM scope_claims WHERE org_id = $1 AND scope = $2`, orgID, scope),
		[]any{&c.GrantID, &c.LeaseExpiresAt}, "claim of scope %q in org %q", scope, orgID)
	if err != nil {
		return claim.ScopeClaim{}, orDomain(err, claim.ErrNotFound)
	}
	c.LeaseExpiresAt = c.LeaseExpiresAt.UTC()
	return c, nil
}

func readRegisteredKey(ctx context.Context, q querier, orgID string, kind registry.Kind, kid string) (registry.Key, error) {
	var raw []byte
	err := scanOne(q.QueryRow(ctx, `SELECT record FROM registered_keys WHERE org_id = $1 AND kind = $2 AND kid = $3`, orgID, string(kind), kid),
		[]any{&raw}, "%s key %q of org %q", kind, kid, orgID)
	if err != nil {
		return registry.Key{}, orDomain(err, registry.ErrKeyNotFound)
	}
	var k registry.Key
	return k, decodeJSON(raw, &k)
}

// Grant implements claim.Tx.
func (t *tx) Grant(ctx context.Context, grantID string) (claim.Grant, error) {
	if err := t.lock(ctx); err != nil {
		return claim.Grant{}, err
	}
	defer t.mu.Unlock()
	return readGrant(t.ctx, t.conn, t.org, grantID)
}

// PutGrant implements claim.Tx. It replaces the stored grant; its state and
// issue time are columns, so the state index follows.
func (t *tx) PutGrant(ctx context.Context, g claim.Grant) error {
	if err := t.checkOrg("grant", g.OrgID); err != nil {
		return err
	}
	if g.GrantID == "" || g.State == "" {
		return errors.New("pgstore: grant needs a grant id and a state")
	}
	raw, err := encodeJSON(g)
	if err != nil {
		return err
	}
	return t.queue(ctx, wrapped("put grant"), `
		INSERT INTO grants (org_id, grant_id, state, issued_at, record) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (org_id, grant_id) DO UPDATE SET state = excluded.state, issued_at = excluded.issued_at, record = excluded.record`,
		t.org, g.GrantID, string(g.State), g.IssuedAt, raw)
}

// NonceGrant implements claim.Tx.
func (t *tx) NonceGrant(ctx context.Context, nonce string) (string, error) {
	if err := t.lock(ctx); err != nil {
		return "", err
	}
	defer t.mu.Unlock()
	var id string
	err := scanOne(t.conn.QueryRow(t.ctx, `SELECT grant_id FROM nonces WHERE org_id = $1 AND nonce = $2`, t.org, nonce),
		[]any{&id}, "nonce in org %q", t.org)
	return id, orDomain(err, claim.ErrNotFound)
}

// PutNonce implements claim.Tx. A nonce names one grant for good: putting
// it for another grant is an error (and writes nothing).
func (t *tx) PutNonce(ctx context.Context, nonce, grantID string) error {
	if nonce == "" || grantID == "" {
		return errors.New("pgstore: nonce record needs a nonce and a grant id")
	}
	// The no-op update makes "already this grant's" count as one row.
	org := t.org
	return t.queue(ctx, oneRow("put nonce", func() error {
		return fmt.Errorf("pgstore: nonce already used by another grant in org %q", org)
	}), `
		INSERT INTO nonces (org_id, nonce, grant_id) VALUES ($1, $2, $3)
		ON CONFLICT (org_id, nonce) DO UPDATE SET grant_id = excluded.grant_id WHERE nonces.grant_id = excluded.grant_id`,
		t.org, nonce, grantID)
}

// ScopeClaim implements claim.Tx.
func (t *tx) ScopeClaim(ctx context.Context, scope string) (claim.ScopeClaim, error) {
	if err := t.lock(ctx); err != nil {
		return claim.ScopeClaim{}, err
	}
	defer t.mu.Unlock()
	return readScopeClaim(t.ctx, t.conn, t.org, scope)
}

// PutScopeClaim implements claim.Tx; it replaces the scope's record.
func (t *tx) PutScopeClaim(ctx context.Context, c claim.ScopeClaim) error {
	if err := t.checkOrg("scope claim", c.OrgID); err != nil {
		return err
	}
	if c.Scope == "" || c.GrantID == "" {
		return errors.New("pgstore: scope claim needs a scope and a grant id")
	}
	return t.queue(ctx, wrapped("put scope claim"), `
		INSERT INTO scope_claims (org_id, scope, grant_id, lease_expires_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (org_id, scope) DO UPDATE SET grant_id = excluded.grant_id, lease_expires_at = excluded.lease_expires_at`,
		t.org, c.Scope, c.GrantID, c.LeaseExpiresAt)
}

// DeleteScopeClaim implements claim.Tx; deleting a missing record is not an
// error.
func (t *tx) DeleteScopeClaim(ctx context.Context, scope string) error {
	return t.queue(ctx, wrapped("delete scope claim"), `DELETE FROM scope_claims WHERE org_id = $1 AND scope = $2`, t.org, scope)
}

// RegisteredKey implements registry.Tx.
func (t *tx) RegisteredKey(ctx context.Context, kind registry.Kind, kid string) (registry.Key, error) {
	if err := t.lock(ctx); err != nil {
		return registry.Key{}, err
	}
	defer t.mu.Unlock()
	return readRegisteredKey(t.ctx, t.conn, t.org, kind, kid)
}

// PutRegisteredKey implements registry.Tx; it replaces the key with the
// same kind and kid.
func (t *tx) PutRegisteredKey(ctx context.Context, k registry.Key) error {
	if err := t.checkOrg("registered key", k.OrgID); err != nil {
		return err
	}
	if k.Kind == "" || k.KID == "" {
		return errors.New("pgstore: registered key needs a kind and a kid")
	}
	raw, err := encodeJSON(k)
	if err != nil {
		return err
	}
	return t.exec(ctx, wrapped("put registered key"), `
		INSERT INTO registered_keys (org_id, kind, kid, record) VALUES ($1, $2, $3, $4)
		ON CONFLICT (org_id, kind, kid) DO UPDATE SET record = excluded.record`,
		t.org, string(k.Kind), k.KID, raw)
}

// GrantOf implements claim.Reader.
func (s *Store) GrantOf(ctx context.Context, orgID, grantID string) (claim.Grant, error) {
	if err := s.enter(ctx); err != nil {
		return claim.Grant{}, err
	}
	return readGrant(ctx, s.rd, orgID, grantID)
}

// GrantsInState implements claim.Reader: the index on (org_id, state,
// issued_at, grant_id), read in pages, so grants come in issue order (those
// issued at the same instant in grant id order) and each is in state.
func (s *Store) GrantsInState(ctx context.Context, orgID string, state claim.State, fn func(claim.Grant) bool) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	type row struct {
		issuedAt time.Time
		grantID  string
		raw      []byte
	}
	var (
		afterAt time.Time
		afterID string
		first   = true
	)
	for {
		var rows pgx.Rows
		var err error
		if first {
			rows, err = s.rd.Query(ctx, `
				SELECT issued_at, grant_id, record FROM grants WHERE org_id = $1 AND state = $2
				ORDER BY issued_at, grant_id LIMIT $3`, orgID, string(state), pageSize)
		} else {
			rows, err = s.rd.Query(ctx, `
				SELECT issued_at, grant_id, record FROM grants WHERE org_id = $1 AND state = $2
				AND (issued_at, grant_id) > ($3, $4)
				ORDER BY issued_at, grant_id LIMIT $5`, orgID, string(state), afterAt, afterID, pageSize)
		}
		if err != nil {
			return fmt.Errorf("pgstore: list %s grants of %q: %w", state, orgID, err)
		}
		page, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
			var x row
			err := r.Scan(&x.issuedAt, &x.grantID, &x.raw)
			return x, err
		})
		if err != nil {
			return fmt.Errorf("pgstore: list %s grants of %q: %w", state, orgID, err)
		}
		for _, x := range page {
			if err := ctx.Err(); err != nil {
				return err
			}
			var g claim.Grant
			if err := decodeJSON(x.raw, &g); err != nil {
				return err
			}
			if g.State != state {
				return fmt.Errorf("pgstore: grant %q indexed as %s is %s", g.GrantID, state, g.State)
			}
			if !fn(g) {
				return nil
			}
		}
		if len(page) < pageSize {
			return nil
		}
		last := page[len(page)-1]
		afterAt, afterID, first = last.issuedAt, last.grantID, false
	}
}

// RegisteredKeyOf implements registry.Reader.
func (s *Store) RegisteredKeyOf(ctx context.Context, orgID string, kind registry.Kind, kid string) (registry.Key, error) {
	if err := s.enter(ctx); err != nil {
		return registry.Key{}, err
	}
	return readRegisteredKey(ctx, s.rd, orgID, kind, kid)
}

// RegisteredKeys implements registry.Reader: the org's keys of kind, active
// and revoked, in kid order (bytewise).
func (s *Store) RegisteredKeys(ctx context.Context, orgID string, kind registry.Kind) ([]registry.Key, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	rows, err := s.rd.Query(ctx, `SELECT record FROM registered_keys WHERE org_id = $1 AND kind = $2 ORDER BY kid`, orgID, string(kind))
	if err != nil {
		return nil, fmt.Errorf("pgstore: list %s keys of %q: %w", kind, orgID, err)
	}
	raws, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, fmt.Errorf("pgstore: list %s keys of %q: %w", kind, orgID, err)
	}
	var out []registry.Key
	for _, raw := range raws {
		var k registry.Key
		if err := decodeJSON(raw, &k); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}
