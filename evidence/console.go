package evidence

import (
	"context"
	"time"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/policy"
)

// The operator console's reads: an org's decisions filtered, and its
// activity over time. Both read the time index of dossier summaries, never
// a dossier body.

// DecisionFilter selects decisions for Decisions. Empty members select all.
type DecisionFilter struct {
	Window
	Outcome     policy.Outcome
	Mode        policy.Mode
	WorkflowKey string
	// Limit is how many to return, newest first (1 to MaxDecisionsPage;
	// 0: DefaultDecisionsPage).
	Limit int
}

// Decisions pages.
const (
	DefaultDecisionsPage = 50
	MaxDecisionsPage     = 200
)

// DecisionSummary is one decision as a list shows it.
type DecisionSummary struct {
	DossierID    string    `json:"dossier_id"`
	DecisionID   string    `json:"decision_id"`
	CreatedAt    time.Time `json:"created_at"`
	Outcome      string    `json:"outcome"`
	Mode         string    `json:"mode"`
	WorkflowKey  string    `json:"workflow_key"`
	DecisionType string    `json:"decision_type"`
}

// DecisionList is the answer of Decisions.
type DecisionList struct {
	OrgID     string            `json:"org_id"`
	From      time.Time         `json:"from"`
	To        time.Time         `json:"to"`
	Decisions []DecisionSummary `json:"decisions"`
	// Truncated: more decisions matched than Limit.
	Truncated bool `json:"truncated"`
}

// Decisions lists the org's decisions in the window that match f, newest
// first.
func (s *Service) Decisions(ctx context.Context, orgID string, f DecisionFilter) (DecisionList, error) {
	from, to, err := s.window(f.Window)
	if err != nil {
		return DecisionList{}, err
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultDecisionsPage
	}
	if limit < 1 || limit > MaxDecisionsPage {
		return DecisionList{}, core.Invalid(core.CodeInvalidRequest, "limit", "limit must be 1 to %d", MaxDecisionsPage)
	}
	out := DecisionList{OrgID: orgID, From: from.UTC(), To: to.UTC(), Decisions: []DecisionSummary{}}
	// The index is oldest first: keep the newest limit+1 in a ring, the
	// match number i at i mod (limit+1).
	ring := make([]dossier.Summary, limit+1)
	matched := 0
	err = s.d.Store.DossierSummaries(ctx, orgID, from, to, func(d dossier.Summary) bool {
		if (f.Outcome != "" && d.Outcome != string(f.Outcome)) || (f.Mode != "" && d.Mode != string(f.Mode)) ||
			(f.WorkflowKey != "" && d.WorkflowKey != f.WorkflowKey) {
			return true
		}
		ring[matched%(limit+1)] = d
		matched++
		return true
	})
	if err != nil {
		return DecisionList{}, core.Unavailable("list decisions", err)
	}
	out.Truncated = matched > limit
	for i := matched - 1; i >= 0 && i >= matched-limit; i-- {
		d := ring[i%(limit+1)]
		out.Decisions = append(out.Decisions, DecisionSummary{DossierID: d.DossierID, DecisionID: d.DecisionID,
			CreatedAt: d.CreatedAt.UTC(), Outcome: d.Outcome, Mode: d.Mode, WorkflowKey: d.WorkflowKey, DecisionType: d.DecisionType})
	}
	return out, nil
}

// Bucket is the width of an Activity series' step.
type Bucket string

// Activity buckets.
const (
	BucketHour Bucket = "hour"
	BucketDay  Bucket = "day"
)

// maxBuckets bounds an Activity series.
const maxBuckets = 24 * 31

// maxExecutionsCounted bounds how many grants of one state Activity counts.
const maxExecutionsCounted = 100_000

// ActivityStep is one bucket of an Activity series.
type ActivityStep struct {
	Start     time.Time              `json:"start"`
	ByOutcome map[policy.Outcome]int `json:"by_outcome"`
	ByMode    map[policy.Mode]int    `json:"by_mode"`
}

// ActivityTotals are an Activity window's counts.
type ActivityTotals struct {
	ByOutcome map[policy.Outcome]int `json:"by_outcome"`
	ByMode    map[policy.Mode]int    `json:"by_mode"`
}

