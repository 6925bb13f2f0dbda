package policy

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Bounds of Explain.
const (
	// MaxExplainedRules bounds Explanation.Rules: the rules that won are
	// listed first, then the rule whose `when` failed, then the other
	// matching rules, then the failed ones in bundle order; the listing
	// itself is in bundle order and RulesOmitted counts the rest.
	MaxExplainedRules = 1000
	// MaxFlipEvaluations bounds the evaluations of modified inputs one
	// Explain makes while searching for flips. Candidates are taken in
	// turn from each field (nearest first), so the bound is shared fairly.
	MaxFlipEvaluations = 2000
)

// Explanation says why an input got its decision: how every rule fared and
// which single-field changes would change the outcome. Outcome,
// ReasonCodes and MatchedRules are always those of Evaluate.
type Explanation struct {
	Outcome      Outcome     `json:"outcome"`
	ReasonCodes  []string    `json:"reason_codes"`
	MatchedRules []string    `json:"matched_rules"` // as Decision.MatchedRules, [] when the default decided
	Rules        []RuleTrace `json:"rules"`         // in bundle order, at most MaxExplainedRules
	RulesOmitted int         `json:"rules_omitted,omitempty"`
	Flips        []Flip      `json:"flips"` // [] when none was found
	// EvaluationError is the Decision.Err text when evaluation failed
	// (the outcome is then BLOCK).
	EvaluationError string `json:"evaluation_error,omitempty"`
}

// RuleTrace is how one rule fared.
type RuleTrace struct {
	RuleID   string  `json:"rule_id"`
	Outcome  Outcome `json:"outcome"`
	Matched  bool    `json:"matched"`
	Decisive bool    `json:"decisive"` // matched and its outcome won (it is in MatchedRules)
	// Failed is the first condition that failed, in evaluation order:
	// decision_types, workflow_keys, surfaces, match[0], match[1], …, when.
	Failed *Failure `json:"failed,omitempty"`
}

// Failure is the condition that kept a rule from matching.
type Failure struct {
	// Condition is "decision_types", "workflow_keys", "surfaces",
	// "match[<i>]" or "when".
	Condition string `json:"condition"`
	// Field is the predicate's field or the selector's input field
	// (decision_type, workflow_key, surface).
	Field string `json:"field,omitempty"`
	// Op is the predicate's op ("in" for a selector).
	Op string `json:"op,omitempty"`
	// Value is the predicate's operand or the selector's list.
	Value any `json:"value,omitempty"`
	// Actual is the input's value (string, float64 or bool; a context
	// value that is no scalar as given), null when absent.
	Actual any `json:"actual"`
	// Message says it in English, e.g. `amount 5000 is not lt 1000`.
	Message string `json:"message"`
}

// Flip is a change of one input field that changes the outcome.
type Flip struct {
	// Field is the input field: amount, risk_score, currency,
	// context.<key>, approval.verified, decision_type, …
	Field string `json:"field"`
	// Op says how to change it: "lt", "le", "gt", "ge" (a value below, at
	// or below, above, at or above the threshold Value), "eq" (set it to
	// Value), "absent" (remove it) or "present" (supply it).
	Op    string `json:"op"`
	Value any    `json:"value,omitempty"`
	// Outcome is the outcome after the change.
	Outcome Outcome `json:"outcome"`
	// Message says it in English, e.g. "amount below 1000 would ALLOW".
	Message string `json:"message"`
}

// Explain evaluates in like Evaluate and says why: every rule's trace and
// the smallest single-field changes that would flip the outcome. See the
// package documentation (Explanations) for what is traced and searched.
// in is not modified.
func (c *Compiled) Explain(in *Input) Explanation {
	d := c.Evaluate(in)
	x := Explanation{
		Outcome:      d.Outcome,
		ReasonCodes:  cloneStrings(d.ReasonCodes),
		MatchedRules: cloneStrings(d.MatchedRules),
		Rules:        []RuleTrace{},
		Flips:        []Flip{},
	}
	if d.Err != nil {
		x.EvaluationError = d.Err.Error()
	}
	var ee *EvalError
	if in == nil || errors.As(d.Err, &ee) && ee.RuleID == "" {
		// The input itself was refused: no rule was evaluated.
		return x
	}
	x.Rules, x.RulesOmitted = c.trace(in, x.MatchedRules)
	x.Flips, _ = c.flips(in, d.Outcome)
	return x
}

