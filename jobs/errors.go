package jobs

import "errors"

// Sentinels of the refusals. Each error a function of this package (or a
// backend checking a Job) returns on purpose wraps exactly one of them;
// any other error is the store's.
var (
	// ErrInvalid: a job or lookup argument no stored job may have.
	ErrInvalid = errors.New("jobs: invalid")
	// ErrOrgMismatch: a job of another org than the transaction's.
	ErrOrgMismatch = errors.New("jobs: org mismatch")
	// ErrNotFound: no job of that kind and id in the org. Backends wrap it
	// together with store.ErrNotFound.
	ErrNotFound = errors.New("jobs: not found")
	// ErrNotDue: Claim of a job that is finished, queued for later, or
	// running under a lease that has not passed.
	ErrNotDue = errors.New("jobs: not due")
	// ErrNotOwner: the caller's claim is no longer the job's (another
	// worker took it over, or it was released, finished or failed).
	ErrNotOwner = errors.New("jobs: not the owner")
	// ErrLeaseExpired: the caller's lease passed by the store's clock; the
	// job is any worker's to claim, the caller's included.
	ErrLeaseExpired = errors.New("jobs: lease expired")
)
