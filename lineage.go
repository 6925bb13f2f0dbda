package clearance

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/json"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
)

// Artifact kinds of the evidence that follows a decision.
const (
	// KindChainMember: one decision's membership of its chain (ID the
	// evaluation id, Ref the chain id).
	KindChainMember = "chain"
	// KindOverride: a human resolution of a dossier (Ref the dossier id).
	KindOverride = "override"
	// KindDispatch: what an executor sent downstream under a claimed grant
	// (Ref the grant id).
	KindDispatch = "dispatch"
)

// ChainNamespace is the UUID namespace of chain ids: every chain id is a
// name-based UUID (version 5, SHA-1) in it, so a client can compute the id
// of a correlation chain itself (see Chain).
var ChainNamespace = uuid.MustParse("1e48acd0-17a6-4137-8d1d-019667328429")

// MaxChainMembers bounds the members one Chain answer lists.
const MaxChainMembers = 1000

// CorrelationChainID is the id of the chain that decisions of org with
// workflowKey and correlationID join when they name no parent decision:
// UUIDv5(ChainNamespace, "correlation" NUL org NUL workflow_key NUL
// correlation_id). Neither name can contain NUL.
func CorrelationChainID(orgID, workflowKey, correlationID string) string {
	return chainUUID("correlation", orgID, workflowKey, correlationID)
}

// RootChainID is the id of the chain a decision starts when it names no
// parent and carries no correlation id: UUIDv5(ChainNamespace, "decision"
// NUL org NUL decision_id).
func RootChainID(orgID, decisionID string) string {
	return chainUUID("decision", orgID, decisionID)
}

// chainUUID is uuid.NewSHA1(ChainNamespace, names joined by NUL) without
// its allocations (it runs on every decision).
func chainUUID(names ...string) string {
	var buf [256]byte
	b := append(buf[:0], ChainNamespace[:]...)
	for i, n := range names {
		if i > 0 {
			b = append(b, 0)
		}
		b = append(b, n...)
	}
	sum := sha1.Sum(b)
	var u uuid.UUID
	copy(u[:], sum[:])
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return u.String()
}

// chainFor is the chain a new decision joins: its parent's (parentChain,
// when the request named a parent), else its correlation's, else its own.
func chainFor(orgID, parentChain, workflowKey, correlationID, decisionID string) string {
	switch {
	case parentChain != "":
		return parentChain
	case correlationID != "":
		return CorrelationChainID(orgID, workflowKey, correlationID)
	default:
		return RootChainID(orgID, decisionID)
	}
}

// parentChain returns the chain of the org's decision parentID ("" when
// parentID is ""). A parentID that is not a decision id is a 400 with code
// on field; one the org has no decision of is a 409
// PARENT_DECISION_UNKNOWN, like an unknown policy pin.
func (e *Engine) parentChain(ctx context.Context, orgID, parentID, field, code string) (string, error) {
	if parentID == "" {
		return "", nil
	}
	if !ValidID(parentID) {
		return "", invalid(code, field, "%s must be a decision id (a lowercase UUID)", field)
	}
	r, err := e.store.DossierByDecision(ctx, orgID, parentID)
	if isNotFound(err) {
		return "", newError(ErrConflict, CodeParentDecisionUnknown, "the organization has no decision %s", parentID)
	}
	if err != nil {
		return "", unavailable("read parent decision", err)
	}
	var p struct {
		ChainID string `json:"chain_id"`
	}
	if err := json.Unmarshal(r.Body, &p); err != nil {
		return "", unavailable("read parent decision", err)
	}
	if p.ChainID == "" {
		// Recorded before chains existed: it would have started its own.
		return RootChainID(orgID, parentID), nil
	}
	return p.ChainID, nil
}

