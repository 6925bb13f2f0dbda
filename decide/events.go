package decide

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/jsonw"
	"github.com/clearancehq/clearance/outbox"
)

// EventDecisionResolved is the event every evaluate-decision emits, in the
// transaction that records the decision.
const EventDecisionResolved = "decision.resolved"

// ReconciliationNotRequired is the reconciliation status of a decision no
// execution grant is bound to: every evaluate-decision.
const ReconciliationNotRequired = "NOT_REQUIRED"

// DecisionResolved is the body of a decision.resolved event, as delivered.
type DecisionResolved struct {
	Type       string `json:"type"` // EventDecisionResolved
	EventID    string `json:"event_id"`
	OccurredAt string `json:"occurred_at"`
	OrgID      string `json:"org_id"`
	DossierID  string `json:"dossier_id"`
	DecisionID string `json:"decision_id"`
	// EvaluationID is also the event's id: one event per evaluation.
	EvaluationID         string   `json:"evaluation_id"`
	IdempotencyKey       string   `json:"idempotency_key"`
	CorrelationID        string   `json:"correlation_id,omitempty"`
	ProtocolOutcome      string   `json:"protocol_outcome"`
	Mode                 string   `json:"mode"`
	ReasonCodes          []string `json:"reason_codes"`
	PolicyVersion        string   `json:"policy_version"`
	WorkflowKey          string   `json:"workflow_key,omitempty"`
	DecisionType         string   `json:"decision_type,omitempty"`
	ReconciliationStatus string   `json:"reconciliation_status"`
	DossierURL           string   `json:"dossier_url"`
	DossierDigest        string   `json:"dossier_digest"`
	LedgerSeq            uint64   `json:"ledger_seq"`
}

// prepareResolved prepares the decision.resolved event of the evaluation
// evaluationID of org, recorded as dossierID at the time at, outside the
// transaction that emits it. The event stored is a reference to the
// dossier recorded beside it; EventBody writes the body delivered, off the
// request path.
func prepareResolved(org, evaluationID, dossierID string, at time.Time) (outbox.Prepared, error) {
	o := jsonw.Open(make([]byte, 0, 64))
	o.String("dossier_id", dossierID)
	return outbox.Prepare(outbox.Event{OrgID: org, ID: evaluationID, Name: EventDecisionResolved,
		OccurredAt: at, Body: o.Close()})
}

// eventRef is what emitResolved stores; Type is set only in the events of
// earlier releases, which stored the body whole.
type eventRef struct {
	Type      string `json:"type"`
	DossierID string `json:"dossier_id"`
}

// EventBody returns the body delivered for ev, an event the decide feature
// emitted: the decision.resolved body, written from the dossier the event
// references. Other events are returned as stored. The dossier is read
// from the store: it was committed with the event.
func (s *Service) EventBody(ctx context.Context, ev outbox.Event) ([]byte, error) {
	if ev.Name != EventDecisionResolved {
		return ev.Body, nil
	}
	var ref eventRef
	if err := json.Unmarshal(ev.Body, &ref); err != nil {
		return nil, fmt.Errorf("decide: event %s does not decode: %w", ev.ID, err)
	}
	if ref.Type != "" {
		return ev.Body, nil
	}
	r, err := s.d.Store.Dossier(ctx, ev.OrgID, ref.DossierID)
	if err != nil {
		return nil, core.Translate("read the event's dossier", err)
	}
	b, err := dossier.Decode(r.Body)
	if err != nil {
		return nil, fmt.Errorf("decide: dossier %s of event %s does not decode: %w", ref.DossierID, ev.ID, err)
	}
	o := jsonw.Open(make([]byte, 0, 768))
	o.String("type", EventDecisionResolved)
	o.String("event_id", ev.ID)
	o.String("occurred_at", b.CreatedAt)
	o.String("org_id", b.OrgID)
	o.String("dossier_id", b.DossierID)
	o.String("decision_id", b.DecisionID)
	o.String("evaluation_id", b.EvaluationID)
	o.String("idempotency_key", b.IdempotencyKey)
	o.OmitEmpty("correlation_id", b.CorrelationID)
	o.String("protocol_outcome", string(b.Outcome))
	o.String("mode", string(b.Mode))
	o.Strings("reason_codes", nonNil(b.ReasonCodes))
	o.String("policy_version", b.PolicySnapshot.PolicyVersion)
	o.OmitEmpty("workflow_key", r.WorkflowKey)
	o.OmitEmpty("decision_type", r.DecisionType)
	o.String("reconciliation_status", ReconciliationNotRequired)
	o.String("dossier_url", dossierURL(b.DossierID))
	o.String("dossier_digest", canon.Digest(r.Body))
	o.Uint("ledger_seq", b.LedgerSeq)
	return o.Close(), nil
}

// emitted tells Config.Events that an event was committed.
func (s *Service) emitted() {
	if s.cfg.Events != nil {
		s.cfg.Events()
	}
}
