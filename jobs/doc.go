// Package jobs is leased, resumable background work judged by the STORE's
// clock: validation packs today, and every worker of DESIGN §10 after them.
// It holds no state of its own: a Job lives in the store, and the rules
// below are free functions over the Tx and Reader a backend provides.
//
// # Contract
//
// A job is (OrgID, Kind, ID), with an opaque Payload. Enqueue creates it
// queued and due at once; enqueueing the same id again returns the job as
// it stands (idempotent by id). A worker claims a due job — queued, or
// running with its lease passed — with Claim (one job) or ClaimNext (the
// next due job of a kind in any org): the job becomes running, Attempts+1,
// owned by the worker until LeaseUntil. While it works the worker renews
// the lease (Heartbeat) and ends the claim with Finish (done, with a
// result), Fail (failed for good) or Release (queued again, after a
// delay). Each of these takes the Job that Claim returned and acts only
// while that claim is still the job's: same owner, same attempt, lease not
// passed. Otherwise it is refused (ErrNotOwner, ErrLeaseExpired) and
// changes nothing, so a stale worker can never overwrite the one that took
// over. A worker that dies simply stops renewing; once its lease passes,
// any worker (after a restart: the first that looks) claims and resumes
// the job. Policy.MaxAttempts fails a job whose claims keep ending
// without a result.
//
// Leases are judged by Tx.Now, the store's clock, never the caller's:
// PostgreSQL's clock_timestamp(), one clock for every server sharing the
// database; Pebble's injected clock (time.Now in production). Times are
// kept to the microsecond.
//
// Two workers never own one job: each call reads and writes the job inside
// one transaction of its org, and backends serialize an org's transactions.
// Claims, heartbeats and ends are atomic with whatever else the caller
// writes in the same transaction (a feature's own record of the work).
//
// Backends keep the fields as given, index Due (set on queued and running
// jobs, zero once finished) across orgs for DueJobs, refuse a Job that
// Validate (or ValidateFor, with the transaction's org) refuses before
// writing anything, and hold no other rule. Their conformance suite is
// jobs/jobstest.
package jobs
