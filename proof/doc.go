// Package proof builds and checks Decision Dossier proof packets: a dossier,
// its policy snapshot, the ledger entry that recorded it, that entry's
// anchor in a signed checkpoint of the org's Merkle ledger, and an Ed25519
// proof bundle over all of it.
//
// The contract: Verify needs only the packet and the ledger verifier key an
// auditor trusts (obtained out of band, e.g. from the server's well-known
// route or an earlier checkpoint). It reports every check with its result,
// and a packet is Valid only when all of them pass with a pinned key: the
// dossier hashes to the ledgered digest and is canonical, the ledger entry
// recomputes and records that digest, the inclusion proof leads to the root
// of a checkpoint signed by the trusted key, and the proof bundle signs the
// same statement. Nothing here reads a clock, the network or a store.
package proof
