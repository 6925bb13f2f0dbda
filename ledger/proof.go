package ledger

import (
	"context"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
)

// TreeReader reads an org's ledger together with its sealed Merkle tree
// (store.Reader provides it). Reads are of committed data.
type TreeReader interface {
	Reader
	// LedgerHashes returns the org's stored tree hashes at the given tlog
	// stored-hash indexes, in the order asked; an index that is not stored
	// is an error.
	LedgerHashes(ctx context.Context, orgID string, indexes []int64) ([]tlog.Hash, error)
	// LatestCheckpoint returns the org's checkpoint of the largest size;
	// the zero Checkpoint when it has none (never sealed).
	LatestCheckpoint(ctx context.Context, orgID string) (Checkpoint, error)
	// CheckpointAt returns the org's checkpoint of tree size size; an
	// error wrapping ErrCheckpointNotFound when there is none.
	CheckpointAt(ctx context.Context, orgID string, size uint64) (Checkpoint, error)
}

// hashReader is a tlog.HashReader over an org's stored tree hashes.
func hashReader(ctx context.Context, r TreeReader, orgID string) tlog.HashReader {
	return tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		return r.LedgerHashes(ctx, orgID, indexes)
	})
}

// requireSealed fails with ErrNotSealed when size is beyond the org's latest
// checkpoint.
func requireSealed(ctx context.Context, r TreeReader, orgID string, size uint64) error {
	latest, err := r.LatestCheckpoint(ctx, orgID)
	if err != nil {
		return fmt.Errorf("ledger: read latest checkpoint: %w", err)
	}
	if size > latest.Size {
		return fmt.Errorf("%w: tree size %d of %q, latest checkpoint has size %d", ErrNotSealed, size, orgID, latest.Size)
	}
	return nil
}

// InclusionProof returns the RFC 9162 inclusion proof of entry seq (leaf
// seq-1) in the org's tree of size treeSize, which must be sealed (at most
// the latest checkpoint's size). It reads O(log treeSize) stored hashes in
// one call. Verify it with VerifyInclusion.
func InclusionProof(ctx context.Context, r TreeReader, orgID string, seq, treeSize uint64) (tlog.RecordProof, error) {
	if seq == 0 || seq > treeSize {
		return nil, fmt.Errorf("%w: seq %d in a tree of size %d", ErrOutOfRange, seq, treeSize)
	}
	if err := requireSealed(ctx, r, orgID, treeSize); err != nil {
		return nil, err
	}
	p, err := tlog.ProveRecord(int64(treeSize), int64(seq-1), hashReader(ctx, r, orgID))
	if err != nil {
		return nil, fmt.Errorf("ledger: inclusion proof of seq %d in %d: %w", seq, treeSize, err)
	}
	return p, nil
}

// ConsistencyProof returns the RFC 9162 consistency proof between the org's
// trees of sizes oldSize and newSize (oldSize <= newSize, both sealed): the
// hashes showing that the larger tree extends the smaller one. It is empty
// when oldSize is 0 or equals newSize. Verify it with VerifyConsistency.
func ConsistencyProof(ctx context.Context, r TreeReader, orgID string, oldSize, newSize uint64) (tlog.TreeProof, error) {
	if oldSize > newSize {
		return nil, fmt.Errorf("%w: old size %d > new size %d", ErrOutOfRange, oldSize, newSize)
	}
	if err := requireSealed(ctx, r, orgID, newSize); err != nil {
		return nil, err
	}
	if oldSize == 0 || oldSize == newSize {
		return tlog.TreeProof{}, nil
	}
	p, err := tlog.ProveTree(int64(newSize), int64(oldSize), hashReader(ctx, r, orgID))
	if err != nil {
		return nil, fmt.Errorf("ledger: consistency proof %d..%d: %w", oldSize, newSize, err)
	}
	return p, nil
}

// VerifyInclusion checks that leafHash (Entry.LeafHash) is entry seq of the
// tree c describes. c must come from VerifyCheckpoint: a Checkpoint is
// only as trustworthy as its signature. Errors wrap ErrProofInvalid.
func VerifyInclusion(c Checkpoint, leafHash tlog.Hash, seq uint64, proof tlog.RecordProof) error {
	if seq == 0 || seq > c.Size {
		return fmt.Errorf("%w: seq %d is not in a tree of size %d", ErrProofInvalid, seq, c.Size)
	}
	if err := tlog.CheckRecord(proof, int64(c.Size), c.Root, int64(seq-1), leafHash); err != nil {
		return fmt.Errorf("%w: inclusion of seq %d in size %d: %v", ErrProofInvalid, seq, c.Size, err)
	}
	return nil
}

