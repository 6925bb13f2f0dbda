// Package strictjson decodes request bodies the way Clearance hashes and signs
// them: duplicate member names, invalid UTF-8, trailing data and nesting deeper
// than MaxDepth are errors, never silently resolved. Every decode error is an
// *Error so callers can answer 400 with a stable code.
package strictjson

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// MaxDepth is the deepest nesting of arrays and objects accepted.
const MaxDepth = 64

// Error describes why a body was refused.
type Error struct {
	Code   string // stable machine code, e.g. MALFORMED_JSON
	Detail string
}

func (e *Error) Error() string { return e.Code + ": " + e.Detail }

// Codes reported by Decode.
const (
	CodeMalformed     = "MALFORMED_JSON"
	CodeDuplicate     = "DUPLICATE_MEMBER"
	CodeInvalidUTF8   = "INVALID_UTF8"
	CodeTrailingData  = "TRAILING_DATA"
	CodeTooDeep       = "JSON_TOO_DEEP"
	CodeUnknownMember = "UNKNOWN_MEMBER"
	CodeWrongType     = "WRONG_TYPE"
	CodeEmpty         = "EMPTY_BODY"
)

// Options tune one decode.
type Options struct {
	// RejectUnknown refuses members the target struct does not declare.
	RejectUnknown bool
}

// Decode validates raw and unmarshals it into v (a pointer).
func Decode(raw []byte, v any, opts Options) error {
	if err := Validate(raw); err != nil {
		return err
	}
	err := json.Unmarshal(raw, v, json.RejectUnknownMembers(opts.RejectUnknown))
	if err == nil {
		return nil
	}
	return classify(err)
}

// Validate checks raw is exactly one strict JSON value within MaxDepth.
func Validate(raw []byte) error {
	if len(raw) == 0 {
		return &Error{Code: CodeEmpty, Detail: "request body is empty"}
	}
	if d := depth(raw); d > MaxDepth {
		return &Error{Code: CodeTooDeep, Detail: fmt.Sprintf("JSON nesting exceeds %d levels", MaxDepth)}
	}
	dec := jsontext.NewDecoder(bytesReader(raw))
	if _, err := dec.ReadValue(); err != nil {
		return classify(err)
	}
	if _, err := dec.ReadToken(); err == nil {
		return &Error{Code: CodeTrailingData, Detail: "data after the top-level JSON value"}
	} else if !isEOF(err) {
		return &Error{Code: CodeTrailingData, Detail: "data after the top-level JSON value"}
	}
	return nil
}

// depth returns the maximum nesting of raw, ignoring brackets in strings.
func depth(raw []byte) int {
	d, maxD := 0, 0
	inStr, esc := false, false
	for _, c := range raw {
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			d++
			if d > maxD {
				maxD = d
			}
		case c == '}' || c == ']':
			d--
		}
	}
	return maxD
}

func classify(err error) error {
	var se *jsontext.SyntacticError
	var sem *json.SemanticError
	msg := err.Error()
	switch {
	case errors.Is(err, jsontext.ErrDuplicateName):
		return &Error{Code: CodeDuplicate, Detail: trim(msg)}
	case strings.Contains(msg, "invalid UTF-8"):
		return &Error{Code: CodeInvalidUTF8, Detail: trim(msg)}
	case errors.As(err, &sem):
		if sem.Err != nil && errors.Is(sem.Err, json.ErrUnknownName) {
			return &Error{Code: CodeUnknownMember, Detail: trim(msg)}
		}
		var inner *Error
		if errors.As(err, &inner) {
			return inner
		}
		return &Error{Code: CodeWrongType, Detail: trim(msg)}
	case errors.As(err, &se):
		return &Error{Code: CodeMalformed, Detail: trim(msg)}
	}
	var inner *Error
	if errors.As(err, &inner) {
		return inner
	}
	return &Error{Code: CodeMalformed, Detail: trim(msg)}
}

func trim(s string) string {
	for _, p := range []string{"jsontext: ", "json: "} {
		if len(s) > len(p) && s[:len(p)] == p {
			return s[len(p):]
		}
	}
	return s
}
