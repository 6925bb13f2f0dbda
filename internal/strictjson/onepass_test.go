package strictjson

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/go-json-experiment/json"
)

// validateThenDecode is Decode as it was written before an accepted body
// was parsed once: validate, then unmarshal. Decode must answer as it does.
func validateThenDecode(raw []byte, v any, opts Options) error {
	if err := Validate(raw, opts); err != nil {
		return err
	}
	if first := bytes.TrimLeft(raw, " \t\r\n"); first[0] != '{' {
		return &Error{Code: CodeWrongType, Detail: "the body must be a JSON object"}
	}
	if err := json.Unmarshal(raw, v, json.RejectUnknownMembers(opts.RejectUnknown)); err != nil {
		return classify(err)
	}
	return nil
}

type onePassBody struct {
	IntentID string `json:"intent_id"`
	Actor    struct {
		ID   string `json:"id"`
		Type string `json:"type"`
	} `json:"actor"`
	Tags    []string       `json:"tags,omitempty"`
	Risk    float64        `json:"risk_score,omitempty"`
	Context map[string]any `json:"context,omitempty"`
}

// FuzzDecodeOnePass: Decode accepts exactly what validating first accepts,
// decodes the same value, and refuses with the same error.
func FuzzDecodeOnePass(f *testing.F) {
	for _, s := range []string{
		`{"intent_id":"i-1","actor":{"id":"agent-1","type":"agent"},"tags":["a"],"risk_score":2.5,"context":{"a":[1,{"b":null}]}}`,
		`{"intent_id":"x","unknown":1,"actor":{"id":"a","type":"b"}`, `{"unknown":1,"tags":["a",]}`,
		`{"intent_id":"x","intent_id":"y"}`, `{"actor":{"id":1}}`, `[1,2`, `"s"`, `[]`, `null`, `{"a":"\u0000"} x`, ` `,
		"{\"unknown\":1,\"context\":{\"a\":\"\xff\"}}", `{"intent_id":"x"} {}`, `{"risk_score":"high"}`,
		`{"context":{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9}}`, `{"unknown":1,"context":{"a":{"a":{"a":{}}}}`,
	} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, raw []byte, rejectUnknown bool) {
		opts := Options{RejectUnknown: rejectUnknown, MaxMembers: 8, MaxElements: 8}
		var got, want onePassBody
		gerr := Decode(raw, &got, opts)
		werr := validateThenDecode(raw, &want, opts)
		if !reflect.DeepEqual(gerr, werr) {
			t.Fatalf("one pass: %#v; validating first: %#v", gerr, werr)
		}
		if gerr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("one pass decoded %+v; validating first %+v", got, want)
		}
	})
}
