package audit

import (
	"context"
	"errors"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
)

// DefaultSealInterval is how often RunSealer signs checkpoints of the orgs
// whose ledgers grew.
const DefaultSealInterval = time.Second

// sealMaxEntries bounds one sealing transaction, so that a long unsealed
// ledger does not hold its org's lock for long; sealing repeats until done.
const sealMaxEntries = 100_000

// SealLedger extends the org's Merkle tree over every entry appended since
// the last seal and signs a checkpoint of it: the only call that writes a
// checkpoint (RunSealer calls it). It first waits until every visible entry
// is durable, so no checkpoint names an entry a power cut could still undo.
// With nothing new it returns the latest checkpoint unchanged.
func (s *Service) SealLedger(ctx context.Context, orgID string) (ledger.Checkpoint, error) {
	k, err := s.LedgerKey()
	if err != nil {
		return ledger.Checkpoint{}, err
	}
	// A seal writes a checkpoint even over an empty ledger: only for an org.
	if err := s.d.Store.RequireOrg(ctx, orgID); err != nil {
		return ledger.Checkpoint{}, err
	}
	if err := s.d.Store.Sync(ctx); err != nil {
		return ledger.Checkpoint{}, core.Unavailable("sync ledger", err)
	}
	origin := s.LedgerOrigin(orgID)
	for {
		var c ledger.Checkpoint
		var head ledger.Head
		// The raw backend: a seal is not growth that needs sealing.
		err := s.d.Store.Backend.Update(ctx, orgID, func(tx store.Tx) error {
			var err error
			if c, err = ledger.Seal(ctx, tx, k, origin, ledger.SealOptions{MaxEntries: sealMaxEntries}); err != nil {
				return err
			}
			head, err = tx.LedgerHead(ctx)
			return err
		})
		switch {
		case errors.Is(err, ledger.ErrBrokenChain):
			return ledger.Checkpoint{}, &core.Error{Kind: core.ErrConflict, Code: CodeLedgerBroken,
				Detail: "the ledger does not verify, so no checkpoint is signed over it", Err: err}
		case err != nil:
			return ledger.Checkpoint{}, core.Unavailable("seal ledger", err)
		case c.Size >= head.Seq:
			return c, nil
		}
	}
}

// RunSealer signs a checkpoint of every org whose ledger grew, every
// interval (DefaultSealInterval when 0), until ctx ends. An org whose seal
// fails is retried at the next tick.
func (s *Service) RunSealer(ctx context.Context, interval time.Duration) {
	if s.d.LedgerKey == nil {
		return
	}
	if interval <= 0 {
		interval = DefaultSealInterval
	}
	core.EveryTick(ctx, interval, func() {
		for _, org := range s.d.Store.TakeGrown() {
			switch _, err := s.SealLedger(ctx, org); {
			case err == nil:
				s.d.Store.Sealed(org)
			case ctx.Err() == nil:
				s.d.Logger.Warn("sealing the ledger failed", "org_id", org, "err", err)
				fallthrough
			default:
				s.d.Store.MarkGrown(org)
			}
		}
	})
}

// LedgerCheckpoint returns the org's latest signed checkpoint as stored. It
// is a read and never seals: RunSealer signs a checkpoint within a seal
// interval of an append, SealLedger signs one now. Before the first seal it
// answers CHECKPOINT_NOT_FOUND (404).
func (s *Service) LedgerCheckpoint(ctx context.Context, orgID string) (ledger.Checkpoint, error) {
	c, err := s.latestCheckpoint(ctx, orgID)
	if err != nil {
		return ledger.Checkpoint{}, err
	}
	if c.IsZero() {
		return ledger.Checkpoint{}, core.New(core.ErrNotFound, CodeCheckpointNotFound,
			"no checkpoint of this ledger was signed yet: the sealer signs one within a second of an append, "+
				"or seal now with POST /v1/protocol/audit/ledger/checkpoints")
	}
	return c, nil
}

