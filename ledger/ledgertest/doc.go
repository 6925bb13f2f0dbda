// Package ledgertest is the conformance suite for the ledger part of a
// store.Backend. Every backend runs it through storetest.All, which calls
//
//	ledgertest.Run(t, ledgertest.Harness{Open: ..., OverwriteEntry: ..., DeleteEntry: ...,
//		SetHead: ..., DeleteCheckpoint: ...})
//
// and benchmarks it from its own tests:
//
//	func BenchmarkLedgerTree(b *testing.B) { ledgertest.Benchmark(b, open) }
//
// The suite opens a fresh, empty backend per subtest and appends only
// through ledger.Append inside Update, the way Clearance does. It checks
// that:
//
//   - appends number an org's entries 1..n without gaps, move the head, and
//     Verify reports the chain valid; orgs have independent chains;
//   - a failed Update writes nothing, and PutLedgerEntry refuses an entry
//     whose seq is not head+1 or whose org is not the transaction's;
//   - N goroutines appending to one org concurrently produce one gap-free
//     valid chain with every append in it exactly once;
//   - tampering done behind the store's back (the Harness hooks) is found by
//     Verify at the right seq: a changed entry, a deleted entry, two
//     swapped entries, a truncated tail;
//   - LedgerEntries pages in ascending seq order.
//
// For the Merkle tree (ledger.Seal) it checks that:
//
//   - sealing an empty ledger, one entry and many gives checkpoints whose
//     roots match RFC 9162's Merkle Tree Hash computed independently, whose
//     signatures verify, and which the backend returns byte for byte, as
//     the latest and by size; the stored hashes are exactly the tlog stored
//     hashes; other orgs are untouched;
//   - sealing step by step stores the same hashes and signs the same
//     checkpoint as sealing once; a Seal with nothing new signs nothing, a
//     new key re-signs; MaxEntries bounds a Seal; a failed Update keeps no
//     hash and no checkpoint; an unsealed (pre-existing) ledger has sealed
//     size 0 and its first Seal covers it;
//   - the backend refuses hashes that do not continue the stored ones and
//     a checkpoint older than the latest;
//   - inclusion proofs of every seq at several sizes, and consistency proofs
//     between every pair of several checkpoints, verify; wrong leaves and
//     forged roots do not;
//   - sealers racing appenders (-race) only ever sign checkpoints that are
//     consistent with the final one;
//   - tampering after sealing is found by ledger.VerifyWith at the right
//     seq, including what the chain alone cannot see: an entry rewritten
//     with every later entry and the head (CHECKPOINT_MISMATCH), the tail
//     deleted and the head moved back (TRUNCATED_BEFORE_CHECKPOINT), entries
//     reordered and rechained, a checkpoint signed by another key or of
//     another org, and the newest checkpoints deleted (caught by an
//     auditor's copy).
//
// Times handed to the backend are whole microseconds, which PostgreSQL
// stores exactly.
package ledgertest