// Rule conditions, in evaluation order, as a trace records them.
const (
	condNone uint8 = iota
	condDecisionTypes
	condWorkflowKeys
	condSurfaces
	condMatch
	condWhenFalse
	condWhenError   // the `when` failed: evaluation stopped here
	condWhenSkipped // an earlier `when` failed, this one was not evaluated
)

type ruleState struct {
	cond uint8
	pred int // the failed predicate of condMatch
}

// firstFailure is selects, telling which condition failed first.
func (r *rule) firstFailure(in *Input) ruleState {
	switch {
	case len(r.decisionTypes.list) > 0 && !r.decisionTypes.contains(in.DecisionType):
		return ruleState{cond: condDecisionTypes}
	case len(r.workflowKeys.list) > 0 && !r.workflowKeys.contains(in.WorkflowKey):
		return ruleState{cond: condWorkflowKeys}
	case len(r.surfaces.list) > 0 && !r.surfaces.contains(in.Surface):
		return ruleState{cond: condSurfaces}
	}
	for p := range r.preds {
		if !r.preds[p].holds(in) {
			return ruleState{cond: condMatch, pred: p}
		}
	}
	return ruleState{}
}

// trace runs every rule as Evaluate runs its candidates (bundle order, the
// CEL activation and cost budget shared, stopping CEL at the first error)
// and lists at most MaxExplainedRules of them.
func (c *Compiled) trace(in *Input, matched []string) ([]RuleTrace, int) {
	states := make([]ruleState, len(c.rules))
	var (
		act     *activation
		celCost uint64
		whenErr error
		errRule string
	)
	for i := range c.rules {
		r := &c.rules[i]
		st := r.firstFailure(in)
		if st.cond == condNone && r.when != nil {
			if whenErr != nil {
				st.cond = condWhenSkipped
			} else {
				if act == nil {
					act = newActivation(in)
				}
				ok, cost, err := evalWhen(r.when, act)
				celCost += cost
				if err == nil && celCost > MaxEvaluationCost {
					err = errCostBudget
				}
				switch {
				case err != nil:
					st.cond, whenErr, errRule = condWhenError, err, r.id
				case !ok:
					st.cond = condWhenFalse
				}
			}
		}
		states[i] = st
	}

	decisive := make(map[string]struct{}, len(matched))
	for _, id := range matched {
		decisive[id] = struct{}{}
	}
	isDecisive := func(i int) bool {
		if states[i].cond != condNone {
			return false
		}
		_, ok := decisive[c.rules[i].id]
		return ok
	}
	// Choose what to list: winners, the failed `when`, other matches,
	// then failures, each class in bundle order, up to the bound.
	listed := make([]bool, len(c.rules))
	n := 0
	for class := range 4 {
		for i := range c.rules {
			if n == MaxExplainedRules {
				break
			}
			var take bool
			switch class {
			case 0:
				take = isDecisive(i)
			case 1:
				take = states[i].cond == condWhenError
			case 2:
				take = states[i].cond == condNone && !isDecisive(i)
			case 3:
				take = states[i].cond != condNone && states[i].cond != condWhenError
			}
			if take && !listed[i] {
				listed[i] = true
				n++
			}
		}
	}
	out := make([]RuleTrace, 0, n)
	for i := range c.rules {
		if !listed[i] {
			continue
		}
		r := &c.rules[i]
		t := RuleTrace{RuleID: r.id, Outcome: r.outcome, Matched: states[i].cond == condNone, Decisive: isDecisive(i)}
		if !t.Matched {
			t.Failed = c.failure(i, states[i], in, whenErr, errRule)
		}
		out = append(out, t)
	}
	return out, len(c.rules) - n
}

// failure describes the failed condition of rule i.
func (c *Compiled) failure(i int, st ruleState, in *Input, whenErr error, errRule string) *Failure {
	src := &c.bundle.Rules[i]
	switch st.cond {
	case condDecisionTypes:
		return selectorFailure("decision_types", "decision_type", src.DecisionTypes, in.DecisionType)
	case condWorkflowKeys:
		return selectorFailure("workflow_keys", "workflow_key", src.WorkflowKeys, in.WorkflowKey)
	case condSurfaces:
		return selectorFailure("surfaces", "surface", src.Surfaces, in.Surface)
	case condMatch:
		return predFailure(st.pred, src.Match[st.pred], &c.rules[i].preds[st.pred], in)
	case condWhenFalse:
		return &Failure{Condition: "when", Message: "when evaluated to false"}
	case condWhenError:
		return &Failure{Condition: "when", Message: "when failed: " + whenErr.Error()}
	case condWhenSkipped:
		return &Failure{Condition: "when", Message: fmt.Sprintf("when not evaluated: evaluation stopped at rule %q", errRule)}
	}
	return nil
}

