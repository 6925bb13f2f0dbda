package policy

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	"cel.dev/cel-go/cel"

	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/strictjson"
)

// Limits enforced by Compile.
const (
	MaxRules       = 10_000 // rules per bundle
	MaxIDLen       = 200    // bytes of bundle_id and rule id
	MaxVersionLen  = 100    // bytes of version, [A-Za-z0-9._-]
	MaxWhenLen     = 10_000 // bytes of one CEL expression
	maxProblems    = 100    // problems listed by a ValidationError
	maxReasonCodes = 50     // reason codes per rule or default
)

// Bundle is the wire form of a policy bundle (DESIGN §8).
type Bundle struct {
	BundleID string  `json:"bundle_id"`
	Version  string  `json:"version"`
	Mode     Mode    `json:"mode"`
	Rules    []Rule  `json:"rules"`
	Default  Default `json:"default"`
	// Source names where the bundle was published from (a policy-source
	// pull sets it); it is part of the content and so of the digest, and
	// decisions record it in their Snapshot. Absent, the digest is the one
	// the bundle always had.
	Source *Provenance `json:"source,omitempty"`
	// SpendGates are the budgets of the bundle (see SpendGate); absent,
	// the digest is the one the bundle always had.
	SpendGates []SpendGate `json:"spend_gates,omitempty"`
}

// Provenance is where a bundle published from a repository came from.
type Provenance struct {
	// Repository is the repository as linked (a URL or a local path).
	Repository string `json:"repository"`
	// Commit is the full hex object name of the commit read.
	Commit string `json:"commit"`
	// Path is the directory of the bundle inside the repository ("" for
	// its root).
	Path string `json:"path,omitempty"`
}

// Rule is one rule of a bundle. It matches when every non-empty selector
// contains the input's value, every predicate of Match holds and When (if
// any) evaluates to true. A rule without any condition matches everything.
type Rule struct {
	ID            string      `json:"id"`
	DecisionTypes []string    `json:"decision_types,omitempty"`
	WorkflowKeys  []string    `json:"workflow_keys,omitempty"`
	Surfaces      []string    `json:"surfaces,omitempty"`
	Match         []Predicate `json:"match,omitempty"`
	When          string      `json:"when,omitempty"`
	Outcome       Outcome     `json:"outcome"`
	ReasonCodes   []string    `json:"reason_codes"`
}

// Predicate is a structured condition: Field Op Value. See the package
// documentation for fields, ops and the treatment of absent values.
type Predicate struct {
	Field string `json:"field"`
	Op    string `json:"op"`
	Value any    `json:"value,omitempty"`
}

// Default is the decision when no rule matches.
type Default struct {
	Outcome     Outcome  `json:"outcome"`
	ReasonCodes []string `json:"reason_codes"`
}

// Snapshot identifies the policy that made a decision.
type Snapshot struct {
	PolicyVersion string `json:"policy_version"`
	BundleID      string `json:"bundle_id"`
	BundleDigest  string `json:"bundle_digest"`
	Evaluator     string `json:"evaluator"`
	// SourceCommit is the commit the bundle was published from (Bundle.Source),
	// absent for bundles published directly.
	SourceCommit string `json:"source_commit,omitempty"`
}

// Compiled is a validated, indexed, immutable bundle, safe for concurrent
// use by any number of goroutines.
type Compiled struct {
	bundle    Bundle
	canonical []byte
	snapshot  Snapshot
	rules     []rule
	fallback  Decision // the default's decision

	// Index: each rule with selectors sits under one dimension.
	byDecisionType map[string][]int32
	byWorkflowKey  map[string][]int32
	bySurface      map[string][]int32
	unindexed      []int32

	usesSignals bool
	gates       []gate
}

// Load strictly decodes raw (unknown members, duplicate members, invalid
// UTF-8 and trailing data refused) and compiles it. Decoding errors are the
// *strictjson.Error unchanged (a 400); semantic errors are *ValidationError
// (a 422).
func Load(raw []byte) (*Compiled, error) {
	var b Bundle
	if err := strictjson.Decode(raw, &b, strictjson.Options{RejectUnknown: true}); err != nil {
		return nil, err
	}
	return Compile(b)
}

