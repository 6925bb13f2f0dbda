package clearance

import (
	"context"
	"errors"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
)

// Codes of the ledger tree routes.
const (
	CodeLedgerKeyNotConfigured = "LEDGER_KEY_NOT_CONFIGURED"
	CodeCheckpointNotFound     = "CHECKPOINT_NOT_FOUND"
	CodeProofRange             = "PROOF_OUT_OF_RANGE"
	CodeLedgerBroken           = "LEDGER_BROKEN"
)

// DefaultSealInterval is how often RunSealer signs checkpoints of the orgs
// whose ledgers grew.
const DefaultSealInterval = time.Second

// sealMaxEntries bounds one sealing transaction, so that a long unsealed
// ledger does not hold its org's lock for long; sealing repeats until done.
const sealMaxEntries = 100_000

// LedgerVerifierKey is the C2SP note verifier key of the org checkpoints
// ("" when no ledger key is configured). Auditors verify checkpoints with it.
func (e *Engine) LedgerVerifierKey() string {
	if e.opts.LedgerKey == nil {
		return ""
	}
	return e.opts.LedgerKey.VerifierKey()
}

// LedgerOrigin is the origin line of the org's checkpoints.
func (e *Engine) LedgerOrigin(orgID string) string { return ledger.Origin(e.opts.Issuer, orgID) }

func (e *Engine) ledgerKey() (*ledger.Key, error) {
	if e.opts.LedgerKey == nil {
		return nil, newError(ErrUnavailable, CodeLedgerKeyNotConfigured, "no ledger key is configured, so checkpoints cannot be signed")
	}
	return e.opts.LedgerKey, nil
}

// SealLedger extends the org's Merkle tree over every entry appended since
// the last seal and signs a checkpoint of it. With nothing new it returns
// the latest checkpoint unchanged.
func (e *Engine) SealLedger(ctx context.Context, orgID string) (ledger.Checkpoint, error) {
	k, err := e.ledgerKey()
	if err != nil {
		return ledger.Checkpoint{}, err
	}
	// A seal writes a checkpoint even over an empty ledger: only for an org.
	if err := e.store.RequireOrg(ctx, orgID); err != nil {
		return ledger.Checkpoint{}, err
	}
	origin := e.LedgerOrigin(orgID)
	for {
		var c ledger.Checkpoint
		var head ledger.Head
		// The raw backend: a seal is not growth that needs sealing.
		err := e.store.Backend.Update(ctx, orgID, func(tx store.Tx) error {
			var err error
			if c, err = ledger.Seal(ctx, tx, k, origin, ledger.SealOptions{MaxEntries: sealMaxEntries}); err != nil {
				return err
			}
			head, err = tx.LedgerHead(ctx)
			return err
		})
		switch {
		case errors.Is(err, ledger.ErrBrokenChain):
			return ledger.Checkpoint{}, &Error{Kind: ErrConflict, Code: CodeLedgerBroken,
				Detail: "the ledger does not verify, so no checkpoint is signed over it", Err: err}
		case err != nil:
			return ledger.Checkpoint{}, unavailable("seal ledger", err)
		case c.Size >= head.Seq:
			return c, nil
		}
	}
}

// RunSealer signs a checkpoint of every org whose ledger grew, every
// interval (DefaultSealInterval when 0), until ctx ends. An org whose seal
// fails is retried at the next tick.
func (e *Engine) RunSealer(ctx context.Context, interval time.Duration) {
	if e.opts.LedgerKey == nil {
		return
	}
	if interval <= 0 {
		interval = DefaultSealInterval
	}
	core.EveryTick(ctx, interval, func() {
		for _, org := range e.store.TakeGrown() {
			if _, err := e.SealLedger(ctx, org); err != nil && ctx.Err() == nil {
				e.store.MarkGrown(org)
				e.opts.Logger.Warn("sealing the ledger failed", "org_id", org, "err", err)
			}
		}
	})
}

// LedgerCheckpoint returns the org's latest signed checkpoint, sealing first
// so that it covers every durable entry.
func (e *Engine) LedgerCheckpoint(ctx context.Context, orgID string) (ledger.Checkpoint, error) {
	if err := e.store.Sync(ctx); err != nil {
		return ledger.Checkpoint{}, unavailable("sync ledger", err)
	}
	return e.SealLedger(ctx, orgID)
}