func selectorFailure(cond, field string, list []string, actual string) *Failure {
	f := &Failure{Condition: cond, Field: field, Op: "in", Value: slices.Clone(list)}
	set := "[" + strings.Join(list, ", ") + "]"
	if actual == "" {
		f.Message = field + " is absent, not one of " + set
	} else {
		f.Actual = actual
		f.Message = field + " " + strconv.Quote(actual) + " is not one of " + set
	}
	return f
}

func predFailure(j int, p Predicate, cp *pred, in *Input) *Failure {
	f := &Failure{Condition: fmt.Sprintf("match[%d]", j), Field: p.Field, Op: p.Op, Value: normalizeValue(p.Value)}
	v := cp.lookup(in)
	f.Actual = actualValue(cp, v, in)
	val := formatValue(f.Value)
	switch {
	case cp.field == fieldApprovalVerified && cp.op == opExists:
		f.Actual = nil
		f.Message = "approval.verified is absent (no approval evidence)"
	case cp.field == fieldApprovalVerified && cp.op == opNotExists:
		f.Message = fmt.Sprintf("approval.verified %s is present (approval evidence supplied)", formatValue(f.Actual))
	case v.kind == valAbsent:
		f.Message = fmt.Sprintf("%s is absent", p.Field)
	case cp.op == opNotExists:
		f.Message = fmt.Sprintf("%s %s is present", p.Field, formatValue(f.Actual))
	case cp.op == opNe:
		f.Message = fmt.Sprintf("%s %s is eq %s", p.Field, formatValue(f.Actual), val)
	case cp.op == opNotIn:
		f.Message = fmt.Sprintf("%s %s is in %s", p.Field, formatValue(f.Actual), val)
	default:
		f.Message = fmt.Sprintf("%s %s is not %s %s", p.Field, formatValue(f.Actual), p.Op, val)
	}
	return f
}

// actualValue is the JSON shape of a looked-up value: nil when absent, the
// scalar, or the raw value when it is no scalar.
func actualValue(p *pred, v scalar, in *Input) any {
	switch v.kind {
	case valString:
		return v.s
	case valNumber:
		return v.n
	case valBool:
		return v.b
	case valOther:
		return rawLookup(p, in)
	}
	return nil
}

// rawLookup returns the value a context or signal predicate reads as given.
func rawLookup(p *pred, in *Input) any {
	switch p.field {
	case fieldContext:
		return in.Context[p.key]
	case fieldSignalData:
		if sig, ok := in.Signals[p.sig].(map[string]any); ok {
			if data, ok := sig[SignalData].(map[string]any); ok {
				return data[p.key]
			}
		}
	case fieldSignalAge:
		if sig, ok := in.Signals[p.sig].(map[string]any); ok {
			return sig[SignalAgeSeconds]
		}
	case fieldSpend:
		if n, ok := spendMember(in, p.sig, p.key); ok {
			return n
		}
	}
	return nil
}

// formatNumber writes a number plainly: 1000, 1000.5, 0.000001.
func formatNumber(n float64) string { return strconv.FormatFloat(n, 'f', -1, 64) }

// formatValue renders a value in a failure message: strings quoted,
// numbers plain, lists in brackets.
func formatValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(x)
	case float64:
		return formatNumber(x)
	case bool:
		return strconv.FormatBool(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = formatValue(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	if s := scalarOf(v); s.kind == valNumber {
		return formatNumber(s.n)
	}
	return fmt.Sprintf("%v", v)
}

// plainValue renders a flip's value: numbers plain, strings bare when they
// read unambiguously as a word, quoted otherwise.
func plainValue(v any) string {
	s, ok := v.(string)
	if !ok {
		return formatValue(v)
	}
	if s == "" || s == "true" || s == "false" || s == "null" {
		return strconv.Quote(s)
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._:/-", r)) {
			return strconv.Quote(s)
		}
	}
	return s
}

