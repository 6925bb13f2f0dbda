package pebblestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/clearancehq/clearance/jobs"
	"github.com/clearancehq/clearance/store"
)

// Job keys: the record under its org, and the due index of every org
// (DueJobs), which holds only queued and running jobs (Due set):
//
//	o <org> j <kind (uvarint-prefixed)> <id>        -> jobValue (jobcodec.go)
//	j <kind (uvarint-prefixed)> <due µs^sign> <org> 0x00 <id> -> empty
//
// Times are Unix microseconds with the sign bit flipped (appendMicrosOrder),
// so entries sort by due time, then org id and id bytewise (the NUL, which
// jobs.Validate refuses in ids, ends the org id), as PostgreSQL's COLLATE
// "C" does. PutJob deletes the replaced job's entry in the same batch.
const (
	tagJobDue = 'j'
	subJob    = 'j'
)

var (
	_ jobs.Tx     = (*tx)(nil)
	_ jobs.Reader = (*Store)(nil)
)

// jobValue is the stored form of a job; org, kind and id are in the key.
type jobValue struct {
	Payload    []byte     `json:"payload,omitempty"`
	State      jobs.State `json:"state"`
	Attempts   int        `json:"attempts"`
	Owner      string     `json:"owner,omitempty"`
	LeaseUntil time.Time  `json:"lease_until,omitzero"`
	Due        time.Time  `json:"due,omitzero"`
	Result     []byte     `json:"result,omitempty"`
	Failure    string     `json:"failure,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
}

func usTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}

func jobKey(orgID, kind, id string) []byte {
	k := orgPrefix(orgID, subJob, binary.MaxVarintLen64+len(kind)+len(id))
	k = appendLP(k, kind)
	return append(k, id...)
}

func jobDuePrefix(kind string, extra int) []byte {
	k := make([]byte, 0, 1+binary.MaxVarintLen64+len(kind)+extra)
	k = append(k, tagJobDue)
	return appendLP(k, kind)
}

func jobDueKey(j jobs.Job) []byte {
	k := jobDuePrefix(j.Kind, 8+len(j.OrgID)+1+len(j.ID))
	k = appendMicrosOrder(k, micros(j.Due))
	k = append(k, j.OrgID...)
	k = append(k, 0)
	return append(k, j.ID...)
}

func readJob(r kv, orgID, kind, id string) (jobs.Job, error) {
	v, err := getOr(r, jobKey(orgID, kind, id), jobs.ErrNotFound, "%s job %q of org %q", kind, id, orgID)
	if err != nil {
		return jobs.Job{}, err
	}
	s, err := decodeJob(v)
	if err != nil {
		return jobs.Job{}, err
	}
	return jobs.Job{OrgID: orgID, Kind: kind, ID: id, Payload: s.Payload, State: s.State, Attempts: s.Attempts,
		Owner: s.Owner, LeaseUntil: s.LeaseUntil.UTC(), Due: s.Due.UTC(), Result: s.Result, Failure: s.Failure,
		CreatedAt: s.CreatedAt.UTC(), UpdatedAt: s.UpdatedAt.UTC()}, nil
}

// jobDue is a job's due index entry as a transaction knows it: none
// (the job is absent or finished) when due is zero.
type jobDue struct{ due time.Time }

// putJob writes j to b, replacing the stored job and its due entry; old,
// when known, is the stored job's due entry (saving its read).
func putJob(b *pebble.Batch, j jobs.Job, old *jobDue) error {
	if old == nil {
		switch o, err := readJob(b, j.OrgID, j.Kind, j.ID); {
		case err == nil:
			old = &jobDue{o.Due}
		case errors.Is(err, store.ErrNotFound):
			old = &jobDue{}
		default:
			return err
		}
	}
	if !old.due.IsZero() {
		if err := b.Delete(jobDueKey(jobs.Job{OrgID: j.OrgID, Kind: j.Kind, ID: j.ID, Due: old.due}), nil); err != nil {
			return fmt.Errorf("pebblestore: write: %w", err)
		}
	}
	j.LeaseUntil, j.Due, j.CreatedAt, j.UpdatedAt = usTime(j.LeaseUntil), usTime(j.Due), usTime(j.CreatedAt), usTime(j.UpdatedAt)
	v, err := encodeJob(jobValue{Payload: j.Payload, State: j.State, Attempts: j.Attempts, Owner: j.Owner,
		LeaseUntil: j.LeaseUntil, Due: j.Due, Result: j.Result, Failure: j.Failure, CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt})
	if err != nil {
		return err
	}
	if err := b.Set(jobKey(j.OrgID, j.Kind, j.ID), v, nil); err != nil {
		return fmt.Errorf("pebblestore: write: %w", err)
	}
	if j.Due.IsZero() {
		return nil
	}
	if err := b.Set(jobDueKey(j), []byte{}, nil); err != nil {
		return fmt.Errorf("pebblestore: write: %w", err)
	}
	return nil
}

// insertDue is what InsertJob assumes of the stored job: what the
// transaction knows, or none.
func insertDue(known *jobDue) *jobDue {
	if known == nil {
		return &jobDue{}
	}
	return known
}

// knownDue returns what t read or wrote of the job's due entry, or nil.
func (t *tx) knownDue(kind, id string) *jobDue {
	if t.dues == nil {
		return nil
	}
	if d, ok := t.dues[kind+"\x00"+id]; ok {
		return &d
	}
	return nil
}

// rememberDue notes the job's due entry as it stands in t's batch: the
// org's lock keeps every other writer out until t ends.
func (t *tx) rememberDue(kind, id string, due time.Time) {
	if t.dues == nil {
		t.dues = map[string]jobDue{}
	}
	t.dues[kind+"\x00"+id] = jobDue{usTime(due)}
}

// PutJob implements jobs.Tx.
func (t *tx) PutJob(ctx context.Context, j jobs.Job) error {
	if err := j.ValidateFor(t.org); err != nil {
		return err
	}
	if err := t.lock(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	if err := putJob(t.b, j, t.knownDue(j.Kind, j.ID)); err != nil {
		return err
	}
	t.rememberDue(j.Kind, j.ID, j.Due)
	return nil
}

// InsertJob implements jobs.Tx: it writes without reading, trusting that
// the id is fresh (a job written over would leave its old due entry).
func (t *tx) InsertJob(ctx context.Context, j jobs.Job) error {
	if err := j.ValidateFor(t.org); err != nil {
		return err
	}
	if err := t.lock(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	if err := putJob(t.b, j, insertDue(t.knownDue(j.Kind, j.ID))); err != nil {
		return err
	}
	// A transaction that touched no job before (a decision's) keeps no
	// memo: a later write of the job reads it back from the batch.
	if t.dues != nil {
		t.rememberDue(j.Kind, j.ID, j.Due)
	}
	return nil
}

// JobInTx implements jobs.Tx.
func (t *tx) JobInTx(ctx context.Context, kind, id string) (jobs.Job, error) {
	if err := jobs.ValidateKey(t.org, kind, id); err != nil {
		return jobs.Job{}, err
	}
	if err := t.lock(ctx); err != nil {
		return jobs.Job{}, err
	}
	defer t.mu.Unlock()
	j, err := readJob(t.b, t.org, kind, id)
	switch {
	case err == nil:
		t.rememberDue(kind, id, j.Due)
	case errors.Is(err, store.ErrNotFound):
		t.rememberDue(kind, id, time.Time{})
	}
	return j, err
}

// Job implements jobs.Reader.
func (s *Store) Job(ctx context.Context, orgID, kind, id string) (jobs.Job, error) {
	if err := jobs.ValidateKey(orgID, kind, id); err != nil {
		return jobs.Job{}, err
	}
	if err := s.enter(ctx); err != nil {
		return jobs.Job{}, err
	}
	defer s.leave()
	return readJob(s.db, orgID, kind, id)
}

// DueJobs implements jobs.Reader: a scan of the due index up to the
// store's clock (Options.Now), each job read from the same snapshot.
func (s *Store) DueJobs(ctx context.Context, kind string, limit int) ([]jobs.Job, error) {
	if err := jobs.ValidateKind(kind); err != nil {
		return nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.leave()
	snap := s.db.NewSnapshot()
	defer snap.Close()
	p := jobDuePrefix(kind, 0)
	upper := appendMicrosOrder(bytes.Clone(p), micros(s.now())+1)
	var out []jobs.Job
	err := scan(snap, p, upper, func(k, _ []byte) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		org, id, ok := bytes.Cut(k[min(len(p)+8, len(k)):], []byte{0})
		if len(k) < len(p)+8 || !ok {
			return false, fmt.Errorf("pebblestore: corrupt job index key %q", k)
		}
		j, err := readJob(snap, string(org), kind, string(id))
		if err != nil {
			return false, fmt.Errorf("pebblestore: job index: %w", err)
		}
		out = append(out, j)
		return limit <= 0 || len(out) < limit, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
