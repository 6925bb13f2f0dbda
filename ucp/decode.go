package ucp

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"

	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/go-json-experiment/json/jsontext"
)

// Number literals are bounded before any validator sees them: math/big
// (which jsonschema uses to compare numbers) takes tens of milliseconds for
// one literal such as 1e-999999, and RFC 8785 is defined over I-JSON only.
const (
	maxNumberLen      = 64  // characters of one number literal
	maxNumberExponent = 400 // magnitude of an explicit exponent
)

// syntaxError is a refusal of the bytes themselves; callers give it their code.
type syntaxError struct {
	pointer, detail string
}

// decodeTree decodes one strict JSON value (house rules of
// internal/strictjson: no duplicate names, valid UTF-8, no U+0000, depth at
// most 64, no trailing data) into map[string]any, []any, string,
// json.Number (the literal as written), bool and nil.
func decodeTree(raw []byte) (any, *syntaxError) {
	if err := strictjson.Validate(raw, strictjson.Options{}); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) {
			return nil, &syntaxError{pointer: se.Field, detail: se.Detail}
		}
		return nil, &syntaxError{detail: err.Error()}
	}
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	v, serr := readTree(dec)
	if serr != nil {
		return nil, serr
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, &syntaxError{detail: "data after the top-level JSON value"}
	}
	return v, nil
}

func readTree(dec *jsontext.Decoder) (any, *syntaxError) {
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, &syntaxError{pointer: string(dec.StackPointer()), detail: trimJSONError(err)}
	}
	switch tok.Kind() {
	case '{':
		obj := map[string]any{}
		for dec.PeekKind() != '}' {
			tok, err := dec.ReadToken()
			if err != nil {
				return nil, &syntaxError{pointer: string(dec.StackPointer()), detail: trimJSONError(err)}
			}
			name := tok.String() // before the next read voids tok
			v, serr := readTree(dec)
			if serr != nil {
				return nil, serr
			}
			obj[name] = v
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, &syntaxError{pointer: string(dec.StackPointer()), detail: trimJSONError(err)}
		}
		return obj, nil
	case '[':
		arr := []any{}
		for dec.PeekKind() != ']' {
			v, serr := readTree(dec)
			if serr != nil {
				return nil, serr
			}
			arr = append(arr, v)
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, &syntaxError{pointer: string(dec.StackPointer()), detail: trimJSONError(err)}
		}
		return arr, nil
	case '"':
		return tok.String(), nil
	case '0':
		lit := tok.String()
		if detail := checkNumber(lit); detail != "" {
			return nil, &syntaxError{pointer: string(dec.StackPointer()), detail: detail}
		}
		return json.Number(lit), nil
	case 't':
		return true, nil
	case 'f':
		return false, nil
	case 'n':
		return nil, nil
	}
	return nil, &syntaxError{pointer: string(dec.StackPointer()), detail: "unexpected JSON token"}
}

// checkNumber returns why the valid JSON number lit is refused, or "".
func checkNumber(lit string) string {
	if len(lit) > maxNumberLen {
		return "number literal longer than " + strconv.Itoa(maxNumberLen) + " characters"
	}
	for i := 0; i < len(lit); i++ {
		if lit[i] == 'e' || lit[i] == 'E' {
			exp := lit[i+1:]
			if exp != "" && (exp[0] == '+' || exp[0] == '-') {
				exp = exp[1:]
			}
			// At most 62 digits: compare by value once leading zeros are gone.
			for len(exp) > 1 && exp[0] == '0' {
				exp = exp[1:]
			}
			if n, err := strconv.Atoi(exp); err != nil || n > maxNumberExponent {
				return "number exponent beyond ±" + strconv.Itoa(maxNumberExponent)
			}
			break
		}
	}
	if _, err := strconv.ParseFloat(lit, 64); err != nil {
		return "number beyond the range of an IEEE 754 double (I-JSON)"
	}
	return ""
}

func trimJSONError(err error) string {
	s := err.Error()
	for _, p := range []string{"jsontext: ", "json: "} {
		if len(s) > len(p) && s[:len(p)] == p {
			return s[len(p):]
		}
	}
	return s
}

// marshalCanonical writes a tree from decodeTree in RFC 8785 form.
func marshalCanonical(v any) ([]byte, error) {
	raw, err := json.Marshal(v) // json.Number keeps its literal
	if err != nil {
		return nil, err
	}
	return canon.Transform(raw)
}
