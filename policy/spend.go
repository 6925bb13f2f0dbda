package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Spend-control gates. A bundle's spend_gates bound what the actions they
// select may spend per window of time ("at most 50,000 EUR per day for
// workflow payments"). A gate applies to an input that its selectors match
// and that carries an amount; the evaluator sees how much of the gate's
// budget is used (Input.Spend, filled by the caller from its reservations)
// and turns an ALLOW whose amount does not fit in what is left into the
// gate's on_exceed outcome with the reason code SPEND_LIMIT_EXCEEDED. An
// amount in another currency than the gate's is never converted: it is
// refused the same way, with SPEND_CURRENCY_MISMATCH, so that a currency
// cannot be a way around a budget.
//
// Rules see the budget too, as the predicate fields spend.<gate>.limit,
// spend.<gate>.used and spend.<gate>.remaining (numbers in the gate's
// currency) and the CEL variable spend["<gate>"].remaining: a rule can
// escalate before the budget is gone.
//
// Amounts are counted exactly in millionths of the currency unit
// (micros); an amount with more decimals is rounded up, so a budget is
// never exceeded by rounding.

// Reason codes the evaluator gives when a gate refuses.
const (
	ReasonSpendLimitExceeded    = "SPEND_LIMIT_EXCEEDED"
	ReasonSpendCurrencyMismatch = "SPEND_CURRENCY_MISMATCH"
)

// Spend gate limits.
const (
	// MaxSpendGates is the most gates a bundle has.
	MaxSpendGates = 32
	// MaxSpendLimit is the largest limit, in currency units.
	MaxSpendLimit = 1_000_000_000_000
	// MicrosPerUnit is the resolution budgets are counted in.
	MicrosPerUnit = 1_000_000
)

// Members of one gate's status in the CEL variable spend and in predicate
// fields spend.<gate>.<member>.
const (
	SpendLimit     = "limit"
	SpendUsed      = "used"
	SpendRemaining = "remaining"
	SpendCurrency  = "currency"
)

// Window is the period a gate's budget covers: a calendar period in UTC.
type Window string

// Windows.
const (
	WindowHour  Window = "HOUR"
	WindowDay   Window = "DAY"
	WindowWeek  Window = "WEEK" // ISO weeks, from Monday 00:00 UTC
	WindowMonth Window = "MONTH"
)

// Valid reports whether w is a known window.
func (w Window) Valid() bool {
	switch w {
	case WindowHour, WindowDay, WindowWeek, WindowMonth:
		return true
	}
	return false
}

// Start returns the start of the window that holds t.
func (w Window) Start(t time.Time) time.Time {
	t = t.UTC()
	switch w {
	case WindowHour:
		return t.Truncate(time.Hour)
	case WindowDay:
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	case WindowWeek:
		d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		return d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7))
	case WindowMonth:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return t
}

// End returns the end of the window that starts at start.
func (w Window) End(start time.Time) time.Time {
	switch w {
	case WindowHour:
		return start.Add(time.Hour)
	case WindowDay:
		return start.AddDate(0, 0, 1)
	case WindowWeek:
		return start.AddDate(0, 0, 7)
	case WindowMonth:
		return start.AddDate(0, 1, 0)
	}
	return start
}

// Decimal is an exact decimal amount. It decodes from a JSON number or
// string and encodes as a string, so that a bundle's digest never depends
// on a float.
type Decimal string

// UnmarshalJSON implements json.Unmarshaler.
func (d *Decimal) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*d = Decimal(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("a decimal is a number or a string")
	}
	*d = Decimal(n.String())
	return nil
}

// Micros parses d as a non-negative decimal with at most six decimals.
func (d Decimal) Micros() (int64, bool) {
	return parseMicros(string(d), false)
}

// parseMicros reads a plain decimal ("123", "123.45"); with roundUp,
// decimals beyond the sixth round the result up instead of failing.
func parseMicros(s string, roundUp bool) (int64, bool) {
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || len(whole) > 13 || strings.Trim(whole, "0123456789") != "" || strings.Trim(frac, "0123456789") != "" {
		return 0, false
	}
	if strings.Contains(s, ".") && frac == "" {
		return 0, false
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, false
	}
	up := false
	if len(frac) > 6 {
		if !roundUp {
			return 0, false
		}
		up = strings.Trim(frac[6:], "0") != ""
		frac = frac[:6]
	}
	frac += strings.Repeat("0", 6-len(frac))
	f, _ := strconv.ParseInt(frac, 10, 64)
	m := w*MicrosPerUnit + f
	if up {
		m++
	}
	return m, true
}

// AmountMicros is an input amount in micros, rounded up; amounts above
// MaxSpendLimit saturate at MaxSpendLimit micros + 1 unit (more than any
// gate allows).
func AmountMicros(amount float64) int64 {
	if math.IsNaN(amount) || amount <= 0 {
		return 0
	}
	if amount > MaxSpendLimit {
		return (MaxSpendLimit + 1) * MicrosPerUnit
	}
	m, ok := parseMicros(strconv.FormatFloat(amount, 'f', -1, 64), true)
	if !ok {
		return (MaxSpendLimit + 1) * MicrosPerUnit
	}
	return m
}

