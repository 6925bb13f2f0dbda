package pebblestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/idempotency"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
)

// kv is what reads need: *pebble.DB for Reader methods, the transaction's
// indexed *pebble.Batch (the DB plus the batch's own writes) for Tx getters.
type kv interface {
	Get(key []byte) ([]byte, io.Closer, error)
	NewIter(o *pebble.IterOptions) (*pebble.Iterator, error)
}

// get returns a copy of the value at key, or an error wrapping
// store.ErrNotFound that names what was looked up.
func get(r kv, key []byte, what string, args ...any) ([]byte, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("pebblestore: %s: %w", fmt.Sprintf(what, args...), store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("pebblestore: get %s: %w", fmt.Sprintf(what, args...), err)
	}
	out := append([]byte(nil), v...)
	return out, closer.Close()
}

// has reports whether key exists.
func has(r kv, key []byte) (bool, error) {
	_, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pebblestore: get: %w", err)
	}
	return true, closer.Close()
}

// scan calls fn for each key/value in [lower, upper), ascending, until fn
// returns false or an error. The slices are only valid during the call.
func scan(r kv, lower, upper []byte, fn func(k, v []byte) (bool, error)) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("pebblestore: iterate: %w", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return fmt.Errorf("pebblestore: iterate: %w", err)
		}
		more, err := fn(it.Key(), v)
		if err != nil {
			_ = it.Close()
			return err
		}
		if !more {
			break
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("pebblestore: iterate: %w", err)
	}
	return nil
}

// last returns a copy of the value of the greatest key in [lower, upper).
func last(r kv, lower, upper []byte) ([]byte, bool, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, false, fmt.Errorf("pebblestore: iterate: %w", err)
	}
	var out []byte
	found := it.Last()
	if found {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return nil, false, fmt.Errorf("pebblestore: iterate: %w", err)
		}
		out = append([]byte(nil), v...)
	}
	if err := it.Close(); err != nil {
		return nil, false, fmt.Errorf("pebblestore: iterate: %w", err)
	}
	return out, found, nil
}

// firstKey returns copies of the least key in [lower, upper) and its value.
func firstKey(r kv, lower, upper []byte) (k, v []byte, found bool, err error) {
	return edgeKey(r, lower, upper, (*pebble.Iterator).First)
}

// lastKey returns copies of the greatest key in [lower, upper) and its value.
func lastKey(r kv, lower, upper []byte) (k, v []byte, found bool, err error) {
	return edgeKey(r, lower, upper, (*pebble.Iterator).Last)
}

// edgeKey returns copies of the key in [lower, upper) that seek (First or
// Last) positions on, and its value.
func edgeKey(r kv, lower, upper []byte, seek func(*pebble.Iterator) bool) (k, v []byte, found bool, err error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, nil, false, fmt.Errorf("pebblestore: iterate: %w", err)
	}
	if found = seek(it); found {
		val, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return nil, nil, false, fmt.Errorf("pebblestore: iterate: %w", err)
		}
		k, v = append([]byte(nil), it.Key()...), append([]byte(nil), val...)
	}
	if err := it.Close(); err != nil {
		return nil, nil, false, fmt.Errorf("pebblestore: iterate: %w", err)
	}
	return k, v, found, nil
}

func readOrg(r kv, orgID string) (tenant.Org, error) {
	var o tenant.Org
	v, err := get(r, orgKey(orgID), "org %q", orgID)
	if err != nil {
		return o, err
	}
	return o, decodeJSON(v, &o)
}

func readAPIKey(r kv, hash string) (tenant.APIKey, error) {
	var k tenant.APIKey
	v, err := get(r, apiKeyKey(hash), "api key")
	if err != nil {
		return k, err
	}
	return k, decodeJSON(v, &k)
}

