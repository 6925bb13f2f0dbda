package evidence

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/core"
)

// MaxChainMembers bounds the members one Chain answer lists.
const MaxChainMembers = 1000

// DecisionChain is a workflow's lineage: the org's decisions that joined
// one chain, oldest first (by created_at, then ledger_seq). Head is the
// newest listed member and Count the number listed; Truncated says that
// the chain has more than MaxChainMembers members, of which the oldest are
// listed.
type DecisionChain struct {
	ChainID   string                `json:"chain_id"`
	OrgID     string                `json:"org_id"`
	Members   []dossier.ChainMember `json:"members"`
	Head      dossier.ChainMember   `json:"head"`
	Count     int                   `json:"count"`
	Truncated bool                  `json:"truncated,omitempty"`
}

// Chain returns the org's decision chain chainID; a chain of another org,
// or one without members, is core.ErrNotFound (CHAIN_NOT_FOUND).
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
func (s *Service) Chain(ctx context.Context, orgID, chainID string) (DecisionChain, error) {
	if !core.ValidID(chainID) {
		return DecisionChain{}, errChainNotFound()
	}
	recs, err := s.d.Store.ArtifactsByRef(ctx, orgID, dossier.KindChainMember, chainID, MaxChainMembers+1)
	if err != nil {
		return DecisionChain{}, core.Unavailable("read decision chain", err)
	}
	if len(recs) == 0 {
		return DecisionChain{}, errChainNotFound()
	}
	ch := DecisionChain{ChainID: chainID, OrgID: orgID}
	if len(recs) > MaxChainMembers {
		recs, ch.Truncated = recs[:MaxChainMembers], true
	}
	type sortable struct {
		m  dossier.ChainMember
		at time.Time
	}
	list := make([]sortable, len(recs))
	for i, r := range recs {
		if err := json.Unmarshal(r.Body, &list[i].m); err != nil {
			return DecisionChain{}, core.Unavailable("read decision chain", err)
		}
		if list[i].at, err = time.Parse(core.TimeFormat, list[i].m.CreatedAt); err != nil {
			return DecisionChain{}, core.Unavailable("read decision chain", err)
		}
	}
	sort.SliceStable(list, func(i, j int) bool {
		if !list[i].at.Equal(list[j].at) {
			return list[i].at.Before(list[j].at)
		}
		return list[i].m.LedgerSeq < list[j].m.LedgerSeq
	})
	ch.Members = make([]dossier.ChainMember, len(list))
	for i, s := range list {
		ch.Members[i] = s.m
	}
	ch.Count, ch.Head = len(ch.Members), ch.Members[len(ch.Members)-1]
	return ch, nil
}

// ChainByEvaluation returns the whole chain that the org's decision with
// evaluationID joined; an unknown evaluation (or another org's) is
// core.ErrNotFound (CHAIN_NOT_FOUND).
func (s *Service) ChainByEvaluation(ctx context.Context, orgID, evaluationID string) (DecisionChain, error) {
	if !core.ValidID(evaluationID) {
		return DecisionChain{}, errChainNotFound()
	}
	r, err := s.d.Store.Artifact(ctx, orgID, dossier.KindChainMember, evaluationID)
	if core.IsNotFound(err) {
		return DecisionChain{}, errChainNotFound()
	}
	if err != nil {
		return DecisionChain{}, core.Unavailable("read decision chain", err)
	}
	return s.Chain(ctx, orgID, r.Ref)
}

func errChainNotFound() error {
	return core.New(core.ErrNotFound, CodeChainNotFound, "decision chain not found")
}
