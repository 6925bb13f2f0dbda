package lincheck

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/clearancehq/clearance/claim"
)

// Spend-control gates couple grants: every grant of a history charges the
// same budget, so a history is one partition, checked against this
// sequential model of all its grants at once:
//
//	claim(g)        ISSUED and the budget holds its amount -> CLAIMED(t), answer {ok, t}
//	                otherwise unchanged, answer {refused}
//	finalize(g,t,o) as in the grant model; FAILED frees the amount, COMMITTED
//	                and INDETERMINATE keep it used (an unknown outcome never
//	                frees budget)
//
// with every grant costing one unit of a budget of spendUnits units.

// budgetState is every grant's state (grants not named are ISSUED).
type budgetState map[string]linState

// used is how many units the budget has spent or reserved.
func (s budgetState) used() int {
	n := 0
	for _, g := range s {
		switch g.Phase {
		case claim.StateClaimed, claim.StateCommitted, claim.StateIndeterminate:
			n++
		}
	}
	return n
}

func (s budgetState) with(grant string, g linState) budgetState {
	out := maps.Clone(s)
	out[grant] = g
	return out
}

func (s budgetState) of(grant string) linState {
	if g, ok := s[grant]; ok {
		return g
	}
	return linState{Phase: claim.StateIssued}
}

// budgetModel is the model of grants sharing a budget of units.
func budgetModel(units int) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return budgetState{} },
		Step: func(state, input, output any) (bool, any) {
			s, in, out := state.(budgetState), input.(linInput), output.(linOutput)
			g := s.of(in.Grant)
			if in.Op == opClaim && g.Phase == claim.StateIssued && s.used() >= units {
				// No room: the claim can only be refused (or, if its
				// answer was lost, have done nothing).
				return out.Answer != answerOK, s
			}
			ok, next := step(g, in, out)
			return ok, s.with(in.Grant, next)
		},
		Equal: func(a, b any) bool {
			x, y := a.(budgetState), b.(budgetState)
			for _, k := range slices.Concat(slices.Collect(maps.Keys(x)), slices.Collect(maps.Keys(y))) {
				if x.of(k) != y.of(k) {
					return false
				}
			}
			return true
		},
		DescribeOperation: grantModel.DescribeOperation,
		DescribeState: func(state any) string {
			s := state.(budgetState)
			var parts []string
			for _, k := range slices.Sorted(maps.Keys(s)) {
				parts = append(parts, short(k)+"="+grantModel.DescribeState(s[k]))
			}
			return fmt.Sprintf("used %d: %s", s.used(), strings.Join(parts, ", "))
		},
	}
}

// spendUnits is how many of a history's grants the budget of spendBundle
// holds: 300 EUR, grants of 100 EUR (engineSys.issue).
const spendUnits = 3

const spendBundle = `{"bundle_id":"lin","version":"v1","mode":"ENFORCEMENT",
 "spend_gates":[{"id":"refunds","workflow_keys":["refunds"],"currency":"EUR","limit":"300","window":"DAY","per_actor":true}],
 "rules":[],"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`

// spendConfig records histories of 8 grants sharing one budget of 3; the
// gate keeps a budget per actor, and each history's grants have an actor
// of their own (engineSys.freshActor), so each starts with an unused one.
//
// A history is one partition, so the checker's search grows with its
// length and with the operations whose answer was lost: histories are
// shorter (48 operations) and cancel less often than the grant model's.
func spendConfig(t testing.TB) config {
	cfg := defaultConfig(t)
	cfg.clients, cfg.grants, cfg.perClient, cfg.cancelP = 8, 6, 6, 0.05
	m := budgetModel(spendUnits)
	cfg.model = &m
	return cfg
}

