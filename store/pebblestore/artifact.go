package pebblestore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/store"
)

// Artifact keys share one sub-table tag and a second tag byte:
//
//	o <org> a r <kind (uvarint-prefixed)> <id>
//	                    uvarint(len(ref)) ref created_at(i64be µs) body-bytes
//	o <org> a x <kind (uvarint-prefixed)> <ref (uvarint-prefixed)> <created_at µs^sign> <id>
//	                    empty: the org's ref index
//
// created_at is Unix microseconds (CreatedAt is stored truncated to the
// microsecond), as an int64 whose sign bit is flipped in keys so that
// big-endian bytes sort like times, over the whole range Validate allows
// (years 1..9999, no clamping). PutArtifact reads the record it replaces
// from the transaction's batch and deletes its index entry in that batch,
// so the record and its index always change together. (Layout 2 also kept
// an index of every org's artifacts under the table tag 'a', which the
// upgrade to layout 3 deletes: see upgrade.go.)
const (
	subArtifact = 'a' // .. a r|x ...                       -> see above

	artifactRecord = 'r' // .. a r <lp kind> <id>              -> artifact value
	artifactByRef  = 'x' // .. a x <lp kind> <lp ref> <created_at> <id> -> empty
)

var (
	_ artifact.Tx     = (*tx)(nil)
	_ artifact.Reader = (*Store)(nil)
)

func appendLP(k []byte, s string) []byte {
	k = binary.AppendUvarint(k, uint64(len(s)))
	return append(k, s...)
}

// micros is t as Unix microseconds (truncated).
func micros(t time.Time) int64 { return t.Truncate(time.Microsecond).UnixMicro() }

func appendMicrosOrder(k []byte, us int64) []byte {
	return binary.BigEndian.AppendUint64(k, uint64(us)^(1<<63))
}

func artifactKey(orgID, kind, id string) []byte {
	k := orgPrefix(orgID, subArtifact, 1+binary.MaxVarintLen64+len(kind)+len(id))
	k = append(k, artifactRecord)
	k = appendLP(k, kind)
	return append(k, id...)
}

// artifactRefPrefix is the prefix of the org's index entries of (kind, ref).
func artifactRefPrefix(orgID, kind, ref string, extra int) []byte {
	k := orgPrefix(orgID, subArtifact, 1+2*binary.MaxVarintLen64+len(kind)+len(ref)+extra)
	k = append(k, artifactByRef)
	k = appendLP(k, kind)
	return appendLP(k, ref)
}

func artifactRefKey(r artifact.Record) []byte {
	k := artifactRefPrefix(r.OrgID, r.Kind, r.Ref, 8+len(r.ID))
	k = appendMicrosOrder(k, micros(r.CreatedAt))
	return append(k, r.ID...)
}

func encodeArtifact(r artifact.Record) []byte {
	v := make([]byte, 0, binary.MaxVarintLen64+len(r.Ref)+8+len(r.Body))
	v = appendLP(v, r.Ref)
	v = binary.BigEndian.AppendUint64(v, uint64(micros(r.CreatedAt)))
	return append(v, r.Body...)
}

func decodeArtifact(orgID, kind, id string, v []byte) (artifact.Record, error) {
	n, w := binary.Uvarint(v)
	if w <= 0 || n > uint64(len(v)-w) || len(v)-w-int(n) < 8 {
		return artifact.Record{}, fmt.Errorf("pebblestore: corrupt artifact value of %s %q in org %q", kind, id, orgID)
	}
	ref := string(v[w : w+int(n)])
	rest := v[w+int(n):]
	r := artifact.Record{
		OrgID:     orgID,
		Kind:      kind,
		ID:        id,
		Ref:       ref,
		CreatedAt: time.UnixMicro(int64(binary.BigEndian.Uint64(rest))).UTC(),
	}
	if len(rest) > 8 {
		r.Body = append([]byte(nil), rest[8:]...)
	}
	return r, nil
}

func readArtifact(r kv, orgID, kind, id string) (artifact.Record, error) {
	v, err := get(r, artifactKey(orgID, kind, id), "%s artifact %q of org %q", kind, id, orgID)
	if err != nil {
		return artifact.Record{}, err
	}
	return decodeArtifact(orgID, kind, id, v)
}