// latestCheckpoint is the org's latest stored checkpoint: the zero
// Checkpoint before its first seal.
func (s *Service) latestCheckpoint(ctx context.Context, orgID string) (ledger.Checkpoint, error) {
	if _, err := s.LedgerKey(); err != nil {
		return ledger.Checkpoint{}, err
	}
	if err := s.d.Store.RequireOrg(ctx, orgID); err != nil {
		return ledger.Checkpoint{}, err
	}
	c, err := s.d.Store.LatestCheckpoint(ctx, orgID)
	if err != nil {
		return ledger.Checkpoint{}, core.Unavailable("read checkpoint", err)
	}
	return c, nil
}

// LedgerCheckpointAt returns the org's signed checkpoint of tree size size.
func (s *Service) LedgerCheckpointAt(ctx context.Context, orgID string, size uint64) (ledger.Checkpoint, error) {
	if _, err := s.LedgerKey(); err != nil {
		return ledger.Checkpoint{}, err
	}
	c, err := s.d.Store.CheckpointAt(ctx, orgID, size)
	if core.IsNotFound(err) || errors.Is(err, ledger.ErrCheckpointNotFound) {
		return ledger.Checkpoint{}, core.New(core.ErrNotFound, CodeCheckpointNotFound, "no checkpoint of size %d was signed", size)
	}
	if err != nil {
		return ledger.Checkpoint{}, core.Unavailable("read checkpoint", err)
	}
	return c, nil
}

// InclusionProof is the proof that entry Seq is leaf Seq-1 of the tree of
// TreeSize entries.
type InclusionProof struct {
	OrgID    string           `json:"org_id"`
	Seq      uint64           `json:"seq"`
	TreeSize uint64           `json:"tree_size"`
	LeafHash tlog.Hash        `json:"leaf_hash"`
	Proof    tlog.RecordProof `json:"proof"`
	// Checkpoint is the signed checkpoint of TreeSize.
	Checkpoint string `json:"checkpoint"`
}

// LedgerInclusionProof proves entry seq in the checkpoint of treeSize (the
// latest stored checkpoint when 0).
func (s *Service) LedgerInclusionProof(ctx context.Context, orgID string, seq, treeSize uint64) (InclusionProof, error) {
	c, err := s.checkpointFor(ctx, orgID, treeSize)
	if err != nil {
		return InclusionProof{}, err
	}
	if seq == 0 || seq > c.Size {
		return InclusionProof{}, core.Invalid(CodeProofRange, "seq", "seq must be 1 to %d (the tree size)", c.Size)
	}
	page, err := s.d.Store.LedgerEntries(ctx, orgID, seq-1, 1)
	if err != nil {
		return InclusionProof{}, core.Unavailable("read ledger", err)
	}
	if len(page) != 1 || page[0].Seq != seq {
		return InclusionProof{}, core.New(core.ErrConflict, CodeLedgerBroken, "ledger entry %d is missing", seq)
	}
	leaf, err := page[0].LeafHash()
	if err != nil {
		return InclusionProof{}, core.Unavailable("hash ledger entry", err)
	}
	p, err := ledger.InclusionProof(ctx, s.d.Store, orgID, seq, c.Size)
	if outOfTree(err) {
		return InclusionProof{}, &core.Error{Kind: core.ErrInvalidRequest, Code: CodeProofRange, Detail: err.Error(), Err: err}
	}
	if err != nil {
		return InclusionProof{}, core.Translate("ledger proof", err)
	}
	return InclusionProof{OrgID: orgID, Seq: seq, TreeSize: c.Size, LeafHash: leaf, Proof: p, Checkpoint: string(c.Note)}, nil
}

// ConsistencyProof proves that the tree of NewSize extends that of OldSize.
type ConsistencyProof struct {
	OrgID         string         `json:"org_id"`
	OldSize       uint64         `json:"old_size"`
	NewSize       uint64         `json:"new_size"`
	Proof         tlog.TreeProof `json:"proof"`
	OldCheckpoint string         `json:"old_checkpoint"`
	NewCheckpoint string         `json:"new_checkpoint"`
}