// FormatMicros writes micros as a plain decimal: 50000, 12.5, 0.000001.
func FormatMicros(m int64) string {
	neg := m < 0
	if neg {
		m = -m
	}
	s := strconv.FormatInt(m/MicrosPerUnit, 10)
	if f := m % MicrosPerUnit; f != 0 {
		s += "." + strings.TrimRight(fmt.Sprintf("%06d", f), "0")
	}
	if neg {
		return "-" + s
	}
	return s
}

// SpendGate is one budget of a bundle.
type SpendGate struct {
	// ID names the gate (the grammar of signal types); budgets are kept
	// under it, so a new version with the same id continues the count (in
	// the same currency and partitioning; any window).
	ID string `json:"id"`
	// Selectors, as on rules; an empty one selects everything.
	DecisionTypes []string `json:"decision_types,omitempty"`
	WorkflowKeys  []string `json:"workflow_keys,omitempty"`
	ActionTypes   []string `json:"action_types,omitempty"`
	ActorIDs      []string `json:"actor_ids,omitempty"`
	// Currency is the ISO 4217 code the limit is in.
	Currency string `json:"currency"`
	// Limit is the most the selected actions may spend per window.
	Limit  Decimal `json:"limit"`
	Window Window  `json:"window"`
	// PerActor keeps one budget per actor id instead of one for all.
	PerActor bool `json:"per_actor,omitempty"`
	// OnExceed is the outcome of an ALLOW that does not fit: BLOCK (the
	// default) or REVIEW_REQUIRED.
	OnExceed Outcome `json:"on_exceed,omitempty"`
}

// SpendStatus is how much of one gate's budget is used in the current
// window, as the caller's reservations say.
type SpendStatus struct {
	Currency string
	Limit    int64 // micros
	Used     int64 // micros: reserved, committed and held
}

// Remaining is what is left of the budget (never below zero).
func (s SpendStatus) Remaining() int64 { return max(0, s.Limit-s.Used) }

// gate is a compiled SpendGate.
type gate struct {
	id            string
	decisionTypes strSet
	workflowKeys  strSet
	actionTypes   strSet
	actorIDs      strSet
	currency      string
	limit         int64
	window        Window
	perActor      bool
	onExceed      Outcome
}

func compileGates(gates []SpendGate, v *validator) []gate {
	if len(gates) > MaxSpendGates {
		v.add("", "spend_gates", fmt.Sprintf("a bundle has at most %d spend gates, got %d", MaxSpendGates, len(gates)))
		return nil
	}
	out := make([]gate, 0, len(gates))
	ids := make(map[string]bool, len(gates))
	for i, g := range gates {
		at := func(f string) string { return fmt.Sprintf("spend_gates[%d].%s", i, f) }
		switch {
		case !ValidSignalType(g.ID):
			v.add("", at("id"), "gate id must be "+SignalTypeRule)
		case ids[g.ID]:
			v.add("", at("id"), fmt.Sprintf("duplicate spend gate id %q", g.ID))
		}
		ids[g.ID] = true
		c := gate{id: g.ID, currency: g.Currency, window: g.Window, perActor: g.PerActor, onExceed: g.OnExceed}
		c.decisionTypes = selector("", at("decision_types"), g.DecisionTypes, decisionTypeGrammar, v)
		c.workflowKeys = selector("", at("workflow_keys"), g.WorkflowKeys, workflowKeyGrammar, v)
		c.actionTypes = selector("", at("action_types"), g.ActionTypes, anyTextGrammar, v)
		c.actorIDs = selector("", at("actor_ids"), g.ActorIDs, anyTextGrammar, v)
		if !validCurrencyCode(g.Currency) {
			v.add("", at("currency"), "currency must be an ISO 4217 code: three upper-case letters")
		}
		m, ok := g.Limit.Micros()
		switch {
		case !ok:
			v.add("", at("limit"), "limit must be a decimal such as 50000 or 1250.75, with at most six decimals")
		case m <= 0 || m > MaxSpendLimit*MicrosPerUnit:
			v.add("", at("limit"), fmt.Sprintf("limit must be more than 0 and at most %d", int64(MaxSpendLimit)))
		}
		c.limit = m
		if ok {
			// One amount, one form: 1000.50, "1000.5" and 1000.5 are one
			// bundle digest.
			gates[i].Limit = Decimal(FormatMicros(m))
		}
		if !g.Window.Valid() {
			v.add("", at("window"), "window must be HOUR, DAY, WEEK or MONTH")
		}
		switch g.OnExceed {
		case "":
			c.onExceed = OutcomeBlock
		case OutcomeBlock, OutcomeReviewRequired:
		default:
			v.add("", at("on_exceed"), "on_exceed must be BLOCK or REVIEW_REQUIRED")
		}
		out = append(out, c)
	}
	return out
}

