package ledger

import (
	"context"
	"fmt"
	"math"
	"slices"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// SealTx is what Seal needs from a backend transaction scoped to one org
// (store.Tx provides it). Reads see the transaction's own writes.
//
// Tree hashes are addressed by their tlog stored-hash index
// (tlog.StoredHashIndex): sealing entries 1..n stores exactly the hashes at
// indexes 0 .. tlog.StoredHashCount(n)-1, in order.
type SealTx interface {
	OrgID() string
	LedgerHead(ctx context.Context) (Head, error)
	// LedgerEntriesInTx returns up to limit of the org's entries with
	// seq > afterSeq, ascending.
	LedgerEntriesInTx(ctx context.Context, afterSeq uint64, limit int) ([]Entry, error)
	// LedgerHashesInTx returns the org's stored tree hashes at indexes, in
	// the order asked; an index that is not stored is an error.
	LedgerHashesInTx(ctx context.Context, indexes []int64) ([]tlog.Hash, error)
	// PutLedgerHashes stores hashes at indexes start, start+1, …; start
	// must be the number of hashes the org has stored (hashes are only ever
	// appended), else it is an error and nothing is stored.
	PutLedgerHashes(ctx context.Context, start int64, hashes []tlog.Hash) error
	// LatestCheckpointInTx returns the org's checkpoint of the largest
	// size; the zero Checkpoint when it has none.
	LatestCheckpointInTx(ctx context.Context) (Checkpoint, error)
	// PutCheckpoint stores c as the org's checkpoint of size c.Size,
	// replacing one of the same size. A size below the latest checkpoint's
	// is an error.
	PutCheckpoint(ctx context.Context, c Checkpoint) error
}

// SealOptions tunes Seal. The zero value seals everything.
type SealOptions struct {
	// MaxEntries bounds how many new entries one Seal covers, so that a
	// long unsealed ledger (one written before checkpoints existed) can be
	// sealed in several short transactions; 0 means no bound.
	MaxEntries int
}

// sealPage is how many entries Seal reads, hashes and stores at a time.
const sealPage = 1000

// emptyRoot is the RFC 9162 root of the empty tree, SHA-256 of "".
var emptyRoot, _ = tlog.TreeHash(0, nil)

// Seal extends the org's Merkle tree over the entries appended since its
// latest checkpoint and signs a checkpoint for the new size; run it inside
// the org's transaction (store Update), which serializes it with appends.
//
// Appends never touch the tree: Seal reads the unsealed entries, checks that
// they continue the chain (seq, org, entry hash, prev link, and the last
// sealed entry still has the leaf hash it was sealed with), computes their
// tlog stored hashes (leaf n-1 is entry seq n, hashed as Entry.LeafHash),
// stores them and the signed checkpoint, and returns it. A ledger that has
// never been sealed (every ledger written before checkpoints existed) has
// sealed size 0, and its first Seal covers all of it; an empty ledger gets a
// checkpoint of size 0.
//
// When nothing was appended and the latest checkpoint already has this
// origin and a signature by signer's key, Seal writes nothing and returns
// it. Otherwise (a new key or origin) it signs the same size again,
// replacing the stored checkpoint of that size.
//
// A chain that does not continue is an error wrapping ErrBrokenChain, and
// nothing is signed.
func Seal(ctx context.Context, tx SealTx, signer note.Signer, origin string, opts SealOptions) (Checkpoint, error) {
	if err := checkOrigin(origin); err != nil {
		return Checkpoint{}, err
	}
	orgID := tx.OrgID()
	head, err := tx.LedgerHead(ctx)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("ledger: read head: %w", err)
	}
	latest, err := tx.LatestCheckpointInTx(ctx)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("ledger: read latest checkpoint: %w", err)
	}
	sealed := latest.Size
	if sealed > head.Seq {
		return Checkpoint{}, fmt.Errorf("%w: the ledger of %q ends at seq %d, before its checkpoint of size %d", ErrBrokenChain, orgID, head.Seq, sealed)
	}
	target := head.Seq
	if opts.MaxEntries > 0 && target-sealed > uint64(opts.MaxEntries) {
		target = sealed + uint64(opts.MaxEntries)
	}
	if target > math.MaxInt64 {
		return Checkpoint{}, fmt.Errorf("ledger: tree size %d out of range", target)
	}
	if target == sealed && !latest.IsZero() && latest.Origin == origin && signedBy(latest, signer) {
		return latest, nil
	}

	hashes, err := loadFrontier(ctx, tx, int64(sealed))
	if err != nil {
		return Checkpoint{}, err
	}
	if !latest.IsZero() {
		root, err := tlog.TreeHash(int64(sealed), hashes)
		if err != nil {
			return Checkpoint{}, fmt.Errorf("ledger: read tree: %w", err)
		}
		if root != latest.Root {
			return Checkpoint{}, fmt.Errorf("%w: the stored tree of %q does not hash to its checkpoint of size %d", ErrBrokenChain, orgID, sealed)
		}
	}
	var prev Entry // the last sealed entry (zero: none)
	if sealed > 0 {
		page, err := tx.LedgerEntriesInTx(ctx, sealed-1, 1)
		if err != nil {
			return Checkpoint{}, fmt.Errorf("ledger: read entries: %w", err)
		}
		if len(page) != 1 || page[0].Seq != sealed {
			return Checkpoint{}, fmt.Errorf("%w: sealed entry %d of %q is missing", ErrBrokenChain, sealed, orgID)
		}
		prev = page[0]
		leaf, err := prev.LeafHash()
		if err != nil {
			return Checkpoint{}, err
		}
		if leaf != hashes.m[tlog.StoredHashIndex(0, int64(sealed-1))] {
			return Checkpoint{}, fmt.Errorf("%w: entry %d of %q changed after it was sealed", ErrBrokenChain, sealed, orgID)
		}
	}

	for n := sealed; n < target; {
		page, err := tx.LedgerEntriesInTx(ctx, n, int(min(sealPage, target-n)))
		if err != nil {
			return Checkpoint{}, fmt.Errorf("ledger: read entries: %w", err)
		}
		if len(page) == 0 {
			return Checkpoint{}, fmt.Errorf("%w: entry %d of %q is missing", ErrBrokenChain, n+1, orgID)
		}
		start := tlog.StoredHashIndex(0, int64(n))
		out := make([]tlog.Hash, 0, 2*len(page))
		for _, e := range page {
			if reason, detail := check(prev, e, orgID); reason != "" {
				return Checkpoint{}, fmt.Errorf("%w: seq %d of %q: %s (%s)", ErrBrokenChain, prev.Seq+1, orgID, reason, detail)
			}
			leaf, err := e.LeafHash()
			if err != nil {
				return Checkpoint{}, err
			}
			stored, err := tlog.StoredHashesForRecordHash(int64(n), leaf, hashes)
			if err != nil {
				return Checkpoint{}, fmt.Errorf("ledger: hash entry %d: %w", e.Seq, err)
			}
			idx := start + int64(len(out))
			for i, h := range stored {
				hashes.m[idx+int64(i)] = h
			}
			out = append(out, stored...)
			prev = e
			n++
		}
		if err := tx.PutLedgerHashes(ctx, start, out); err != nil {
			return Checkpoint{}, fmt.Errorf("ledger: store tree hashes: %w", err)
		}
		hashes.keepFrontier(int64(n))
	}

	root, err := tlog.TreeHash(int64(target), hashes)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("ledger: tree hash: %w", err)
	}
	c, err := signCheckpoint(signer, origin, target, root)
	if err != nil {
		return Checkpoint{}, err
	}
	if err := tx.PutCheckpoint(ctx, c); err != nil {
		return Checkpoint{}, fmt.Errorf("ledger: store checkpoint: %w", err)
	}
	return c, nil
}

