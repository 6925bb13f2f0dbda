package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/clearancehq/clearance/internal/strictjson"
)

// Intent is the unified JSON wire shape of a decision request as policies
// see it: the decision request's members at the top level plus actor,
// action and surface (DESIGN §8). Routes decode their own bodies and fill
// the members they have.
type Intent struct {
	DecisionType     string         `json:"decision_type,omitempty"`
	WorkflowKey      string         `json:"workflow_key,omitempty"`
	VerticalPack     string         `json:"vertical_pack,omitempty"`
	Amount           Amount         `json:"amount,omitzero"`
	RiskScore        Score          `json:"risk_score,omitzero"`
	ObjectiveProfile string         `json:"objective_profile,omitempty"`
	Mode             Mode           `json:"mode,omitempty"`
	Context          map[string]any `json:"context,omitempty"`
	Surface          string         `json:"surface,omitempty"`
	Actor            *Actor         `json:"actor,omitempty"`
	Action           *Action        `json:"action,omitempty"`
}

// Actor is who asks.
type Actor struct {
	ID   string `json:"id,omitempty"`
	Type string `json:"type,omitempty"`
}

// Action is what the actor wants to do.
type Action struct {
	Type       string         `json:"type,omitempty"`
	Amount     Amount         `json:"amount,omitzero"`
	Currency   string         `json:"currency,omitempty"`
	Target     string         `json:"target,omitempty"`
	Parameters map[string]any `json:"parameters,omitempty"`
}

// Input maps the wire shape to the evaluator's Input, with Now set to now.
//
// action.amount is also the amount when the top-level amount is absent.
// When both are present they must be numerically equal ("1000" and
// "1000.00" agree), otherwise the error is AMOUNT_CONFLICT on
// "action.amount": the two could select different rules, so neither is
// silently preferred. A mode other than "", ENFORCEMENT or SHADOW is
// INVALID_MODE. Amounts and scores built in Go (not decoded) are checked
// with the same rules as decoded ones. Errors are *InputError.
func (i Intent) Input(now time.Time) (Input, error) {
	if i.Mode != "" && !i.Mode.Valid() {
		return Input{}, &InputError{Code: CodeInvalidMode, Field: "mode", Message: "mode must be ENFORCEMENT or SHADOW"}
	}
	if err := i.checkIdentifiers(); err != nil {
		return Input{}, err
	}
	in := Input{
		DecisionType:     i.DecisionType,
		WorkflowKey:      i.WorkflowKey,
		Surface:          i.Surface,
		VerticalPack:     i.VerticalPack,
		ObjectiveProfile: i.ObjectiveProfile,
		RequestedMode:    i.Mode,
		Context:          i.Context,
		Now:              now,
	}
	amount, field := i.Amount, "amount"
	if i.Actor != nil {
		in.ActorID, in.ActorType = i.Actor.ID, i.Actor.Type
	}
	if a := i.Action; a != nil {
		in.ActionType, in.ActionTarget, in.Currency, in.ActionParameters = a.Type, a.Target, a.Currency, a.Parameters
		if a.Amount.Set {
			if amount.Set && amount.Value != a.Amount.Value {
				return Input{}, &InputError{Code: CodeAmountConflict, Field: "action.amount",
					Message: "action.amount differs from amount"}
			}
			if !amount.Set {
				amount, field = a.Amount, "action.amount"
			}
		}
	}
	if amount.Set {
		if msg := amountProblem(amount.Value); msg != "" {
			return Input{}, &InputError{Code: CodeInvalidAmount, Field: field, Message: msg}
		}
		in.Amount, in.HasAmount = amount.Value, true
	}
	if i.RiskScore.Set {
		if math.IsNaN(i.RiskScore.Value) || math.IsInf(i.RiskScore.Value, 0) {
			return Input{}, &InputError{Code: CodeInvalidRiskScore, Field: "risk_score", Message: "risk_score must be finite"}
		}
		in.RiskScore, in.HasRiskScore = i.RiskScore.Value, true
	}
	return in, nil
}

// DecodeIntent strictly decodes raw (strictjson, unknown members rejected)
// and checks every amount and score literal. Syntax and shape errors are
// *strictjson.Error; amount and score errors are *InputError naming the
// member ("amount", "action.amount", "risk_score").
func DecodeIntent(raw []byte) (Intent, error) {
	var w wireIntent
	if err := strictjson.Decode(raw, &w, strictjson.Options{RejectUnknown: true}); err != nil {
		return Intent{}, err
	}
	i := Intent{
		DecisionType:     w.DecisionType,
		WorkflowKey:      w.WorkflowKey,
		VerticalPack:     w.VerticalPack,
		ObjectiveProfile: w.ObjectiveProfile,
		Mode:             w.Mode,
		Context:          w.Context,
		Surface:          w.Surface,
		Actor:            w.Actor,
	}
	var err error
	if i.Amount, err = w.Amount.amount("amount"); err != nil {
		return Intent{}, err
	}
	if w.Action != nil {
		i.Action = &Action{Type: w.Action.Type, Currency: w.Action.Currency, Target: w.Action.Target, Parameters: w.Action.Parameters}
		if i.Action.Amount, err = w.Action.Amount.amount("action.amount"); err != nil {
			return Intent{}, err
		}
	}
	if w.RiskScore.set {
		if err := i.RiskScore.UnmarshalJSON(w.RiskScore.b); err != nil {
			return Intent{}, err
		}
	}
	return i, nil
}

