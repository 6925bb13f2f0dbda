package webhook

import (
	"context"
	"encoding/json"
	"slices"
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

// namespace derives delivery ids: the same event and destination always
// make the same delivery.
var namespace = uuid.MustParse("0b6f7c1e-3f1e-4b7a-9a7e-6c1d2b4e8f10")

// deliveryID is the id of event's delivery to the org's destination.
func deliveryID(orgID, eventID, destination string) string {
	return uuid.NewSHA1(namespace, []byte(orgID+"\x00"+eventID+"\x00"+destination)).String()
}

// payload is what a delivery job carries: the event as it is sent.
type payload struct {
	EventID    string          `json:"event_id"`
	Event      string          `json:"event"`
	OccurredAt time.Time       `json:"occurred_at"`
	Body       json.RawMessage `json:"body"`
}

// Dispatch hands the pending events of every org to their destinations:
// in one transaction of the org, each event is taken from the outbox and a
// delivery queued for each destination it matches. It returns how many
// events it took.
func (s *Service) Dispatch(ctx context.Context) (int, error) {
	pending, err := outbox.Pending(ctx, s.d.Store, batch)
	if err != nil {
		return 0, core.Translate("list pending events", err)
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
	for _, org := range orgs {
		var taken int
		err := s.d.Store.Update(ctx, org, func(tx store.Tx) error {
			taken = 0
			r, found, err := readIntegrationTx(ctx, tx)
			if err != nil {
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
				if found && r.wants(ev) {
					if err := s.queue(ctx, tx, ev); err != nil {
						return err
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
	}
	return total, nil
}

// queue enqueues ev's delivery to the org's WEBHOOK integration and opens
// its log record, in the dispatching transaction.
func (s *Service) queue(ctx context.Context, tx store.Tx, ev outbox.Event) error {
	id := deliveryID(ev.OrgID, ev.ID, Provider)
	p, err := json.Marshal(payload{EventID: ev.ID, Event: ev.Name, OccurredAt: ev.OccurredAt, Body: ev.Body})
	if err != nil {
		return err
	}
	if _, _, err := jobs.Enqueue(ctx, tx, deliveryJob, id, p); err != nil {
		return err
	}
	now := tx.Now().UTC()
	return putDelivery(ctx, tx, &Delivery{DeliveryID: id, EventID: ev.ID, Event: ev.Name, Destination: Provider,
		State: StatePending, OccurredAt: ev.OccurredAt.UTC().Format(core.TimeFormat), Attempts: []Attempt{},
		CreatedAt: now.Format(core.TimeFormat), UpdatedAt: now.Format(core.TimeFormat)}, ev.OccurredAt)
}

// eventFacts are the members of an event body the filters read.
type eventFacts struct {
	Outcome      string `json:"protocol_outcome"`
	Mode         string `json:"mode"`
	WorkflowKey  string `json:"workflow_key"`
	DecisionType string `json:"decision_type"`
}

// wants reports whether the integration receives ev, as the integration
// stands when the event is dispatched (normally moments after its
// commit): an event made after it was connected, with an enabled
// subscription to its event whose filter matches, within the workflow its
// config names.
func (r *stored) wants(ev outbox.Event) bool {
	// An event of a decision made before the integration was connected is
	// not its to receive.
	if ev.Name != EventDecisionResolved || ev.OccurredAt.Before(r.CreatedAt) {
		return false
	}
	var f eventFacts
	if err := json.Unmarshal(ev.Body, &f); err != nil {
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
