package dossier

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/clearancehq/clearance/artifact"
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
	member := func(name, v string) {
		b = append(b, `,"`...)
		b = append(b, name...)
		b = append(b, `":`...)
		b = appendJSONString(b, v)
	}
	b = append(b, `{"decision_id":`...)
	b = appendJSONString(b, m.DecisionID)
	member("evaluation_id", m.EvaluationID)
	member("dossier_id", m.DossierID)
	member("dossier_digest", m.DossierDigest)
	member("route", m.Route)
	member("outcome", string(m.Outcome))
	member("mode", string(m.Mode))
	member("created_at", m.CreatedAt)
	b = append(b, `,"ledger_seq":`...)
	b = strconv.AppendUint(b, m.LedgerSeq, 10)
	for _, o := range [...]struct{ name, v string }{{"parent_decision_id", m.ParentDecisionID}, {"workflow_key", m.WorkflowKey},
		{"correlation_id", m.CorrelationID}, {"grant_id", m.GrantID}} {
		if o.v != "" {
			member(o.name, o.v)
		}
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string. Invalid UTF-8 (which no
// validated input holds) is left to encoding/json, which replaces it.
func appendJSONString(b []byte, s string) []byte {
	if !utf8.ValidString(s) {
		var q bytes.Buffer
		enc := json.NewEncoder(&q)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s) // a string always encodes
		return append(b, bytes.TrimSuffix(q.Bytes(), []byte("\n"))...)
	}
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c == '\b':
			b = append(b, '\\', 'b')
		case c == '\f':
			b = append(b, '\\', 'f')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		case c == 0xe2 && i+2 < len(s) && s[i+1] == 0x80 && s[i+2]&^1 == 0xa8: // U+2028, U+2029
			b = append(b, '\\', 'u', '2', '0', '2', hex[s[i+2]&0xf])
			i += 2
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
