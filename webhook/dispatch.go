package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/jobs"
	"github.com/clearancehq/clearance/outbox"
	"github.com/clearancehq/clearance/store"
)

// Run dispatches and delivers until ctx ends. Several servers on one
// store share the work: an event is handed over once (outbox.Take) and a
// delivery is attempted by one worker at a time (a job leased by the
// store's clock).
func (s *Service) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.Worker.Poll)
	defer t.Stop()
	for {
		for ctx.Err() == nil {
			n, err := s.Dispatch(ctx)
			if err != nil && ctx.Err() == nil {
				s.d.Logger.Warn("webhook dispatch failed", "error", err.Error())
			}
			m, err := s.Deliver(ctx)
			if err != nil && ctx.Err() == nil {
				s.d.Logger.Warn("webhook delivery failed", "error", err.Error())
			}
			if n == 0 && m == 0 || err != nil {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.wake:
		}
	}
}

// deliveryJob is the jobs kind of one event's delivery to one destination.
const deliveryJob = "webhook.delivery"

// DeliveryJobKind is the jobs kind of one event's delivery to one
// destination: the delivery queue.
const DeliveryJobKind = deliveryJob

// namespace derives delivery ids: the same event and destination always
// make the same delivery.
var namespace = uuid.MustParse("0b6f7c1e-3f1e-4b7a-9a7e-6c1d2b4e8f10")

// deliveryID is the id of event's delivery to the org's destination.
func deliveryID(orgID, eventID, destination string) string {
	return uuid.NewSHA1(namespace, []byte(orgID+"\x00"+eventID+"\x00"+destination)).String()
}

// encodePayload frames what a delivery job carries, the event as it is
// sent and where, as "<event id> <event> <occurred_at> <destination>\n<body>":
// the body byte for byte, encoded once. The WEBHOOK integration's frame
// names no destination, as before callbacks existed, so that a server of
// an older release sharing the store still delivers it during an upgrade.
func encodePayload(ev outbox.Event, destination string) []byte {
	b := make([]byte, 0, len(ev.ID)+len(ev.Name)+len(time.RFC3339Nano)+len(destination)+4+len(ev.Body))
	b = append(b, ev.ID...)
	b = append(b, ' ')
	b = append(b, ev.Name...)
	b = append(b, ' ')
	b = ev.OccurredAt.UTC().AppendFormat(b, time.RFC3339Nano)
	if destination != Provider {
		b = append(b, ' ')
		b = append(b, destination...)
	}
	b = append(b, '\n')
	return append(b, ev.Body...)
}

// payload is a delivery job's event and destination.
type payload struct {
	EventID     string          `json:"event_id"`
	Event       string          `json:"event"`
	OccurredAt  time.Time       `json:"occurred_at"`
	Body        json.RawMessage `json:"body"`
	Destination string          `json:"-"`
}

// decodePayload reads encodePayload's frame, the frame without a
// destination and the JSON object that queued deliveries carried before
// it (both the WEBHOOK integration's).
func decodePayload(b []byte) (payload, error) {
	var p payload
	if len(b) > 0 && b[0] == '{' {
		err := json.Unmarshal(b, &p)
		p.Destination = Provider
		return p, err
	}
	head, body, ok := bytes.Cut(b, []byte{'\n'})
	fields := strings.Fields(string(head))
	if !ok || len(fields) != 3 && len(fields) != 4 {
		return p, errors.New("not a delivery frame")
	}
	at, err := time.Parse(time.RFC3339Nano, fields[2])
	if err != nil {
		return p, err
	}
	p = payload{EventID: fields[0], Event: fields[1], OccurredAt: at, Body: body, Destination: Provider}
	if len(fields) == 4 {
		p.Destination = fields[3]
	}
	return p, nil
}

