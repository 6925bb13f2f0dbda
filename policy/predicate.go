package policy

import (
	"fmt"
	"math"
	"reflect"
	"strings"
)

// fieldID names what a structured predicate looks at.
type fieldID uint8

const (
	fieldDecisionType fieldID = iota + 1
	fieldWorkflowKey
	fieldSurface
	fieldVerticalPack
	fieldObjectiveProfile
	fieldCurrency
	fieldActorID
	fieldActorType
	fieldActionType
	fieldActionTarget
	fieldMode
	fieldAmount
	fieldRiskScore
	fieldApprovalVerified
	fieldContext    // context.<key>
	fieldSignalData // signals.<type>.data.<key>
	fieldSignalAge  // signals.<type>.age_seconds
	fieldSpend      // spend.<gate>.<limit|used|remaining>
)

// isSignal reports whether the field reads inbound signals.
func (f fieldID) isSignal() bool { return f == fieldSignalData || f == fieldSignalAge }

var fieldsByName = map[string]fieldID{
	"decision_type":     fieldDecisionType,
	"workflow_key":      fieldWorkflowKey,
	"surface":           fieldSurface,
	"vertical_pack":     fieldVerticalPack,
	"objective_profile": fieldObjectiveProfile,
	"currency":          fieldCurrency,
	"actor.id":          fieldActorID,
	"actor.type":        fieldActorType,
	"action.type":       fieldActionType,
	"action.target":     fieldActionTarget,
	"mode":              fieldMode,
	"amount":            fieldAmount,
	"risk_score":        fieldRiskScore,
	"approval.verified": fieldApprovalVerified,
}

const (
	contextPrefix   = "context."
	signalsPrefix   = "signals."
	spendPrefix     = "spend."
	signalDataInfix = ".data."
	signalAgeSuffix = ".age_seconds"
)

// opID is a predicate operator.
type opID uint8

const (
	opEq opID = iota + 1
	opNe
	opLt
	opLe
	opGt
	opGe
	opIn
	opNotIn
	opExists
	opNotExists
)

var opsByName = map[string]opID{
	"eq": opEq, "ne": opNe, "lt": opLt, "le": opLe, "gt": opGt, "ge": opGe,
	"in": opIn, "not_in": opNotIn, "exists": opExists, "not_exists": opNotExists,
}

// valKind is the type of a looked-up value; valAbsent is the zero value.
type valKind uint8

const (
	valAbsent valKind = iota
	valString
	valNumber
	valBool
	valOther // present but not a scalar (object, array, …)
)

// scalar is a value looked up from an Input without allocating.
type scalar struct {
	kind valKind
	b    bool
	n    float64
	s    string
}

func (a scalar) equal(b scalar) bool {
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case valString:
		return a.s == b.s
	case valNumber:
		return a.n == b.n
	case valBool:
		return a.b == b.b
	}
	return false
}

// valueSet is the compiled operand of in / not_in.
type valueSet struct {
	strs   []string
	strMap map[string]struct{} // for long string lists
	nums   []float64
	hasT   bool
	hasF   bool
}

const setMapThreshold = 16

func (vs *valueSet) contains(v scalar) bool {
	switch v.kind {
	case valString:
		if vs.strMap != nil {
			_, ok := vs.strMap[v.s]
			return ok
		}
		for _, s := range vs.strs {
			if s == v.s {
				return true
			}
		}
	case valNumber:
		for _, n := range vs.nums {
			if n == v.n {
				return true
			}
		}
	case valBool:
		return (v.b && vs.hasT) || (!v.b && vs.hasF)
	}
	return false
}

// pred is a compiled structured predicate. Evaluating it allocates nothing.
type pred struct {
	field fieldID
	op    opID
	key   string // context or signal data key
	sig   string // signal type of fieldSignalData and fieldSignalAge; gate of fieldSpend
	val   scalar // operand of eq … ge
	set   *valueSet
}

func str(s string) scalar {
	if s == "" {
		return scalar{}
	}
	return scalar{kind: valString, s: s}
}