// TestLinSpendModel checks the budget model on hand-written histories.
func TestLinSpendModel(t *testing.T) {
	const inf = math.MaxInt64
	claimOp := func(c int, g string, call, ret int64, a answer, tok string) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: linInput{Op: opClaim, Grant: g}, Call: call, Return: ret,
			Output: linOutput{Answer: a, Token: tok}}
	}
	finOp := func(c int, g, tok string, o claim.Outcome, call, ret int64, a answer) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: linInput{Op: opFinalize, Grant: g, Token: tok, Outcome: o},
			Call: call, Return: ret, Output: linOutput{Answer: a}}
	}
	model := budgetModel(2)
	cases := []struct {
		name  string
		ops   []porcupine.Operation
		legal bool
	}{
		{"two fit", []porcupine.Operation{claimOp(0, "a", 0, 10, answerOK, "ta"), claimOp(1, "b", 0, 10, answerOK, "tb")}, true},
		{"three concurrent claims of a budget of two all run", []porcupine.Operation{
			claimOp(0, "a", 0, 10, answerOK, "ta"), claimOp(1, "b", 0, 10, answerOK, "tb"), claimOp(2, "c", 0, 10, answerOK, "tc")}, false},
		{"a refusal while the budget had room", []porcupine.Operation{claimOp(0, "a", 0, 10, answerRefused, "")}, false},
		{"full, then refused", []porcupine.Operation{claimOp(0, "a", 0, 10, answerOK, "ta"), claimOp(1, "b", 0, 10, answerOK, "tb"),
			claimOp(2, "c", 20, 30, answerRefused, "")}, true},
		{"FAILED frees", []porcupine.Operation{claimOp(0, "a", 0, 10, answerOK, "ta"), claimOp(1, "b", 0, 10, answerOK, "tb"),
			finOp(0, "a", "ta", claim.OutcomeFailed, 20, 30, answerOK), claimOp(2, "c", 40, 50, answerOK, "tc")}, true},
		{"INDETERMINATE holds", []porcupine.Operation{claimOp(0, "a", 0, 10, answerOK, "ta"), claimOp(1, "b", 0, 10, answerOK, "tb"),
			finOp(0, "a", "ta", claim.OutcomeIndeterminate, 20, 30, answerOK), claimOp(2, "c", 40, 50, answerOK, "tc")}, false},
		{"COMMITTED keeps it spent", []porcupine.Operation{claimOp(0, "a", 0, 10, answerOK, "ta"), claimOp(1, "b", 0, 10, answerOK, "tb"),
			finOp(0, "a", "ta", claim.OutcomeCommitted, 20, 30, answerOK), claimOp(2, "c", 40, 50, answerOK, "tc")}, false},
		{"a lost claim may hold budget", []porcupine.Operation{claimOp(0, "a", 0, inf, answerUnknown, ""), claimOp(1, "b", 0, 10, answerOK, "tb"),
			claimOp(2, "c", 20, 30, answerRefused, "")}, true},
		{"a lost claim may hold none", []porcupine.Operation{claimOp(0, "a", 0, inf, answerUnknown, ""), claimOp(1, "b", 0, 10, answerOK, "tb"),
			claimOp(2, "c", 20, 30, answerOK, "tc")}, true},
		{"a refused claim while a FAILED freed room concurrently", []porcupine.Operation{
			claimOp(0, "a", 0, 10, answerOK, "ta"), claimOp(1, "b", 0, 10, answerOK, "tb"),
			finOp(0, "a", "ta", claim.OutcomeFailed, 20, 40, answerOK), claimOp(2, "c", 25, 35, answerRefused, "")}, true},
	}
	for _, c := range cases {
		res := porcupine.CheckOperationsTimeout(model, c.ops, 10*time.Second)
		if want := map[bool]porcupine.CheckResult{true: porcupine.Ok, false: porcupine.Illegal}[c.legal]; res != want {
			t.Errorf("%s: %s, want %s", c.name, res, want)
		}
	}
}

// newSpendSys is an engine whose org spends within spendBundle's gate.
func newSpendSys(t testing.TB, x *engineSys) *engineSys {
	x.freshActor = true
	return x
}

// TestLinSpendPebble: claims and finalizations of grants sharing a budget,
// in-process over Pebble, never run more than the budget holds.
func TestLinSpendPebble(t *testing.T) {
	x := newSpendSys(t, newEngineSysWith(t, openPebble(t), spendBundle))
	s := runLin(t, x, spendConfig(t))
	x.requireNoSurprises(t)
	wantExercised(t, s)
}

// TestLinSpendPostgres: the same over PostgreSQL.
func TestLinSpendPostgres(t *testing.T) {
	x := newSpendSys(t, newEngineSysWith(t, openPostgres(t), spendBundle))
	s := runLin(t, x, spendConfig(t))
	x.requireNoSurprises(t)
	wantExercised(t, s)
}
