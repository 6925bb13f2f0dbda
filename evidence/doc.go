// Package evidence serves what an auditor reads of a decision and what
// people add to it afterwards: the dossier (by dossier or decision id), the
// shadow report, the decision chain a decision joined, the proof packet
// (dossier, policy snapshot, ledger entry anchored in a signed checkpoint,
// Ed25519 proof bundle), the Agent Action Capsules projected from the
// dossier and its grant with their COSE producer envelopes, and overrides:
// a person's resolution of a decision that was not ALLOW, recorded and
// ledgered beside the immutable dossier, never authority. Reads never
// write: a proof packet anchors its entry in the latest checkpoint the
// audit feature already signed.
package evidence
