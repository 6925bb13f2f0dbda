package jobs

import (
	"context"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"
)

// State of a job.
type State string

// States: queued → running → done or failed; running goes back to queued
// when released, and is claimed again once its lease passes.
const (
	Queued  State = "queued"
	Running State = "running"
	Done    State = "done"
	Failed  State = "failed"
)

// Finished reports whether s is final (done or failed).
func (s State) Finished() bool { return s == Done || s == Failed }

// Job is one unit of leased, resumable work of an org.
type Job struct {
	OrgID string
	// Kind names the work ("export"): 1 to MaxKindLen bytes of [a-z0-9_.-].
	Kind string
	// ID is unique within (OrgID, Kind): enqueueing it again is a no-op.
	ID string
	// Payload is opaque to this package and to backends.
	Payload []byte
	State   State
	// Attempts counts the claims, the one running included.
	Attempts int
	// Owner and LeaseUntil are the running claim's: who holds it, and the
	// instant (store clock) from which any worker may take it over.
	Owner      string
	LeaseUntil time.Time
	// Due is when a worker may next claim the job: a queued job's start,
	// a running job's LeaseUntil; zero once finished. Backends index it.
	Due time.Time
	// Result is what Finish stored; Failure why the last attempt failed,
	// or why the job did.
	Result  []byte
	Failure string
	// CreatedAt and UpdatedAt are the store clock's.
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Tx is what jobs need from a backend transaction scoped to one org.
type Tx interface {
	OrgID() string
	// Now is the store's clock: leases are judged by it, never by the
	// caller's.
	Now() time.Time
	// PutJob inserts j or replaces the job with the same (Kind, ID),
	// moving its Due index entry. j.OrgID must be the transaction's org.
	PutJob(ctx context.Context, j Job) error
	// InsertJob writes j, a job that does not exist: its id was minted
	// fresh for it. It is PutJob for the hot paths that create jobs, where
	// a backend may write without looking first (store/pebblestore does;
	// store/pgstore refuses an existing job when the transaction commits).
	InsertJob(ctx context.Context, j Job) error
	// JobInTx returns the org's job (kind, id) as of this transaction; an
	// error wrapping ErrNotFound (and store.ErrNotFound) when there is none.
	JobInTx(ctx context.Context, kind, id string) (Job, error)
}

// Reader reads committed jobs.
type Reader interface {
	// Job returns the org's job (kind, id), or an error wrapping ErrNotFound.
	Job(ctx context.Context, orgID, kind, id string) (Job, error)
	// DueJobs returns the jobs of kind, in every org, whose Due is set and
	// not after the store's clock, ordered by (Due, OrgID, ID), at most
	// limit of them (limit <= 0: all).
	DueJobs(ctx context.Context, kind string, limit int) ([]Job, error)
}

// Limits of the string fields, in bytes.
const (
	MaxKindLen = 64
	// MaxIDLen bounds OrgID, ID and Owner (index rows stay small).
	MaxIDLen = 512
	// MaxFailureLen bounds Failure; longer failures are cut (Fail, Release).
	MaxFailureLen = 4096
)

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}

// Validate reports why j cannot be stored, or nil: its key (ValidateKey),
// a known State with the fields it implies (an Owner, LeaseUntil and
// Due = LeaseUntil when running; Due alone when queued; none of them once
// finished), Attempts >= 0, Owner and Failure as bounded text, and times
// within the years 1 to 9999 (CreatedAt and UpdatedAt set).
func (j Job) Validate() error {
	if err := ValidateKey(j.OrgID, j.Kind, j.ID); err != nil {
		return err
	}
	if j.Attempts < 0 {
		return invalid("attempts", "%d is negative", j.Attempts)
	}
	if err := checkString("owner", j.Owner, 0, MaxIDLen); err != nil {
		return err
	}
	if err := checkString("failure", j.Failure, 0, MaxFailureLen); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		t    time.Time
		set  bool
	}{{"created_at", j.CreatedAt, true}, {"updated_at", j.UpdatedAt, true}, {"lease_until", j.LeaseUntil, false}, {"due", j.Due, false}} {
		if err := checkTime(f.name, f.t, f.set); err != nil {
			return err
		}
	}
	switch j.State {
	case Queued:
		if j.Owner != "" || !j.LeaseUntil.IsZero() || j.Due.IsZero() {
			return invalid("state", "a queued job has a due time and no owner or lease")
		}
	case Running:
		if j.Owner == "" || j.LeaseUntil.IsZero() || !j.Due.Equal(j.LeaseUntil) {
			return invalid("state", "a running job has an owner, a lease and is due when its lease ends")
		}
	case Done, Failed:
		if j.Owner != "" || !j.LeaseUntil.IsZero() || !j.Due.IsZero() {
			return invalid("state", "a finished job has no owner, lease or due time")
		}
	default:
		return invalid("state", "%q is not a state", j.State)
	}
	return nil
}

// ValidateFor is Validate for a write in a transaction of orgID: a job of
// another org is refused with ErrOrgMismatch.
func (j Job) ValidateFor(orgID string) error {
	if j.OrgID != orgID {
		return fmt.Errorf("%w: job of org %q in a transaction of org %q", ErrOrgMismatch, j.OrgID, orgID)
	}
	return j.Validate()
}

// ValidateKey reports why (orgID, kind, id) cannot name a job, or nil: the
// arguments of Job and (with the transaction's org) JobInTx.
func ValidateKey(orgID, kind, id string) error {
	if err := checkString("org_id", orgID, 1, MaxIDLen); err != nil {
		return err
	}
	if err := ValidateKind(kind); err != nil {
		return err
	}
	return checkString("id", id, 1, MaxIDLen)
}

// ValidateKind reports why no job can have kind, or nil: the argument of
// DueJobs.
func ValidateKind(kind string) error {
	if kind == "" || len(kind) > MaxKindLen {
		return invalid("kind", "%d bytes, want 1 to %d", len(kind), MaxKindLen)
	}
	for i := 0; i < len(kind); i++ {
		c := kind[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return invalid("kind", "byte %#02x at %d is not one of [a-z0-9_.-]", c, i)
		}
	}
	return nil
}

// checkString checks a text field of min to max bytes: valid UTF-8 without
// control characters, except that a failure may hold line breaks and tabs.
func checkString(field, s string, min, max int) error {
	if len(s) < min || len(s) > max {
		return invalid(field, "%d bytes, want %d to %d", len(s), min, max)
	}
	if !utf8.ValidString(s) {
		return invalid(field, "invalid UTF-8")
	}
	for i, c := range s {
		if unicode.IsControl(c) && (field != "failure" || c != '\n' && c != '\t') {
			return invalid(field, "control character %U at byte %d", c, i)
		}
	}
	return nil
}

func checkTime(field string, t time.Time, required bool) error {
	if t.IsZero() {
		if required {
			return invalid(field, "not set")
		}
		return nil
	}
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		return invalid(field, "year %d outside 1..9999", y)
	}
	return nil
}
