// Package audit is what an auditor asks of an org's ledger: its pages, a
// full verification (the hash chain, the signed checkpoints, and the
// stored records the entries bind), signed checkpoints of its Merkle tree,
// and inclusion and consistency proofs against them.
//
// Contract:
//   - Checkpoints are signed with Deps.LedgerKey; without one, every
//     checkpoint and proof answers LEDGER_KEY_NOT_CONFIGURED (503) and
//     VerifyLedger checks the chain and the records only.
//   - Nothing is signed over a chain that does not verify (LEDGER_BROKEN).
//   - Ledger, VerifyLedger and LedgerCheckpoint first wait until every
//     visible entry is durable (Store.Sync), so no answer names an entry a
//     power cut could still undo.
//   - LedgerCheckpoint, and through it LedgerAnchor and a proof against
//     the latest tree (size 0), seals before it answers: these reads write
//     a checkpoint when the ledger grew since the last seal.
//   - RunSealer seals every org whose ledger grew (core.Store.TakeGrown),
//     so checkpoints follow the writers without a caller asking.
package audit