// Compile validates b, compiles its predicates and CEL expressions, builds
// the selector index and computes the digest over the RFC 8785 form of b
// (re-marshalled, so whitespace and member order do not matter). b is
// copied; later changes to it do not affect the result. Semantic errors are
// a *ValidationError listing every problem found.
func Compile(b Bundle) (*Compiled, error) {
	b = cloneBundle(b)
	var v validator
	switch {
	case b.BundleID == "":
		v.add("", "bundle_id", "bundle_id is required")
	case len(b.BundleID) > MaxIDLen || hasControl(b.BundleID):
		v.add("", "bundle_id", fmt.Sprintf("bundle_id must be at most %d bytes without control characters", MaxIDLen))
	}
	if !validVersion(b.Version) {
		v.add("", "version", fmt.Sprintf("version must be 1..%d characters of [A-Za-z0-9._-]", MaxVersionLen))
	}
	if !b.Mode.Valid() {
		v.add("", "mode", "mode must be ENFORCEMENT or SHADOW")
	}
	if len(b.Rules) > MaxRules {
		v.add("", "rules", fmt.Sprintf("a bundle has at most %d rules, got %d", MaxRules, len(b.Rules)))
		return nil, v.err()
	}
	c := &Compiled{bundle: b, rules: make([]rule, len(b.Rules))}
	ids := make(map[string]struct{}, len(b.Rules))
	for i := range b.Rules {
		c.rules[i] = compileRule(i, b.Rules[i], ids, &v)
	}
	if !b.Default.Outcome.Valid() {
		v.add("", "default.outcome", "outcome must be ALLOW, ESCALATE, REVIEW_REQUIRED or BLOCK")
	}
	checkReasonCodes("", "default.reason_codes", b.Default.ReasonCodes, false, &v)
	if b.Source != nil {
		checkSource(*b.Source, &v)
	}
	c.gates = compileGates(b.SpendGates, &v)
	if len(v.problems) > 0 {
		return nil, v.err()
	}
	canonical, err := canon.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("policy: canonicalize bundle: %w", err)
	}
	c.canonical = canonical
	c.snapshot = Snapshot{
		PolicyVersion: b.Version,
		BundleID:      b.BundleID,
		BundleDigest:  canon.Digest(canonical),
		Evaluator:     EvaluatorVersion,
	}
	if b.Source != nil {
		c.snapshot.SourceCommit = b.Source.Commit
	}
	c.fallback = Decision{
		Outcome:     b.Default.Outcome,
		ReasonCodes: headerCodes(b.Default.Outcome, ReasonNoRuleMatched, dedupe(b.Default.ReasonCodes)),
	}
	c.buildIndex()
	for i := range c.rules {
		c.usesSignals = c.usesSignals || c.rules[i].usesSignals
	}
	return c, nil
}

// compileRule validates and compiles rule i, reporting problems to v.
func compileRule(i int, r Rule, ids map[string]struct{}, v *validator) rule {
	at := func(f string) string { return fmt.Sprintf("rules[%d].%s", i, f) }
	switch _, dup := ids[r.ID]; {
	case r.ID == "":
		v.add("", at("id"), "rule id is required")
	case len(r.ID) > MaxIDLen || hasControl(r.ID):
		v.add(r.ID, at("id"), fmt.Sprintf("rule id must be at most %d bytes without control characters", MaxIDLen))
	case dup:
		v.add(r.ID, at("id"), "duplicate rule id")
	}
	ids[r.ID] = struct{}{}
	out := rule{id: r.ID, outcome: r.Outcome, rank: r.Outcome.Rank()}
	if !r.Outcome.Valid() {
		v.add(r.ID, at("outcome"), "outcome must be ALLOW, ESCALATE, REVIEW_REQUIRED or BLOCK")
	}
	checkReasonCodes(r.ID, at("reason_codes"), r.ReasonCodes, true, v)
	out.decisionTypes = selector(r.ID, at("decision_types"), r.DecisionTypes, decisionTypeGrammar, v)
	out.workflowKeys = selector(r.ID, at("workflow_keys"), r.WorkflowKeys, workflowKeyGrammar, v)
	out.surfaces = selector(r.ID, at("surfaces"), r.Surfaces, surfaceGrammar, v)
	for j, p := range r.Match {
		path := at(fmt.Sprintf("match[%d]", j))
		cp, ok := compilePredicate(p, func(f, msg string) { v.add(r.ID, path+"."+f, msg) })
		if ok {
			out.preds = append(out.preds, cp)
			out.usesSignals = out.usesSignals || cp.field.isSignal()
		}
	}
	if r.When != "" {
		if len(r.When) > MaxWhenLen {
			v.add(r.ID, at("when"), fmt.Sprintf("when is longer than %d bytes", MaxWhenLen))
		} else if prg, signals, msg := compileWhen(r.When); msg != "" {
			v.add(r.ID, at("when"), msg)
		} else {
			out.when, out.usesSignals = prg, out.usesSignals || signals
		}
	}
	own := dedupe(r.ReasonCodes)
	out.own = own
	out.decision = Decision{
		Outcome:      r.Outcome,
		ReasonCodes:  headerCodes(r.Outcome, ReasonPolicyMatched, own),
		MatchedRules: []string{r.ID},
	}
	return out
}

