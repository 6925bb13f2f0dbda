// Package strictjson decodes request bodies the way Clearance hashes and signs
// them: duplicate member names, invalid UTF-8, trailing data and nesting deeper
// than MaxDepth are errors, never silently resolved. Every decode error is an
// *Error so callers can answer 400 with a stable code.
package strictjson

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strconv"
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
	Field  string // JSON pointer of the offending member, when known
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

// A decode target's UnmarshalJSON may fail with an error that has an
// ErrorCode() string method; Decode then reports that code (and the text of
// an ErrorDetail() string method, if it has one).

// Decode validates raw and unmarshals it into v (a pointer). Every body
// Clearance accepts is a JSON object: anything else (null included) is
// refused rather than decoded into a zero value.
func Decode(raw []byte, v any, opts Options) error {
	if err := Validate(raw); err != nil {
		return err
	}
	if first := bytes.TrimLeft(raw, " \t\r\n"); first[0] != '{' {
		return &Error{Code: CodeWrongType, Detail: "the body must be a JSON object"}
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
	var inner *Error
	if errors.As(err, &inner) {
		return inner
	}
	var se *jsontext.SyntacticError
	var sem *json.SemanticError
	var coded interface {
		error
		ErrorCode() string
	}
	msg := err.Error()
	switch {
	case errors.As(err, &coded):
		// An UnmarshalJSON method's own verdict (e.g. INVALID_AMOUNT).
		field := ""
		if errors.As(err, &sem) {
			field = string(sem.JSONPointer)
		}
		detail := coded.Error()
		var d interface{ ErrorDetail() string }
		if errors.As(err, &d) {
			detail = d.ErrorDetail()
		}
		return &Error{Code: coded.ErrorCode(), Detail: detail, Field: field}
	case errors.Is(err, jsontext.ErrDuplicateName):
		return &Error{Code: CodeDuplicate, Detail: trim(msg), Field: pointerOf(err)}
	case strings.Contains(msg, "invalid UTF-8"):
		return &Error{Code: CodeInvalidUTF8, Detail: trim(msg), Field: pointerOf(err)}
	case errors.As(err, &sem):
		field := string(sem.JSONPointer)
		if sem.Err != nil && errors.Is(sem.Err, json.ErrUnknownName) {
			return &Error{Code: CodeUnknownMember, Detail: "unknown " + quoteField(field), Field: field}
		}
		want := "another type"
		if sem.GoType != nil {
			want = kindName(sem.GoType.Kind())
		}
		got := "JSON value"
		if sem.JSONKind != 0 {
			got = "JSON " + sem.JSONKind.String()
		}
		return &Error{Code: CodeWrongType, Detail: fmt.Sprintf("%s must be %s, got %s", quoteField(field), want, got), Field: field}
	case errors.As(err, &se):
		return &Error{Code: CodeMalformed, Detail: trim(msg), Field: string(se.JSONPointer)}
	}
	return &Error{Code: CodeMalformed, Detail: trim(msg)}
}

func pointerOf(err error) string {
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		return string(se.JSONPointer)
	}
	return ""
}

func quoteField(ptr string) string {
	if ptr == "" {
		return "the body"
	}
	return "member " + strconv.Quote(ptr)
}

func kindName(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8,
		reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "another type"
}

func trim(s string) string {
	for _, p := range []string{"jsontext: ", "json: "} {
		if len(s) > len(p) && s[:len(p)] == p {
			return s[len(p):]
		}
	}
	return s
}
