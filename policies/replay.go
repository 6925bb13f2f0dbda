package policies

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/policy"
)

// SignalReader reads the data of the signal events a dossier recorded (the
// signals feature's Recorded).
type SignalReader interface {
	Recorded(ctx context.Context, orgID string, used []dossier.Signal) (map[string]json.RawMessage, error)
}

// UseSignals gives replays, reproductions and explanations the signal
// events decisions recorded; without it a policy that reads signals is not
// replayed (SIGNALS_NOT_RECORDED).
func (s *Service) UseSignals(r SignalReader) { s.signals = r }

// Candidate names the policy a replay, dry run or explanation evaluates:
// one of the org's drafts or published versions. Neither named is the
// org's active policy.
type Candidate struct {
	Draft   string `json:"draft,omitempty"`
	Version string `json:"version,omitempty"`
}

// Compile returns the candidate's compiled bundle: a draft must be valid
// (422 listing every problem otherwise), a version published; neither
// named is the org's active policy (the starter policy when none is).
func (s *Service) Compile(ctx context.Context, orgID string, c Candidate) (*policy.Compiled, error) {
	switch {
	case c.Draft != "" && c.Version != "":
		return nil, core.Invalid(core.CodeInvalidRequest, "draft", "name a draft or a version, not both")
	case c.Draft != "":
		rec, err := s.readDraft(ctx, orgID, c.Draft)
		if err != nil {
			return nil, err
		}
		return compileDraft(rec, "")
	case c.Version != "":
		if !policy.ValidVersion(c.Version) {
			return nil, core.New(core.ErrNotFound, CodePolicyNotFound, "policy version %q not found", c.Version)
		}
		r, err := s.d.Store.Bundle(ctx, orgID, c.Version)
		if core.IsNotFound(err) {
			return nil, core.New(core.ErrNotFound, CodePolicyNotFound, "policy version %q not found", c.Version)
		}
		if err != nil {
			return nil, core.Unavailable("read bundle", err)
		}
		return s.compile(r)
	}
	r, err := s.Resolve(ctx, orgID, "")
	if err != nil {
		return nil, err
	}
	return r.Active, nil
}

// Verdict is an outcome with its reason codes.
type Verdict struct {
	Outcome      policy.Outcome `json:"outcome"`
	ReasonCodes  []string       `json:"reason_codes"`
	MatchedRules []string       `json:"matched_rules,omitempty"`
}

// ReplayExample is one recorded decision whose outcome the candidate
// changes.
type ReplayExample struct {
	DossierID    string  `json:"dossier_id"`
	WorkflowKey  string  `json:"workflow_key"`
	DecisionType string  `json:"decision_type"`
	Recorded     Verdict `json:"recorded"`
	Replayed     Verdict `json:"replayed"`
}

// Tally counts one slice of a replay.
type Tally struct {
	Replayed int `json:"replayed"`
	Changed  int `json:"changed"`
	// ByDirection counts changed outcomes as "RECORDED->REPLAYED".
	ByDirection map[string]int `json:"by_direction"`
}

func (t *Tally) add(changed bool, dir string) {
	t.Replayed++
	if changed {
		t.Changed++
		if t.ByDirection == nil {
			t.ByDirection = map[string]int{}
		}
		t.ByDirection[dir]++
	}
}

// ReplayResult says what the candidate would have decided over the
// recorded decisions of a window, compared with what was recorded.
type ReplayResult struct {
	// Total is every dossier of the window; Replayed those evaluated again,
	// Skipped those whose input could not be rebuilt exactly (by reason).
	Total     int            `json:"total"`
	Replayed  int            `json:"replayed"`
	Skipped   int            `json:"skipped"`
	SkippedBy map[string]int `json:"skipped_by_reason"`
	// Changed outcomes, in total and by direction: MoreRestrictive (e.g.
	// ALLOW->BLOCK) and LessRestrictive (e.g. ESCALATE->ALLOW).
	Changed         int            `json:"changed"`
	Unchanged       int            `json:"unchanged"`
	MoreRestrictive int            `json:"more_restrictive"`
	LessRestrictive int            `json:"less_restrictive"`
	ByDirection     map[string]int `json:"by_direction"`
	// ReasonCodesChanged counts unchanged outcomes whose reason codes
	// differ.
	ReasonCodesChanged int               `json:"reason_codes_changed"`
	ByWorkflow         map[string]*Tally `json:"by_workflow"`
	ByDecisionType     map[string]*Tally `json:"by_decision_type"`
	// Examples are the first changed decisions, oldest first.
	Examples []ReplayExample `json:"examples"`
}

func newResult() *ReplayResult {
	return &ReplayResult{SkippedBy: map[string]int{}, ByDirection: map[string]int{},
		ByWorkflow: map[string]*Tally{}, ByDecisionType: map[string]*Tally{}, Examples: []ReplayExample{}}
}

// replayer evaluates one candidate over recorded dossiers.
type replayer struct {
	c       *policy.Compiled
	sources decide.RecordSources
	// open restores a sealed dossier's personal data; nil: none to restore.
	open     func(body []byte) ([]byte, error)
	examples int
	out      *ReplayResult
}