func (p *pred) lookup(in *Input) scalar {
	switch p.field {
	case fieldDecisionType:
		return str(in.DecisionType)
	case fieldWorkflowKey:
		return str(in.WorkflowKey)
	case fieldSurface:
		return str(in.Surface)
	case fieldVerticalPack:
		return str(in.VerticalPack)
	case fieldObjectiveProfile:
		return str(in.ObjectiveProfile)
	case fieldCurrency:
		return str(in.Currency)
	case fieldActorID:
		return str(in.ActorID)
	case fieldActorType:
		return str(in.ActorType)
	case fieldActionType:
		return str(in.ActionType)
	case fieldActionTarget:
		return str(in.ActionTarget)
	case fieldMode:
		return str(string(in.RequestedMode))
	case fieldAmount:
		if in.HasAmount {
			return scalar{kind: valNumber, n: in.Amount}
		}
	case fieldRiskScore:
		if in.HasRiskScore {
			return scalar{kind: valNumber, n: in.RiskScore}
		}
	case fieldApprovalVerified:
		return scalar{kind: valBool, b: in.Approval != nil && in.Approval.Verified}
	case fieldContext:
		if v, ok := in.Context[p.key]; ok {
			return scalarOf(v)
		}
	case fieldSignalData:
		if sig, ok := in.Signals[p.sig].(map[string]any); ok {
			if data, ok := sig[SignalData].(map[string]any); ok {
				if v, ok := data[p.key]; ok {
					return scalarOf(v)
				}
			}
		}
	case fieldSignalAge:
		if sig, ok := in.Signals[p.sig].(map[string]any); ok {
			if v, ok := sig[SignalAgeSeconds]; ok {
				return scalarOf(v)
			}
		}
	case fieldSpend:
		if n, ok := spendMember(in, p.sig, p.key); ok {
			return scalar{kind: valNumber, n: n}
		}
	}
	return scalar{}
}

// scalarOf classifies a context value. JSON null is absent.
func scalarOf(v any) scalar {
	switch x := v.(type) {
	case nil:
		return scalar{}
	case string:
		return scalar{kind: valString, s: x}
	case bool:
		return scalar{kind: valBool, b: x}
	case float64:
		return scalar{kind: valNumber, n: x}
	case float32:
		return scalar{kind: valNumber, n: float64(x)}
	case int:
		return scalar{kind: valNumber, n: float64(x)}
	case int64:
		return scalar{kind: valNumber, n: float64(x)}
	case int32:
		return scalar{kind: valNumber, n: float64(x)}
	case uint64:
		return scalar{kind: valNumber, n: float64(x)}
	case uint32:
		return scalar{kind: valNumber, n: float64(x)}
	case uint:
		return scalar{kind: valNumber, n: float64(x)}
	}
	return scalar{kind: valOther}
}

// holds evaluates the predicate. An absent value satisfies only
// not_exists; ne and not_in are the negations of eq and in over present
// values (so a type mismatch satisfies ne); ordering ops need a number.
func (p *pred) holds(in *Input) bool {
	if p.field == fieldApprovalVerified && (p.op == opExists || p.op == opNotExists) {
		return (in.Approval != nil) == (p.op == opExists)
	}
	v := p.lookup(in)
	switch p.op {
	case opExists:
		return v.kind != valAbsent
	case opNotExists:
		return v.kind == valAbsent
	}
	if v.kind == valAbsent {
		return false
	}
	switch p.op {
	case opEq:
		return v.equal(p.val)
	case opNe:
		return !v.equal(p.val)
	case opLt:
		return v.kind == valNumber && v.n < p.val.n
	case opLe:
		return v.kind == valNumber && v.n <= p.val.n
	case opGt:
		return v.kind == valNumber && v.n > p.val.n
	case opGe:
		return v.kind == valNumber && v.n >= p.val.n
	case opIn:
		return p.set.contains(v)
	case opNotIn:
		return !p.set.contains(v)
	}
	return false
}

// fieldType is what a field holds: valString, valNumber, valBool, or
// valOther for context values (any scalar).
func (f fieldID) fieldType() valKind {
	switch f {
	case fieldAmount, fieldRiskScore, fieldSignalAge, fieldSpend:
		return valNumber
	case fieldApprovalVerified:
		return valBool
	case fieldContext, fieldSignalData:
		return valOther
	}
	return valString
}

