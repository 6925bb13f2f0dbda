// Package strictjson decodes request bodies the way Clearance hashes and signs
// them: duplicate member names, invalid UTF-8, trailing data, nesting deeper
// than MaxDepth, objects or arrays larger than their limits (Options) and
// U+0000 in any string are errors, never silently resolved. Every decode
// error is an *Error so callers can answer 400 with a stable code.
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

// Defaults of Options. A policy bundle may hold policy.MaxRules (10,000)
// rules, so arrays are allowed as many elements; no object Clearance reads
// needs more than a few dozen members, and a request's free-form context
// stays far below 1,000.
const (
	DefaultMaxMembers  = 1_000
	DefaultMaxElements = 10_000
)

// Error describes why a body was refused.
type Error struct {
	Code   string // stable machine code, e.g. MALFORMED_JSON
	Detail string
	Field  string // JSON pointer of the offending member, when known
}

func (e *Error) Error() string { return e.Code + ": " + e.Detail }

// Codes reported by Decode.
const (
	CodeMalformed       = "MALFORMED_JSON"
	CodeDuplicate       = "DUPLICATE_MEMBER"
	CodeInvalidUTF8     = "INVALID_UTF8"
	CodeTrailingData    = "TRAILING_DATA"
	CodeTooDeep         = "JSON_TOO_DEEP"
	CodeUnknownMember   = "UNKNOWN_MEMBER"
	CodeWrongType       = "WRONG_TYPE"
	CodeEmpty           = "EMPTY_BODY"
	CodeTooManyMembers  = "JSON_TOO_MANY_MEMBERS"
	CodeTooManyElements = "JSON_TOO_MANY_ELEMENTS"
	// CodeNUL: a string (value or member name) holds U+0000, which no
	// name or text Clearance records needs and PostgreSQL text and jsonb
	// cannot hold.
	CodeNUL = "JSON_NUL_CHARACTER"
)

// Options tune one decode.
type Options struct {
	// RejectUnknown refuses members the target struct does not declare.
	RejectUnknown bool
	// MaxMembers bounds the members of any one object; 0 or less means
	// DefaultMaxMembers.
	MaxMembers int
	// MaxElements bounds the elements of any one array; 0 or less means
	// DefaultMaxElements.
	MaxElements int
}

// Limits returns the most members an object and elements an array may
// have under o, defaults applied.
func (o Options) Limits() (members, elements int) {
	members, elements = o.MaxMembers, o.MaxElements
	if members <= 0 {
		members = DefaultMaxMembers
	}
	if elements <= 0 {
		elements = DefaultMaxElements
	}
	return members, elements
}

// A decode target's UnmarshalJSON may fail with an error that has an
// ErrorCode() string method; Decode then reports that code (and the text of
// an ErrorDetail() string method, if it has one).

// Decode validates raw and unmarshals it into v (a pointer). Every body
// Clearance accepts is a JSON object: anything else (null included) is
// refused rather than decoded into a zero value.
//
// An accepted body is parsed once: a byte scan (depth, limits, NUL; no
// allocation) and the unmarshal, whose decoder refuses what Validate
// refuses (bad syntax, duplicate names, invalid UTF-8, trailing data). Only
// a body that is refused is validated again, so that its error is the one
// validating first would report.
func Decode(raw []byte, v any, opts Options) error {
	if len(raw) == 0 {
		return &Error{Code: CodeEmpty, Detail: "request body is empty"}
	}
	members, elements := opts.Limits()
	if tooDeep, limit := scan(raw, members, elements); tooDeep || limit != nil {
		return Validate(raw, opts)
	}
	if first := bytes.TrimLeft(raw, " \t\r\n"); len(first) == 0 || first[0] != '{' {
		if err := Validate(raw, opts); err != nil {
			return err
		}
		return &Error{Code: CodeWrongType, Detail: "the body must be a JSON object"}
	}
	err := json.Unmarshal(raw, v, json.RejectUnknownMembers(opts.RejectUnknown))
	if err == nil {
		return nil
	}
	if verr := Validate(raw, opts); verr != nil {
		return verr
	}
	return classify(err)
}

// Validate checks raw is exactly one strict JSON value within MaxDepth and
// opts' limits, without U+0000 in any string. Problems are reported in this
// order: depth, syntax, then size and NUL.
func Validate(raw []byte, opts Options) error {
	if len(raw) == 0 {
		return &Error{Code: CodeEmpty, Detail: "request body is empty"}
	}
	members, elements := opts.Limits()
	tooDeep, limit := scan(raw, members, elements)
	if tooDeep {
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
	if limit != nil {
		return limit
	}
	return nil
}

// scan reports whether raw nests deeper than MaxDepth and the first object
// with more than maxMembers members, array with more than maxElements
// elements or string with an escaped U+0000 (a raw NUL byte is malformed
// JSON already). It counts the commas of each open container, ignoring
// brackets and commas in strings: exact for valid JSON, which Validate
// checks before it reports a limit. It allocates nothing.
func scan(raw []byte, maxMembers, maxElements int) (tooDeep bool, limit *Error) {
	type container struct {
		commas int
		array  bool
	}
	var stack [MaxDepth]container
	d := 0
	inStr, esc := false, false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
				if c == 'u' && limit == nil && i+4 < len(raw) && string(raw[i+1:i+5]) == "0000" {
					limit = &Error{Code: CodeNUL, Detail: "a string holds U+0000 (NUL)"}
				}
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			if d == MaxDepth {
				return true, limit
			}
			stack[d] = container{array: c == '['}
			d++
		case c == '}' || c == ']':
			if d > 0 {
				d--
			}
		case c == ',' && d > 0 && limit == nil:
			top := &stack[d-1]
			top.commas++ // at least commas+1 entries
			switch {
			case top.array && top.commas >= maxElements:
				limit = &Error{Code: CodeTooManyElements, Detail: fmt.Sprintf("a JSON array has more than %d elements", maxElements)}
			case !top.array && top.commas >= maxMembers:
				limit = &Error{Code: CodeTooManyMembers, Detail: fmt.Sprintf("a JSON object has more than %d members", maxMembers)}
			}
		}
	}
	return false, limit
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
