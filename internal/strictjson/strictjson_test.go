package strictjson

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

type target struct {
	A string         `json:"a"`
	B map[string]any `json:"b"`
}

func TestDecodeRejects(t *testing.T) {
	cases := []struct {
		name, in, code string
		strict         bool
	}{
		{"empty", "", CodeEmpty, false},
		{"malformed", `{"a":`, CodeMalformed, false},
		{"duplicate", `{"a":"x","a":"y"}`, CodeDuplicate, false},
		{"nested duplicate", `{"b":{"k":1,"k":2}}`, CodeDuplicate, false},
		{"invalid utf8", "{\"a\":\"\xff\"}", CodeInvalidUTF8, false},
		{"trailing", `{"a":"x"} {}`, CodeTrailingData, false},
		{"trailing garbage", `{"a":"x"}x`, CodeTrailingData, false},
		{"too deep", `{"b":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`, CodeTooDeep, false},
		{"unknown", `{"zz":1}`, CodeUnknownMember, true},
		{"wrong type", `{"a":1}`, CodeWrongType, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var v target
			err := Decode([]byte(c.in), &v, Options{RejectUnknown: c.strict})
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("got %v, want *Error", err)
			}
			if se.Code != c.code {
				t.Fatalf("code %s, want %s (%v)", se.Code, c.code, err)
			}
		})
	}
}

func TestDecodeAccepts(t *testing.T) {
	var v target
	if err := Decode([]byte(` {"a":"x","b":{"s":"[{"}} `+"\n"), &v, Options{RejectUnknown: true}); err != nil {
		t.Fatal(err)
	}
	if v.A != "x" || v.B["s"] != "[{" {
		t.Fatalf("decoded %+v", v)
	}
}

// members is an object of n members; elements an array of n elements.
func members(n int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":%d`, i, i)
	}
	b.WriteByte('}')
	return b.String()
}

func elements(n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat(`"e",`, n), ",") + "]"
}

func TestLimits(t *testing.T) {
	for _, c := range []struct {
		name, in string
		opts     Options
		code     string // "" accepted
	}{
		{"default members", `{"b":` + members(DefaultMaxMembers) + `}`, Options{}, ""},
		{"default members + 1", `{"b":` + members(DefaultMaxMembers+1) + `}`, Options{}, CodeTooManyMembers},
		{"100,000 members", `{"b":` + members(100_000) + `}`, Options{}, CodeTooManyMembers},
		{"top-level members", members(DefaultMaxMembers + 1), Options{}, CodeTooManyMembers},
		{"members deep inside", `{"b":{"x":[{"y":` + members(DefaultMaxMembers+1) + `}]}}`, Options{}, CodeTooManyMembers},
		{"default elements", `{"b":{"l":` + elements(DefaultMaxElements) + `}}`, Options{}, ""},
		{"default elements + 1", `{"b":{"l":` + elements(DefaultMaxElements+1) + `}}`, Options{}, CodeTooManyElements},
		{"configured members", `{"b":` + members(11) + `}`, Options{MaxMembers: 10}, CodeTooManyMembers},
		{"configured members, at the limit", `{"b":` + members(10) + `}`, Options{MaxMembers: 10}, ""},
		{"configured elements", `{"b":{"l":` + elements(4) + `}}`, Options{MaxElements: 3}, CodeTooManyElements},
		{"raised members", `{"b":` + members(DefaultMaxMembers+1) + `}`, Options{MaxMembers: 2 * DefaultMaxMembers}, ""},
		{"commas in strings do not count", `{"a":"` + strings.Repeat(",", 5000) + `","b":{"s":"[,{,"}}`, Options{MaxMembers: 2, MaxElements: 1}, ""},
		{"empty containers", `{"b":{"o":{},"l":[]}}`, Options{MaxMembers: 2, MaxElements: 1}, ""},
		{"NUL in a value", `{"a":"x\u0000y"}`, Options{}, CodeNUL},
		{"NUL in a nested value", `{"b":{"l":["ok","\u0000"]}}`, Options{}, CodeNUL},
		{"NUL in a member name", `{"b":{"k\u0000":1}}`, Options{}, CodeNUL},
		{"escaped backslash before u0000", `{"a":"\\u0000"}`, Options{}, ""},
		{"other escapes", `{"a":"\u0001\u00e9\n"}`, Options{}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var v target
			err := Decode([]byte(c.in), &v, c.opts)
			verr := Validate([]byte(c.in), c.opts)
			if c.code == "" {
				if err != nil || verr != nil {
					t.Fatalf("refused: %v / %v", err, verr)
				}
				return
			}
			for _, e := range []error{err, verr} {
				var se *Error
				if !errors.As(e, &se) || se.Code != c.code {
					t.Fatalf("got %v; want %s", e, c.code)
				}
			}
		})
	}
}

// TestLimitsOrder: a body that is too deep or malformed says so first.
func TestLimitsOrder(t *testing.T) {
	for in, code := range map[string]string{
		`{"b":` + members(DefaultMaxMembers+1) + `,` + `"c":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`: CodeTooDeep,
		`{"b":` + members(DefaultMaxMembers+1) + `,}`:                                                                   CodeMalformed,
		`{"a":"\u0000"} x`: CodeTrailingData,
	} {
		var se *Error
		if err := Validate([]byte(in), Options{}); !errors.As(err, &se) || se.Code != code {
			t.Errorf("%.40s…: got %v; want %s", in, err, code)
		}
	}
}

// BenchmarkDecode decodes a typical decision body.
func BenchmarkDecode(b *testing.B) {
	raw := []byte(`{"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":2500,"context":{"vendor":"acme","tier":"gold"},"actor":{"id":"agent-7","type":"agent"}}`)
	type body struct {
		DecisionType string         `json:"decision_type"`
		WorkflowKey  string         `json:"workflow_key"`
		Amount       float64        `json:"amount"`
		Context      map[string]any `json:"context"`
		Actor        map[string]any `json:"actor"`
	}
	b.ReportAllocs()
	for b.Loop() {
		var v body
		if err := Decode(raw, &v, Options{RejectUnknown: true}); err != nil {
			b.Fatal(err)
		}
	}
}
