package capsule

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/clearancehq/clearance/internal/canon"
)

// ID is a Capsule ID: SHA-256 over the capsule's identity preimage. In
// capsule JSON it is 64 lowercase hex digits; in a Producer Envelope it is
// the raw 32-byte payload.
type ID [32]byte

// String returns the 64 lowercase hex digits of id.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// MarshalText encodes id as 64 lowercase hex digits.
func (id ID) MarshalText() ([]byte, error) {
	b := make([]byte, 64)
	hex.Encode(b, id[:])
	return b, nil
}

// UnmarshalText parses 64 lowercase hex digits.
func (id *ID) UnmarshalText(b []byte) error {
	p, err := ParseID(string(b))
	if err != nil {
		return err
	}
	*id = p
	return nil
}

// ParseID parses a capsule_id: exactly 64 lowercase hex digits.
func ParseID(s string) (ID, error) {
	var id ID
	if !isHex64(s) {
		return id, fmt.Errorf("capsule: capsule_id %q is not 64 lowercase hex digits", s)
	}
	_, _ = hex.Decode(id[:], []byte(s))
	return id, nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func isHex64Value(v any) bool {
	s, ok := v.(string)
	return ok && isHex64(s)
}

// ComputeID recomputes the Capsule ID of raw capsule JSON, ignoring the
// capsule_id it carries (draft §5.1, §6 check 2). The identity path is
// chosen by canonicalization_id:
//
//   - "jcs" (format 4): SHA-256 over plain RFC 8785 JCS of the capsule with
//     only capsule_id removed; chain, null, empty arrays and empty objects
//     participate.
//   - absent (vintage format 2): capsule_id and chain removed, members whose
//     value is null, [] or {} removed bottom-up, then JCS and SHA-256.
//   - anything else (jcs-n, unknown, empty, null, non-string): no ID.
//
// It fails with ErrUncomputableID for input that is not one strict JSON
// object (duplicate member names, invalid UTF-8, trailing data, nesting
// beyond 64), or that holds a floating-point number or an integer outside
// ±(2^53−1) anywhere. ComputeID does not check anything else; Verify does.
func ComputeID(raw []byte) (ID, error) {
	v, err := parseJSON(raw)
	if err != nil {
		return ID{}, fmt.Errorf("%w: %v", ErrUncomputableID, err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return ID{}, fmt.Errorf("%w: capsule is not a JSON object", ErrUncomputableID)
	}
	if p := numberProblems(obj); len(p) > 0 {
		return ID{}, fmt.Errorf("%w: %s at %s", ErrUncomputableID, p[0].what, p[0].path)
	}
	return identity(obj)
}

// identity computes the ID of a parsed capsule whose numbers are known to be
// safe integers.
func identity(obj map[string]any) (ID, error) {
	var pre map[string]any
	switch cid, present := obj["canonicalization_id"]; {
	case !present:
		pre = normalize(without(obj, "capsule_id", "chain"))
	case cid == CanonicalizationJCS:
		pre = without(obj, "capsule_id")
	default:
		if s, ok := cid.(string); ok {
			return ID{}, fmt.Errorf("%w: unsupported canonicalization_id %q", ErrUncomputableID, s)
		}
		return ID{}, fmt.Errorf("%w: canonicalization_id is not a string", ErrUncomputableID)
	}
	raw, err := appendTree(make([]byte, 0, 1024), pre)
	if err != nil {
		return ID{}, fmt.Errorf("%w: %v", ErrUncomputableID, err)
	}
	c, err := canon.Transform(raw)
	if err != nil {
		return ID{}, fmt.Errorf("%w: %v", ErrUncomputableID, err)
	}
	return sha256.Sum256(c), nil
}

// without returns a shallow copy of obj minus the named members.
func without(obj map[string]any, names ...string) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	for _, n := range names {
		delete(out, n)
	}
	return out
}

// normalize is the withdrawn jcs-n absent-field normalization of vintage
// format 2: in every object, bottom-up, drop members whose value is null,
// an empty array or an empty object (after normalization). Array elements
// are normalized but never dropped.
func normalize(v map[string]any) map[string]any {
	out := make(map[string]any, len(v))
	for k, x := range v {
		n := normalizeValue(x)
		switch t := n.(type) {
		case nil:
			continue
		case map[string]any:
			if len(t) == 0 {
				continue
			}
		case []any:
			if len(t) == 0 {
				continue
			}
		}
		out[k] = n
	}
	return out
}

func normalizeValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return normalize(t)
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = normalizeValue(x)
		}
		return out
	}
	return v
}

