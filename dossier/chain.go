package dossier

import (
	"context"
	"time"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/internal/jsonw"
	"github.com/clearancehq/clearance/policy"
)

// KindChainMember is the artifact kind of one decision's membership of its
// chain (ID the evaluation id, Ref the chain id).
const KindChainMember = "chain"

// ChainMember is one decision of a chain, as recorded with its dossier.
type ChainMember struct {
	DecisionID       string         `json:"decision_id"`
	EvaluationID     string         `json:"evaluation_id"`
	DossierID        string         `json:"dossier_id"`
	DossierDigest    string         `json:"dossier_digest"`
	Route            string         `json:"route"`
	Outcome          policy.Outcome `json:"outcome"`
	Mode             policy.Mode    `json:"mode"`
	CreatedAt        string         `json:"created_at"`
	LedgerSeq        uint64         `json:"ledger_seq"`
	ParentDecisionID string         `json:"parent_decision_id,omitempty"`
	WorkflowKey      string         `json:"workflow_key,omitempty"`
	CorrelationID    string         `json:"correlation_id,omitempty"`
	GrantID          string         `json:"grant_id,omitempty"`
}

// putChainMember records d's membership of its chain: the one write a
// decision adds for its chain, in the decision's own transaction.
func putChainMember(ctx context.Context, tx artifact.Tx, d *Body, digest, workflowKey string, now time.Time) error {
	m := ChainMember{
		DecisionID: d.DecisionID, EvaluationID: d.EvaluationID, DossierID: d.DossierID, DossierDigest: digest,
		Route: d.Route, Outcome: d.Outcome, Mode: d.Mode, CreatedAt: d.CreatedAt, LedgerSeq: d.LedgerSeq,
		ParentDecisionID: d.ParentDecisionID, WorkflowKey: workflowKey, CorrelationID: d.CorrelationID, GrantID: d.GrantID,
	}
	return tx.PutArtifact(ctx, artifact.Record{OrgID: d.OrgID, Kind: KindChainMember, ID: d.EvaluationID,
		Ref: d.ChainID, CreatedAt: now, Body: m.appendJSON(make([]byte, 0, 512))})
}

// appendJSON appends the JSON form of m that encoding/json would write
// (the same members, in order, the optional ones omitted when empty), by
// hand: it runs on every decision, and reflection was half of its cost.
func (m *ChainMember) appendJSON(b []byte) []byte {
	o := jsonw.Open(b)
	o.String("decision_id", m.DecisionID)
	o.String("evaluation_id", m.EvaluationID)
	o.String("dossier_id", m.DossierID)
	o.String("dossier_digest", m.DossierDigest)
	o.String("route", m.Route)
	o.String("outcome", string(m.Outcome))
	o.String("mode", string(m.Mode))
	o.String("created_at", m.CreatedAt)
	o.Uint("ledger_seq", m.LedgerSeq)
	o.OmitEmpty("parent_decision_id", m.ParentDecisionID)
	o.OmitEmpty("workflow_key", m.WorkflowKey)
	o.OmitEmpty("correlation_id", m.CorrelationID)
	o.OmitEmpty("grant_id", m.GrantID)
	return o.Close()
}