// add replays one stored dossier into the result.
func (r *replayer) add(st dossier.Stored) error {
	r.out.Total++
	body := st.Body
	if r.open != nil {
		var err error
		body, err = r.open(body)
		var nr *decide.NotReplayable
		if errors.As(err, &nr) {
			r.out.Skipped++
			r.out.SkippedBy[nr.Reason]++
			return nil
		}
		if err != nil {
			return err
		}
	}
	rec, err := decide.DecodeRecorded(body)
	if err != nil {
		return core.Unavailable("decode dossier", err)
	}
	in, err := decide.RecordedInput(&rec, r.c.UsesSignals(), r.sources)
	var nr *decide.NotReplayable
	if errors.As(err, &nr) {
		r.out.Skipped++
		r.out.SkippedBy[nr.Reason]++
		return nil
	}
	if err != nil {
		return err
	}
	d := r.c.Evaluate(&in)
	r.out.Replayed++
	changed := d.Outcome != rec.Outcome
	dir := string(rec.Outcome) + "->" + string(d.Outcome)
	wf := r.out.ByWorkflow[st.WorkflowKey]
	if wf == nil {
		wf = &Tally{}
		r.out.ByWorkflow[st.WorkflowKey] = wf
	}
	wf.add(changed, dir)
	dt := r.out.ByDecisionType[st.DecisionType]
	if dt == nil {
		dt = &Tally{}
		r.out.ByDecisionType[st.DecisionType] = dt
	}
	dt.add(changed, dir)
	if !changed {
		r.out.Unchanged++
		if !rec.SameReasonCodes(d.ReasonCodes) {
			r.out.ReasonCodesChanged++
		}
		return nil
	}
	r.out.Changed++
	r.out.ByDirection[dir]++
	if d.Outcome.Rank() > rec.Outcome.Rank() {
		r.out.MoreRestrictive++
	} else {
		r.out.LessRestrictive++
	}
	if len(r.out.Examples) < r.examples {
		recorded, err := verdictOf(&rec)
		if err != nil {
			return core.Unavailable("decode dossier", err)
		}
		r.out.Examples = append(r.out.Examples, ReplayExample{DossierID: st.DossierID, WorkflowKey: st.WorkflowKey,
			DecisionType: st.DecisionType, Recorded: recorded,
			Replayed: Verdict{Outcome: d.Outcome, ReasonCodes: slices.Clone(d.ReasonCodes), MatchedRules: slices.Clone(d.MatchedRules)}})
	}
	return nil
}

// verdictOf is the recorded decision of rec.
func verdictOf(rec *decide.Recorded) (Verdict, error) {
	codes, err := rec.ReasonCodes()
	if err != nil {
		return Verdict{}, err
	}
	rules, err := rec.MatchedRules()
	if err != nil {
		return Verdict{}, err
	}
	return Verdict{Outcome: rec.Outcome, ReasonCodes: codes, MatchedRules: rules}, nil
}

// sources binds the signal reader to an org and adds the checkout reader,
// for decide.RecordedInput.
func (s *Service) sources(ctx context.Context, orgID string) decide.RecordSources {
	src := decide.RecordSources{Checkout: s.checkouts}
	if s.signals != nil {
		src.Signals = func(used []dossier.Signal) (map[string]json.RawMessage, error) {
			return s.signals.Recorded(ctx, orgID, used)
		}
	}
	return src
}

// PersonalOpener restores the personal data of a stored dossier body for
// evaluating it again (privacy.Service.OpenRecorded): the plaintext body,
// or erased when its data subject's key was destroyed.
type PersonalOpener func(ctx context.Context, orgID string, body []byte) (plain []byte, erased bool, err error)

// UsePersonal gives replays and reproductions the data-protection
// feature's opener; without it a sealed dossier is replayed as stored
// (its personal members hold "[sealed]").
func (s *Service) UsePersonal(fn PersonalOpener) { s.personal = fn }

// openRecorded is body with its personal data restored.
func (s *Service) openRecorded(ctx context.Context, orgID string, body []byte) ([]byte, error) {
	if s.personal == nil {
		return body, nil
	}
	plain, erased, err := s.personal(ctx, orgID, body)
	if err != nil {
		return nil, err
	}
	if erased {
		return nil, &decide.NotReplayable{Reason: decide.ReasonSubjectErased,
			Detail: "the dossier's data subject was erased: its recorded intent is gone"}
	}
	return plain, nil
}

// UseCheckouts gives replays, reproductions and explanations the checkout
// feature's reader of recorded checkout decisions (checkout.RecordedInput);
// without it they are not replayed (CHECKOUT_NOT_REPLAYED).
func (s *Service) UseCheckouts(fn func(checkout, evidence json.RawMessage, now time.Time) (policy.Input, error)) {
	s.checkouts = fn
}

// errReplayTooLarge stops a replay answered at once when the window holds
// more decisions than it may replay.
var errReplayTooLarge = errors.New("policies: the window holds more decisions than a replay answers at once")

// replayWindow replays the org's dossiers of [from, to) with c, calling
// progress (when set) with the count processed every progressEvery; with
// limit > 0, a window of more decisions is errReplayTooLarge.
func (s *Service) replayWindow(ctx context.Context, orgID string, c *policy.Compiled, from, to time.Time, examples, limit int,
	progress func(processed int) error) (*ReplayResult, error) {
	r := replayer{c: c, sources: s.sources(ctx, orgID), examples: examples, out: newResult()}
	if s.personal != nil {
		r.open = func(body []byte) ([]byte, error) { return s.openRecorded(ctx, orgID, body) }
	}
	var failed error
	err := s.d.Store.Dossiers(ctx, orgID, from, to, func(st dossier.Stored) bool {
		if limit > 0 && r.out.Total == limit {
			failed = errReplayTooLarge
			return false
		}
		if failed = r.add(st); failed != nil {
			return false
		}
		if progress != nil && r.out.Total%progressEvery == 0 {
			if failed = progress(r.out.Total); failed != nil {
				return false
			}
		}
		return true
	})
	if failed != nil {
		return nil, failed
	}
	if err != nil {
		return nil, core.Unavailable("read dossiers", err)
	}
	return r.out, nil
}

// progressEvery is how many dossiers a replay job processes between
// progress reports.
const progressEvery = 5000

// sortedKeys is for stable output of maps in tests and logs.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
