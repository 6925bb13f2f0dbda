package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/jobs"
	"github.com/clearancehq/clearance/store"
)

// States of a delivery.
const (
	// StatePending: queued, not attempted yet (or queued again by a
	// redelivery).
	StatePending = "pending"
	// StateRetrying: an attempt failed; the next is due at NextAttemptAt.
	StateRetrying = "retrying"
	// StateDelivered: the receiver answered 2xx.
	StateDelivered = "delivered"
	// StateDeadLettered: the last attempt of the schedule failed.
	StateDeadLettered = "dead_lettered"
	// StateDropped: the integration was deleted before the delivery.
	StateDropped = "dropped"
)

// maxAttemptsKept bounds the attempts a delivery's log keeps (the latest).
const maxAttemptsKept = 50

const deliveryKind = "webhook.delivery"

// Delivery is one event's delivery to a destination and its attempts:
// the delivery log.
type Delivery struct {
	DeliveryID    string    `json:"delivery_id"`
	EventID       string    `json:"event_id"`
	Event         string    `json:"event"`
	Destination   string    `json:"destination"`
	State         string    `json:"state"`
	OccurredAt    string    `json:"occurred_at"`
	Attempts      []Attempt `json:"attempts"`
	NextAttemptAt string    `json:"next_attempt_at,omitempty"`
	Redeliveries  int       `json:"redeliveries"`
	CreatedAt     string    `json:"created_at"`
	UpdatedAt     string    `json:"updated_at"`
}

