// Package storetest holds the storage conformance suites' entry point and
// the suite for the parts of a store.Backend that no domain suite covers.
//
// A backend's tests call only All, which runs every conformance suite
// (this package's Run, ledgertest, dossiertest, claimtest, artifacttest,
// jobstest), so that a suite added to All reaches every backend at once; a
// test in this package fails on a suite All does not run and on a backend
// that runs a suite itself:
//
//	func TestConformance(t *testing.T) {
//		storetest.All(t, storetest.Harness{Open: ..., OverwriteEntry: ..., DeleteScope: ...})
//	}
//
// Run, this package's own suite, takes open, which returns a fresh, empty
// backend that the caller closes. It checks that:
//
//   - orgs and API keys read back (keys by hash, globally; the platform key
//     is written in tenant.PlatformOrgID's transaction), and absent ones are
//     store.ErrNotFound;
//   - bundles read back by version, LatestBundle is the last published,
//     Bundles lists them in publish order, a version is published once, and
//     orgs do not see each other's bundles;
//   - an org's activation reads back and is replaced by the next, names
//     only a version the org published (a refusal leaves the transaction
//     usable), and is store.ErrNotFound until the first;
//   - idempotency records are keyed by (org, scope, key);
//   - reads inside a transaction see the transaction's own writes, and
//     writes of another org's records are refused;
//   - a cancelled context makes Update fail without running fn;
//   - Ping and Sync succeed on an open backend.
//
// Times handed to the backend are whole microseconds, which PostgreSQL
// stores exactly; they are compared with time.Time.Equal.
package storetest