// number is a JSON number literal exactly as written.
type number string

// maxDepth bounds nesting, as for every JSON body Clearance accepts.
const maxDepth = 64

// maxSafeInteger is 2^53−1, the largest integer every IEEE-754-double JSON
// reader round-trips exactly.
const maxSafeInteger = 1<<53 - 1

var errTooDeep = errors.New("JSON nested deeper than 64")

// parseJSON decodes exactly one strict JSON value: no duplicate member
// names, valid UTF-8, nothing but whitespace after it, nesting at most 64.
// Objects become map[string]any, arrays []any, numbers number.
func parseJSON(raw []byte) (any, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	v, err := readValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		if err == nil {
			return nil, errors.New("trailing data after the JSON value")
		}
		return nil, err
	}
	return v, nil
}

func readValue(dec *jsontext.Decoder, depth int) (any, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		if err == io.EOF {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	switch tok.Kind() {
	case jsontext.KindNull:
		return nil, nil
	case jsontext.KindTrue:
		return true, nil
	case jsontext.KindFalse:
		return false, nil
	case jsontext.KindString:
		return tok.String(), nil
	case jsontext.KindNumber:
		return number(tok.String()), nil
	case jsontext.KindBeginObject:
		if depth >= maxDepth {
			return nil, errTooDeep
		}
		obj := map[string]any{}
		for dec.PeekKind() != jsontext.KindEndObject {
			k, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			name := k.String()
			v, err := readValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			obj[name] = v
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		return obj, nil
	case jsontext.KindBeginArray:
		if depth >= maxDepth {
			return nil, errTooDeep
		}
		arr := []any{}
		for dec.PeekKind() != jsontext.KindEndArray {
			v, err := readValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		return arr, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok.Kind())
}

// appendTree appends v as JSON (member order as the map iterates; the
// caller canonicalizes). Strings were valid UTF-8 when parsed.
func appendTree(dst []byte, v any) ([]byte, error) {
	var err error
	switch t := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		if t {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case string:
		return jsontext.AppendQuote(dst, t)
	case number:
		return append(dst, t...), nil
	case map[string]any:
		dst = append(dst, '{')
		first := true
		for k, x := range t {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			if dst, err = jsontext.AppendQuote(dst, k); err != nil {
				return nil, err
			}
			dst = append(dst, ':')
			if dst, err = appendTree(dst, x); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	case []any:
		dst = append(dst, '[')
		for i, x := range t {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = appendTree(dst, x); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	}
	return nil, fmt.Errorf("capsule: cannot encode %T", v)
}

// numberProblem is a float or unsafe integer found at path.
type numberProblem struct {
	path  string
	float bool
	what  string
}

// numberProblems lists every number that may not appear in digest-bearing
// material (draft §2): floating-point literals (any '.', 'e' or 'E') and
// integers outside ±(2^53−1). Paths are reported in sorted member order so
// findings are deterministic.
func numberProblems(v any) []numberProblem {
	if !hasNumberProblem(v) {
		return nil
	}
	var out []numberProblem
	walkNumbers(v, "", &out)
	return out
}

// hasNumberProblem is the allocation-free test behind numberProblems.
func hasNumberProblem(v any) bool {
	switch t := v.(type) {
	case number:
		return badNumber(string(t))
	case map[string]any:
		for _, x := range t {
			if hasNumberProblem(x) {
				return true
			}
		}
	case []any:
		for _, x := range t {
			if hasNumberProblem(x) {
				return true
			}
		}
	}
	return false
}

func badNumber(s string) bool {
	if strings.ContainsAny(s, ".eE") {
		return true
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return err != nil || n > maxSafeInteger || n < -maxSafeInteger
}

func walkNumbers(v any, path string, out *[]numberProblem) {
	switch t := v.(type) {
	case number:
		s := string(t)
		if strings.ContainsAny(s, ".eE") {
			*out = append(*out, numberProblem{path: orRoot(path), float: true, what: "floating-point value"})
			return
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n > maxSafeInteger || n < -maxSafeInteger {
			*out = append(*out, numberProblem{path: orRoot(path), what: "integer outside the safe range ±9007199254740991"})
		}
	case map[string]any:
		for _, k := range sortedKeys(t) {
			p := k
			if path != "" {
				p = path + "." + k
			}
			walkNumbers(t[k], p, out)
		}
	case []any:
		for i, x := range t {
			walkNumbers(x, path+"["+strconv.Itoa(i)+"]", out)
		}
	}
}

func orRoot(path string) string {
	if path == "" {
		return "<root>"
	}
	return path
}
