package decide

import (
	"bytes"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/strictjson"
)

// wireSeeds are evaluate-decision bodies, accepted and refused, that
// exercise what readEvaluateBody reads itself or leaves to strictjson.
var wireSeeds = []string{
	// Accepted: every member, members out of order, nested context.
	`{"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":250.5,"actor":{"id":"agent-7","type":"agent"}}`,
	`{"org_id":"o","parent_decision_id":"p","decision_type":"PAYMENT","workflow_key":"ap.invoice","vertical_pack":"v","amount":1000.50,"risk_score":-1.5e-7,"objective_profile":"x","mode":"SHADOW","context":{"b":[1,2.50,{"z":null,"a":true}],"a":"é","\u20ac":1,"\ud83d\ude00":2,"דּ":3,"":false},"surface":"api","actor":{"type":"agent","id":"a"},"action":{"type":"pay","amount":5,"currency":"EUR","target":"t","parameters":{"k":[],"j":{}}}}`,
	`{"workflow_key":"w","decision_type":"d","action":{"target":"t","amount":0.000001,"type":"x"},"amount":0.000001}`,
	`{}`, `{"actor":{}}`, `{"action":{}}`, `{"context":{}}`, `{"context":{"a":[]}}`,
	" \t\n\r{ \"amount\" : 1 , \"actor\" : { \"id\" : \"a\" } } \n",
	`{"mode":"LOUD","decision_type":"not a type","amount":1e15}`,
	// Duplicate and unknown members.
	`{"amount":1,"amount":1}`, `{"actor":{"id":"a","id":"b"}}`, `{"context":{"a":1,"a":2}}`,
	`{"context":{"\u0061":1,"a":2}}`, `{"context":{"b":1,"a":2,"b":3}}`, `{"actor":{},"actor":{}}`,
	`{"unknown":1}`, `{"actor":{"name":"x"}}`, `{"Amount":1}`, `{"action":{"parameters":{"a":1},"parameters":{}}}`,
	`{"decision_\u0074ype":"PAYMENT"}`,
	// Nulls and wrong types.
	`{"amount":null}`, `{"actor":null}`, `{"context":null}`, `{"decision_type":null}`, `{"risk_score":null}`,
	`{"amount":"1"}`, `{"actor":[]}`, `{"context":[]}`, `{"decision_type":1}`, `{"action":{"amount":true}}`,
	// Numbers.
	`{"amount":1e3}`, `{"amount":-0}`, `{"amount":-1}`, `{"amount":0}`, `{"amount":0.0}`, `{"amount":1000000000000000}`,
	`{"amount":1000000000000001}`, `{"amount":0.1234567}`, `{"amount":0.1234560}`, `{"amount":123456789.123456}`,
	`{"risk_score":-0}`, `{"risk_score":-0.0}`, `{"risk_score":1e400}`, `{"risk_score":1E+2}`, `{"risk_score":5e-324}`,
	`{"amount":1,"action":{"amount":1.0}}`, `{"amount":1,"action":{"amount":2}}`,
	`{"context":{"n":[9007199254740993,9007199254740992,123456789012345678901234567890,1e21,1e-7,0.000001,0.0000001,5e-324,1.7976931348623157e308,-0,0.1,2e0,1E+2,100.0,-0.5,0.30000000000000004,123456789012345.6,1234567890123456.7]}}`,
	`{"context":{"n":1e400}}`, `{"context":{"n":-1e400}}`,
	`{"amount":01}`, `{"amount":1.}`, `{"amount":.5}`, `{"amount":+1}`, `{"amount":1e}`, `{"amount":-}`,
	// Strings: escapes, surrogates, U+0000, invalid UTF-8.
	`{"decision_type":"\u0041BC"}`, `{"actor":{"id":"\ud83d\ude00"}}`, `{"actor":{"id":"\ud83d"}}`,
	`{"actor":{"id":"\ude00\ud83d"}}`, `{"actor":{"id":"\ud83dx"}}`, `{"actor":{"id":"\ud83d\u0041"}}`,
	`{"actor":{"id":"\u0000"}}`, `{"context":{"\u0000":1}}`, `{"context":{"a\"b":1,"a\\b":2,"a\nb":3}}`,
	`{"context":{"x":"\/\b\f\n\r\t\"\\\u001f\u007f\u2028\u00e9\uFFFF"}}`, `{"actor":{"id":"\x"}}`, `{"actor":{"id":"\u12"}}`,
	"{\"context\":{\"tab\t\":1}}", "{\"actor\":{\"id\":\"\xff\"}}", "{\"context\":{\"\xed\xa0\x80\":1}}",
	"{\"actor\":{\"id\":\"\xc0\xaf\"}}", "{\"actor\":{\"id\":\"\xe2\x82\"}}", "{\"actor\":{\"id\":\"a\x00\"}}",
	`{"context":{"\uE000":1,"\ud800\udc00":2,"\uFFFF":3,"z":4}}`,
	// Syntax.
	``, `{`, `}`, `[]`, `null`, `"x"`, `{} x`, `{}{}`, `{"amount":1,}`, `{,}`, `{"amount" 1}`, `{"amount":1 "mode":"x"}`,
	"\xef\xbb\xbf{}", `{"context":{"a":[1,]}}`, `{"context":{"a":[,1]}}`, `{"context":{"a":tru}}`, `{"context":{"a":nul}}`,
	// Nesting and size limits.
	`{"context":{"a":` + strings.Repeat("[", 62) + strings.Repeat("]", 62) + `}}`,
	`{"context":{"a":` + strings.Repeat("[", 63) + strings.Repeat("]", 63) + `}}`,
	`{"context":{"a":` + strings.Repeat(`{"b":`, 70) + `1` + strings.Repeat("}", 70) + `}}`,
	`{"context":{` + strings.TrimSuffix(strings.Repeat(`"k":1,`, 3), ",") + `}}`,
	`{"context":{"a":[` + strings.TrimSuffix(strings.Repeat(`1,`, 20), ",") + `]}}`,
	`{"context":{` + manyMembers(1001) + `}}`, `{"context":{` + manyMembers(1000) + `}}`, `{"context":{` + manyMembers(40) + `}}`,
}

