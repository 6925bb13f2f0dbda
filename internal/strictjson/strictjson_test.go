package strictjson

import (
	"errors"
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