// Attempt is one try of a delivery.
type Attempt struct {
	Number     int    `json:"number"`
	At         string `json:"at"`
	StatusCode int    `json:"status_code,omitempty"`
	Error      string `json:"error,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}

// dayRef indexes a delivery by its destination and the UTC day of its
// event, so that the log is read a destination and a day at a time.
func dayRef(destination string, t time.Time) string {
	return destination + ":" + t.UTC().Format(time.DateOnly)
}

func putDelivery(ctx context.Context, tx store.Tx, d *Delivery, occurred time.Time) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return tx.PutArtifact(ctx, artifact.Record{OrgID: tx.OrgID(), Kind: deliveryKind, ID: d.DeliveryID, Ref: dayRef(d.Destination, occurred),
		CreatedAt: occurred, Body: b})
}

func readDelivery(rec artifact.Record, err error) (Delivery, time.Time, error) {
	if err != nil {
		return Delivery{}, time.Time{}, err
	}
	var d Delivery
	if err := json.Unmarshal(rec.Body, &d); err != nil {
		return Delivery{}, time.Time{}, core.Unavailable("decode delivery", err)
	}
	return d, rec.CreatedAt, nil
}

// outcome is how one attempt ended.
type outcome struct {
	held    jobs.Job
	attempt Attempt
	ok      bool
	dropped bool
}

// target is a destination as one pass sees it: read, and its secrets
// opened, once for all the org's attempts of the pass.
type target struct {
	url     string
	secrets [][]byte
	// problem says why nothing can be sent; dropped that the destination
	// is gone (the delivery ends), not merely unusable for now.
	problem string
	dropped bool
}

// targetKey files a target by org and destination name.
func targetKey(orgID, destination string) string { return orgID + "\x00" + destination }

// targets files the org's destinations for a pass into into: the WEBHOOK
// integration from r, found and err as its read returned them, and each
// callback of cbs (cbErr: they could not be read).
func (s *Service) targets(ctx context.Context, into map[string]target, orgID string, r stored, found bool, err error, cbs callbackSet, cbErr error) {
	into[targetKey(orgID, Provider)] = s.target(orgID, r, found, err)
	if cbErr != nil {
		// Filed under the prefix: every callback of the org waits.
		into[targetKey(orgID, CallbackPrefix)] = target{problem: "the callbacks cannot be read: " + cbErr.Error()}
		return
	}
	for _, c := range cbs.Callbacks {
		into[targetKey(orgID, c.destination())] = s.callbackTarget(ctx, orgID, c)
	}
}

// lookup returns the target of a delivery: a callback that is not filed
// was removed (its delivery ends) unless the callbacks could not be read.
func lookup(targets map[string]target, orgID, destination string) target {
	if t, ok := targets[targetKey(orgID, destination)]; ok {
		return t
	}
	if _, ok := isCallback(destination); ok {
		if t, ok := targets[targetKey(orgID, CallbackPrefix)]; ok {
			return t
		}
		return target{problem: "the callback was removed", dropped: true}
	}
	return target{problem: "the delivery names no destination of the org", dropped: true}
}

// target reads the org's WEBHOOK integration for a pass from r, found and
// err as the integration's read returned them.
func (s *Service) target(orgID string, r stored, found bool, err error) target {
	switch {
	case err != nil:
		return target{problem: "the integration cannot be read: " + err.Error()}
	case !found:
		return target{problem: "the WEBHOOK integration was deleted", dropped: true}
	case s.d.Secrets == nil:
		return target{problem: "the server has no secrets key"}
	}
	t := target{url: r.Config.EndpointURL}
	for _, sec := range r.active(s.d.Now()) {
		b, err := s.d.Secrets.Open(sec.Sealed, secretContext(orgID))
		if err != nil {
			return target{problem: "a signing secret cannot be opened: " + err.Error()}
		}
		t.secrets = append(t.secrets, b)
	}
	if len(t.secrets) == 0 {
		return target{problem: "the integration has no signing secret"}
	}
	return t
}

// callbackTarget is a callback's target for a pass: none (its deliveries
// dropped) once the credential that registered it is revoked or expired.
func (s *Service) callbackTarget(ctx context.Context, orgID string, c storedCallback) target {
	switch live, err := s.live(ctx, orgID, c); {
	case err != nil:
		return target{problem: err.Error()}
	case !live:
		return target{problem: "the credential that registered the callback was revoked or expired", dropped: true}
	case s.d.Secrets == nil:
		return target{problem: "the server has no secrets key"}
	}
	b, err := s.d.Secrets.Open(c.Sealed, callbackSecretContext(orgID, c.ID))
	if err != nil {
		return target{problem: "the signing secret cannot be opened: " + err.Error()}
	}
	return target{url: c.URL, secrets: [][]byte{b}}
}

// Deliver attempts the deliveries that are due (retries, and deliveries
// whose worker stopped mid-attempt), up to Concurrency at a time, and
// records each attempt with its delivery's next state in one transaction
// of the org. It returns how many attempts it made.
func (s *Service) Deliver(ctx context.Context) (int, error) {
	due, err := s.d.Store.DueJobs(ctx, deliveryJob, batch)
	if err != nil {
		return 0, core.Translate("list due deliveries", err)
	}
	if len(due) == 0 {
		return 0, nil
	}
	owner, err := s.d.IDs.New()
	if err != nil {
		return 0, core.Unavailable("id generation", err)
	}
	var orgs []string
	byOrg := map[string][]jobs.Job{}
	for _, j := range due {
		if _, ok := byOrg[j.OrgID]; !ok {
			orgs = append(orgs, j.OrgID)
		}
		byOrg[j.OrgID] = append(byOrg[j.OrgID], j)
	}
	var held []jobs.Job
	targets := map[string]target{}
	for _, org := range orgs {
		var claimed []jobs.Job
		err := s.d.Store.Update(ctx, org, func(tx store.Tx) error {
			claimed = nil
			for _, j := range byOrg[org] {
				h, err := jobs.Claim(ctx, tx, deliveryJob, j.ID, owner, jobs.Policy{Lease: s.cfg.Worker.Lease})
				if errors.Is(err, jobs.ErrNotDue) {
					continue // another worker took it
				}
				if err != nil {
					return err
				}
				claimed = append(claimed, h)
			}
			return nil
		})
		if err != nil {
			return 0, core.Translate("claim deliveries", err)
		}
		if len(claimed) > 0 {
			held = append(held, claimed...)
			r, found, err := s.read(ctx, org)
			cbs, cbErr := s.readCallbacks(ctx, org)
			s.targets(ctx, targets, org, r, found, err, cbs, cbErr)
		}
	}
	return len(held), s.deliverHeld(ctx, orgs, held, targets)
}

// deliverHeld attempts the held deliveries, up to Concurrency at a time,
// and records them org by org (orgs gives the order).
func (s *Service) deliverHeld(ctx context.Context, orgs []string, held []jobs.Job, targets map[string]target) error {
	if len(held) == 0 {
		return nil
	}
	results := make([]outcome, len(held))
	sem := make(chan struct{}, s.cfg.Worker.Concurrency)
	var wg sync.WaitGroup
	for i, h := range held {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			results[i] = s.attempt(ctx, h, targets)
		}()
	}
	wg.Wait()
	byOrg := map[string][]outcome{}
	for _, r := range results {
		byOrg[r.held.OrgID] = append(byOrg[r.held.OrgID], r)
	}
	for _, org := range orgs {
		if len(byOrg[org]) == 0 {
			continue
		}
		if err := s.record(ctx, org, byOrg[org]); err != nil {
			return err
		}
	}
	return nil
}

// attempt makes one try of a held delivery to its destination's target.
func (s *Service) attempt(ctx context.Context, held jobs.Job, targets map[string]target) outcome {
	start := s.d.Now()
	out := outcome{held: held, attempt: Attempt{Number: held.Attempts, At: start.UTC().Format(core.TimeFormat)}}
	fail := func(format string, args ...any) outcome {
		out.attempt.Error = fmt.Sprintf(format, args...)
		out.attempt.DurationMS = s.d.Now().Sub(start).Milliseconds()
		return out
	}
	p, err := decodePayload(held.Payload)
	if err != nil {
		return fail("the delivery does not decode: %v", err)
	}
	t := lookup(targets, held.OrgID, p.Destination)
	if t.problem != "" {
		out.dropped = t.dropped
		return fail("%s", t.problem)
	}
	actx, cancel := context.WithTimeout(ctx, s.cfg.Worker.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, t.url, bytes.NewReader(p.Body))
	if err != nil {
		return fail("the endpoint URL is not usable: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderEvent, p.Event)
	req.Header.Set(HeaderDeliveryID, held.ID)
	req.Header.Set(HeaderSignature, Sign(p.Body, start, t.secrets...))
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return fail("%v", err)
	}
	out.attempt.StatusCode = resp.StatusCode
	out.attempt.DurationMS = s.d.Now().Sub(start).Milliseconds()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		out.ok = true
		return out
	}
	out.attempt.Error = "the receiver answered " + strconv.Itoa(resp.StatusCode) + " " + http.StatusText(resp.StatusCode)
	return out
}

// record writes the attempts of one org and moves each delivery on:
// delivered, retrying after the schedule's next wait, or dead-lettered.
func (s *Service) record(ctx context.Context, org string, results []outcome) error {
	var delivered, failed, dead, dropped int64
	err := s.d.Store.Update(ctx, org, func(tx store.Tx) error {
		delivered, failed, dead, dropped = 0, 0, 0, 0
		for _, r := range results {
			d, occurred, err := readDelivery(tx.ArtifactInTx(ctx, deliveryKind, r.held.ID))
			if err != nil {
				return err
			}
			now := tx.Now().UTC()
			switch {
			case r.ok:
				_, err = jobs.Finish(ctx, tx, r.held, nil)
				d.State, d.NextAttemptAt = StateDelivered, ""
				delivered++
			case r.dropped:
				_, err = jobs.Finish(ctx, tx, r.held, nil)
				d.State, d.NextAttemptAt = StateDropped, ""
				dropped++
			case r.held.Attempts > len(s.cfg.Worker.Retries):
				_, err = jobs.Fail(ctx, tx, r.held, r.attempt.Error)
				d.State, d.NextAttemptAt = StateDeadLettered, ""
				failed++
				dead++
			default:
				wait := jitter(s.cfg.Worker.Retries[r.held.Attempts-1])
				_, err = jobs.Release(ctx, tx, r.held, r.attempt.Error, wait)
				d.State, d.NextAttemptAt = StateRetrying, now.Add(wait).Format(core.TimeFormat)
				failed++
			}
			if errors.Is(err, jobs.ErrNotOwner) || errors.Is(err, jobs.ErrLeaseExpired) {
				continue // another worker took the delivery over: its attempt counts
			}
			if err != nil {
				return err
			}
			d.Attempts = append(d.Attempts, r.attempt)
			if n := len(d.Attempts); n > maxAttemptsKept {
				d.Attempts = d.Attempts[n-maxAttemptsKept:]
			}
			d.UpdatedAt = now.Format(core.TimeFormat)
			if err := putDelivery(ctx, tx, &d, occurred); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return core.Translate("record delivery attempts", err)
	}
	s.stats.delivered.Add(delivered)
	s.stats.failedAttempts.Add(failed)
	s.stats.deadLettered.Add(dead)
	s.stats.dropped.Add(dropped)
	return nil
}

// jitter varies a wait by up to a fifth either way, so that receivers
// that failed together are not retried together.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d - d/5 + rand.N(2*d/5+1)
}

// Redeliver queues a delivered or dead-lettered delivery of the WEBHOOK
// integration again, with the same delivery id (a receiver that processed
// it already recognizes it) and a new series of attempts on the schedule.
// A callback's delivery is not the integration's: DELIVERY_NOT_FOUND.
func (s *Service) Redeliver(ctx context.Context, orgID, deliveryID string) (Delivery, error) {
	if !core.ValidID(deliveryID) {
		return Delivery{}, core.New(core.ErrNotFound, CodeDeliveryNotFound, "no delivery of the org has that id")
	}
	var out Delivery
	err := s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		if _, found, err := readIntegrationTx(ctx, tx); err != nil {
			return err
		} else if !found {
			return notConnected()
		}
		d, occurred, err := readDelivery(tx.ArtifactInTx(ctx, deliveryKind, deliveryID))
		if core.IsNotFound(err) || err == nil && d.Destination != Provider {
			return core.New(core.ErrNotFound, CodeDeliveryNotFound, "no delivery of the org's WEBHOOK integration has that id")
		}
		if err != nil {
			return err
		}
		if d.State != StateDelivered && d.State != StateDeadLettered && d.State != StateDropped {
			return core.New(core.ErrConflict, CodeDeliveryInProgress, "the delivery is %s: its attempts are still under way", d.State)
		}
		if _, err := jobs.Requeue(ctx, tx, deliveryJob, deliveryID); err != nil {
			return err
		}
		d.State, d.NextAttemptAt, d.Redeliveries = StatePending, "", d.Redeliveries+1
		d.UpdatedAt = tx.Now().UTC().Format(core.TimeFormat)
		out = d
		return putDelivery(ctx, tx, &d, occurred)
	})
	if err != nil {
		return Delivery{}, core.Translate("redeliver", err)
	}
	s.Wake()
	return out, nil
}

// DeliveryFilter selects the delivery log's records.
type DeliveryFilter struct {
	// Destination is the destination whose log is read: "" or Provider
	// for the WEBHOOK integration, CallbackPrefix + subscription id for a
	// callback.
	Destination string
	// Day is the UTC day of the events (YYYY-MM-DD); "" means today.
	Day string
	// State, when set, keeps the deliveries in that state.
	State string
	// Limit bounds the answer (1 to MaxDeliveries; 0 means 100).
	Limit int
}

// MaxDeliveries bounds one page of the delivery log.
const MaxDeliveries = 500

// CodeInvalidDeliveryFilter: a delivery log query the route refuses.
const CodeInvalidDeliveryFilter = "INVALID_DELIVERY_FILTER"

// Deliveries returns the delivery log of one destination of the org (the
// WEBHOOK integration unless the filter names a callback) for one day of
// events, oldest event first.
func (s *Service) Deliveries(ctx context.Context, orgID string, f DeliveryFilter) ([]Delivery, error) {
	day := s.d.Now().UTC()
	if f.Day != "" {
		t, err := time.Parse(time.DateOnly, f.Day)
		if err != nil {
			return nil, core.Invalid(CodeInvalidDeliveryFilter, "day", "day must be a date YYYY-MM-DD")
		}
		day = t
	}
	switch f.State {
	case "", StatePending, StateRetrying, StateDelivered, StateDeadLettered, StateDropped:
	default:
		return nil, core.Invalid(CodeInvalidDeliveryFilter, "state", "state must be one of pending, retrying, delivered, dead_lettered, dropped")
	}
	if f.Limit < 0 || f.Limit > MaxDeliveries {
		return nil, core.Invalid(CodeInvalidDeliveryFilter, "limit", "limit must be 1 to %d", MaxDeliveries)
	}
	if f.Limit == 0 {
		f.Limit = 100
	}
	switch id, ok := isCallback(f.Destination); {
	case ok && !core.ValidID(id):
		return nil, errNoCallback()
	case ok:
	case f.Destination == "" || f.Destination == Provider:
		f.Destination = Provider
		if _, found, err := s.read(ctx, orgID); err != nil {
			return nil, err
		} else if !found {
			return nil, notConnected()
		}
	default:
		return nil, core.Invalid(CodeInvalidDeliveryFilter, "destination", "destination must be %s or %s<subscription id>", Provider, CallbackPrefix)
	}
	recs, err := s.d.Store.ArtifactsByRef(ctx, orgID, deliveryKind, dayRef(f.Destination, day), 0)
	if err != nil {
		return nil, core.Translate("read deliveries", err)
	}
	out := []Delivery{}
	for _, rec := range recs {
		d, _, err := readDelivery(rec, nil)
		if err != nil {
			return nil, err
		}
		if f.State == "" || d.State == f.State {
			out = append(out, d)
			if len(out) == f.Limit {
				break
			}
		}
	}
	return out, nil
}
