// Package clearance is the facade of Clearance: it decides, before an AI
// agent or a workflow acts, whether the action may run (ALLOW, ESCALATE,
// REVIEW_REQUIRED or BLOCK), binds a single-use signed grant to an allowed
// action, and leaves evidence an auditor can check without trusting us.
//
// Open(backend, Options) returns an Engine: the kernel (internal/core) over
// one storage backend, and one feature package per concern. Import the
// package for what you do:
//
//	clearance        Open, Options, Engine; the hot path as methods
//	                 (Evaluate, EnforceAndBind, VerifyGrant, Claim, Finalize),
//	                 Run (every background worker) and the error Kinds
//	                 (ErrInvalidRequest, …, *Error)
//	decide           Engine.Decide: Evaluate (the request body as received,
//	                 decoded by the engine) and EnforceAndBind, on ONE record
//	                 path; verdicts of the gate routes (GateAnswerOf)
//	execution        Engine.Execution: verify, claim, finalize, reconcile,
//	                 dispatches
//	policies         Engine.Policies: publish, stage, activate, resolve
//	evidence         Engine.Evidence: dossiers, shadow report, chains, proof
//	                 packets, capsules, overrides
//	audit            Engine.Audit: ledger pages, verification, checkpoints,
//	                 proofs, the sealer
//	sharelink        Engine.ShareLinks: public, expiring dossier checks
//	export           Engine.Exports: validation packs, queued, built in the
//	                 background, downloaded
//	admin            Engine.Admin: orgs, API keys, agent and provider keys,
//	                 grant key revocations
//	store/pebblestore, store/pgstore
//	                 the backends: embedded (one server) or PostgreSQL (many)
//	server           the HTTP API over an Engine
//	policy, grant, ledger, capsule, proof, pack
//	                 pure formats an outside verifier uses on its own
//
// Below the features: records, rules over a transaction their consumer
// declares (tenant, registry, claim, dossier, artifact, idempotency, jobs),
// and the store contract they compose; internal/archtest holds the layers
// to this map.
//
// Contract: an entry point either returns a result whose evidence is
// durably stored, or an error; a failed write never yields a decision, and
// a storage failure never authorizes. Errors are *Error values whose Kind is
// one of the Err* sentinels and whose Code is a stable machine code.
// Engines are safe for concurrent use.
package clearance
