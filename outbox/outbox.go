package outbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/clearancehq/clearance/jobs"
)

// JobKind is the jobs kind under which events wait for their dispatch.
const JobKind = "outbox"

// MaxNameLen bounds an event or subscriber name, in bytes.
const MaxNameLen = 64

// ErrInvalid: an event no store may hold.
var ErrInvalid = errors.New("outbox: invalid event")

// Event is one thing that happened, owed to the org's destinations.
type Event struct {
	OrgID string
	// ID is unique within the org: the fresh id of the event.
	ID string
	// Name is what happened ("decision.resolved"): a name ValidName
	// accepts.
	Name string
	// OccurredAt is when the change that caused it was made.
	OccurredAt time.Time
	// Body is the event's JSON object, sent as is.
	Body []byte
}

// Validate reports why e cannot be emitted, or nil.
func (e Event) Validate() error {
	if err := jobs.ValidateKey(e.OrgID, JobKind, e.ID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := ValidName(e.Name); err != nil {
		return err
	}
	if e.OccurredAt.IsZero() {
		return fmt.Errorf("%w: occurred_at not set", ErrInvalid)
	}
	if len(e.Body) == 0 || e.Body[0] != '{' || !json.Valid(e.Body) {
		return fmt.Errorf("%w: body is not a JSON object", ErrInvalid)
	}
	return nil
}

// Tx is what Emit needs of a backend transaction.
type Tx interface {
	jobs.Tx
	SubscriberTx
}

// Emit writes e, pending, in tx (the transaction of the change that
// caused it) when the org has a subscriber, and reports whether it did:
// without one nothing is owed, and nothing is written. e.ID must be fresh
// (an id never emitted before in the org): Emit does not read, so that it
// costs one write on the paths it rides. Emit is Prepare, then Emit of
// what it prepared.
func Emit(ctx context.Context, tx Tx, e Event) (bool, error) {
	p, err := Prepare(e)
	if err != nil {
		return false, err
	}
	return p.Emit(ctx, tx)
}

// Prepared is an event validated and encoded: the part of emitting it
// that needs no transaction, done before one is opened so that the
// transaction (which holds the org's lock) only writes it.
type Prepared struct {
	job jobs.Job
}

// Prepare validates e and encodes it for Prepared.Emit.
func Prepare(e Event) (Prepared, error) {
	if err := e.Validate(); err != nil {
		return Prepared{}, err
	}
	return Prepared{job: jobs.Job{OrgID: e.OrgID, Kind: JobKind, ID: e.ID, Payload: encode(e), State: jobs.Queued}}, nil
}

// Emit is Emit of the prepared event: it writes it in tx when the org has
// a subscriber, and reports whether it did. Like Emit it does not read:
// p's event id must be fresh in the org.
func (p Prepared) Emit(ctx context.Context, tx Tx) (bool, error) {
	if p.job.OrgID == "" {
		return false, fmt.Errorf("%w: not prepared", ErrInvalid)
	}
	if p.job.OrgID != tx.OrgID() {
		return false, fmt.Errorf("%w: event of org %q in a transaction of org %q", ErrInvalid, p.job.OrgID, tx.OrgID())
	}
	if ok, err := tx.OutboxSubscribed(ctx); err != nil || !ok {
		return false, err
	}
	j := p.job
	at := tx.Now().UTC().Truncate(time.Microsecond)
	j.Due, j.CreatedAt, j.UpdatedAt = at, at, at
	return true, tx.InsertJob(ctx, j)
}

// Pending lists up to limit pending events of every org, oldest first
// (limit <= 0: all). A listed event may be taken by another dispatcher
// before this one takes it.
func Pending(ctx context.Context, r jobs.Reader, limit int) ([]Event, error) {
	due, err := r.DueJobs(ctx, JobKind, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Event, 0, len(due))
	for _, j := range due {
		e, err := decode(j)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// Take marks the org's event id handed over, in tx, and returns it; ok is
// false when it was handed over already (by this dispatcher or another).
// The caller fans the event out in the same transaction.
func Take(ctx context.Context, tx jobs.Tx, id string) (e Event, ok bool, err error) {
	j, err := tx.JobInTx(ctx, JobKind, id)
	if err != nil {
		return Event{}, false, err
	}
	if j.State.Finished() {
		return Event{}, false, nil
	}
	if e, err = decode(j); err != nil {
		return Event{}, false, err
	}
	at := tx.Now().UTC().Truncate(time.Microsecond)
	// The event leaves with the taker: the record keeps that it was
	// handed over, not its body again.
	j.State, j.Owner, j.LeaseUntil, j.Due, j.UpdatedAt, j.Payload = jobs.Done, "", time.Time{}, time.Time{}, at, nil
	j.Attempts++
	return e, true, tx.PutJob(ctx, j)
}

// encode frames e as "<name> <occurred_at>\n<body>": the body is kept
// byte for byte, and nothing is encoded twice on the emitting path.
func encode(e Event) []byte {
	b := make([]byte, 0, len(e.Name)+len(time.RFC3339Nano)+2+len(e.Body))
	b = append(b, e.Name...)
	b = append(b, ' ')
	b = e.OccurredAt.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, '\n')
	return append(b, e.Body...)
}

func decode(j jobs.Job) (Event, error) {
	bad := func(why string) (Event, error) {
		return Event{}, fmt.Errorf("outbox: event %s of org %s does not decode: %s", j.ID, j.OrgID, why)
	}
	head, body, ok := bytes.Cut(j.Payload, []byte{'\n'})
	if !ok {
		return bad("no header line")
	}
	name, at, ok := strings.Cut(string(head), " ")
	if !ok {
		return bad("no occurred_at")
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return bad(err.Error())
	}
	return Event{OrgID: j.OrgID, ID: j.ID, Name: name, OccurredAt: t, Body: bytes.Clone(body)}, nil
}
