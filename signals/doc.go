// Package signals is Clearance's inbound signal feature: outside systems
// (fraud scoring, incident tooling, maintenance windows) post events that
// policies read when they decide, and that a claim reads again before an
// action runs.
//
// # Connectors
//
// An org makes a Connector (CreateConnector) and receives its secret once:
// "whsec_" + base64 of 32 random bytes, the Standard Webhooks form. Its
// SHA-256 is always stored, to check the x-webhook-secret header in
// constant time; when the connector requires signatures the secret itself
// is also sealed (internal/secretbox, context "signals/connector/<org>/<id>"),
// since an HMAC cannot be checked with a hash. The ingress path names only
// the connector, so a pointer connector id → org is kept in the platform
// org; the org's own record stays the authority (status, hash, sealed
// secret). RevokeConnector keeps the metadata, drops the secret material
// and turns the ingress away.
//
// # Ingress
//
// Ingest authenticates before it reads the body: an unknown connector, a
// revoked one, a missing or repeated header and a wrong secret all get the
// same 401 WEBHOOK_SECRET_INVALID, after the same hashing work. A connector
// that requires signatures also checks webhook-id, webhook-timestamp
// (within SignatureTolerance either way) and webhook-signature
// (v1,<base64 HMAC-SHA256(key, id.timestamp.body)>). A webhook-id is
// processed once per connector: a replay answers Duplicate and stores
// nothing. The body is strict JSON, {"events":[{type, timestamp, data}]},
// within MaxEvents, policy.SignalTypeRule, MaxEventLead and MaxDataBytes; a
// refused delivery stores nothing.
//
// # Signals
//
// Every event is stored with its receipt time, and the newest event of
// each type by event timestamp is the type's latest (a tie goes to the one
// received last; an older event arriving late is kept but does not
// replace it). A delivery is one unit: its events, the latest view, its
// replay record and its ledger entry (signals.received) commit together.
//
// Current gives an evaluation the org's latest signals in the shape of
// policy.Input.Signals, age_seconds counted against the evaluation's now,
// and what a dossier records of each. Decisions read them only when the
// policy reads signals (policy.Compiled.UsesSignals); a failure to read
// them refuses the request, never authorizes.
package signals
