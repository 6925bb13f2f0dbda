// Package privacy keeps personal data in dossiers erasable without breaking
// the ledger: crypto-shredding under one key per data subject.
//
// # Setting
//
// An org opts in with a data-protection Setting: Subject, an RFC 6901
// pointer into a decision's intent naming its data subject (e.g.
// "/actor/id" or "/customer/id"), and Personal, pointers to the intent's
// members that hold personal data. It is the org's artifact
// (store.DataProtectionKind, store.DataProtectionID), which every backend
// keeps at hand with the org's lock, so a decision of an org without one
// pays no read. Changing it is ledgered (data_protection.set); it applies
// to the decisions recorded after it, never to earlier ones.
//
// # Sealing
//
// Seal runs in the decision's transaction. When the setting applies and the
// intent holds at least one of its members, it returns a copy of the
// dossier in which every such value, the request as received, the actor id
// (when "/actor/id" is sealed), the approver and approval receipt, and a
// checkout's evaluated intent hold dossier.SealedMarker, and
// dossier.PersonalData seals the values (AES-256-GCM, internal/secretbox)
// under the subject's data key, with the dossier's org and id as
// additional data. The data key is random (256 bits), created on the
// subject's first sealed decision and stored wrapped by the engine's
// secrets key in one record per subject (kind privacy.subject_key, id a
// keyed MAC of the subject id, ref the key id), which also counts the
// dossiers sealed under it. The stored body, its digest, the ledger entry,
// proof packets, capsules and validation packs carry the sealed form only.
//
// With a sealed dossier Seal returns a dossier.Sealer under the same subject
// key, with which the decision's other records are sealed in the same
// transaction: the grant's actor and bound intent, the grant token of its
// idempotent answer, a managed escalation's intent and grant token. Each is
// sealed for its own record ("record/<context>" as additional data), and
// OpenSealed opens it there, or reports it erased.
//
// # Reading
//
// Open restores the values while the key exists (status OPEN) and writes
// dossier.ErasedMarker in their place once it is destroyed (status ERASED).
// OpenRecorded gives replay and reproduction the plaintext body, or
// ErrErased.
//
// # Erasure
//
// Erase destroys a subject's key (the record is deleted from the store,
// not flagged), appends a subject.erased ledger entry whose payload digest
// is the digest of the receipt's payload, keeps the receipt under the
// subject's MAC and answers it: a compact JWS (typ
// clearance-erasure-receipt+jwt, EdDSA) signed with the ledger key, which
// VerifyReceipt checks offline with the published ledger verifier key. An
// erasure repeated with nothing new to destroy answers the stored receipt.
// EraseOrg destroys every subject key of an org (a marketplace deletion
// notice for the whole account).
package privacy
