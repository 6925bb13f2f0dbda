// Package ledgertest is the conformance suite for the ledger part of a
// store.Backend. Every backend runs it from its own tests:
//
//	func TestLedger(t *testing.T) {
//		ledgertest.Run(t, ledgertest.Harness{Open: ..., OverwriteEntry: ..., DeleteEntry: ...})
//	}
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
// Times handed to the backend are whole microseconds, which PostgreSQL
// stores exactly.
package ledgertest
