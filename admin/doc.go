// Package admin is the administration feature: organizations and their API
// keys (tenancy), the public agent and provider keys an org registers
// (keys), and the grant signing keys revoked in the store (grant keys).
//
// Contract: every change is written in the org's transaction together with
// its ledger entry, or not at all; an API key's secret is shown once, when
// it is issued, and only its hash is stored or ledgered. A revoked grant key
// is applied to the engine's keys for good: a revocation is never withdrawn.
// Errors are *core.Error values; a store failure is STORE_UNAVAILABLE and
// never authenticates anyone.
package admin