// LedgerCheckpointAt returns the org's signed checkpoint of tree size size.
func (e *Engine) LedgerCheckpointAt(ctx context.Context, orgID string, size uint64) (ledger.Checkpoint, error) {
	if _, err := e.ledgerKey(); err != nil {
		return ledger.Checkpoint{}, err
	}
	c, err := e.store.CheckpointAt(ctx, orgID, size)
	if isNotFound(err) || errors.Is(err, ledger.ErrCheckpointNotFound) {
		return ledger.Checkpoint{}, newError(ErrNotFound, CodeCheckpointNotFound, "no checkpoint of size %d was signed", size)
	}
	if err != nil {
		return ledger.Checkpoint{}, unavailable("read checkpoint", err)
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
// latest checkpoint when 0).
func (e *Engine) LedgerInclusionProof(ctx context.Context, orgID string, seq, treeSize uint64) (InclusionProof, error) {
	c, err := e.checkpointFor(ctx, orgID, treeSize)
	if err != nil {
		return InclusionProof{}, err
	}
	if seq == 0 || seq > c.Size {
		return InclusionProof{}, invalid(CodeProofRange, "seq", "seq must be 1 to %d (the tree size)", c.Size)
	}
	page, err := e.store.LedgerEntries(ctx, orgID, seq-1, 1)
	if err != nil {
		return InclusionProof{}, unavailable("read ledger", err)
	}
	if len(page) != 1 || page[0].Seq != seq {
		return InclusionProof{}, newError(ErrConflict, CodeLedgerBroken, "ledger entry %d is missing", seq)
	}
	leaf, err := page[0].LeafHash()
	if err != nil {
		return InclusionProof{}, unavailable("hash ledger entry", err)
	}
	p, err := ledger.InclusionProof(ctx, e.store, orgID, seq, c.Size)
	if err != nil {
		return InclusionProof{}, proofError(err)
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
// when 0) extends the checkpoint of oldSize.
func (e *Engine) LedgerConsistencyProof(ctx context.Context, orgID string, oldSize, newSize uint64) (ConsistencyProof, error) {
	newer, err := e.checkpointFor(ctx, orgID, newSize)
	if err != nil {
		return ConsistencyProof{}, err
	}
	if oldSize == 0 || oldSize > newer.Size {
		return ConsistencyProof{}, invalid(CodeProofRange, "old_size", "old_size must be 1 to %d (new_size)", newer.Size)
	}
	older, err := e.LedgerCheckpointAt(ctx, orgID, oldSize)
	if err != nil {
		return ConsistencyProof{}, err
	}
	p, err := ledger.ConsistencyProof(ctx, e.store, orgID, oldSize, newer.Size)
	if err != nil {
		return ConsistencyProof{}, proofError(err)
	}
	return ConsistencyProof{OrgID: orgID, OldSize: oldSize, NewSize: newer.Size, Proof: p,
		OldCheckpoint: string(older.Note), NewCheckpoint: string(newer.Note)}, nil
}

// checkpointFor is the checkpoint of size, or the latest (sealed now) for 0.
func (e *Engine) checkpointFor(ctx context.Context, orgID string, size uint64) (ledger.Checkpoint, error) {
	if size == 0 {
		return e.LedgerCheckpoint(ctx, orgID)
	}
	return e.LedgerCheckpointAt(ctx, orgID, size)
}

func proofError(err error) error {
	if errors.Is(err, ledger.ErrOutOfRange) || errors.Is(err, ledger.ErrNotSealed) {
		return &Error{Kind: ErrInvalidRequest, Code: CodeProofRange, Detail: err.Error(), Err: err}
	}
	return unavailable("ledger proof", err)
}

// LedgerAnchor places the org's entry seq in its latest signed checkpoint
// (sealing first): a proof packet's ledger anchor.
func (e *Engine) LedgerAnchor(ctx context.Context, orgID string, seq uint64) (ledger.Anchor, error) {
	if _, err := e.LedgerCheckpoint(ctx, orgID); err != nil {
		return ledger.Anchor{}, err
	}
	a, err := ledger.NewAnchor(ctx, e.store, orgID, seq)
	if err != nil {
		return ledger.Anchor{}, proofError(err)
	}
	return a, nil
}