// LedgerConsistencyProof proves that the checkpoint of newSize (the latest
// stored when 0) extends the checkpoint of oldSize.
func (s *Service) LedgerConsistencyProof(ctx context.Context, orgID string, oldSize, newSize uint64) (ConsistencyProof, error) {
	newer, err := s.checkpointFor(ctx, orgID, newSize)
	if err != nil {
		return ConsistencyProof{}, err
	}
	if oldSize == 0 || oldSize > newer.Size {
		return ConsistencyProof{}, core.Invalid(CodeProofRange, "old_size", "old_size must be 1 to %d (new_size)", newer.Size)
	}
	older, err := s.LedgerCheckpointAt(ctx, orgID, oldSize)
	if err != nil {
		return ConsistencyProof{}, err
	}
	p, err := ledger.ConsistencyProof(ctx, s.d.Store, orgID, oldSize, newer.Size)
	if outOfTree(err) {
		return ConsistencyProof{}, &core.Error{Kind: core.ErrInvalidRequest, Code: CodeProofRange, Detail: err.Error(), Err: err}
	}
	if err != nil {
		return ConsistencyProof{}, core.Translate("ledger proof", err)
	}
	return ConsistencyProof{OrgID: orgID, OldSize: oldSize, NewSize: newer.Size, Proof: p,
		OldCheckpoint: string(older.Note), NewCheckpoint: string(newer.Note)}, nil
}

// checkpointFor is the checkpoint of size, or the latest stored for 0.
func (s *Service) checkpointFor(ctx context.Context, orgID string, size uint64) (ledger.Checkpoint, error) {
	if size == 0 {
		return s.LedgerCheckpoint(ctx, orgID)
	}
	return s.LedgerCheckpointAt(ctx, orgID, size)
}

// LedgerAnchor places the org's entry seq in its latest stored checkpoint:
// a proof packet's ledger anchor. It never seals: an entry the latest
// checkpoint does not cover yet is ENTRY_NOT_YET_SEALED (409), which the
// sealer resolves within a seal interval, or SealLedger at once.
func (s *Service) LedgerAnchor(ctx context.Context, orgID string, seq uint64) (ledger.Anchor, error) {
	c, err := s.latestCheckpoint(ctx, orgID)
	if err != nil {
		return ledger.Anchor{}, err
	}
	if seq > c.Size {
		return ledger.Anchor{}, s.notYetSealed(ctx, orgID, seq, c.Size)
	}
	a, err := ledger.NewAnchor(ctx, s.d.Store, orgID, seq)
	if outOfTree(err) {
		return ledger.Anchor{}, &core.Error{Kind: core.ErrInvalidRequest, Code: CodeProofRange, Detail: err.Error(), Err: err}
	}
	if err != nil {
		return ledger.Anchor{}, core.Translate("ledger proof", err)
	}
	return a, nil
}

// notYetSealed answers an anchor of seq beyond the sealed size: the
// caller's mistake when the ledger has no such entry, else a wait.
func (s *Service) notYetSealed(ctx context.Context, orgID string, seq, sealed uint64) error {
	head, err := s.d.Store.LedgerHeadOf(ctx, orgID)
	if err != nil {
		return core.Unavailable("read ledger head", err)
	}
	if seq > head.Seq {
		return core.Invalid(CodeProofRange, "seq", "seq must be 1 to %d (the ledger size)", head.Seq)
	}
	return core.New(core.ErrConflict, CodeEntryNotYetSealed,
		"ledger entry %d is not in a signed checkpoint yet (the latest covers %d entries): the sealer signs one "+
			"within a second, or seal now with POST /v1/protocol/audit/ledger/checkpoints", seq, sealed)
}

// outOfTree reports whether a proof failed because the caller named a seq
// or size outside the sealed tree (PROOF_OUT_OF_RANGE), not because the
// store failed.
func outOfTree(err error) bool {
	return errors.Is(err, ledger.ErrOutOfRange) || errors.Is(err, ledger.ErrNotSealed)
}