// Flip search.

// flipField is one input field the bundle tests, with the operands it is
// compared to.
type flipField struct {
	name   string
	id     fieldID
	key    string    // context key
	nums   []float64 // numeric operands, in bundle order, distinct
	strs   []string  // string operands and selector values, in bundle order, distinct
	bools  [2]bool   // false, true seen as operands
	exists bool      // an exists or not_exists predicate tests it
	cands  []flipCand

	seenStr map[string]struct{}
	seenNum map[float64]struct{}
}

// Where a numeric candidate lies relative to its threshold.
const (
	pointBelow = -1
	pointAt    = 0
	pointAbove = 1
)

// flipCand is one modification of one field.
type flipCand struct {
	set     scalar // the new value; valAbsent removes the field
	present bool   // "present": the field supplied (approval without verification, or a placeholder)
	numeric bool   // a point around the threshold thr
	thr     float64
	point   int8

	done bool    // evaluated
	ok   bool    // evaluated without error
	out  Outcome // the outcome after the change
}

// collectFlipFields gathers the fields the bundle's selectors and
// predicates test, except mode and signals.
func (c *Compiled) collectFlipFields() []*flipField {
	byName := map[string]*flipField{}
	get := func(name string, id fieldID, key string) *flipField {
		f := byName[name]
		if f == nil {
			f = &flipField{name: name, id: id, key: key, seenStr: map[string]struct{}{}, seenNum: map[float64]struct{}{}}
			byName[name] = f
		}
		return f
	}
	addStr := func(f *flipField, s string) {
		if _, dup := f.seenStr[s]; !dup {
			f.seenStr[s] = struct{}{}
			f.strs = append(f.strs, s)
		}
	}
	addScalar := func(f *flipField, v any) {
		switch x := v.(type) {
		case string:
			addStr(f, x)
		case float64:
			if _, dup := f.seenNum[x]; !dup {
				f.seenNum[x] = struct{}{}
				f.nums = append(f.nums, x)
			}
		case bool:
			if x {
				f.bools[1] = true
			} else {
				f.bools[0] = true
			}
		}
	}
	for i := range c.rules {
		src := &c.bundle.Rules[i]
		for _, sel := range [...]struct {
			name string
			id   fieldID
			list []string
		}{
			{"decision_type", fieldDecisionType, src.DecisionTypes},
			{"workflow_key", fieldWorkflowKey, src.WorkflowKeys},
			{"surface", fieldSurface, src.Surfaces},
		} {
			if len(sel.list) == 0 {
				continue
			}
			f := get(sel.name, sel.id, "")
			for _, s := range sel.list {
				addStr(f, s)
			}
		}
		for j := range c.rules[i].preds {
			cp := &c.rules[i].preds[j]
			if cp.field == fieldMode || cp.field.isSignal() {
				continue
			}
			f := get(src.Match[j].Field, cp.field, cp.key)
			switch cp.op {
			case opExists, opNotExists:
				f.exists = true
			case opIn, opNotIn:
				list, _ := src.Match[j].Value.([]any)
				for _, v := range list {
					addScalar(f, v)
				}
			default:
				addScalar(f, src.Match[j].Value)
			}
		}
	}
	fields := slices.Collect(maps.Values(byName))
	slices.SortFunc(fields, func(a, b *flipField) int { return strings.Compare(a.name, b.name) })
	return fields
}

// current is the field's value in the input.
func (f *flipField) current(in *Input) scalar {
	p := pred{field: f.id, key: f.key}
	return p.lookup(in)
}

