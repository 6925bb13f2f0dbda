// Package dossiertest is the conformance suite for the dossier part of a
// store.Backend. Every backend runs it through storetest.All, which calls
//
//	dossiertest.Run(t, open)
//
// where open returns a fresh, empty backend that the caller closes. The
// suite records dossiers the way Clearance does, each with its ledger entry
// (ledger.Append) in the same Update, and checks that:
//
//   - a dossier reads back by dossier id and by decision id with every field
//     equal and the body byte for byte; lookups never cross orgs (another
//     org's ids are store.ErrNotFound);
//   - a dossier id or decision id is stored once: a second put fails;
//   - DossierSummaries returns the org's dossiers created in [from, to),
//     oldest first (ties in dossier id order), and stops when fn returns
//     false;
//   - Dossiers yields the same dossiers in the same order as
//     DossierSummaries (also across ties split by paging), each with every
//     field equal to what was put and the body byte for byte, stops when fn
//     returns false, never crosses orgs, and calls nothing for an empty
//     window (from >= to);
//   - a dossier and its ledger entry written by an Update whose fn then
//     fails are both absent;
//   - concurrent writers to one org lose nothing and keep the ledger valid.
//
// Times handed to the backend are whole microseconds, which PostgreSQL
// stores exactly; they are compared with time.Time.Equal.
package dossiertest