// Dispatch hands the pending events of every org to their destinations
// and makes their first attempts: in one transaction of the org, each
// event is taken from the outbox and a delivery queued, already held by
// this worker, for each destination it matches; the attempts follow the
// commit. It returns how many events it took.
func (s *Service) Dispatch(ctx context.Context) (int, error) {
	pending, err := outbox.Pending(ctx, s.d.Store, batch)
	if err != nil {
		return 0, core.Translate("list pending events", err)
	}
	if len(pending) == 0 {
		return 0, nil
	}
	owner, err := s.d.IDs.New()
	if err != nil {
		return 0, core.Unavailable("id generation", err)
	}
	var orgs []string
	byOrg := map[string][]outbox.Event{}
	for _, e := range pending {
		if _, ok := byOrg[e.OrgID]; !ok {
			orgs = append(orgs, e.OrgID)
		}
		byOrg[e.OrgID] = append(byOrg[e.OrgID], e)
	}
	total := 0
	var held []jobs.Job
	targets := map[string]target{}
	var failed error
	for _, org := range orgs {
		if err := s.render(ctx, byOrg[org]); err != nil {
			// The org's events wait for the next pass; the others go on.
			failed = errors.Join(failed, err)
			continue
		}
		var taken int
		var queued []jobs.Job
		var r stored
		var found bool
		var cbs callbackSet
		err := s.d.Store.Update(ctx, org, func(tx store.Tx) error {
			taken, queued = 0, nil
			var err error
			if r, found, err = readIntegrationTx(ctx, tx); err != nil {
				return err
			}
			if cbs, err = readCallbacksTx(ctx, tx); err != nil {
				return err
			}
			for _, e := range byOrg[org] {
				ev, ok, err := outbox.Take(ctx, tx, e.ID)
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
				taken++
				ev.Body = e.Body // as rendered
				for _, dest := range destinationsOf(ev, &r, found, cbs) {
					j, created, err := s.queue(ctx, tx, ev, owner, dest)
					if err != nil {
						return err
					}
					if created {
						queued = append(queued, j)
					}
				}
			}
			return nil
		})
		if err != nil {
			return total, core.Translate("dispatch events", err)
		}
		total += taken
		s.stats.dispatched.Add(int64(taken))
		if len(queued) > 0 {
			held = append(held, queued...)
			s.targets(ctx, targets, org, r, found, nil, cbs, nil)
		}
	}
	return total, errors.Join(failed, s.deliverHeld(ctx, orgs, held, targets))
}

// render replaces each event's stored body with the body delivered
// (Config.Render), before the org's transaction: an event is taken only
// with the body it is sent with.
func (s *Service) render(ctx context.Context, events []outbox.Event) error {
	if s.cfg.Render == nil {
		return nil
	}
	for i := range events {
		body, err := s.cfg.Render(ctx, events[i])
		if err != nil {
			return core.Translate("render event "+events[i].ID, err)
		}
		events[i].Body = body
	}
	return nil
}

// queue enqueues ev's delivery to one destination of the org, held by
// owner for its first attempt, and opens its log record, in the
// dispatching transaction.
func (s *Service) queue(ctx context.Context, tx store.Tx, ev outbox.Event, owner, destination string) (jobs.Job, bool, error) {
	id := deliveryID(ev.OrgID, ev.ID, destination)
	j, created, err := jobs.EnqueueClaimed(ctx, tx, deliveryJob, id, encodePayload(ev, destination), owner, jobs.Policy{Lease: s.cfg.Worker.Lease})
	if err != nil || !created {
		return j, false, err
	}
	now := tx.Now().UTC()
	return j, true, putDelivery(ctx, tx, &Delivery{DeliveryID: id, EventID: ev.ID, Event: ev.Name, Destination: destination,
		State: StatePending, OccurredAt: ev.OccurredAt.UTC().Format(core.TimeFormat), Attempts: []Attempt{},
		CreatedAt: now.Format(core.TimeFormat), UpdatedAt: now.Format(core.TimeFormat)}, ev.OccurredAt)
}

// destinationsOf names the destinations of the org that receive ev, as
// they stand when it is dispatched: the WEBHOOK integration (r, when
// found) and each callback.
func destinationsOf(ev outbox.Event, r *stored, found bool, cbs callbackSet) []string {
	if ev.Name != EventDecisionResolved || !found && len(cbs.Callbacks) == 0 {
		return nil
	}
	var f eventFacts
	if err := json.Unmarshal(ev.Body, &f); err != nil {
		return nil
	}
	var out []string
	if found && r.wants(ev, f) {
		out = append(out, Provider)
	}
	for _, c := range cbs.Callbacks {
		if c.wants(ev, f) {
			out = append(out, c.destination())
		}
	}
	return out
}

// eventFacts are the members of an event body the filters read.
type eventFacts struct {
	Outcome      string `json:"protocol_outcome"`
	Mode         string `json:"mode"`
	WorkflowKey  string `json:"workflow_key"`
	DecisionType string `json:"decision_type"`
}

// wants reports whether the integration receives ev (its facts f), as
// the integration stands when the event is dispatched (normally moments
// after its commit): an event made after it was connected, with an
// enabled subscription to its event whose filter matches, within the
// workflow its config names.
func (r *stored) wants(ev outbox.Event, f eventFacts) bool {
	// An event of a decision made before the integration was connected is
	// not its to receive.
	if ev.Name != EventDecisionResolved || ev.OccurredAt.Before(r.CreatedAt) {
		return false
	}
	if r.Config.WorkflowID != "" && f.WorkflowKey != r.Config.WorkflowID {
		return false
	}
	for _, sub := range r.Subscriptions {
		if sub.IsEnabled && (sub.EventName == EventDecisionResolved || sub.EventName == EventDecisioningRan) && sub.Filter.matches(f) {
			return true
		}
	}
	return false
}

func (f Filter) matches(e eventFacts) bool {
	in := func(values []string, v string) bool { return len(values) == 0 || slices.Contains(values, v) }
	return in(f.Outcomes, e.Outcome) && in(f.Modes, e.Mode) && in(f.WorkflowKeys, e.WorkflowKey) && in(f.DecisionTypes, e.DecisionType)
}