// compilePredicate validates p (whose Value is already normalised) and
// compiles it. report is called once per problem with the sub-field.
func compilePredicate(p Predicate, report func(field, msg string)) (pred, bool) {
	var out pred
	ok := true
	bad := func(field, format string, args ...any) {
		ok = false
		report(field, fmt.Sprintf(format, args...))
	}
	if key, isCtx := strings.CutPrefix(p.Field, contextPrefix); isCtx {
		out.field, out.key = fieldContext, key
		switch {
		case key == "":
			bad("field", "context predicates need a key: context.<key>")
		case strings.Contains(key, "."):
			bad("field", "context predicates address top-level keys only (%q); use when for nested values", p.Field)
		}
	} else if rest, isSig := strings.CutPrefix(p.Field, signalsPrefix); isSig {
		var msg string
		out.field, out.sig, out.key, msg = signalField(rest)
		if msg != "" {
			bad("field", "%s (%q)", msg, p.Field)
		}
	} else if rest, isSpend := strings.CutPrefix(p.Field, spendPrefix); isSpend {
		var msg string
		out.field = fieldSpend
		out.sig, out.key, msg = spendField(rest)
		if msg != "" {
			bad("field", "%s (%q)", msg, p.Field)
		}
	} else if f, known := fieldsByName[p.Field]; known {
		out.field = f
	} else {
		bad("field", "unknown field %q", p.Field)
	}
	op, known := opsByName[p.Op]
	if !known {
		bad("op", "unknown op %q (want eq, ne, lt, le, gt, ge, in, not_in, exists, not_exists)", p.Op)
	}
	out.op = op
	if !ok {
		return out, false
	}
	ft := out.field.fieldType()
	switch op {
	case opExists, opNotExists:
		if p.Value != nil {
			bad("value", "op %s takes no value", p.Op)
		}
	case opEq, opNe:
		v, good := operand(p.Value)
		switch {
		case !good:
			bad("value", "op %s needs a string, number or boolean value", p.Op)
		case ft != valOther && v.kind != ft:
			bad("value", "field %s holds a %s; the value is a %s", p.Field, kindName(ft), kindName(v.kind))
		case out.field == fieldMode && !Mode(v.s).Valid():
			bad("value", "mode must be ENFORCEMENT or SHADOW")
		}
		out.val = v
	case opLt, opLe, opGt, opGe:
		v, good := operand(p.Value)
		switch {
		case ft != valNumber && ft != valOther:
			bad("op", "op %s needs a numeric field; %s holds a %s", p.Op, p.Field, kindName(ft))
		case !good || v.kind != valNumber:
			bad("value", "op %s needs a number value", p.Op)
		}
		out.val = v
	case opIn, opNotIn:
		list, isList := p.Value.([]any)
		if !isList || len(list) == 0 {
			bad("value", "op %s needs a non-empty array value", p.Op)
			break
		}
		vs := &valueSet{}
		for i, e := range list {
			v, good := operand(e)
			switch {
			case !good:
				bad(fmt.Sprintf("value[%d]", i), "array elements must be strings, numbers or booleans")
				continue
			case ft != valOther && v.kind != ft:
				bad(fmt.Sprintf("value[%d]", i), "field %s holds a %s; the element is a %s", p.Field, kindName(ft), kindName(v.kind))
				continue
			case out.field == fieldMode && !Mode(v.s).Valid():
				bad(fmt.Sprintf("value[%d]", i), "mode must be ENFORCEMENT or SHADOW")
				continue
			}
			switch v.kind {
			case valString:
				vs.strs = append(vs.strs, v.s)
			case valNumber:
				vs.nums = append(vs.nums, v.n)
			case valBool:
				vs.hasT, vs.hasF = vs.hasT || v.b, vs.hasF || !v.b
			}
		}
		if len(vs.strs) > setMapThreshold {
			vs.strMap = make(map[string]struct{}, len(vs.strs))
			for _, s := range vs.strs {
				vs.strMap[s] = struct{}{}
			}
		}
		out.set = vs
	}
	return out, ok
}

// operand converts a normalised scalar value.
func operand(v any) (scalar, bool) {
	switch x := v.(type) {
	case string:
		return scalar{kind: valString, s: x}, true
	case bool:
		return scalar{kind: valBool, b: x}, true
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return scalar{}, false
		}
		return scalar{kind: valNumber, n: x}, true
	}
	return scalar{}, false
}

func kindName(k valKind) string {
	switch k {
	case valString:
		return "string"
	case valNumber:
		return "number"
	case valBool:
		return "boolean"
	}
	return "value"
}

// normalizeValue maps a predicate value built in Go (ints, []string, …) to
// the shapes JSON decoding produces (float64, string, bool, []any), so that
// the compiled form and the canonical bytes agree. Values it cannot map
// (maps, NaN, …) are returned unchanged and refused by validation.
func normalizeValue(v any) any {
	switch x := v.(type) {
	case nil, string, bool, float64:
		return v
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeValue(e)
		}
		return out
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return float64(rv.Uint())
	case reflect.Float32, reflect.Float64:
		return rv.Float()
	case reflect.String:
		return rv.String()
	case reflect.Bool:
		return rv.Bool()
	case reflect.Slice, reflect.Array:
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = normalizeValue(rv.Index(i).Interface())
		}
		return out
	}
	return v
}

// signalField parses what follows "signals." in a predicate field:
// <type>.data.<key> (a top-level member of the signal's data) or
// <type>.age_seconds. The last segments name the member, so a type may
// hold dots itself; <type>.data.age_seconds is the data member.
func signalField(rest string) (f fieldID, sigType, key, problem string) {
	const want = "signal predicates are signals.<type>.data.<key> or signals.<type>.age_seconds"
	if i := strings.LastIndex(rest, signalDataInfix); i > 0 {
		sigType, key = rest[:i], rest[i+len(signalDataInfix):]
		switch {
		case key == "" || strings.Contains(key, "."):
			return 0, "", "", want + "; data predicates address top-level keys only, use when for nested values"
		case !ValidSignalType(sigType):
			return 0, "", "", "invalid signal type: " + SignalTypeRule
		}
		return fieldSignalData, sigType, key, ""
	}
	if t, ok := strings.CutSuffix(rest, signalAgeSuffix); ok && t != "" {
		if !ValidSignalType(t) {
			return 0, "", "", "invalid signal type: " + SignalTypeRule
		}
		return fieldSignalAge, t, "", ""
	}
	return 0, "", "", want
}
