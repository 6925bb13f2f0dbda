package clearance

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/execution"
)

// Artifact kinds of the evidence that follows a decision.
const (
	// KindChainMember: one decision's membership of its chain (ID the
	// evaluation id, Ref the chain id).
	KindChainMember = dossier.KindChainMember
	// KindOverride: a human resolution of a dossier (Ref the dossier id).
	KindOverride = "override"
	// KindDispatch: what an executor sent downstream under a claimed grant
	// (Ref the grant id).
	KindDispatch = execution.KindDispatch
)

// ChainNamespace is the UUID namespace of chain ids (decide.ChainNamespace).
var ChainNamespace = decide.ChainNamespace

// MaxChainMembers bounds the members one Chain answer lists.
const MaxChainMembers = 1000

// CorrelationChainID is the id of the chain that decisions of org with
// workflowKey and correlationID join when they name no parent decision
// (see decide.CorrelationChainID).
func CorrelationChainID(orgID, workflowKey, correlationID string) string {
	return decide.CorrelationChainID(orgID, workflowKey, correlationID)
}

// RootChainID is the id of the chain a decision starts when it names no
// parent and carries no correlation id (see decide.RootChainID).
func RootChainID(orgID, decisionID string) string { return decide.RootChainID(orgID, decisionID) }

// ChainMember is one decision of a chain, as recorded with its dossier.
type ChainMember = dossier.ChainMember

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