// Activity is an org's decisions over time, and its executions now.
type Activity struct {
	OrgID  string         `json:"org_id"`
	From   time.Time      `json:"from"`
	To     time.Time      `json:"to"`
	Bucket Bucket         `json:"bucket"`
	Series []ActivityStep `json:"series"`
	Totals ActivityTotals `json:"totals"`
	// Executions counts the org's grants by lifecycle state now (at most
	// 100,000 per state; ExecutionsCapped says when one reached it).
	Executions       map[claim.State]int `json:"executions"`
	ExecutionsCapped bool                `json:"executions_capped,omitempty"`
	// ReconciliationQueue is how many executions wait to be reconciled
	// (INDETERMINATE).
	ReconciliationQueue int `json:"reconciliation_queue"`
}

// Activity counts the org's decisions in the window by bucket (UTC hours or
// days; the window is widened to whole buckets), outcome and mode, and its
// executions by state.
func (s *Service) Activity(ctx context.Context, orgID string, w Window, bucket Bucket) (Activity, error) {
	from, to, err := s.window(w)
	if err != nil {
		return Activity{}, err
	}
	step := time.Hour
	switch bucket {
	case BucketHour, "":
		bucket = BucketHour
	case BucketDay:
		step = 24 * time.Hour
	default:
		return Activity{}, core.Invalid(core.CodeInvalidRequest, "bucket", "bucket must be hour or day")
	}
	from = from.UTC().Truncate(step)
	if end := to.UTC().Truncate(step); end.Before(to) {
		to = end.Add(step)
	}
	n := int(to.Sub(from) / step)
	if n > maxBuckets {
		return Activity{}, core.Invalid(core.CodeInvalidRequest, "bucket", "at most %d buckets: widen the bucket or narrow the window", maxBuckets)
	}
	a := Activity{OrgID: orgID, From: from, To: to.UTC(), Bucket: bucket, Series: make([]ActivityStep, n),
		Totals: ActivityTotals{ByOutcome: zeroOutcomes(), ByMode: zeroModes()}, Executions: map[claim.State]int{}}
	for i := range a.Series {
		a.Series[i] = ActivityStep{Start: from.Add(time.Duration(i) * step), ByOutcome: zeroOutcomes(), ByMode: zeroModes()}
	}
	err = s.d.Store.DossierSummaries(ctx, orgID, from, to, func(d dossier.Summary) bool {
		i := int(d.CreatedAt.Sub(from) / step)
		if i < 0 || i >= n {
			return true
		}
		o, m := policy.Outcome(d.Outcome), policy.Mode(d.Mode)
		a.Series[i].ByOutcome[o]++
		a.Series[i].ByMode[m]++
		a.Totals.ByOutcome[o]++
		a.Totals.ByMode[m]++
		return true
	})
	if err != nil {
		return Activity{}, core.Unavailable("activity", err)
	}
	for _, st := range []claim.State{claim.StateIssued, claim.StateClaimed, claim.StateCommitted, claim.StateFailed, claim.StateIndeterminate} {
		count := 0
		err := s.d.Store.GrantsInState(ctx, orgID, st, func(claim.Grant) bool {
			count++
			return count < maxExecutionsCounted
		})
		if err != nil {
			return Activity{}, core.Unavailable("activity", err)
		}
		a.Executions[st] = count
		a.ExecutionsCapped = a.ExecutionsCapped || count >= maxExecutionsCounted
	}
	a.ReconciliationQueue = a.Executions[claim.StateIndeterminate]
	return a, nil
}

// window resolves a report's window: nil ends default (To now, From a day
// before To), From before To, at most MaxShadowWindow wide.
func (s *Service) window(w Window) (from, to time.Time, err error) {
	to = s.d.Now()
	if w.To != nil {
		to = *w.To
	}
	from = to.Add(-DefaultShadowWindow)
	if w.From != nil {
		from = *w.From
	}
	if !from.Before(to) {
		return from, to, core.Invalid(core.CodeInvalidRequest, "from", "from must be before to")
	}
	if to.Sub(from) > MaxShadowWindow {
		return from, to, core.Invalid(core.CodeInvalidRequest, "from", "the window may span at most 366 days")
	}
	return from, to, nil
}

func zeroModes() map[policy.Mode]int {
	return map[policy.Mode]int{policy.ModeShadow: 0, policy.ModeEnforcement: 0}
}