var anyTextGrammar = grammar{func(s string) bool { return s != "" && len(s) <= MaxIDLen && !hasControl(s) },
	fmt.Sprintf("1 to %d bytes without control characters", MaxIDLen)}

func validCurrencyCode(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}

func (g *gate) selects(in *Input) bool {
	return in.HasAmount &&
		(len(g.decisionTypes.list) == 0 || g.decisionTypes.contains(in.DecisionType)) &&
		(len(g.workflowKeys.list) == 0 || g.workflowKeys.contains(in.WorkflowKey)) &&
		(len(g.actionTypes.list) == 0 || g.actionTypes.contains(in.ActionType)) &&
		(len(g.actorIDs.list) == 0 || g.actorIDs.contains(in.ActorID))
}

// GateCharge is what one action costs one gate: the budget it counts
// against and the amount.
type GateCharge struct {
	GateID   string
	Currency string
	Window   Window
	// Partition is the actor id of a per-actor gate, "" otherwise.
	Partition string
	Limit     int64 // micros
	Amount    int64 // micros
	// CurrencyMismatch: the action's currency is not the gate's; it can
	// never be charged.
	CurrencyMismatch bool
}

// HasSpendGates reports whether the bundle has any spend gate: only then
// does a caller need to fill Input.Spend.
func (c *Compiled) HasSpendGates() bool { return len(c.gates) > 0 }

// SpendGates returns a copy of the bundle's gates.
func (c *Compiled) SpendGates() []SpendGate { return cloneBundle(c.bundle).SpendGates }

// Charges returns what in would cost each gate that applies to it, in
// bundle order; nil when none applies.
func (c *Compiled) Charges(in *Input) []GateCharge {
	var out []GateCharge
	for i := range c.gates {
		g := &c.gates[i]
		if !g.selects(in) {
			continue
		}
		ch := GateCharge{GateID: g.id, Currency: g.currency, Window: g.window, Limit: g.limit,
			Amount: AmountMicros(in.Amount), CurrencyMismatch: in.Currency != g.currency}
		if g.perActor {
			ch.Partition = in.ActorID
		}
		out = append(out, ch)
	}
	return out
}

// applyGates turns an ALLOW that a gate refuses into the gate's outcome.
func (c *Compiled) applyGates(in *Input, d Decision) Decision {
	if d.Outcome != OutcomeAllow || d.Err != nil {
		return d
	}
	refused, code := OutcomeAllow, ""
	for i := range c.gates {
		g := &c.gates[i]
		if !g.selects(in) {
			continue
		}
		var reason string
		if in.Currency != g.currency {
			reason = ReasonSpendCurrencyMismatch
		} else {
			// The gate's own limit counts, whatever the caller filled in;
			// an absent status is an unused budget (the reservation at
			// claim is what holds the line).
			if AmountMicros(in.Amount) > max(0, g.limit-in.Spend[g.id].Used) {
				reason = ReasonSpendLimitExceeded
			}
		}
		if reason != "" && (code == "" || g.onExceed.Rank() > refused.Rank()) {
			refused, code = g.onExceed, reason
		}
	}
	if code == "" {
		return d
	}
	return Decision{Outcome: refused, ReasonCodes: headerCodes(refused, code, nil), MatchedRules: d.MatchedRules}
}

// spendValue is the CEL and predicate view of in.Spend.
func spendValue(in *Input) map[string]any {
	if len(in.Spend) == 0 {
		return emptyMap
	}
	m := make(map[string]any, len(in.Spend))
	for id, st := range in.Spend {
		m[id] = map[string]any{
			SpendLimit:     float64(st.Limit) / MicrosPerUnit,
			SpendUsed:      float64(st.Used) / MicrosPerUnit,
			SpendRemaining: float64(st.Remaining()) / MicrosPerUnit,
			SpendCurrency:  st.Currency,
		}
	}
	return m
}

// spendMember reads spend.<gate>.<member> for a predicate.
func spendMember(in *Input, gateID, member string) (float64, bool) {
	st, ok := in.Spend[gateID]
	if !ok {
		return 0, false
	}
	switch member {
	case SpendLimit:
		return float64(st.Limit) / MicrosPerUnit, true
	case SpendUsed:
		return float64(st.Used) / MicrosPerUnit, true
	case SpendRemaining:
		return float64(st.Remaining()) / MicrosPerUnit, true
	}
	return 0, false
}

// spendField parses what follows "spend." in a predicate field.
func spendField(rest string) (gateID, member, problem string) {
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 {
		return "", "", "spend predicates are spend.<gate>.limit, spend.<gate>.used or spend.<gate>.remaining"
	}
	gateID, member = rest[:i], rest[i+1:]
	switch member {
	case SpendLimit, SpendUsed, SpendRemaining:
	default:
		return "", "", "spend predicates are spend.<gate>.limit, spend.<gate>.used or spend.<gate>.remaining"
	}
	if !ValidSignalType(gateID) {
		return "", "", "invalid gate id: " + SignalTypeRule
	}
	return gateID, member, ""
}