// readHead returns the org's head, the zero Head when its ledger is empty.
func readHead(r kv, orgID string) (ledger.Head, error) {
	var h ledger.Head
	v, err := get(r, headKey(orgID), "ledger head of %q", orgID)
	if errors.Is(err, store.ErrNotFound) {
		return h, nil
	}
	if err != nil {
		return h, err
	}
	return h, decodeJSON(v, &h)
}

func readEntries(r kv, orgID string, afterSeq uint64, limit int) ([]ledger.Entry, error) {
	if limit <= 0 || afterSeq == ^uint64(0) {
		return nil, nil
	}
	var out []ledger.Entry
	lower := entryKey(orgID, afterSeq+1)
	upper := upperBound(orgPrefix(orgID, subEntry, 0))
	err := scan(r, lower, upper, func(_, v []byte) (bool, error) {
		var e ledger.Entry
		if err := decodeJSON(v, &e); err != nil {
			return false, err
		}
		out = append(out, e)
		return len(out) < limit, nil
	})
	return out, err
}

// readTreeHashes returns the org's tree hashes at indexes, in order; a
// missing one is store.ErrNotFound.
func readTreeHashes(r kv, orgID string, indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 {
			return nil, fmt.Errorf("pebblestore: tree hash index %d: %w", x, store.ErrNotFound)
		}
		v, err := get(r, treeHashKey(orgID, x), "tree hash %d of %q", x, orgID)
		if err != nil {
			return nil, err
		}
		if len(v) != tlog.HashSize {
			return nil, fmt.Errorf("pebblestore: corrupt tree hash %d of %q", x, orgID)
		}
		copy(out[i][:], v)
	}
	return out, nil
}

// treeHashCount is the number of tree hashes the org has stored (they are
// stored at indexes 0..count-1).
func treeHashCount(r kv, orgID string) (int64, error) {
	p := orgPrefix(orgID, subTreeHash, 0)
	k, _, found, err := lastKey(r, p, upperBound(p))
	if err != nil || !found {
		return 0, err
	}
	if len(k) != len(p)+8 {
		return 0, fmt.Errorf("pebblestore: corrupt tree hash key of %q", orgID)
	}
	return int64(binary.BigEndian.Uint64(k[len(p):])) + 1, nil
}

// readLatestCheckpoint returns the org's largest checkpoint, the zero
// Checkpoint when it has none.
func readLatestCheckpoint(r kv, orgID string) (ledger.Checkpoint, error) {
	p := orgPrefix(orgID, subCheckpoint, 0)
	k, v, found, err := lastKey(r, p, upperBound(p))
	if err != nil || !found {
		return ledger.Checkpoint{}, err
	}
	if len(k) != len(p)+8 {
		return ledger.Checkpoint{}, fmt.Errorf("pebblestore: checkpoint key of %q: %w", orgID, store.ErrCorrupt)
	}
	return decodeCheckpoint(binary.BigEndian.Uint64(k[len(p):]), v)
}

func readCheckpoint(r kv, orgID string, size uint64) (ledger.Checkpoint, error) {
	v, closer, err := r.Get(checkpointKey(orgID, size))
	if errors.Is(err, pebble.ErrNotFound) {
		return ledger.Checkpoint{}, fmt.Errorf("pebblestore: checkpoint of size %d of %q: %w (%w)", size, orgID, ledger.ErrCheckpointNotFound, store.ErrNotFound)
	}
	if err != nil {
		return ledger.Checkpoint{}, fmt.Errorf("pebblestore: get checkpoint: %w", err)
	}
	defer closer.Close()
	return decodeCheckpoint(size, v)
}

func readBundle(r kv, orgID, version string) (store.BundleRecord, error) {
	var b store.BundleRecord
	seq, err := get(r, bundleVersionKey(orgID, version), "bundle %q of org %q", version, orgID)
	if err != nil {
		return b, err
	}
	if len(seq) != 8 {
		return b, fmt.Errorf("pebblestore: corrupt bundle index for %q", version)
	}
	v, err := get(r, bundleKey(orgID, binary.BigEndian.Uint64(seq)), "bundle %q of org %q", version, orgID)
	if err != nil {
		return b, err
	}
	return b, decodeJSON(v, &b)
}