// candidates lists the field's modifications in order of preference: for
// a number, the points around each threshold nearest the current value
// first (ascending when it has none); strings in bundle order; then
// removing or supplying the field.
func (f *flipField) candidates(in *Input) []flipCand {
	if f.id == fieldApprovalVerified {
		var out []flipCand
		if in.Approval == nil || !in.Approval.Verified {
			out = append(out, flipCand{set: scalar{kind: valBool, b: true}})
		}
		switch {
		case in.Approval != nil && in.Approval.Verified:
			out = append(out, flipCand{set: scalar{kind: valBool, b: false}})
		case in.Approval == nil && f.exists:
			out = append(out, flipCand{set: scalar{kind: valBool, b: false}, present: true})
		}
		if in.Approval != nil {
			out = append(out, flipCand{})
		}
		return out
	}
	cur := f.current(in)
	var nums, strs, bools []flipCand
	nums = f.numberCands(cur)
	for _, s := range f.strs {
		if s == "" && f.id != fieldContext {
			continue // an empty string field is absent
		}
		if cur.kind == valString && cur.s == s {
			continue
		}
		strs = append(strs, flipCand{set: scalar{kind: valString, s: s}})
	}
	for k, seen := range f.bools {
		if b := k == 1; seen && !(cur.kind == valBool && cur.b == b) {
			bools = append(bools, flipCand{set: scalar{kind: valBool, b: b}})
		}
	}
	var out []flipCand
	switch cur.kind {
	case valNumber:
		out = slices.Concat(nums, strs, bools)
	case valBool:
		out = slices.Concat(bools, strs, nums)
	default:
		out = slices.Concat(strs, nums, bools)
	}
	switch {
	case cur.kind != valAbsent:
		out = append(out, flipCand{})
	case !f.exists:
	case f.id == fieldAmount || f.id == fieldRiskScore:
		if len(nums) == 0 { // else the thresholds supply it
			out = append(out, flipCand{set: scalar{kind: valNumber}, present: true})
		}
	default:
		out = append(out, flipCand{set: scalar{kind: valString, s: f.placeholder()}, present: true})
	}
	return out
}

// placeholder is a string no predicate names, to supply an absent field.
func (f *flipField) placeholder() string {
	s := "present"
	for k := 1; ; k++ {
		if _, taken := f.seenStr[s]; !taken {
			return s
		}
		s = "present_" + strconv.Itoa(k)
	}
}