func checkReasonCodes(ruleID, field string, codes []string, required bool, v *validator) {
	if required && len(codes) == 0 {
		v.add(ruleID, field, "at least one reason code is required")
	}
	if len(codes) > maxReasonCodes {
		v.add(ruleID, field, fmt.Sprintf("at most %d reason codes", maxReasonCodes))
		return
	}
	for k, code := range codes {
		switch {
		case !validReasonCode(code):
			v.add(ruleID, fmt.Sprintf("%s[%d]", field, k), fmt.Sprintf("reason code %q must match ^[A-Z][A-Z0-9_]*$ (at most %d bytes)", code, maxReasonCodeLen))
		case reservedReason(code):
			v.add(ruleID, fmt.Sprintf("%s[%d]", field, k), fmt.Sprintf("reason code %q is reserved for the evaluator", code))
		}
	}
}

// selector validates a selector list and returns it as a set. Its values
// follow the grammar of the member they select on: a value no valid request
// can carry would be a rule that silently never matches.
func selector(ruleID, field string, values []string, g grammar, v *validator) strSet {
	for k, s := range values {
		if !g.valid(s) {
			v.add(ruleID, fmt.Sprintf("%s[%d]", field, k), fmt.Sprintf("selector value %q must be %s", s, g.rule))
		}
	}
	return newStrSet(dedupe(values))
}

// buildIndex files each rule with selectors under its most selective
// dimension (fewest values; ties: decision_types, workflow_keys, surfaces).
func (c *Compiled) buildIndex() {
	for i := range c.rules {
		r := &c.rules[i]
		dims := [3]struct {
			set *strSet
			idx *map[string][]int32
		}{
			{&r.decisionTypes, &c.byDecisionType},
			{&r.workflowKeys, &c.byWorkflowKey},
			{&r.surfaces, &c.bySurface},
		}
		best := -1
		for d := range dims {
			if n := len(dims[d].set.list); n > 0 && (best < 0 || n < len(dims[best].set.list)) {
				best = d
			}
		}
		if best < 0 {
			c.unindexed = append(c.unindexed, int32(i))
			continue
		}
		m := dims[best].idx
		if *m == nil {
			*m = make(map[string][]int32)
		}
		for _, val := range dims[best].set.list {
			(*m)[val] = append((*m)[val], int32(i))
		}
	}
}

// Bundle returns a deep copy of the compiled bundle (predicate values
// normalised to their JSON shapes: float64, string, bool, []any).
func (c *Compiled) Bundle() Bundle { return cloneBundle(c.bundle) }

// Canonical returns a copy of the RFC 8785 bytes of the bundle, the bytes
// the digest covers. Load(c.Canonical()) yields the same digest.
func (c *Compiled) Canonical() []byte { return slices.Clone(c.canonical) }

// Digest returns "sha256:" + hex SHA-256 of Canonical().
func (c *Compiled) Digest() string { return c.snapshot.BundleDigest }

// Mode returns the bundle's mode.
func (c *Compiled) Mode() Mode { return c.bundle.Mode }

// Snapshot identifies this bundle for decision records.
func (c *Compiled) Snapshot() Snapshot { return c.snapshot }

// UsesSignals reports whether any rule reads inbound signals (a signals.*
// predicate, or a when that names signals). Only then does a caller need
// to fill Input.Signals: for any other bundle they cannot change a
// decision.
func (c *Compiled) UsesSignals() bool { return c.usesSignals }

// validator collects problems in document order.
type validator struct {
	problems []Problem
	dropped  int
}

func (v *validator) add(ruleID, field, msg string) {
	if len(v.problems) >= maxProblems {
		v.dropped++
		return
	}
	v.problems = append(v.problems, Problem{RuleID: ruleID, Field: field, Message: msg})
}

func (v *validator) err() error {
	ps := v.problems
	if v.dropped > 0 {
		ps = append(ps, Problem{Message: fmt.Sprintf("%d more problems not shown", v.dropped)})
	}
	return &ValidationError{Problems: ps}
}