// wireIntent mirrors Intent with amount literals captured raw, so that
// DecodeIntent can report which member was wrong (strictjson reports an
// error from a field's UnmarshalJSON only as WRONG_TYPE).
type wireIntent struct {
	DecisionType     string         `json:"decision_type"`
	WorkflowKey      string         `json:"workflow_key"`
	VerticalPack     string         `json:"vertical_pack"`
	Amount           rawValue       `json:"amount"`
	RiskScore        rawValue       `json:"risk_score"`
	ObjectiveProfile string         `json:"objective_profile"`
	Mode             Mode           `json:"mode"`
	Context          map[string]any `json:"context"`
	Surface          string         `json:"surface"`
	Actor            *Actor         `json:"actor"`
	Action           *wireAction    `json:"action"`
}

type wireAction struct {
	Type       string         `json:"type"`
	Amount     rawValue       `json:"amount"`
	Currency   string         `json:"currency"`
	Target     string         `json:"target"`
	Parameters map[string]any `json:"parameters"`
}

// rawValue captures any JSON value, null included.
type rawValue struct {
	b   []byte
	set bool
}

func (r *rawValue) UnmarshalJSON(b []byte) error {
	r.b, r.set = bytes.Clone(b), true
	return nil
}

func (r rawValue) amount(field string) (Amount, error) {
	if !r.set {
		return Amount{}, nil
	}
	var a Amount
	if err := a.UnmarshalJSON(r.b); err != nil {
		err.(*InputError).Field = field
		return Amount{}, err
	}
	return a, nil
}

// MaxAmount is the largest amount accepted.
const MaxAmount = 1e15

// maxAmountFraction is the most significant fractional digits an amount
// literal may carry (trailing zeros do not count).
const maxAmountFraction = 6

// Amount is a money amount as it arrived on the wire. The zero value means
// absent. Raw keeps the literal exactly (e.g. "1000.50").
type Amount struct {
	Value float64
	Set   bool
	Raw   string
}

// IsZero reports whether the amount is absent (for omitzero).
func (a Amount) IsZero() bool { return !a.Set }

// UnmarshalJSON accepts a plain JSON number literal (see ParseAmount). It
// is called for null too, which is refused.
func (a *Amount) UnmarshalJSON(b []byte) error {
	b = trimSpace(b)
	v, err := ParseAmount(b)
	if err != nil {
		return err
	}
	*a = Amount{Value: v, Set: true, Raw: string(b)}
	return nil
}

// MarshalJSON writes Raw when known, else the shortest decimal form.
func (a Amount) MarshalJSON() ([]byte, error) {
	if !a.Set {
		return []byte("null"), nil
	}
	if a.Raw != "" {
		return []byte(a.Raw), nil
	}
	return strconv.AppendFloat(nil, a.Value, 'f', -1, 64), nil
}

// ParseAmount parses a money amount literal. It must be a plain JSON number:
// no sign, no exponent form (1e3), at most 6 significant fractional digits
// (9999.999 is fine, 1.0000001 is not; trailing zeros do not count), at most
// MaxAmount. null, booleans, strings ("50000"), objects and arrays are
// refused. Errors are *InputError with code INVALID_AMOUNT and field "amount".
func ParseAmount(raw []byte) (float64, error) {
	s := trimSpace(raw)
	fail := func(msg string) (float64, error) {
		return 0, &InputError{Code: CodeInvalidAmount, Field: "amount", Message: msg}
	}
	if len(s) == 0 {
		return fail("amount is empty")
	}
	switch s[0] {
	case 'n':
		return fail("amount must be a JSON number, not null")
	case 't', 'f':
		return fail("amount must be a JSON number, not a boolean")
	case '"':
		return fail("amount must be a JSON number, not a string")
	case '{', '[':
		return fail("amount must be a JSON number")
	case '-':
		return fail("amount must not be negative")
	}
	n, ok := scanNumber(s)
	switch {
	case !ok:
		return fail("amount is not a valid JSON number")
	case n.exp:
		return fail("amount must be written without an exponent")
	case n.intDigits > 16:
		return fail("amount exceeds the maximum of 1e15")
	case n.fracDigits > maxAmountFraction:
		return fail("amount has more than 6 fractional digits")
	}
	v, err := strconv.ParseFloat(string(s), 64)
	if err != nil {
		return fail("amount is not a finite number")
	}
	if msg := amountProblem(v); msg != "" {
		return fail(msg)
	}
	return v, nil
}

