package clearance

import (
	"context"
	"time"

	"github.com/clearancehq/clearance/audit"
	"github.com/clearancehq/clearance/ledger"
)

// Codes of the ledger tree routes.
const (
	CodeLedgerKeyNotConfigured = audit.CodeLedgerKeyNotConfigured
	CodeCheckpointNotFound     = audit.CodeCheckpointNotFound
	CodeProofRange             = audit.CodeProofRange
	CodeLedgerBroken           = audit.CodeLedgerBroken
)

// DefaultSealInterval is how often RunSealer signs checkpoints of the orgs
// whose ledgers grew.
const DefaultSealInterval = audit.DefaultSealInterval

// InclusionProof is the proof that entry Seq is leaf Seq-1 of the tree of
// TreeSize entries.
type InclusionProof = audit.InclusionProof

// ConsistencyProof proves that the tree of NewSize extends that of OldSize.
type ConsistencyProof = audit.ConsistencyProof

// LedgerVerifierKey forwards to Audit.LedgerVerifierKey.
func (e *Engine) LedgerVerifierKey() string { return e.Audit.LedgerVerifierKey() }

// LedgerOrigin forwards to Audit.LedgerOrigin.
func (e *Engine) LedgerOrigin(orgID string) string { return e.Audit.LedgerOrigin(orgID) }

// SealLedger forwards to Audit.SealLedger.
func (e *Engine) SealLedger(ctx context.Context, orgID string) (ledger.Checkpoint, error) {
	return e.Audit.SealLedger(ctx, orgID)
}

// RunSealer forwards to Audit.RunSealer.
func (e *Engine) RunSealer(ctx context.Context, interval time.Duration) {
	e.Audit.RunSealer(ctx, interval)
}

// LedgerCheckpoint forwards to Audit.LedgerCheckpoint.
func (e *Engine) LedgerCheckpoint(ctx context.Context, orgID string) (ledger.Checkpoint, error) {
	return e.Audit.LedgerCheckpoint(ctx, orgID)
}

// LedgerCheckpointAt forwards to Audit.LedgerCheckpointAt.
func (e *Engine) LedgerCheckpointAt(ctx context.Context, orgID string, size uint64) (ledger.Checkpoint, error) {
	return e.Audit.LedgerCheckpointAt(ctx, orgID, size)
}

// LedgerInclusionProof forwards to Audit.LedgerInclusionProof.
func (e *Engine) LedgerInclusionProof(ctx context.Context, orgID string, seq, treeSize uint64) (InclusionProof, error) {
	return e.Audit.LedgerInclusionProof(ctx, orgID, seq, treeSize)
}

// LedgerConsistencyProof forwards to Audit.LedgerConsistencyProof.
func (e *Engine) LedgerConsistencyProof(ctx context.Context, orgID string, oldSize, newSize uint64) (ConsistencyProof, error) {
	return e.Audit.LedgerConsistencyProof(ctx, orgID, oldSize, newSize)
}

// LedgerAnchor forwards to Audit.LedgerAnchor.
func (e *Engine) LedgerAnchor(ctx context.Context, orgID string, seq uint64) (ledger.Anchor, error) {
	return e.Audit.LedgerAnchor(ctx, orgID, seq)
}

// LedgerPage is one page of an org's ledger.
type LedgerPage = audit.LedgerPage

// Ledger page limits.
const (
	DefaultLedgerPage = audit.DefaultLedgerPage
	MaxLedgerPage     = audit.MaxLedgerPage
)

// Reasons reported by VerifyLedger when a ledgered record (dossier,
// override, dispatch) no longer matches, or no longer decodes.
const (
	ReasonRecordDigestMismatch = audit.ReasonRecordDigestMismatch
	ReasonRecordUnreadable     = audit.ReasonRecordUnreadable
)

// Ledger forwards to Audit.Ledger.
func (e *Engine) Ledger(ctx context.Context, orgID string, afterSeq uint64, limit int) (LedgerPage, error) {
	return e.Audit.Ledger(ctx, orgID, afterSeq, limit)
}

// VerifyLedger forwards to Audit.VerifyLedger.
func (e *Engine) VerifyLedger(ctx context.Context, orgID string) (ledger.Report, error) {
	return e.Audit.VerifyLedger(ctx, orgID)
}

// VerifyLedgerAgainst forwards to Audit.VerifyLedgerAgainst.
func (e *Engine) VerifyLedgerAgainst(ctx context.Context, orgID string, checkpoint []byte) (ledger.Report, error) {
	return e.Audit.VerifyLedgerAgainst(ctx, orgID, checkpoint)
}
