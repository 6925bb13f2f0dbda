// Package sharelink makes expiring, stateless capabilities that let anyone
// holding one check a single dossier without a credential. One link opens
// up to three answers, each stating what it reveals: verify (the outcome,
// the digest and the dossier's place in the org's signed ledger, without
// the dossier itself), reproduce (whether the recorded decision evaluates
// the same again, by outcome only) and, only when the org asked for it, the
// proof bundle (the dossier's whole proof packet, dossier included, for
// offline verification with the ledger key).
//
// A link is MACed with a key derived from the server's share secret and
// names the org's share epoch and what it opens; revoking moves the epoch
// on (ledgered), so every earlier link stops opening anything at once.
// Every refusal of a link is the same 404, so an answer never says why.
// Verification is anchored on the org's latest signed checkpoint: its cost
// does not grow with the ledger.
package sharelink
