package canon_test

import (
	"bytes"
	"testing"

	"github.com/clearancehq/clearance/internal/canon"
)

// FuzzTransform: Transform never panics, never modifies its input, and is
// idempotent: the canonical form of a canonical form is itself. An accepted
// input's digest does not depend on its formatting.
func FuzzTransform(f *testing.F) {
	for _, s := range []string{
		`{ "b": 1.50, "a": [1e2, "\u00e9"], "c": {"z":true,"y":null} }`,
		`{"a":1,"b":2}`,
		"{\n  \"b\" : 2 ,\n  \"a\" : 1\n}",
		`{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6,"\u00f6":7}`,
		`[1e21, 1e-7, 0.000001, -0, 123456789012345678901234567890, 5e-324, 1.7976931348623157e308, 0.1, 2e0]`,
		`"\u0000\u001f\"\\\/\b\f\n\r\t"`,
		`{"a":{"b":{"c":[[[]]],"a":{}}}}`,
		`null`, `true`, `false`, `0`, `""`, `[]`, `{}`,
		`{"a":1,"a":2}`, "\"\xff\"", `{"a":1e400}`, `{"a":}`, `{} {}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		in := bytes.Clone(raw)
		once, err := canon.Transform(raw)
		if !bytes.Equal(in, raw) {
			t.Fatalf("Transform modified its input: %q → %q", in, raw)
		}
		if err != nil {
			return
		}
		twice, err := canon.Transform(once)
		if err != nil {
			t.Fatalf("canonical form is refused: %v\n%q → %q", err, raw, once)
		}
		if !bytes.Equal(once, twice) {
			t.Fatalf("not idempotent:\n%q\n%q\n%q", raw, once, twice)
		}
		d1, err1 := canon.DigestJSON(raw)
		d2, err2 := canon.DigestJSON(once)
		if err1 != nil || err2 != nil || d1 != d2 || d1 != canon.Digest(once) {
			t.Fatalf("digest depends on formatting: %s %v / %s %v\n%q", d1, err1, d2, err2, raw)
		}
	})
}

// FuzzAppendNumber: AppendNumber writes a JSON number as Transform does.
func FuzzAppendNumber(f *testing.F) {
	for _, s := range []string{
		"0", "-0", "-0.0", "0.0", "1", "-1", "250.5", "1000.50", "0.000001", "0.0000001", "-0.000001", "1e21", "1e20",
		"100000000000000000000", "1000000000000000000000", "9007199254740992", "9007199254740993", "999999999999999",
		"123456789012345.6", "12345678901234.56", "0.30000000000000004", "0.1", "5e-324", "1.7976931348623157e308",
		"1e400", "-1e400", "1E+2", "2e0", "1.5e-7", "123456789012345678901234567890",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, lit []byte) {
		if len(bytes.Trim(lit, "0123456789+-.eE")) != 0 {
			return // not only a number's characters
		}
		want, err := canon.Transform(lit)
		if err != nil {
			return // not one JSON number
		}
		if got := canon.AppendNumber([]byte("x"), lit); string(got) != "x"+string(want) {
			t.Fatalf("AppendNumber(%s) = %s, Transform: %s", lit, got[1:], want)
		}
	})
}
