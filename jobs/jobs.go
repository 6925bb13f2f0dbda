package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Policy is how a claim leases a job.
type Policy struct {
	// Lease is how long a claim holds the job without a Heartbeat, by the
	// store's clock; it must be positive.
	Lease time.Duration
	// MaxAttempts is how many claims a job gets; the claim after the last
	// fails it instead (0: no limit).
	MaxAttempts int
}

// Updater runs fn in a transaction of orgID (a store's Update, adapted):
// ClaimNext claims in it.
type Updater func(ctx context.Context, orgID string, fn func(tx Tx) error) error

// ClaimBatch is how many due jobs ClaimNext looks at per call.
const ClaimBatch = 16

// now is the store's clock at the precision backends keep.
func now(tx Tx) time.Time { return tx.Now().UTC().Truncate(time.Microsecond) }

// Enqueue queues the job (kind, id) of the transaction's org, due at once.
// It is idempotent by id: when the job exists, in any state, it is returned
// unchanged with created false.
func Enqueue(ctx context.Context, tx Tx, kind, id string, payload []byte) (j Job, created bool, err error) {
	return EnqueueAt(ctx, tx, kind, id, payload, time.Time{})
}

// EnqueueAt is Enqueue for a job due at due (a deadline, a retry); a due
// time that is zero or already passed by the store's clock means at once.
func EnqueueAt(ctx context.Context, tx Tx, kind, id string, payload []byte, due time.Time) (j Job, created bool, err error) {
	j, err = tx.JobInTx(ctx, kind, id)
	if err == nil {
		return j, false, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return Job{}, false, err
	}
	at := now(tx)
	j = Job{OrgID: tx.OrgID(), Kind: kind, ID: id, Payload: bytes.Clone(payload), State: Queued,
		Due: at, CreatedAt: at, UpdatedAt: at}
	if due = due.UTC().Truncate(time.Microsecond); due.After(at) {
		j.Due = due
	}
	if err := tx.PutJob(ctx, j); err != nil {
		return Job{}, false, err
	}
	return j, true, nil
}

// EnqueueClaimed is Enqueue and Claim in one write, for a caller that
// starts at once the job it creates: a new job is running for owner, its
// first attempt leased for p.Lease. A job that exists is returned
// unchanged with created false, and is not the caller's.
func EnqueueClaimed(ctx context.Context, tx Tx, kind, id string, payload []byte, owner string, p Policy) (j Job, created bool, err error) {
	if p.Lease <= 0 {
		return Job{}, false, invalid("lease", "%v is not positive", p.Lease)
	}
	if owner == "" {
		return Job{}, false, invalid("owner", "empty")
	}
	j, err = tx.JobInTx(ctx, kind, id)
	if err == nil {
		return j, false, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return Job{}, false, err
	}
	at := now(tx)
	j = Job{OrgID: tx.OrgID(), Kind: kind, ID: id, Payload: bytes.Clone(payload), State: Running, Attempts: 1,
		Owner: owner, LeaseUntil: at.Add(p.Lease), CreatedAt: at, UpdatedAt: at}
	j.Due = j.LeaseUntil
	if err := tx.PutJob(ctx, j); err != nil {
		return Job{}, false, err
	}
	return j, true, nil
}

// Claim takes the job (kind, id) for owner when it is due: queued and its
// Due reached, or running with its lease passed (its owner stopped without
// a sign of life: the job is taken over and resumed). The job becomes
// running with Attempts+1 and a lease of p.Lease; the returned Job is the
// fence of the later calls (Heartbeat, Finish, Fail, Release).
//
// A due job that already had p.MaxAttempts claims is failed instead, and
// returned with State Failed and a nil error: the caller records its own
// side of the failure in the same transaction. A job that is not due is
// ErrNotDue.
func Claim(ctx context.Context, tx Tx, kind, id, owner string, p Policy) (Job, error) {
	if p.Lease <= 0 {
		return Job{}, invalid("lease", "%v is not positive", p.Lease)
	}
	if owner == "" {
		return Job{}, invalid("owner", "empty")
	}
	j, err := tx.JobInTx(ctx, kind, id)
	if err != nil {
		return Job{}, err
	}
	at := now(tx)
	if j.State.Finished() || j.Due.After(at) {
		return j, fmt.Errorf("%w: %s job %q is %s, due %v", ErrNotDue, kind, id, j.State, j.Due)
	}
	if j.State == Running { // taken over: that attempt's end is its failure
		j.Failure = fmt.Sprintf("attempt %d stopped without finishing (its lease passed)", j.Attempts)
	}
	j.UpdatedAt = at
	if p.MaxAttempts > 0 && j.Attempts >= p.MaxAttempts {
		j.State, j.Owner, j.LeaseUntil, j.Due = Failed, "", time.Time{}, time.Time{}
		j.Failure = clip(fmt.Sprintf("gave up after %d attempts; the last: %s", j.Attempts, j.Failure))
		return j, tx.PutJob(ctx, j)
	}
	j.State, j.Attempts, j.Owner = Running, j.Attempts+1, owner
	j.LeaseUntil = at.Add(p.Lease)
	j.Due = j.LeaseUntil
	return j, tx.PutJob(ctx, j)
}

