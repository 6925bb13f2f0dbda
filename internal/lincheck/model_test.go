package lincheck

import (
	"fmt"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/clearancehq/clearance/claim"
)

// opKind is the operation of a history entry.
type opKind uint8

const (
	opClaim opKind = iota
	opFinalize
)

// linInput is what a client asked: claim(grant), or finalize(grant, token,
// outcome).
type linInput struct {
	Op      opKind
	Grant   string
	Token   string        // finalize: the claim token presented
	Outcome claim.Outcome // finalize: the outcome reported
}

// answer is how an operation ended, as the client saw it.
type answer uint8

const (
	answerOK answer = iota
	answerRefused
	answerUnknown // the answer was lost: may or may not have taken effect
)

func (a answer) String() string {
	return [...]string{"ok", "refused", "unknown"}[a]
}

// linOutput is the answer: {ok, token} for a claim, {ok} for a finalize,
// {refused}, or unknown.
type linOutput struct {
	Answer answer
	Token  string // claim ok: the claim token handed out
}

// linState is one grant's lifecycle state. It is comparable, so porcupine's
// default equality works.
type linState struct {
	Phase claim.State
	Token string // the claim token of a CLAIMED (or finalized) grant
}

// lostToken is the token of a claim whose answer was lost: no client knows
// it, so no finalize presents it.
const lostToken = "<lost>"

// step is the sequential specification of one grant (see the package doc).
func step(st linState, in linInput, out linOutput) (bool, linState) {
	switch in.Op {
	case opClaim:
		can := st.Phase == claim.StateIssued
		switch out.Answer {
		case answerUnknown:
			if can {
				return true, linState{Phase: claim.StateClaimed, Token: lostToken}
			}
			return true, st
		case answerOK:
			if !can || out.Token == "" || out.Token == lostToken {
				return false, st
			}
			return true, linState{Phase: claim.StateClaimed, Token: out.Token}
		default:
			return !can, st
		}
	case opFinalize:
		can := st.Phase == claim.StateClaimed && in.Token != "" && in.Token == st.Token && validOutcome(in.Outcome)
		next := linState{Phase: claim.State(in.Outcome), Token: st.Token}
		switch out.Answer {
		case answerUnknown:
			if can {
				return true, next
			}
			return true, st
		case answerOK:
			return can, next
		default:
			return !can, st
		}
	}
	return false, st
}

func validOutcome(o claim.Outcome) bool {
	return o == claim.OutcomeCommitted || o == claim.OutcomeFailed || o == claim.OutcomeIndeterminate
}

// grantModel is the porcupine model of one grant's lifecycle; a history of
// several grants is partitioned by grant.
var grantModel = porcupine.Model{
	Partition: partitionByGrant,
	Init:      func() any { return linState{Phase: claim.StateIssued} },
	Step: func(state, input, output any) (bool, any) {
		return step(state.(linState), input.(linInput), output.(linOutput))
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		res := out.Answer.String()
		if in.Op == opClaim {
			if out.Answer == answerOK {
				res += ", " + short(out.Token)
			}
			return fmt.Sprintf("claim(%s) → %s", short(in.Grant), res)
		}
		return fmt.Sprintf("finalize(%s, %s, %s) → %s", short(in.Grant), short(in.Token), in.Outcome, res)
	},
	DescribeState: func(state any) string {
		s := state.(linState)
		if s.Phase == claim.StateIssued {
			return string(s.Phase)
		}
		return fmt.Sprintf("%s(%s)", s.Phase, short(s.Token))
	},
}

// short abbreviates ids and tokens for the visualization.
func short(s string) string {
	if len(s) > 18 {
		return s[:8] + "…" + s[len(s)-6:]
	}
	return s
}

func partitionByGrant(history []porcupine.Operation) [][]porcupine.Operation {
	byGrant := map[string][]porcupine.Operation{}
	for _, op := range history {
		g := op.Input.(linInput).Grant
		byGrant[g] = append(byGrant[g], op)
	}
	keys := make([]string, 0, len(byGrant))
	for k := range byGrant {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, byGrant[k])
	}
	return out
}