// ChainMember is one decision of a chain, as recorded with its dossier.
type ChainMember struct {
	DecisionID       string         `json:"decision_id"`
	EvaluationID     string         `json:"evaluation_id"`
	DossierID        string         `json:"dossier_id"`
	DossierDigest    string         `json:"dossier_digest"`
	Route            Route          `json:"route"`
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
func putChainMember(ctx context.Context, tx store.Tx, d *Dossier, digest, workflowKey string, now time.Time) error {
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
	member("route", string(m.Route))
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

// DecisionChain is a workflow's lineage: the org's decisions that joined
// one chain, oldest first (by created_at, then ledger_seq). Head is the
// newest listed member and Count the number listed; Truncated says that
// the chain has more than MaxChainMembers members, of which the oldest are
// listed.
type DecisionChain struct {
	ChainID   string        `json:"chain_id"`
	OrgID     string        `json:"org_id"`
	Members   []ChainMember `json:"members"`
	Head      ChainMember   `json:"head"`
	Count     int           `json:"count"`
	Truncated bool          `json:"truncated,omitempty"`
}

// Chain returns the org's decision chain chainID; a chain of another org,
// or one without members, is ErrNotFound (CHAIN_NOT_FOUND).
//
// How a decision joins a chain (evaluate-decision, its aliases and hooks,
// and enforce-and-bind): a request that names a parent decision
// (parent_decision_id: a body member of evaluate-decision, a member of the
// signed execution intent) joins the parent's chain, whatever else it
// carries; the parent must be a decision of the same org (else
// PARENT_DECISION_UNKNOWN). Otherwise a request with a correlation id
// (X-Correlation-Id, or a hook body's correlation_id) joins the chain of
// (org, workflow_key, correlation id), whose id is CorrelationChainID.
// Otherwise the decision starts its own chain, RootChainID of its decision
// id. The dossier records chain_id (and parent_decision_id), so the
// ledger-bound dossier is what states a decision's chain; the member
// records listed here are written in the same transaction and index it.
func (e *Engine) Chain(ctx context.Context, orgID, chainID string) (DecisionChain, error) {
	if !ValidID(chainID) {
		return DecisionChain{}, errChainNotFound()
	}
	recs, err := e.store.ArtifactsByRef(ctx, orgID, KindChainMember, chainID, MaxChainMembers+1)
	if err != nil {
		return DecisionChain{}, unavailable("read decision chain", err)
	}
	if len(recs) == 0 {
		return DecisionChain{}, errChainNotFound()
	}
	ch := DecisionChain{ChainID: chainID, OrgID: orgID}
	if len(recs) > MaxChainMembers {
		recs, ch.Truncated = recs[:MaxChainMembers], true
	}
	type sortable struct {
		m  ChainMember
		at time.Time
	}
	list := make([]sortable, len(recs))
	for i, r := range recs {
		if err := json.Unmarshal(r.Body, &list[i].m); err != nil {
			return DecisionChain{}, unavailable("read decision chain", err)
		}
		if list[i].at, err = time.Parse(timeFormat, list[i].m.CreatedAt); err != nil {
			return DecisionChain{}, unavailable("read decision chain", err)
		}
	}
	sort.SliceStable(list, func(i, j int) bool {
		if !list[i].at.Equal(list[j].at) {
			return list[i].at.Before(list[j].at)
		}
		return list[i].m.LedgerSeq < list[j].m.LedgerSeq
	})
	ch.Members = make([]ChainMember, len(list))
	for i, s := range list {
		ch.Members[i] = s.m
	}
	ch.Count, ch.Head = len(ch.Members), ch.Members[len(ch.Members)-1]
	return ch, nil
}

// ChainByEvaluation returns the whole chain that the org's decision with
// evaluationID joined; an unknown evaluation (or another org's) is
// ErrNotFound (CHAIN_NOT_FOUND).
func (e *Engine) ChainByEvaluation(ctx context.Context, orgID, evaluationID string) (DecisionChain, error) {
	if !ValidID(evaluationID) {
		return DecisionChain{}, errChainNotFound()
	}
	r, err := e.store.Artifact(ctx, orgID, KindChainMember, evaluationID)
	if isNotFound(err) {
		return DecisionChain{}, errChainNotFound()
	}
	if err != nil {
		return DecisionChain{}, unavailable("read decision chain", err)
	}
	return e.Chain(ctx, orgID, r.Ref)
}

func errChainNotFound() error {
	return newError(ErrNotFound, CodeChainNotFound, "decision chain not found")
}
