// Package sharelink makes expiring, stateless capabilities that let anyone
// holding one check a single dossier — its outcome, its digest and its place
// in the org's signed ledger — without a credential and without seeing the
// dossier itself. A link is MACed with a key derived from the server's
// share secret and names the org's share epoch; revoking moves the epoch on
// (ledgered), so every earlier link stops verifying at once. Every refusal
// of a link is the same 404, so an answer never says why.
package sharelink
