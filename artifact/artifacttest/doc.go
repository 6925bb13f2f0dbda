// Package artifacttest is the conformance suite for the artifact part of a
// store.Backend. Every backend runs it through storetest.All, which calls
//
//	artifacttest.Run(t, open)
//
// where open returns a fresh, empty backend that the caller closes. The
// backend must implement artifact.Reader and its transactions artifact.Tx
// (the suite type-asserts both, so it runs whether or not store.Tx and
// store.Reader embed the artifact interfaces). It checks that:
//
//   - a record reads back (Artifact, ArtifactInTx, both listings) with every
//     field equal and the body byte for byte, non-UTF-8 and 200 KiB bodies
//     included; CreatedAt comes back truncated to the microsecond;
//   - a put with an existing (kind, id) replaces the record and moves it in
//     the Ref index: listings under the old Ref no longer return it, and a
//     changed CreatedAt moves it within its Ref;
//   - ArtifactsByRef lists the org's records of one kind and ref in
//     (CreatedAt, ID) order, honours limit (<= 0: all) and does not mix
//     kinds or refs that are prefixes of each other;
//   - lookups never cross orgs, and a transaction may not write another
//     org's record (artifact.ErrOrgMismatch);
//   - an Update whose fn fails writes nothing, and readers do not see a
//     transaction's writes before it commits, while the transaction does;
//   - invalid records and lookups are refused with artifact.ErrInvalid,
//     write nothing, and leave the transaction usable;
//   - concurrent puts from many goroutines, to one org and to several, all
//     land.
//
// Times handed to the backend are whole microseconds unless a test says
// otherwise; they are compared with time.Time.Equal.
package artifacttest
