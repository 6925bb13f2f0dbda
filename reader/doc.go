// Package reader verifies the evidence an auditor holds — a proof packet, an
// Agent Action Capsule, a ledger consistency proof, a validation pack or its
// manifest, or a share link — with the verifiers of packages proof,
// capsule, ledger and pack, behind one entry point: Verify. `clearance
// verify` and the public route POST /v1/reader/verify both call it, so the
// command and the server can never disagree.
//
// The contract:
//
//   - An artifact that is read but does not verify is a Report with Valid
//     false and a failed Check carrying a stable Reason; only input that
//     cannot be read as the kind asked for (or detected) is an error
//     (ErrInvalidInput, with a Code).
//   - An artifact cannot vouch for its own key. What is signed is checked
//     against the ledger key the caller supplies or, without one, the
//     ledger key of the server running the reader (Options.ServerLedgerKey);
//     Report.Key says which. With neither, the checks that need a key fail
//     (LEDGER_KEY_UNAVAILABLE): a packet checked against the key it names
//     proves only that it is self-consistent, and is never Valid.
//   - A share link is never fetched: its dossier id and sig are handed to
//     the server's share-link service (a ShareLinks), which answers for the
//     links it issued; a link it does not honour is one reason,
//     SHARE_LINK_INVALID, whatever is wrong with it.
//   - Detect tells a kind from the artifact's bytes when the caller does
//     not name it.
//
// The package is pure: no storage, no network, no clock.
package reader
