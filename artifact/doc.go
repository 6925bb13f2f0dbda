// Package artifact stores the small evidence records that follow a
// decision: human overrides of a dossier, execution dispatches bound to a
// grant, decision-chain memberships, validation-pack records and chunks,
// share-link revocation epochs. The package names none of them: a kind is
// its consumer's. Each is a Record: an opaque Body filed under an org, a
// Kind and an ID, and indexed by a Ref (what it belongs to) and its
// CreatedAt.
//
// # Contract
//
// A record is identified by (OrgID, Kind, ID). Tx.PutArtifact inserts it or
// replaces the stored one wholesale, moving it in the Ref index when its Ref
// or CreatedAt changed: after a replace, listings under the old Ref no
// longer return it. Writes happen inside a backend transaction scoped to
// one org (store.Backend.Update); they are atomic with the transaction's
// other writes, invisible to readers until it commits, and discarded when
// it fails. Tx.ArtifactInTx sees the transaction's own writes.
//
// Lookups never cross orgs (work that must be found in every org after a
// restart is a jobs.Job). A lookup that finds nothing returns an error
// wrapping store.ErrNotFound. Listings are ordered by (CreatedAt, ID),
// comparing strings byte by byte; a limit <= 0 returns every match.
//
// Backends keep Body byte for byte (nil and empty read back as nil) and
// store CreatedAt to the microsecond, truncated, returned in UTC. They hold
// no rules beyond Validate: a Record that Validate refuses, or one of
// another org than the transaction's, is refused before anything is
// written, with the *Error that Validate (or ValidateFor) returns, and the
// transaction stays usable. Lookups with arguments that no valid record
// could have (ValidateKey, ValidateRef) are refused the same way rather
// than reported as not found.
//
// # Usage
//
// Inside an Update of the org (the backend's transaction implements Tx):
//
//	err := backend.Update(ctx, orgID, func(tx store.Tx) error {
//		return tx.PutArtifact(ctx, artifact.Record{
//			OrgID: orgID, Kind: "override", ID: overrideID, Ref: dossierID,
//			CreatedAt: now, Body: body,
//		})
//	})
//
// then, from the backend (which implements Reader):
//
//	overrides, err := backend.ArtifactsByRef(ctx, orgID, "override", dossierID, 0)
//
// A record that moves between Refs (a status, say) is listed under its
// current Ref only: replacing it with Ref "done" takes it out of the
// listing of "pending".
//
// The conformance suite every backend runs is artifact/artifacttest.
package artifact