// PutArtifact implements artifact.Tx. It replaces a record with the same
// kind and id, deleting its index entry before writing the new one.
func (t *tx) PutArtifact(ctx context.Context, r artifact.Record) error {
	if err := r.ValidateFor(t.org); err != nil {
		return err
	}
	if err := t.lock(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	key := artifactKey(t.org, r.Kind, r.ID)
	prefix := key[:len(key)-len(r.ID)]
	if absent, err := t.absent(prefix, key); err != nil {
		return err
	} else if absent {
		return t.putNewArtifact(prefix, key, r)
	}
	// A raw lookup: the usual record is new, and get would build a
	// not-found error only to drop it.
	switch v, closer, err := t.b.Get(key); {
	case err == nil:
		old, err := decodeArtifact(t.org, r.Kind, r.ID, v)
		if cerr := closer.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if err := t.b.Delete(artifactRefKey(old), nil); err != nil {
			return fmt.Errorf("pebblestore: write: %w", err)
		}
	case !errors.Is(err, pebble.ErrNotFound):
		return fmt.Errorf("pebblestore: get %s artifact %q of org %q: %w", r.Kind, r.ID, t.org, err)
	}
	return t.putNewArtifact(prefix, key, r)
}

// putNewArtifact writes r under key, in the range of prefix, which holds
// no record (any earlier one's index entry is deleted).
func (t *tx) putNewArtifact(prefix, key []byte, r artifact.Record) error {
	t.raise(prefix, key) // first: a ceiling too high is always safe
	if r.Kind == store.DataProtectionKind && r.ID == store.DataProtectionID {
		t.protection, t.protectionSet = append([]byte(nil), r.Body...), true
	}
	if err := t.set(key, encodeArtifact(r)); err != nil {
		return err
	}
	return t.set(artifactRefKey(r), []byte{})
}

// ArtifactInTx implements artifact.Tx.
func (t *tx) ArtifactInTx(ctx context.Context, kind, id string) (artifact.Record, error) {
	if err := artifact.ValidateKey(t.org, kind, id); err != nil {
		return artifact.Record{}, err
	}
	if err := t.lock(ctx); err != nil {
		return artifact.Record{}, err
	}
	defer t.mu.Unlock()
	return readArtifact(t.b, t.org, kind, id)
}

// Artifact implements artifact.Reader.
func (s *Store) Artifact(ctx context.Context, orgID, kind, id string) (artifact.Record, error) {
	if err := artifact.ValidateKey(orgID, kind, id); err != nil {
		return artifact.Record{}, err
	}
	if err := s.enter(ctx); err != nil {
		return artifact.Record{}, err
	}
	defer s.leave()
	return readArtifact(s.db, orgID, kind, id)
}

// ArtifactsByRef implements artifact.Reader: a scan of the org's ref index,
// each record read from the same snapshot.
func (s *Store) ArtifactsByRef(ctx context.Context, orgID, kind, ref string, limit int) ([]artifact.Record, error) {
	if err := artifact.ValidateRef(orgID, kind, ref); err != nil {
		return nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.leave()
	snap := s.db.NewSnapshot()
	defer snap.Close()
	p := artifactRefPrefix(orgID, kind, ref, 0)
	return scanArtifactIndex(ctx, snap, kind, p, limit, func(rest []byte) (string, string, bool) {
		return orgID, string(rest), true
	})
}

// scanArtifactIndex reads the records of the index entries under p, the
// prefix of kind and a ref, at most limit of them (limit <= 0: all). split
// returns the org and id that follow an entry's time.
func scanArtifactIndex(ctx context.Context, r *pebble.Snapshot, kind string, p []byte, limit int, split func(rest []byte) (orgID, id string, ok bool)) ([]artifact.Record, error) {
	var out []artifact.Record
	err := scan(r, p, upperBound(p), func(k, _ []byte) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if len(k) < len(p)+8 {
			return false, fmt.Errorf("pebblestore: corrupt artifact index key %q", k)
		}
		orgID, id, ok := split(k[len(p)+8:])
		if !ok {
			return false, fmt.Errorf("pebblestore: corrupt artifact index key %q", k)
		}
		rec, err := readArtifact(r, orgID, kind, id)
		if err != nil {
			return false, fmt.Errorf("pebblestore: artifact index: %w", err)
		}
		out = append(out, rec)
		return limit <= 0 || len(out) < limit, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteArtifact implements artifact.Tx: the record and its index entry
// are deleted in the transaction's batch.
func (t *tx) DeleteArtifact(ctx context.Context, kind, id string) (bool, error) {
	if err := artifact.ValidateKey(t.org, kind, id); err != nil {
		return false, err
	}
	if err := t.lock(ctx); err != nil {
		return false, err
	}
	defer t.mu.Unlock()
	old, err := readArtifact(t.b, t.org, kind, id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := t.b.Delete(artifactKey(t.org, kind, id), nil); err != nil {
		return false, fmt.Errorf("pebblestore: write: %w", err)
	}
	if err := t.b.Delete(artifactRefKey(old), nil); err != nil {
		return false, fmt.Errorf("pebblestore: write: %w", err)
	}
	if kind == store.DataProtectionKind && id == store.DataProtectionID {
		t.protection, t.protectionSet = nil, true
	}
	return true, nil
}

// DataProtectionInTx implements store.Tx: read once per org and then kept
// in memory (this process is the store's only writer), so a decision of
// an org without a setting reads nothing for it.
func (t *tx) DataProtectionInTx(ctx context.Context) ([]byte, error) {
	if err := t.lock(ctx); err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	if t.protectionSet {
		return t.protection, nil
	}
	o := t.state
	if !o.protectionKnown {
		r, err := readArtifact(t.b, t.org, store.DataProtectionKind, store.DataProtectionID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			r.Body = nil
		case err != nil:
			return nil, err
		}
		// Read under the org's mutex: nothing else writes it meanwhile.
		o.protection, o.protectionKnown = r.Body, true
	}
	return o.protection, nil
}
