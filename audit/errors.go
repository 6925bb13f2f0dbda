package audit

import "github.com/clearancehq/clearance/internal/core"

// Codes of the ledger tree routes.
const (
	// CodeLedgerKeyNotConfigured: no ledger key, so no checkpoint (503).
	CodeLedgerKeyNotConfigured = "LEDGER_KEY_NOT_CONFIGURED"
	// CodeCheckpointNotFound: no checkpoint of that tree size was signed (404).
	CodeCheckpointNotFound = "CHECKPOINT_NOT_FOUND"
	// CodeEntryNotYetSealed: the entry a proof packet anchors is not in the
	// latest signed checkpoint yet (409); the sealer signs one within a seal
	// interval, or SealLedger at once.
	CodeEntryNotYetSealed = "ENTRY_NOT_YET_SEALED"
	// CodeProofRange: a seq or tree size outside the sealed tree (400).
	CodeProofRange = "PROOF_OUT_OF_RANGE"
	// CodeLedgerBroken: the chain does not verify, or an entry is missing (409).
	CodeLedgerBroken = core.CodeLedgerBroken
)