// frontier returns the stored-hash indexes of the maximal complete subtrees
// of a tree of size n, left to right (ascending). They are all the stored
// hashes that extending the tree, or hashing it, needs from before.
func frontier(n int64) []int64 {
	var out []int64
	var start int64
	for level := 62; level >= 0; level-- {
		if n&(1<<level) != 0 {
			out = append(out, tlog.StoredHashIndex(level, start>>level))
			start += 1 << level
		}
	}
	return out
}

// txHashes is a tlog.HashReader over the hashes Seal holds in memory (the
// frontier of the sealed tree and the hashes it computes), falling back
// to the transaction for anything else.
type txHashes struct {
	ctx context.Context
	tx  SealTx
	m   map[int64]tlog.Hash
}

// loadFrontier reads, in one call, the frontier of the sealed tree and the
// leaf hash of its last entry.
func loadFrontier(ctx context.Context, tx SealTx, sealed int64) (*txHashes, error) {
	h := &txHashes{ctx: ctx, tx: tx, m: make(map[int64]tlog.Hash)}
	idx := frontier(sealed)
	if sealed > 0 {
		idx = append(idx, tlog.StoredHashIndex(0, sealed-1))
		slices.Sort(idx)
		idx = slices.Compact(idx)
	}
	if _, err := h.ReadHashes(idx); err != nil {
		return nil, err
	}
	return h, nil
}

// ReadHashes implements tlog.HashReader.
func (h *txHashes) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	var miss []int64
	for i, x := range indexes {
		if v, ok := h.m[x]; ok {
			out[i] = v
		} else {
			miss = append(miss, x)
		}
	}
	if len(miss) == 0 {
		return out, nil
	}
	got, err := h.tx.LedgerHashesInTx(h.ctx, miss)
	if err != nil {
		return nil, fmt.Errorf("ledger: read tree hashes: %w", err)
	}
	if len(got) != len(miss) {
		return nil, fmt.Errorf("ledger: read %d tree hashes, got %d", len(miss), len(got))
	}
	for i, x := range miss {
		h.m[x] = got[i]
	}
	for i, x := range indexes {
		out[i] = h.m[x]
	}
	return out, nil
}

// keepFrontier drops every held hash but the frontier of a tree of size n,
// bounding Seal's memory however many entries it seals.
func (h *txHashes) keepFrontier(n int64) {
	keep := make(map[int64]tlog.Hash)
	for _, x := range frontier(n) {
		if v, ok := h.m[x]; ok {
			keep[x] = v
		}
	}
	h.m = keep
}