// VerifyConsistency checks that the tree of newer extends the tree of older
// (same origin, older.Size <= newer.Size): nothing sealed in older was
// changed, removed or reordered. Both must come from VerifyCheckpoint.
// Errors wrap ErrProofInvalid or ErrOriginMismatch.
func VerifyConsistency(older, newer Checkpoint, proof tlog.TreeProof) error {
	if older.Origin != newer.Origin {
		return fmt.Errorf("%w: %q and %q", ErrOriginMismatch, older.Origin, newer.Origin)
	}
	switch {
	case older.Size > newer.Size:
		return fmt.Errorf("%w: size %d is older than size %d", ErrProofInvalid, older.Size, newer.Size)
	case older.Size == 0:
		if older.Root != emptyRoot || len(proof) != 0 {
			return fmt.Errorf("%w: the empty tree has root %v and an empty proof", ErrProofInvalid, emptyRoot)
		}
		return nil
	case older.Size == newer.Size:
		if older.Root != newer.Root || len(proof) != 0 {
			return fmt.Errorf("%w: two trees of size %d with different roots", ErrProofInvalid, older.Size)
		}
		return nil
	}
	if err := tlog.CheckTree(proof, int64(newer.Size), newer.Root, int64(older.Size), older.Root); err != nil {
		return fmt.Errorf("%w: consistency of size %d with size %d: %v", ErrProofInvalid, older.Size, newer.Size, err)
	}
	return nil
}

// Anchor places one ledger entry in a signed tree: the ledger anchor of a
// proof packet. Hashes are base64 in JSON; Checkpoint is the signed note.
type Anchor struct {
	Seq            uint64           `json:"seq"`
	LeafHash       tlog.Hash        `json:"leaf_hash"`
	Checkpoint     string           `json:"checkpoint"`
	InclusionProof tlog.RecordProof `json:"inclusion_proof"`
}

// NewAnchor returns the anchor of entry seq in the org's latest checkpoint;
// ErrNotSealed when seq is beyond it (Seal first).
func NewAnchor(ctx context.Context, r TreeReader, orgID string, seq uint64) (Anchor, error) {
	latest, err := r.LatestCheckpoint(ctx, orgID)
	if err != nil {
		return Anchor{}, fmt.Errorf("ledger: read latest checkpoint: %w", err)
	}
	if seq == 0 || seq > latest.Size {
		if seq == 0 {
			return Anchor{}, fmt.Errorf("%w: seq 0", ErrOutOfRange)
		}
		return Anchor{}, fmt.Errorf("%w: seq %d of %q, latest checkpoint has size %d", ErrNotSealed, seq, orgID, latest.Size)
	}
	page, err := r.LedgerEntries(ctx, orgID, seq-1, 1)
	if err != nil {
		return Anchor{}, fmt.Errorf("ledger: read entry %d: %w", seq, err)
	}
	if len(page) != 1 || page[0].Seq != seq {
		return Anchor{}, fmt.Errorf("%w: entry %d of %q is missing", ErrBrokenChain, seq, orgID)
	}
	leaf, err := page[0].LeafHash()
	if err != nil {
		return Anchor{}, err
	}
	p, err := tlog.ProveRecord(int64(latest.Size), int64(seq-1), hashReader(ctx, r, orgID))
	if err != nil {
		return Anchor{}, fmt.Errorf("ledger: inclusion proof of seq %d in %d: %w", seq, latest.Size, err)
	}
	return Anchor{Seq: seq, LeafHash: leaf, Checkpoint: string(latest.Note), InclusionProof: p}, nil
}

// VerifyAnchor checks offline that e is in the log origin as a proves: the
// checkpoint is signed by verifierKey and names origin, a is about e (same
// seq, leaf hash recomputed from e), and the inclusion proof leads to the
// checkpoint's root. It returns the checkpoint.
func VerifyAnchor(verifierKey, origin string, e Entry, a Anchor) (Checkpoint, error) {
	c, err := VerifyCheckpoint(verifierKey, []byte(a.Checkpoint))
	if err != nil {
		return Checkpoint{}, err
	}
	if c.Origin != origin {
		return Checkpoint{}, fmt.Errorf("%w: checkpoint of %q, want %q", ErrOriginMismatch, c.Origin, origin)
	}
	if e.Seq != a.Seq {
		return Checkpoint{}, fmt.Errorf("%w: anchor of seq %d for entry %d", ErrProofInvalid, a.Seq, e.Seq)
	}
	leaf, err := e.LeafHash()
	if err != nil {
		return Checkpoint{}, fmt.Errorf("%w: %v", ErrProofInvalid, err)
	}
	if leaf != a.LeafHash {
		return Checkpoint{}, fmt.Errorf("%w: the entry's leaf hash is %v, the anchor's %v", ErrProofInvalid, leaf, a.LeafHash)
	}
	if err := VerifyInclusion(c, leaf, a.Seq, a.InclusionProof); err != nil {
		return Checkpoint{}, err
	}
	return c, nil
}