// numberCands lists, for each threshold t, a value just below t, t and a
// value just above t. Amounts step by 0.000001 (their finest precision)
// and stay within 0..MaxAmount; other numbers step to the adjacent float.
// A point on the same side of t as the current value is left out (it
// says nothing new), as is the current value.
func (f *flipField) numberCands(cur scalar) []flipCand {
	var out []flipCand
	seen := map[float64]bool{}
	for _, t := range f.nums {
		for _, pt := range [...]int8{pointBelow, pointAt, pointAbove} {
			v := t
			switch {
			case pt == pointBelow && f.id == fieldAmount:
				v = t - 0.000001
			case pt == pointAbove && f.id == fieldAmount:
				v = t + 0.000001
			case pt == pointBelow:
				v = math.Nextafter(t, math.Inf(-1))
			case pt == pointAbove:
				v = math.Nextafter(t, math.Inf(1))
			}
			switch {
			case math.IsInf(v, 0) || math.IsNaN(v) || seen[v]:
				continue
			case f.id == fieldAmount && amountProblem(v) != "":
				continue
			case cur.kind == valNumber && (v == cur.n || pt == pointBelow && cur.n < t || pt == pointAbove && cur.n > t):
				continue
			}
			seen[v] = true
			out = append(out, flipCand{set: scalar{kind: valNumber, n: v}, numeric: true, thr: t, point: pt})
		}
	}
	if cur.kind == valNumber {
		x := cur.n
		slices.SortStableFunc(out, func(a, b flipCand) int {
			da, db := math.Abs(a.set.n-x), math.Abs(b.set.n-x)
			if da != db {
				if da < db {
					return -1
				}
				return 1
			}
			return cmpFloat(a.set.n, b.set.n)
		})
	} else {
		slices.SortStableFunc(out, func(a, b flipCand) int { return cmpFloat(a.set.n, b.set.n) })
	}
	return out
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// apply sets the field of cp (a copy of in) as the candidate says. Maps
// and the approval are replaced, never modified.
func (f *flipField) apply(cp *Input, in *Input, k *flipCand) {
	v := k.set
	switch f.id {
	case fieldDecisionType:
		cp.DecisionType = v.s
	case fieldWorkflowKey:
		cp.WorkflowKey = v.s
	case fieldSurface:
		cp.Surface = v.s
	case fieldVerticalPack:
		cp.VerticalPack = v.s
	case fieldObjectiveProfile:
		cp.ObjectiveProfile = v.s
	case fieldCurrency:
		cp.Currency = v.s
	case fieldActorID:
		cp.ActorID = v.s
	case fieldActorType:
		cp.ActorType = v.s
	case fieldActionType:
		cp.ActionType = v.s
	case fieldActionTarget:
		cp.ActionTarget = v.s
	case fieldAmount:
		cp.Amount, cp.HasAmount = v.n, v.kind == valNumber
	case fieldRiskScore:
		cp.RiskScore, cp.HasRiskScore = v.n, v.kind == valNumber
	case fieldApprovalVerified:
		if v.kind == valAbsent {
			cp.Approval = nil
			break
		}
		var a Approval
		if in.Approval != nil {
			a = *in.Approval
		}
		a.Verified = v.b
		cp.Approval = &a
	case fieldContext:
		m := make(map[string]any, len(in.Context)+1)
		maps.Copy(m, in.Context)
		switch v.kind {
		case valAbsent:
			delete(m, f.key)
		case valString:
			m[f.key] = v.s
		case valNumber:
			m[f.key] = v.n
		case valBool:
			m[f.key] = v.b
		}
		cp.Context = m
	}
}

// flips searches the single-field changes that change the outcome base
// and says how many evaluations it made.
func (c *Compiled) flips(in *Input, base Outcome) ([]Flip, int) {
	fields := c.collectFlipFields()
	for _, f := range fields {
		f.cands = f.candidates(in)
	}
	// Evaluate in turns, one candidate per field per turn.
	budget := MaxFlipEvaluations
	for turn := 0; budget > 0; turn++ {
		progressed := false
		for _, f := range fields {
			if turn >= len(f.cands) || budget == 0 {
				continue
			}
			k := &f.cands[turn]
			cp := *in
			f.apply(&cp, in, k)
			d := c.Evaluate(&cp)
			k.done, k.ok, k.out = true, d.Err == nil, d.Outcome
			budget--
			progressed = true
		}
		if !progressed {
			break
		}
	}
	out := []Flip{}
	outcomes := [...]Outcome{OutcomeAllow, OutcomeEscalate, OutcomeReviewRequired, OutcomeBlock}
	for _, f := range fields {
		cur := f.current(in)
		for _, o := range outcomes {
			if o == base {
				continue
			}
			for i := range f.cands {
				if k := &f.cands[i]; k.done && k.ok && k.out == o {
					out = append(out, f.describe(k, cur, o))
					break
				}
			}
		}
	}
	return out, MaxFlipEvaluations - budget
}

// neighbour returns the evaluated candidate at the given side of thr.
func (f *flipField) neighbour(thr float64, pt int8) *flipCand {
	for i := range f.cands {
		if k := &f.cands[i]; k.numeric && k.thr == thr && k.point == pt && k.done && k.ok {
			return k
		}
	}
	return nil
}

// describe turns a candidate into a Flip.
func (f *flipField) describe(k *flipCand, cur scalar, o Outcome) Flip {
	fl := Flip{Field: f.name, Outcome: o}
	switch {
	case k.present:
		fl.Op = "present"
	case k.set.kind == valAbsent:
		fl.Op = "absent"
	case k.numeric:
		fl.Value = k.thr
		switch k.point {
		case pointBelow:
			fl.Op = "lt"
		case pointAbove:
			fl.Op = "gt"
		default:
			// At the threshold: "at or below" (moving down) or "at or
			// above" when the far side agrees, else exactly the value.
			fl.Op = "eq"
			down := cur.kind == valNumber && k.thr < cur.n
			if down {
				if nb := f.neighbour(k.thr, pointBelow); nb != nil && nb.out == o {
					fl.Op = "le"
				}
			} else if nb := f.neighbour(k.thr, pointAbove); nb != nil && nb.out == o {
				fl.Op = "ge"
			}
		}
	default:
		fl.Op = "eq"
		switch k.set.kind {
		case valString:
			fl.Value = k.set.s
		case valNumber:
			fl.Value = k.set.n
		case valBool:
			fl.Value = k.set.b
		}
	}
	var change string
	switch fl.Op {
	case "lt":
		change = "below " + plainValue(fl.Value)
	case "le":
		change = "at or below " + plainValue(fl.Value)
	case "gt":
		change = "above " + plainValue(fl.Value)
	case "ge":
		change = "at or above " + plainValue(fl.Value)
	case "eq":
		change = plainValue(fl.Value)
	default:
		change = fl.Op
	}
	fl.Message = fmt.Sprintf("%s %s would %s", f.name, change, o)
	return fl
}
