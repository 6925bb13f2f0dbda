package decide

import (
	"context"
	"time"

	"github.com/clearancehq/clearance/internal/jsonw"
	"github.com/clearancehq/clearance/outbox"
	"github.com/clearancehq/clearance/store"
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

// emitResolved writes the decision.resolved event of d in tx: it is
// committed with the decision or not at all.
func emitResolved(ctx context.Context, tx store.Tx, d *Decision, workflow, decisionType string, at time.Time) error {
	o := jsonw.Open(make([]byte, 0, 768))
	o.String("type", EventDecisionResolved)
	o.String("event_id", d.EvaluationID)
	o.String("occurred_at", d.CreatedAt)
	o.String("org_id", d.OrgID)
	o.String("dossier_id", d.DossierID)
	o.String("decision_id", d.DecisionID)
	o.String("evaluation_id", d.EvaluationID)
	o.String("idempotency_key", d.IdempotencyKey)
	o.OmitEmpty("correlation_id", d.CorrelationID)
	o.String("protocol_outcome", string(d.Outcome))
	o.String("mode", string(d.Mode))
	o.Strings("reason_codes", d.ReasonCodes)
	o.String("policy_version", d.PolicySnapshot.PolicyVersion)
	o.OmitEmpty("workflow_key", workflow)
	o.OmitEmpty("decision_type", decisionType)
	o.String("reconciliation_status", ReconciliationNotRequired)
	o.String("dossier_url", d.DossierURL)
	o.String("dossier_digest", d.DossierDigest)
	o.Uint("ledger_seq", d.LedgerSeq)
	return outbox.Emit(ctx, tx, outbox.Event{OrgID: d.OrgID, ID: d.EvaluationID, Name: EventDecisionResolved,
		OccurredAt: at, Body: o.Close()})
}

// emitted tells Config.Events that an event was committed.
func (s *Service) emitted() {
	if s.cfg.Events != nil {
		s.cfg.Events()
	}
}
