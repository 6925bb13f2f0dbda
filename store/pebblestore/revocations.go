package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/clearancehq/clearance/store"
)

// RevokeGrantKey implements store.Backend. The record is written with
// pebble.Sync outside any org's Update; revMu makes its read-then-write
// keep the first RevokedAt when two revocations of one kid race.
func (s *Store) RevokeGrantKey(ctx context.Context, kid string, at time.Time) error {
	if kid == "" {
		return errors.New("pebblestore: revoke grant key: empty kid")
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.leave()
	s.revMu.Lock()
	defer s.revMu.Unlock()
	key := keyRevocationKey(kid)
	if ok, err := has(s.db, key); err != nil || ok {
		return err
	}
	v, err := encodeJSON(store.KeyRevocation{KID: kid, RevokedAt: at.UTC()})
	if err != nil {
		return err
	}
	// Refused, as every write, while the storage fails (fault.go).
	if err := s.guard.writable(); err != nil {
		return err
	}
	if err := s.guard.commit(func() error { return s.db.Set(key, v, pebble.Sync) }); err != nil {
		return fmt.Errorf("pebblestore: revoke grant key: %w", err)
	}
	return nil
}

// RevokedGrantKeys implements store.Backend.
func (s *Store) RevokedGrantKeys(ctx context.Context) ([]store.KeyRevocation, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.leave()
	var out []store.KeyRevocation
	p := []byte{tagKeyRev}
	err := scan(s.db, p, upperBound(p), func(_, v []byte) (bool, error) {
		var r store.KeyRevocation
		if err := decodeJSON(v, &r); err != nil {
			return false, err
		}
		out = append(out, r)
		return true, nil
	})
	return out, err
}