// ClaimNext claims the next due job of kind in any org for owner: it lists
// up to ClaimBatch due jobs and claims the first that is still due in its
// org's transaction (another worker may have taken the others). It reports
// false when none could be claimed. The job it returns may be Failed (see
// Claim's MaxAttempts).
func ClaimNext(ctx context.Context, r Reader, update Updater, kind, owner string, p Policy) (Job, bool, error) {
	due, err := r.DueJobs(ctx, kind, ClaimBatch)
	if err != nil {
		return Job{}, false, err
	}
	for _, d := range due {
		var got Job
		err := update(ctx, d.OrgID, func(tx Tx) error {
			j, err := Claim(ctx, tx, kind, d.ID, owner, p)
			got = j
			return err
		})
		if errors.Is(err, ErrNotDue) {
			continue
		}
		if err != nil {
			return Job{}, false, err
		}
		return got, true, nil
	}
	return Job{}, false, nil
}

// owned returns the stored job while held is still its running claim: the
// same owner and attempt, and the lease not passed by the store's clock.
func owned(ctx context.Context, tx Tx, held Job) (Job, time.Time, error) {
	j, err := tx.JobInTx(ctx, held.Kind, held.ID)
	if err != nil {
		return Job{}, time.Time{}, err
	}
	if j.State != Running || j.Owner != held.Owner || j.Attempts != held.Attempts {
		return j, time.Time{}, fmt.Errorf("%w: %s job %q is %s, attempt %d", ErrNotOwner, held.Kind, held.ID, j.State, j.Attempts)
	}
	at := now(tx)
	if !at.Before(j.LeaseUntil) {
		return j, time.Time{}, fmt.Errorf("%w: %s job %q: the lease ended at %v", ErrLeaseExpired, held.Kind, held.ID, j.LeaseUntil)
	}
	return j, at, nil
}

// Heartbeat extends held's lease to lease from now (store clock), only
// while it is still the caller's: ErrNotOwner or ErrLeaseExpired otherwise.
func Heartbeat(ctx context.Context, tx Tx, held Job, lease time.Duration) (Job, error) {
	if lease <= 0 {
		return Job{}, invalid("lease", "%v is not positive", lease)
	}
	j, at, err := owned(ctx, tx, held)
	if err != nil {
		return Job{}, err
	}
	j.LeaseUntil, j.UpdatedAt = at.Add(lease), at
	j.Due = j.LeaseUntil
	return j, tx.PutJob(ctx, j)
}

// Finish records held as done with result, only while it is the caller's.
func Finish(ctx context.Context, tx Tx, held Job, result []byte) (Job, error) {
	j, at, err := owned(ctx, tx, held)
	if err != nil {
		return Job{}, err
	}
	j.State, j.Result, j.Failure = Done, bytes.Clone(result), ""
	return end(ctx, tx, j, at)
}

// Fail records held as failed for good with why, only while it is the
// caller's.
func Fail(ctx context.Context, tx Tx, held Job, failure string) (Job, error) {
	j, at, err := owned(ctx, tx, held)
	if err != nil {
		return Job{}, err
	}
	j.State, j.Failure = Failed, clip(failure)
	return end(ctx, tx, j, at)
}

func end(ctx context.Context, tx Tx, j Job, at time.Time) (Job, error) {
	j.Owner, j.LeaseUntil, j.Due, j.UpdatedAt = "", time.Time{}, time.Time{}, at
	return j, tx.PutJob(ctx, j)
}

// Release hands held back to the queue, due after the given delay, with
// why (a shutdown, a failure worth retrying), only while it is the
// caller's. Its attempts are kept.
func Release(ctx context.Context, tx Tx, held Job, failure string, after time.Duration) (Job, error) {
	j, at, err := owned(ctx, tx, held)
	if err != nil {
		return Job{}, err
	}
	j.State, j.Owner, j.LeaseUntil, j.Failure, j.UpdatedAt = Queued, "", time.Time{}, clip(failure), at
	j.Due = at.Add(max(after, 0))
	return j, tx.PutJob(ctx, j)
}

// Requeue queues a finished job (done or failed) again, due at once, for
// a new series of claims: Attempts starts again from 0, Result and Failure
// are cleared, Payload is kept. A job that is not finished is ErrNotDue
// (its current series runs on).
func Requeue(ctx context.Context, tx Tx, kind, id string) (Job, error) {
	j, err := tx.JobInTx(ctx, kind, id)
	if err != nil {
		return Job{}, err
	}
	if !j.State.Finished() {
		return j, fmt.Errorf("%w: %s job %q is %s, not finished", ErrNotDue, kind, id, j.State)
	}
	at := now(tx)
	j.State, j.Attempts, j.Result, j.Failure, j.Due, j.UpdatedAt = Queued, 0, nil, "", at, at
	return j, tx.PutJob(ctx, j)
}

// clip makes s a storable Failure: valid UTF-8, control characters other
// than line breaks and tabs replaced by spaces, at most MaxFailureLen bytes.
func clip(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return ' '
		}
		return r
	}, s)
	if len(s) <= MaxFailureLen {
		return s
	}
	cut := MaxFailureLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
