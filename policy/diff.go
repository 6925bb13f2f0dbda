package policy

import (
	"bytes"
	"reflect"
	"slices"

	"github.com/clearancehq/clearance/internal/canon"
)

// BundleDiff is what changed from one bundle to another.
type BundleDiff struct {
	// Identical: every member but version and source is equal (compared
	// canonically: predicate values by their JSON form, an absent list as
	// an empty one).
	Identical    bool           `json:"identical"`
	BundleID     *StringChange  `json:"bundle_id,omitempty"`
	Mode         *StringChange  `json:"mode,omitempty"`
	Default      *DefaultChange `json:"default,omitempty"`
	RulesAdded   []string       `json:"rules_added"`   // ids, in `to` order
	RulesRemoved []string       `json:"rules_removed"` // ids, in `from` order
	RulesChanged []RuleChange   `json:"rules_changed"` // in `to` order
	// Reordered: rules present in both appear in another relative order
	// (order decides the order of reason codes).
	Reordered bool `json:"reordered"`
}

// StringChange is a changed string member.
type StringChange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// DefaultChange is a changed default.
type DefaultChange struct {
	From Default `json:"from"`
	To   Default `json:"to"`
}

// RuleChange is a rule present in both bundles whose content changed.
type RuleChange struct {
	RuleID string `json:"rule_id"`
	// Fields lists the members that changed, in this order: decision_types,
	// workflow_keys, surfaces, match, when, outcome, reason_codes.
	Fields []string `json:"fields"`
	From   Rule     `json:"from"`
	To     Rule     `json:"to"`
}

// Diff compares two bundles rule by rule (by rule id). Members are
// compared canonically: lists in order, an absent list equal to an empty
// one, predicate values by their canonical JSON (so 5 and 5.0 are equal).
// Version and Source are not compared. Neither bundle need be valid; a
// rule id that occurs more than once pairs its occurrences in order.
func Diff(from, to Bundle) BundleDiff {
	from, to = cloneBundle(from), cloneBundle(to)
	d := BundleDiff{RulesAdded: []string{}, RulesRemoved: []string{}, RulesChanged: []RuleChange{}}
	if from.BundleID != to.BundleID {
		d.BundleID = &StringChange{From: from.BundleID, To: to.BundleID}
	}
	if from.Mode != to.Mode {
		d.Mode = &StringChange{From: string(from.Mode), To: string(to.Mode)}
	}
	if from.Default.Outcome != to.Default.Outcome || !slices.Equal(from.Default.ReasonCodes, to.Default.ReasonCodes) {
		d.Default = &DefaultChange{From: from.Default, To: to.Default}
	}

	fromKeys, toKeys := ruleKeys(from.Rules), ruleKeys(to.Rules)
	fromAt := make(map[ruleKey]int, len(fromKeys))
	for i, k := range fromKeys {
		fromAt[k] = i
	}
	toAt := make(map[ruleKey]int, len(toKeys))
	for i, k := range toKeys {
		toAt[k] = i
	}
	var commonTo []ruleKey
	for i, k := range toKeys {
		j, ok := fromAt[k]
		if !ok {
			d.RulesAdded = append(d.RulesAdded, k.id)
			continue
		}
		commonTo = append(commonTo, k)
		if fields := ruleFieldsChanged(from.Rules[j], to.Rules[i]); len(fields) > 0 {
			d.RulesChanged = append(d.RulesChanged, RuleChange{RuleID: k.id, Fields: fields, From: from.Rules[j], To: to.Rules[i]})
		}
	}
	var commonFrom []ruleKey
	for _, k := range fromKeys {
		if _, ok := toAt[k]; ok {
			commonFrom = append(commonFrom, k)
		} else {
			d.RulesRemoved = append(d.RulesRemoved, k.id)
		}
	}
	d.Reordered = !slices.Equal(commonFrom, commonTo)
	d.Identical = d.BundleID == nil && d.Mode == nil && d.Default == nil && len(d.RulesAdded) == 0 &&
		len(d.RulesRemoved) == 0 && len(d.RulesChanged) == 0 && !d.Reordered
	return d
}

// ruleKey is a rule id and which occurrence of it (0 for the first).
type ruleKey struct {
	id string
	n  int
}

func ruleKeys(rules []Rule) []ruleKey {
	seen := make(map[string]int, len(rules))
	out := make([]ruleKey, len(rules))
	for i, r := range rules {
		out[i] = ruleKey{r.ID, seen[r.ID]}
		seen[r.ID]++
	}
	return out
}

// ruleFieldsChanged lists the members in which a and b (same id) differ.
func ruleFieldsChanged(a, b Rule) []string {
	var out []string
	if !slices.Equal(a.DecisionTypes, b.DecisionTypes) {
		out = append(out, "decision_types")
	}
	if !slices.Equal(a.WorkflowKeys, b.WorkflowKeys) {
		out = append(out, "workflow_keys")
	}
	if !slices.Equal(a.Surfaces, b.Surfaces) {
		out = append(out, "surfaces")
	}
	if !samePredicates(a.Match, b.Match) {
		out = append(out, "match")
	}
	if a.When != b.When {
		out = append(out, "when")
	}
	if a.Outcome != b.Outcome {
		out = append(out, "outcome")
	}
	if !slices.Equal(a.ReasonCodes, b.ReasonCodes) {
		out = append(out, "reason_codes")
	}
	return out
}

// samePredicates compares predicate lists by their canonical JSON (values
// already normalised), falling back to deep equality for values JSON
// cannot carry.
func samePredicates(a, b []Predicate) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 {
		return true
	}
	ca, errA := canon.Marshal(a)
	cb, errB := canon.Marshal(b)
	if errA != nil || errB != nil {
		return reflect.DeepEqual(a, b)
	}
	return bytes.Equal(ca, cb)
}
