// Package ledger is the per-org audit log: a hash-linked chain of entries
// and, over it, an RFC 9162 Merkle tree with signed checkpoints, inclusion
// proofs and consistency proofs (golang.org/x/mod/sumdb/tlog and note).
//
// # Chain
//
// Every state change Clearance records (a decision, a published policy, an
// org or key created) appends one Entry to its org's ledger in the same atomic
// write as the change itself. Entries are numbered from 1 without gaps; each
// carries the hash of its predecessor (Genesis for seq 1) and its own hash,
// SHA-256 over the RFC 8785 form of the entry without entry_hash. Verify
// recomputes the chain and reports the first broken seq and why.
//
// # Tree and checkpoints
//
// Entry seq n is leaf n-1 of the org's Merkle tree; its leaf data is the
// RFC 8785 canonical JSON of the whole entry, entry_hash included
// (Entry.LeafData), and its leaf hash SHA-256(0x00 || leaf data). The tree
// is built lazily, never on the append path: Seal, run in the org's
// transaction, hashes the entries appended since the latest checkpoint,
// stores their tlog stored hashes and signs a checkpoint for the new size.
// A checkpoint is a C2SP signed note (Ed25519, the dedicated ledger Key)
// whose text is the C2SP tlog-checkpoint body
//
//	<origin>\n<size>\n<base64 root hash>\n
//
// with origin "<issuer>/ledger/<org_id>" (Origin). Checkpoints are kept by
// size. Ledgers written before checkpoints existed have sealed size 0: their
// first Seal covers every entry.
//
// # Proofs and verification
//
// InclusionProof and ConsistencyProof read O(log n) stored hashes; NewAnchor
// packages an entry's proof with the signed checkpoint (a proof packet's
// ledger anchor). VerifyCheckpoint, VerifyInclusion, VerifyConsistency and
// VerifyAnchor are pure and need only the ledger's verifier key, so
// auditors run them offline. VerifyWith checks the chain and also that the
// ledger recomputes to the root of the latest stored checkpoint (and of a
// checkpoint an auditor kept) and is at least as long: a rewrite that
// rebuilt every later entry and the head, a reordering, or a tail cut off
// with the head moved back is found although the chain itself is valid.
//
// The package is pure: storage comes in through the small Tx, Reader,
// SealTx and TreeReader interfaces that backends implement (store/store.go
// composes them), time is an argument and randomness an io.Reader.
package ledger
