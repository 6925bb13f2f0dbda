package policy

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Match them with errors.Is; the typed errors below carry
// the details.
var (
	// ErrInvalidBundle is matched by every *ValidationError: the bundle is
	// well-formed JSON but semantically wrong (callers answer 422).
	ErrInvalidBundle = errors.New("policy: invalid bundle")
	// ErrInvalidInput is matched by every *InputError: the request is
	// refused before evaluation (callers answer 400).
	ErrInvalidInput = errors.New("policy: invalid input")
	// ErrEvaluation is matched by every *EvalError, the Err of a Decision
	// that failed closed.
	ErrEvaluation = errors.New("policy: evaluation failed")
)

// Problem is one semantic defect of a bundle.
type Problem struct {
	RuleID  string `json:"rule_id,omitempty"`
	Field   string `json:"field"` // JSON path, e.g. "rules[2].match[0].value"
	Message string `json:"message"`
}

// ValidationError lists every problem found in a bundle, in document order
// (at most maxProblems, the last one then saying how many were left out).
type ValidationError struct {
	Problems []Problem
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString(ErrInvalidBundle.Error())
	for i, p := range e.Problems {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(e.Problems)-3)
			break
		}
		b.WriteString("; ")
		if p.RuleID != "" {
			fmt.Fprintf(&b, "rule %q: ", p.RuleID)
		}
		if p.Field != "" {
			b.WriteString(p.Field)
			b.WriteString(": ")
		}
		b.WriteString(p.Message)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrInvalidBundle) true.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalidBundle }

// Input error codes.
const (
	CodeInvalidAmount    = "INVALID_AMOUNT"
	CodeInvalidRiskScore = "INVALID_RISK_SCORE"
	CodeInvalidMode      = "INVALID_MODE"
	CodeAmountConflict   = "AMOUNT_CONFLICT"
)

// InputError reports a request that cannot be evaluated.
type InputError struct {
	Code    string // stable machine code, e.g. INVALID_AMOUNT
	Field   string // wire path of the offending member, e.g. "action.amount"
	Message string
}

func (e *InputError) Error() string {
	return "policy: " + e.Code + ": " + e.Field + ": " + e.Message
}

// Is makes errors.Is(err, ErrInvalidInput) true.
func (e *InputError) Is(target error) bool { return target == ErrInvalidInput }

// ErrorCode lets strictjson report an InputError raised inside a decode
// (Amount.UnmarshalJSON in a request struct) with its own code.
func (e *InputError) ErrorCode() string { return e.Code }

// ErrorDetail is the message without the package and code prefixes.
func (e *InputError) ErrorDetail() string { return e.Message }

// EvalError is the Err of a Decision that failed closed.
type EvalError struct {
	RuleID string // the rule being evaluated, "" when the input itself was refused
	Err    error
}

func (e *EvalError) Error() string {
	if e.RuleID == "" {
		return ErrEvaluation.Error() + ": " + e.Err.Error()
	}
	return fmt.Sprintf("%s: rule %q: %v", ErrEvaluation.Error(), e.RuleID, e.Err)
}

// Unwrap returns ErrEvaluation and the cause.
func (e *EvalError) Unwrap() []error { return []error{ErrEvaluation, e.Err} }