// cloneBundle deep-copies b, normalising predicate values and giving
// reason_codes a non-nil slice so that absent and [] canonicalise alike.
func cloneBundle(b Bundle) Bundle {
	out := b
	out.Default.ReasonCodes = cloneStrings(b.Default.ReasonCodes)
	if b.Source != nil {
		src := *b.Source
		out.Source = &src
	}
	if b.SpendGates != nil {
		out.SpendGates = make([]SpendGate, len(b.SpendGates))
		for i, g := range b.SpendGates {
			g.DecisionTypes, g.WorkflowKeys = slices.Clone(g.DecisionTypes), slices.Clone(g.WorkflowKeys)
			g.ActionTypes, g.ActorIDs = slices.Clone(g.ActionTypes), slices.Clone(g.ActorIDs)
			out.SpendGates[i] = g
		}
	}
	if b.Rules != nil {
		out.Rules = make([]Rule, len(b.Rules))
	}
	for i, r := range b.Rules {
		r.DecisionTypes = slices.Clone(r.DecisionTypes)
		r.WorkflowKeys = slices.Clone(r.WorkflowKeys)
		r.Surfaces = slices.Clone(r.Surfaces)
		r.ReasonCodes = cloneStrings(r.ReasonCodes)
		if r.Match != nil {
			m := make([]Predicate, len(r.Match))
			for j, p := range r.Match {
				p.Value = normalizeValue(p.Value)
				m[j] = p
			}
			r.Match = m
		}
		out.Rules[i] = r
	}
	return out
}

func cloneStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return slices.Clone(s)
}

// headerCodes returns [PROTOCOL_OUTCOME_<o>, matchCode, codes...] clipped,
// so that an append by a caller cannot write into shared memory.
func headerCodes(o Outcome, matchCode string, codes []string) []string {
	out := make([]string, 0, 2+len(codes))
	out = append(out, outcomeReason(o), matchCode)
	out = append(out, codes...)
	return slices.Clip(out)
}

// dedupe returns codes without repeats, first occurrence kept.
func dedupe(codes []string) []string {
	out := make([]string, 0, len(codes))
	for _, c := range codes {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

func validVersion(s string) bool {
	if s == "" || len(s) > MaxVersionLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// hasControl reports whether s holds a control character: C0, DEL or C1
// (U+0080–U+009F), as unicode.IsControl says. It is the one test of the
// identifiers this package checks (bundle_id, rule ids, Intent members).
func hasControl(s string) bool {
	return strings.ContainsFunc(s, unicode.IsControl)
}

// strSet is a small string set: a list, plus a map when long.
type strSet struct {
	list []string
	m    map[string]struct{}
}

func newStrSet(list []string) strSet {
	s := strSet{list: list}
	if len(list) > setMapThreshold {
		s.m = make(map[string]struct{}, len(list))
		for _, v := range list {
			s.m[v] = struct{}{}
		}
	}
	return s
}

func (s *strSet) contains(v string) bool {
	if s.m != nil {
		_, ok := s.m[v]
		return ok
	}
	for _, x := range s.list {
		if x == v {
			return true
		}
	}
	return false
}

// rule is a compiled rule.
type rule struct {
	id            string
	outcome       Outcome
	rank          int
	decisionTypes strSet
	workflowKeys  strSet
	surfaces      strSet
	preds         []pred
	when          cel.Program // nil without a when
	usesSignals   bool        // a predicate or the when reads signals
	own           []string    // the rule's reason codes, deduplicated
	decision      Decision    // the decision when this rule alone wins
}

// MaxSourceLen bounds Source.Repository and Source.Path.
const MaxSourceLen = 2000

// checkSource validates a bundle's provenance: a repository named without
// control characters, a full hex commit id (SHA-1 or SHA-256 object
// format) and a relative path that does not climb.
func checkSource(src Provenance, v *validator) {
	if src.Repository == "" || len(src.Repository) > MaxSourceLen || hasControl(src.Repository) {
		v.add("", "source.repository", fmt.Sprintf("source.repository must be 1..%d bytes without control characters", MaxSourceLen))
	}
	if !validCommit(src.Commit) {
		v.add("", "source.commit", "source.commit must be 40 or 64 lowercase hex digits")
	}
	if len(src.Path) > MaxSourceLen || hasControl(src.Path) || strings.HasPrefix(src.Path, "/") ||
		slices.Contains(strings.Split(src.Path, "/"), "..") {
		v.add("", "source.path", fmt.Sprintf("source.path must be a relative path of at most %d bytes without control characters or ..", MaxSourceLen))
	}
}

// validCommit reports whether s is a full lowercase hex object name.
func validCommit(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