// TestLinModel checks the model on hand-written histories, legal and not.
func TestLinModel(t *testing.T) {
	const inf = math.MaxInt64
	claimOp := func(c int, g string, call, ret int64, a answer, tok string) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: linInput{Op: opClaim, Grant: g}, Call: call, Return: ret,
			Output: linOutput{Answer: a, Token: tok}}
	}
	finOp := func(c int, g, tok string, call, ret int64, a answer) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: linInput{Op: opFinalize, Grant: g, Token: tok, Outcome: claim.OutcomeCommitted},
			Call: call, Return: ret, Output: linOutput{Answer: a}}
	}
	cases := []struct {
		name  string
		ops   []porcupine.Operation
		legal bool
	}{
		{"cycle", []porcupine.Operation{claimOp(0, "g", 0, 10, answerOK, "t1"), finOp(0, "g", "t1", 20, 30, answerOK)}, true},
		{"concurrent claims, one wins", []porcupine.Operation{
			claimOp(0, "g", 0, 10, answerOK, "t1"), claimOp(1, "g", 1, 9, answerRefused, "")}, true},
		{"two claims succeed", []porcupine.Operation{
			claimOp(0, "g", 0, 10, answerOK, "t1"), claimOp(1, "g", 1, 9, answerOK, "t2")}, false},
		{"two grants, one claim each", []porcupine.Operation{
			claimOp(0, "g", 0, 10, answerOK, "t1"), claimOp(1, "h", 1, 9, answerOK, "t2")}, true},
		{"refused claim of an issued grant", []porcupine.Operation{claimOp(0, "g", 0, 10, answerRefused, "")}, false},
		{"finalize with a wrong token succeeds", []porcupine.Operation{
			claimOp(0, "g", 0, 10, answerOK, "t1"), finOp(0, "g", "bad", 20, 30, answerOK)}, false},
		{"finalized twice", []porcupine.Operation{claimOp(0, "g", 0, 10, answerOK, "t1"),
			finOp(0, "g", "t1", 20, 30, answerOK), finOp(1, "g", "t1", 21, 31, answerOK)}, false},
		{"finalize before claim answered, concurrently", []porcupine.Operation{
			claimOp(0, "g", 0, 10, answerOK, "t1"), finOp(1, "g", "t1", 5, 15, answerOK)}, true},
		{"lost claim may have happened", []porcupine.Operation{
			claimOp(0, "g", 0, inf, answerUnknown, ""), claimOp(1, "g", 20, 30, answerRefused, "")}, true},
		{"lost claim may not have happened", []porcupine.Operation{
			claimOp(0, "g", 0, inf, answerUnknown, ""), claimOp(1, "g", 20, 30, answerOK, "t1"),
			finOp(1, "g", "t1", 40, 50, answerOK)}, true},
		{"lost claim cannot excuse a refusal before it", []porcupine.Operation{
			claimOp(1, "g", 0, 5, answerRefused, ""), claimOp(0, "g", 10, inf, answerUnknown, "")}, false},
		{"lost finalize then refused", []porcupine.Operation{claimOp(0, "g", 0, 10, answerOK, "t1"),
			finOp(0, "g", "t1", 20, inf, answerUnknown), finOp(1, "g", "t1", 30, 40, answerRefused)}, true},
		{"lost finalize did not happen", []porcupine.Operation{claimOp(0, "g", 0, 10, answerOK, "t1"),
			finOp(0, "g", "t1", 20, inf, answerUnknown), finOp(1, "g", "t1", 30, 40, answerOK)}, true},
	}
	for _, c := range cases {
		res := porcupine.CheckOperationsTimeout(grantModel, c.ops, 10*time.Second)
		if want := map[bool]porcupine.CheckResult{true: porcupine.Ok, false: porcupine.Illegal}[c.legal]; res != want {
			t.Errorf("%s: %s, want %s", c.name, res, want)
		}
	}
}