// amountProblem checks a parsed (or Go-built) amount value.
func amountProblem(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "amount must be finite"
	case v < 0 || math.Signbit(v):
		return "amount must not be negative"
	case v > MaxAmount:
		return "amount exceeds the maximum of 1e15"
	}
	return ""
}

// Score is a risk score as it arrived: any finite JSON number (negative
// and exponent forms allowed, no range enforced). The zero value is absent.
type Score struct {
	Value float64
	Set   bool
}

// IsZero reports whether the score is absent (for omitzero).
func (s Score) IsZero() bool { return !s.Set }

// UnmarshalJSON accepts a finite JSON number; null, strings and the rest
// are *InputError with code INVALID_RISK_SCORE.
func (s *Score) UnmarshalJSON(b []byte) error {
	b = trimSpace(b)
	fail := func(msg string) error {
		return &InputError{Code: CodeInvalidRiskScore, Field: "risk_score", Message: msg}
	}
	if _, ok := scanNumber(b); !ok {
		return fail("risk_score must be a JSON number")
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return fail("risk_score must be finite")
	}
	*s = Score{Value: v, Set: true}
	return nil
}

// MarshalJSON writes the score as a JSON number.
func (s Score) MarshalJSON() ([]byte, error) {
	if !s.Set {
		return []byte("null"), nil
	}
	return json.Marshal(s.Value)
}

type numberShape struct {
	intDigits, fracDigits int // fracDigits excludes trailing zeros
	exp                   bool
}

// scanNumber checks that s is exactly one JSON number (RFC 8259 grammar).
func scanNumber(s []byte) (numberShape, bool) {
	var n numberShape
	i := 0
	digits := func() int {
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - start
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
		n.intDigits = 1
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		n.intDigits = digits()
	default:
		return n, false
	}
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		if digits() == 0 {
			return n, false
		}
		end := i
		for end > start && s[end-1] == '0' {
			end--
		}
		n.fracDigits = end - start
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		n.exp = true
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return n, false
		}
	}
	return n, i == len(s)
}

func trimSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// CodeInvalidIdentifier is the InputError code of an identifier member that
// breaks its grammar, is too long or holds control characters.
const CodeInvalidIdentifier = "INVALID_IDENTIFIER"

// MaxIdentifierLen bounds the identifier members without a grammar of their
// own (vertical_pack, objective_profile, actor.*, action.type/currency/target).
const MaxIdentifierLen = 200

// checkIdentifiers holds decision_type, workflow_key and surface, when
// present, to their grammars (ValidDecisionType, ValidWorkflowKey,
// ValidSurface), and refuses control characters (C0 with NUL, DEL and C1:
// hasControl) and oversized values in the other members that name things:
// they are indexed and stored as text by every backend, and no legitimate
// name needs them.
func (i Intent) checkIdentifiers() error {
	if err := checkGrammar("decision_type", i.DecisionType, &decisionTypeGrammar); err != nil {
		return err
	}
	if err := checkGrammar("workflow_key", i.WorkflowKey, &workflowKeyGrammar); err != nil {
		return err
	}
	if err := checkGrammar("surface", i.Surface, &surfaceGrammar); err != nil {
		return err
	}
	if err := checkName("vertical_pack", i.VerticalPack); err != nil {
		return err
	}
	if err := checkName("objective_profile", i.ObjectiveProfile); err != nil {
		return err
	}
	if a := i.Actor; a != nil {
		if err := checkName("actor.id", a.ID); err != nil {
			return err
		}
		if err := checkName("actor.type", a.Type); err != nil {
			return err
		}
	}
	if a := i.Action; a != nil {
		if err := checkName("action.type", a.Type); err != nil {
			return err
		}
		if err := checkName("action.currency", a.Currency); err != nil {
			return err
		}
		if err := checkName("action.target", a.Target); err != nil {
			return err
		}
	}
	return nil
}

// checkGrammar holds a present member to its grammar.
func checkGrammar(field, v string, g *grammar) error {
	if v != "" && !g.valid(v) {
		return &InputError{Code: CodeInvalidIdentifier, Field: field, Message: field + " must be " + g.rule}
	}
	return nil
}

// checkName refuses an oversized name, and one a reader of the dossier
// would not see as it is (VisibleName).
func checkName(field, v string) error {
	if len(v) > MaxIdentifierLen {
		return &InputError{Code: CodeInvalidIdentifier, Field: field, Message: fmt.Sprintf("%s is longer than %d bytes", field, MaxIdentifierLen)}
	}
	if !VisibleName(v) {
		return &InputError{Code: CodeInvalidIdentifier, Field: field,
			Message: field + " must not contain control or invisible characters, nor begin or end with white space"}
	}
	return nil
}
