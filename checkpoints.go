package clearance

import (
	"github.com/clearancehq/clearance/audit"
)

// Codes of the ledger tree routes.
const (
	CodeLedgerKeyNotConfigured = audit.CodeLedgerKeyNotConfigured
	CodeCheckpointNotFound     = audit.CodeCheckpointNotFound
	CodeEntryNotYetSealed      = audit.CodeEntryNotYetSealed
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
