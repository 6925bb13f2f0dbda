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
//   - Reads never write. LedgerCheckpoint, a proof against the latest tree
//     (size 0) and LedgerAnchor use the latest STORED checkpoint; before the
//     first seal the checkpoint is CHECKPOINT_NOT_FOUND (404), and an anchor
//     of an entry the latest checkpoint does not cover yet is
//     ENTRY_NOT_YET_SEALED (409), like a Certificate Transparency log's
//     merge delay.
//   - Only SealLedger writes checkpoints, after waiting until every visible
//     entry is durable (Store.Sync), so no checkpoint names an entry a power
//     cut could still undo; Ledger and VerifyLedger wait the same way.
//   - RunSealer seals every org whose ledger grew (core.Store.TakeGrown),
//     so checkpoints follow the writers within a seal interval.
package audit
