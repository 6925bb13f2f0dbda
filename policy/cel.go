package policy

import (
	"time"

	"errors"
	"fmt"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/interpreter"
)

// CEL limits. MaxRuleCost bounds one `when` evaluation (cel.CostLimit);
// MaxEvaluationCost bounds the CEL cost of one Evaluate across all rules.
// Exceeding either fails the decision closed.
const (
	MaxRuleCost       = 100_000
	MaxEvaluationCost = 1_000_000
)

// celEnv declares the variables a `when` expression sees. Numbers compare
// across int and double (JSON numbers are doubles), and time accessors use
// UTC, so results never depend on the host.
var celEnv = sync.OnceValues(newCelEnv)

func newCelEnv() (*cel.Env, error) {
	env, err := cel.NewEnv(
		cel.Variable("intent", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("signals", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("spend", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("approval", cel.DynType),
		cel.Variable("federation", cel.ListType(cel.DynType)),
		cel.Variable("now", cel.TimestampType),
		cel.CrossTypeNumericComparisons(true),
		cel.DefaultUTCTimeZone(true),
	)
	if err != nil {
		return nil, err
	}
	// cel-go's checker fills its symbol catalog lazily, on the first
	// undeclared reference, while concurrent checks copy that field
	// unguarded (a data race in cel-go v0.33). Compiling one undeclared
	// name here fills it before the environment is shared.
	env.Compile("clearance_undeclared_warmup")
	return env, nil
}

// compileWhen compiles expr into a cost-limited program and reports
// whether it reads the signals variable. On failure it returns the problem
// message (the CEL issue text for parse/check errors).
func compileWhen(expr string) (prg cel.Program, usesSignals bool, problem string) {
	env, err := celEnv()
	if err != nil {
		return nil, false, "CEL environment: " + err.Error()
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, false, iss.Err().Error()
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) {
		return nil, false, fmt.Sprintf("when must be a bool expression, not %s (compare dyn values explicitly, e.g. `x == true`)", t)
	}
	prg, err = env.Program(ast, cel.CostLimit(MaxRuleCost), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, false, err.Error()
	}
	return prg, referencesSignals(ast), ""
}

// referencesSignals reports whether a checked expression names the signals
// variable: the checker resolves every identifier, so the reference map
// holds it wherever it occurs (macros and comprehensions included).
func referencesSignals(ast *cel.Ast) bool {
	for _, ref := range ast.NativeRep().ReferenceMap() {
		if ref.Name == "signals" {
			return true
		}
	}
	return false
}

var errCostBudget = errors.New("CEL cost budget of one evaluation exceeded")

// evalWhen runs a compiled `when` and returns its value and cost.
func evalWhen(prg cel.Program, act *activation) (bool, uint64, error) {
	out, det, err := prg.Eval(act)
	var cost uint64
	if c := det.ActualCost(); c != nil {
		cost = *c
	}
	if err != nil {
		return false, cost, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, cost, fmt.Errorf("when produced %s, not bool", out.Type())
	}
	return bool(b), cost, nil
}

var emptyMap = map[string]any{}

// activation resolves the CEL variables from an Input. It is built at most
// once per Evaluate, and only when a candidate rule reaches its `when`.
// It keeps what it needs of the Input, never a pointer to it: that would
// make every caller's Input escape to the heap, though only CEL rules need
// anything kept.
type activation struct {
	intent     map[string]any
	signals    map[string]any
	spend      map[string]any // built on first use
	in         spendSource
	now        time.Time
	approval   any
	federation []any
}

func newActivation(in *Input) *activation {
	a := &activation{signals: orEmpty(in.Signals), in: spendSource{in.Spend}, now: in.Now, approval: types.NullValue,
		federation: federationValues(in.Federation)}
	if in.Approval != nil {
		a.approval = map[string]any{
			"verified":    in.Approval.Verified,
			"approver_id": in.Approval.ApproverID,
			"method":      in.Approval.Method,
		}
	}
	m := make(map[string]any, 12+len(in.Extra))
	for k, v := range in.Extra {
		m[k] = v
	}
	m["decision_type"] = in.DecisionType
	m["workflow_key"] = in.WorkflowKey
	m["surface"] = in.Surface
	m["vertical_pack"] = in.VerticalPack
	m["objective_profile"] = in.ObjectiveProfile
	m["mode"] = string(in.RequestedMode)
	m["context"] = orEmpty(in.Context)
	m["actor"] = map[string]any{"id": in.ActorID, "type": in.ActorType}
	action := map[string]any{
		"type":       in.ActionType,
		"currency":   in.Currency,
		"target":     in.ActionTarget,
		"parameters": orEmpty(in.ActionParameters),
	}
	delete(m, "amount")
	delete(m, "risk_score")
	if in.HasAmount {
		m["amount"] = in.Amount
		action["amount"] = in.Amount
	}
	if in.HasRiskScore {
		m["risk_score"] = in.RiskScore
	}
	m["action"] = action
	a.intent = m
	return a
}

// spendSource keeps the spend statuses for the CEL view (a map, never a
// pointer to the Input).
type spendSource struct{ spend map[string]SpendStatus }

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return emptyMap
	}
	return m
}

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "intent":
		return a.intent, true
	case "signals":
		return a.signals, true
	case "spend":
		if a.spend == nil {
			a.spend = spendValue(&Input{Spend: a.in.spend})
		}
		return a.spend, true
	case "approval":
		return a.approval, true
	case "now":
		return a.now, true
	case "federation":
		return a.federation, true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (a *activation) Parent() interpreter.Activation { return nil }
