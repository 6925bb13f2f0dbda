// Package federation lets one Clearance deployment present a decision it
// recorded to another deployment that trusts it, as evidence for that
// deployment's own policy — never as authority by itself, like approvals.
//
// The issuing side signs a federated decision envelope (IssueEnvelope): a
// compact JWS of typ grant.TypFederatedDecision, signed with the
// deployment's grant keys and so verifiable against its published JWKS,
// whose claims state only what bears on authorization (issuer, audience,
// org, decision and dossier ids, the dossier's digest and ledger seq,
// outcome, mode, policy version and bundle digest, the intent's digest
// under IntentProfile) and never the intent itself.
//
// The receiving side keeps a per-org trust list (PutIssuer, Issuer,
// Issuers, DeleteIssuer), at most MaxTrustedIssuers entries counted in the
// transaction that adds one, each change ledgered. An entry names the
// issuer's exact iss, the issuing orgs trusted on it (1 to MaxTrustedOrgs:
// a deployment signs for each of its tenants, so the deployment alone is
// not a trust boundary) and either the URL of its JWKS — fetched through the
// SSRF-guarded outbound client, cached for KeyTTL and fetched again on an
// unknown kid (at most once per KeyRefetchInterval) — or an inline JWKS;
// optionally the extra audiences it accepts and the oldest decision it
// accepts (max_age_seconds).
//
// Verify checks every envelope presented with a decision request
// (signature with a kid in the issuer's current key set, typ, a trusted
// iss, an org the entry lists, an audience the org accepts, iat and exp with the engine's clock
// skew, the decision's age) and refuses the whole request when one fails
// (FEDERATED_DECISION_INVALID, naming the index and the reason): nothing
// is recorded. The verified envelopes reach the policy as
// policy.Input.Federation and the dossier records them whole. A request
// without envelopes costs nothing here: Verify is not called.
package federation