func readLatestBundle(r kv, orgID string) (store.BundleRecord, error) {
	var b store.BundleRecord
	p := orgPrefix(orgID, subBundle, 0)
	v, ok, err := last(r, p, upperBound(p))
	if err != nil {
		return b, err
	}
	if !ok {
		return b, fmt.Errorf("pebblestore: no bundle in org %q: %w", orgID, store.ErrNotFound)
	}
	return b, decodeJSON(v, &b)
}

func readActivation(r kv, orgID string) (store.Activation, error) {
	var a store.Activation
	v, err := get(r, activationKey(orgID), "activation of org %q", orgID)
	if err != nil {
		return a, err
	}
	return a, decodeJSON(v, &a)
}

func readBundles(r kv, orgID string) ([]store.BundleRecord, error) {
	var out []store.BundleRecord
	p := orgPrefix(orgID, subBundle, 0)
	err := scan(r, p, upperBound(p), func(_, v []byte) (bool, error) {
		var b store.BundleRecord
		if err := decodeJSON(v, &b); err != nil {
			return false, err
		}
		out = append(out, b)
		return true, nil
	})
	return out, err
}

func readDossier(r kv, orgID, dossierID string) (dossier.Stored, error) {
	v, err := get(r, dossierKey(orgID, dossierID), "dossier %q of org %q", dossierID, orgID)
	if err != nil {
		return dossier.Stored{}, err
	}
	return decodeDossier(orgID, dossierID, v)
}

func readDossierByDecision(r kv, orgID, decisionID string) (dossier.Stored, error) {
	id, err := get(r, decisionKey(orgID, decisionID), "dossier of decision %q in org %q", decisionID, orgID)
	if err != nil {
		return dossier.Stored{}, err
	}
	return readDossier(r, orgID, string(id))
}

func scanSummaries(ctx context.Context, r kv, orgID string, from, to time.Time, fn func(dossier.Summary) bool) error {
	if !from.Before(to) {
		return nil
	}
	return scan(r, summaryBound(orgID, from), summaryBound(orgID, to), func(_, v []byte) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		var s summaryValue
		if err := decodeJSON(v, &s); err != nil {
			return false, err
		}
		return fn(dossier.Summary{
			DossierID:    s.DossierID,
			DecisionID:   s.DecisionID,
			CreatedAt:    s.CreatedAt,
			Outcome:      s.Outcome,
			Mode:         s.Mode,
			WorkflowKey:  s.WorkflowKey,
			DecisionType: s.DecisionType,
		}), nil
	})
}

// scanDossiers walks the org's time index over [from, to) with one
// iterator and reads each dossier through a clone of it: the clone sees the
// same state of the store, so every indexed dossier is there and a
// concurrent write shows in both or neither.
func scanDossiers(ctx context.Context, r kv, orgID string, from, to time.Time, fn func(dossier.Stored) bool) error {
	if !from.Before(to) {
		return nil
	}
	lower := summaryBound(orgID, from)
	index, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: summaryBound(orgID, to)})
	if err != nil {
		return fmt.Errorf("pebblestore: iterate: %w", err)
	}
	defer index.Close()
	dossierPrefix := orgPrefix(orgID, subDossier, 64)
	records, err := index.Clone(pebble.CloneOptions{IterOptions: &pebble.IterOptions{
		LowerBound: dossierPrefix, UpperBound: upperBound(dossierPrefix),
	}})
	if err != nil {
		return fmt.Errorf("pebblestore: iterate: %w", err)
	}
	defer records.Close()
	idStart := len(lower) // a summary key is the bound's bytes, then the dossier id
	key := dossierPrefix  // reused for every lookup
	for ok := index.First(); ok; ok = index.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		id := index.Key()[idStart:]
		key = append(key[:len(dossierPrefix)], id...)
		// The whole key is the prefix (default comparer), so this is a
		// point lookup that the bloom filters can answer.
		if !records.SeekPrefixGE(key) || !bytes.Equal(records.Key(), key) {
			if err := records.Error(); err != nil {
				return fmt.Errorf("pebblestore: iterate: %w", err)
			}
			return fmt.Errorf("pebblestore: indexed dossier %q of org %q has no record: %w", id, orgID, store.ErrCorrupt)
		}
		v, err := records.ValueAndErr()
		if err != nil {
			return fmt.Errorf("pebblestore: iterate: %w", err)
		}
		// The body is the iterator's until it moves: fn may not keep it.
		rec, err := viewDossier(orgID, string(id), v)
		if err != nil {
			return err
		}
		if !fn(rec) {
			return nil
		}
	}
	if err := index.Error(); err != nil {
		return fmt.Errorf("pebblestore: iterate: %w", err)
	}
	return nil
}