// manyMembers is n members "m<i>":i, in descending order (RFC 8785's is
// ascending).
func manyMembers(n int) string {
	members := make([]string, 0, n)
	for i := n - 1; i >= 0; i-- {
		members = append(members, `"m`+strconv.Itoa(i)+`":`+strconv.Itoa(i))
	}
	return strings.Join(members, ",")
}

// FuzzReadEvaluateBody holds decode (the one-pass reading, or the
// strictjson path it falls back to) and canonicalIntent to the strictjson
// path and canon.Transform: the same error, the same decoded values, the
// same canonical bytes. limit sets small member and element limits; nested
// puts the input in a body's context, so that most of what the fuzzer
// tries there is read in one pass.
func FuzzReadEvaluateBody(f *testing.F) {
	for _, s := range wireSeeds {
		f.Add([]byte(s), uint8(0), false, false)
	}
	for _, s := range []string{`{"b":[1,2.50,{"z":null,"a":true}],"a":"é","\u20ac":1,"\ud83d\ude00":2,"דּ":3,"":false}`,
		`[1e21,-0,0.000001,"\u0041\n",[],{}]`, `{"\uE000":1,"\ud800\udc00":2,"\uFFFF":3,"z":4,"Z":5}`} {
		f.Add([]byte(s), uint8(0), false, true)
	}
	f.Add([]byte(`{"context":{"a":[1,2,3],"b":1,"c":2}}`), uint8(0x33), false, false)
	f.Add([]byte(`{"context":{"a":[1,2,3],"b":1,"c":2}}`), uint8(0x22), true, false)
	f.Add([]byte(`{"amount":1,"unknown":2}`), uint8(0), true, false)
	f.Fuzz(func(t *testing.T, body []byte, limit uint8, lenient, nested bool) {
		opts := strictjson.Options{RejectUnknown: !lenient, MaxMembers: int(limit & 0xf), MaxElements: int(limit >> 4)}
		if nested {
			body = slices.Concat([]byte(`{"workflow_key":"w","context":{"x":`), body, []byte(`},"actor":{"type":"t","id":"i"}}`))
		}
		checkWire(t, body, opts)
	})
}

func TestReadEvaluateBodyMatchesStrictjson(t *testing.T) {
	for _, s := range wireSeeds {
		checkWire(t, []byte(s), strictjson.Options{RejectUnknown: true})
		checkWire(t, []byte(s), strictjson.Options{RejectUnknown: true, MaxMembers: 2, MaxElements: 2})
	}
}

// TestReadEvaluateBodyReadsCommonBodies: the bodies clients send are read in
// one pass, not left to strictjson.
func TestReadEvaluateBodyReadsCommonBodies(t *testing.T) {
	for _, s := range []string{
		wireSeeds[0], wireSeeds[1], wireSeeds[2], `{}`,
		`{"context":{"approval_path":["a","b"],"vendor":{"id":"v-1","new":true,"score":0.75}}}`,
	} {
		if _, _, ok := readEvaluateBody([]byte(s), strictjson.Options{RejectUnknown: true}); !ok {
			t.Errorf("left to strictjson: %s", s)
		}
	}
}

func checkWire(t *testing.T, body []byte, opts strictjson.Options) {
	t.Helper()
	in := bytes.Clone(body)
	want, wantErr := decodeEvaluateDecision(body, opts)
	got, err := decode(RouteEvaluateDecision, body, "", opts)
	if !bytes.Equal(in, body) {
		t.Fatalf("decode modified its input: %q → %q", in, body)
	}
	if !reflect.DeepEqual(err, wantErr) {
		t.Fatalf("%q (%+v):\nerror %#v\nwant  %#v", body, opts, err, wantErr)
	}
	if wantErr != nil {
		return
	}
	if got.org != want.org || got.parent != want.parent || !reflect.DeepEqual(got.intent, want.intent) {
		t.Fatalf("%q (%+v):\ndecoded %#v\nwant    %#v", body, opts, got, want)
	}
	wantCanon, wantCanonErr := canon.Transform(body)
	canonical, err := got.canonicalIntent(body)
	if !bytes.Equal(canonical, wantCanon) || (err == nil) != (wantCanonErr == nil) || err != nil && err.Error() != wantCanonErr.Error() {
		t.Fatalf("%q (%+v):\ncanonical %q %v\nwant      %q %v", body, opts, canonical, err, wantCanon, wantCanonErr)
	}
}
