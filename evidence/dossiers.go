package evidence

import (
	"context"
	"sort"
	"time"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/policy"
)

// DossierRecord is a stored dossier: Body is its canonical JSON and Digest
// the SHA-256 the ledger recorded.
type DossierRecord struct {
	DossierID  string
	DecisionID string
	Body       []byte
	Digest     string
}

// Dossier returns the org's dossier by dossier id; another org's is core.ErrNotFound.
func (s *Service) Dossier(ctx context.Context, orgID, dossierID string) (DossierRecord, error) {
	if !core.ValidID(dossierID) {
		return DossierRecord{}, core.New(core.ErrNotFound, core.CodeDossierNotFound, "dossier not found")
	}
	return s.dossierResult(s.d.Store.Dossier(ctx, orgID, dossierID))
}

// DossierByDecision returns the org's dossier of a decision id.
func (s *Service) DossierByDecision(ctx context.Context, orgID, decisionID string) (DossierRecord, error) {
	if !core.ValidID(decisionID) {
		return DossierRecord{}, core.New(core.ErrNotFound, core.CodeDossierNotFound, "dossier not found")
	}
	return s.dossierResult(s.d.Store.DossierByDecision(ctx, orgID, decisionID))
}

func (s *Service) dossierResult(r dossier.Stored, err error) (DossierRecord, error) {
	if core.IsNotFound(err) {
		return DossierRecord{}, core.New(core.ErrNotFound, core.CodeDossierNotFound, "dossier not found")
	}
	if err != nil {
		return DossierRecord{}, core.Unavailable("read dossier", err)
	}
	return DossierRecord{DossierID: r.DossierID, DecisionID: r.DecisionID, Body: r.Body, Digest: canon.Digest(r.Body)}, nil
}

// ShadowReport aggregates an org's SHADOW decisions over [From, To).
type ShadowReport struct {
	OrgID      string                 `json:"org_id"`
	From       time.Time              `json:"from"`
	To         time.Time              `json:"to"`
	Total      int                    `json:"total"`
	ByOutcome  map[policy.Outcome]int `json:"by_outcome"`
	ByWorkflow []WorkflowShadow       `json:"by_workflow"`
}

// WorkflowShadow is one workflow's share of a ShadowReport.
type WorkflowShadow struct {
	WorkflowKey string                 `json:"workflow_key"`
	Total       int                    `json:"total"`
	ByOutcome   map[policy.Outcome]int `json:"by_outcome"`
}

// MaxShadowWindow bounds a shadow report's time window.
const MaxShadowWindow = 366 * 24 * time.Hour

// DefaultShadowWindow is a shadow report's window when the request bounds
// only one end, or neither (which ends now).
const DefaultShadowWindow = 24 * time.Hour

// Window is a report's time window [From, To). A nil end is defaulted: To
// is the engine's now, From is To minus DefaultShadowWindow. Optional ends
// are pointers so that the zero time stays a time a caller may name.
type Window struct {
	From *time.Time
	To   *time.Time
}

// Between is the window [from, to).
func Between(from, to time.Time) Window { return Window{From: &from, To: &to} }

// ShadowReport counts the org's SHADOW decisions in the window by outcome
// and by workflow (workflows sorted by key).
func (s *Service) ShadowReport(ctx context.Context, orgID string, w Window) (ShadowReport, error) {
	from, to, err := s.window(w)
	if err != nil {
		return ShadowReport{}, err
	}
	rep := ShadowReport{OrgID: orgID, From: from.UTC(), To: to.UTC(), ByOutcome: zeroOutcomes(), ByWorkflow: []WorkflowShadow{}}
	byWF := map[string]*WorkflowShadow{}
	err = s.d.Store.DossierSummaries(ctx, orgID, from, to, func(s dossier.Summary) bool {
		if s.Mode != string(policy.ModeShadow) {
			return true
		}
		o := policy.Outcome(s.Outcome)
		rep.Total++
		rep.ByOutcome[o]++
		w := byWF[s.WorkflowKey]
		if w == nil {
			w = &WorkflowShadow{WorkflowKey: s.WorkflowKey, ByOutcome: zeroOutcomes()}
			byWF[s.WorkflowKey] = w
		}
		w.Total++
		w.ByOutcome[o]++
		return true
	})
	if err != nil {
		return ShadowReport{}, core.Unavailable("shadow report", err)
	}
	for _, w := range byWF {
		rep.ByWorkflow = append(rep.ByWorkflow, *w)
	}
	sort.Slice(rep.ByWorkflow, func(i, j int) bool { return rep.ByWorkflow[i].WorkflowKey < rep.ByWorkflow[j].WorkflowKey })
	return rep, nil
}

func zeroOutcomes() map[policy.Outcome]int {
	return map[policy.Outcome]int{policy.OutcomeAllow: 0, policy.OutcomeEscalate: 0, policy.OutcomeReviewRequired: 0, policy.OutcomeBlock: 0}
}

// ReasonCodes is the stable reason-code vocabulary.
func ReasonCodes() []policy.ReasonCode { return policy.ReasonCodes() }