func readIdempotency(r kv, orgID, scope, key string) (store.IdempotencyRecord, error) {
	var rec store.IdempotencyRecord
	v, err := getOr(r, idempotencyKey(orgID, scope, key), idempotency.ErrNotFound, "idempotency key in scope %q of org %q", scope, orgID)
	if err != nil {
		return rec, err
	}
	return rec, decodeJSON(v, &rec)
}

// Reader methods: read the DB directly (committed data only).

// Org implements tenant.Reader.
func (s *Store) Org(ctx context.Context, orgID string) (tenant.Org, error) {
	if err := s.enter(ctx); err != nil {
		return tenant.Org{}, err
	}
	defer s.leave()
	return readOrg(s.db, orgID)
}

// APIKeyByHash implements tenant.Reader.
func (s *Store) APIKeyByHash(ctx context.Context, hash string) (tenant.APIKey, error) {
	if err := s.enter(ctx); err != nil {
		return tenant.APIKey{}, err
	}
	defer s.leave()
	return readAPIKey(s.db, hash)
}

// Orgs implements tenant.Reader: orgs in key order (by id length, then
// id), one seek per org over the records filed under it.
func (s *Store) Orgs(ctx context.Context, afterID string, limit int) ([]tenant.Org, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.leave()
	out := []tenant.Org{}
	if limit <= 0 {
		return out, nil
	}
	lower, upper := []byte{tagOrg}, []byte{tagOrg + 1}
	if afterID != "" {
		p := orgPrefix(afterID, 0, 0)
		lower = upperBound(p[:len(p)-1]) // past every record of afterID
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("pebblestore: iterate orgs: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok && len(out) < limit; {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		k := it.Key()
		n, w := binary.Uvarint(k[1:])
		if w <= 0 || uint64(len(k)-1-w) < n {
			return nil, fmt.Errorf("pebblestore: malformed org key %x", k)
		}
		orgID := string(k[1+w : 1+w+int(n)])
		switch o, err := readOrg(s.db, orgID); {
		case errors.Is(err, store.ErrNotFound): // the platform's records
		case err != nil:
			return nil, err
		default:
			out = append(out, o)
		}
		ok = it.SeekGE(upperBound(k[:1+w+int(n)]))
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("pebblestore: iterate orgs: %w", err)
	}
	return out, nil
}

// APIKeysOf implements tenant.Reader: keys are filed by hash alone, so this
// scans every key (rare work: revoking an org's credentials).
func (s *Store) APIKeysOf(ctx context.Context, orgID string) ([]tenant.APIKey, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.leave()
	prefix := []byte{tagAPIKey}
	out := []tenant.APIKey{}
	err := scan(s.db, prefix, upperBound(prefix), func(_, v []byte) (bool, error) {
		var k tenant.APIKey
		if err := decodeJSON(v, &k); err != nil {
			return false, err
		}
		if k.OrgID == orgID {
			out = append(out, k)
		}
		return ctx.Err() == nil, ctx.Err()
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b tenant.APIKey) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// LedgerEntries implements ledger.Reader. A limit <= 0 returns no entries.
func (s *Store) LedgerEntries(ctx context.Context, orgID string, afterSeq uint64, limit int) ([]ledger.Entry, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.leave()
	return readEntries(s.db, orgID, afterSeq, limit)
}

// LedgerHeadOf implements ledger.Reader.
func (s *Store) LedgerHeadOf(ctx context.Context, orgID string) (ledger.Head, error) {
	if err := s.enter(ctx); err != nil {
		return ledger.Head{}, err
	}
	defer s.leave()
	return readHead(s.db, orgID)
}

// LedgerHashes implements ledger.TreeReader.
func (s *Store) LedgerHashes(ctx context.Context, orgID string, indexes []int64) ([]tlog.Hash, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.leave()
	return readTreeHashes(s.db, orgID, indexes)
}

// LatestCheckpoint implements ledger.TreeReader.
func (s *Store) LatestCheckpoint(ctx context.Context, orgID string) (ledger.Checkpoint, error) {
	if err := s.enter(ctx); err != nil {
		return ledger.Checkpoint{}, err
	}
	defer s.leave()
	return readLatestCheckpoint(s.db, orgID)
}

// CheckpointAt implements ledger.TreeReader.
func (s *Store) CheckpointAt(ctx context.Context, orgID string, size uint64) (ledger.Checkpoint, error) {
	if err := s.enter(ctx); err != nil {
		return ledger.Checkpoint{}, err
	}
	defer s.leave()
	return readCheckpoint(s.db, orgID, size)
}

// Dossier implements dossier.Reader.
func (s *Store) Dossier(ctx context.Context, orgID, dossierID string) (dossier.Stored, error) {
	if err := s.enter(ctx); err != nil {
		return dossier.Stored{}, err
	}
	defer s.leave()
	return readDossier(s.db, orgID, dossierID)
}

// DossierByDecision implements dossier.Reader.
func (s *Store) DossierByDecision(ctx context.Context, orgID, decisionID string) (dossier.Stored, error) {
	if err := s.enter(ctx); err != nil {
		return dossier.Stored{}, err
	}
	defer s.leave()
	return readDossierByDecision(s.db, orgID, decisionID)
}

// DossierSummaries implements dossier.Reader. Dossiers created at the same
// instant come in dossier id order.
func (s *Store) DossierSummaries(ctx context.Context, orgID string, from, to time.Time, fn func(dossier.Summary) bool) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.leave()
	return scanSummaries(ctx, s.db, orgID, from, to, fn)
}

// Dossiers implements dossier.Reader, in DossierSummaries' order, from
// one consistent view of the store.
func (s *Store) Dossiers(ctx context.Context, orgID string, from, to time.Time, fn func(dossier.Stored) bool) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.leave()
	return scanDossiers(ctx, s.db, orgID, from, to, fn)
}

// Bundle implements store.Reader.
func (s *Store) Bundle(ctx context.Context, orgID, version string) (store.BundleRecord, error) {
	if err := s.enter(ctx); err != nil {
		return store.BundleRecord{}, err
	}
	defer s.leave()
	return readBundle(s.db, orgID, version)
}

// LatestBundle implements store.Reader.
func (s *Store) LatestBundle(ctx context.Context, orgID string) (store.BundleRecord, error) {
	if err := s.enter(ctx); err != nil {
		return store.BundleRecord{}, err
	}
	defer s.leave()
	return readLatestBundle(s.db, orgID)
}

// Activation implements store.Reader.
func (s *Store) Activation(ctx context.Context, orgID string) (store.Activation, error) {
	if err := s.enter(ctx); err != nil {
		return store.Activation{}, err
	}
	defer s.leave()
	return readActivation(s.db, orgID)
}

// Bundles implements store.Reader.
func (s *Store) Bundles(ctx context.Context, orgID string) ([]store.BundleRecord, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.leave()
	return readBundles(s.db, orgID)
}
