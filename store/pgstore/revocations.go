package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/clearancehq/clearance/store"
)

// RevokeGrantKey implements store.Backend: one INSERT that keeps the first
// row of a kid (ON CONFLICT DO NOTHING), committed before it returns.
func (s *Store) RevokeGrantKey(ctx context.Context, kid string, at time.Time) error {
	if kid == "" {
		return errors.New("pgstore: revoke grant key: empty kid")
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	if _, err := s.rd.Exec(ctx, `INSERT INTO grant_key_revocations (kid, revoked_at) VALUES ($1, $2) ON CONFLICT (kid) DO NOTHING`,
		kid, at.UTC()); err != nil {
		return fmt.Errorf("pgstore: revoke grant key: %w", err)
	}
	return nil
}

// RevokedGrantKeys implements store.Backend.
func (s *Store) RevokedGrantKeys(ctx context.Context) ([]store.KeyRevocation, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	rows, err := s.rd.Query(ctx, `SELECT kid, revoked_at FROM grant_key_revocations ORDER BY kid`)
	if err != nil {
		return nil, fmt.Errorf("pgstore: revoked grant keys: %w", err)
	}
	defer rows.Close()
	var out []store.KeyRevocation
	for rows.Next() {
		var r store.KeyRevocation
		if err := rows.Scan(&r.KID, &r.RevokedAt); err != nil {
			return nil, fmt.Errorf("pgstore: revoked grant keys: %w", err)
		}
		r.RevokedAt = r.RevokedAt.UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: revoked grant keys: %w", err)
	}
	return out, nil
}
