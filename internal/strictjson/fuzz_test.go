package strictjson_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/strictjson"
)

// fuzzIntent is a representative request body: the shapes Clearance decodes
// (strings, an optional amount, nested objects, arrays, free-form context).
type fuzzIntent struct {
	IntentID string         `json:"intent_id"`
	Nonce    string         `json:"nonce,omitempty"`
	Actor    fuzzActor      `json:"actor"`
	Action   *fuzzAction    `json:"action,omitempty"`
	Tags     []string       `json:"tags,omitempty"`
	Verified bool           `json:"verified,omitempty"`
	Risk     float64        `json:"risk_score,omitempty"`
	Context  map[string]any `json:"context,omitempty"`
	Extra    []any          `json:"extra,omitempty"`
}

type fuzzActor struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

type fuzzAction struct {
	Type     string   `json:"type"`
	Amount   *float64 `json:"amount,omitempty"`
	Currency string   `json:"currency,omitempty"`
}

var fuzzCodes = map[string]bool{
	strictjson.CodeMalformed: true, strictjson.CodeDuplicate: true, strictjson.CodeInvalidUTF8: true,
	strictjson.CodeTrailingData: true, strictjson.CodeTooDeep: true, strictjson.CodeUnknownMember: true,
	strictjson.CodeWrongType: true, strictjson.CodeEmpty: true, strictjson.CodeTooManyMembers: true,
	strictjson.CodeTooManyElements: true, strictjson.CodeNUL: true,
}

func wantStrictError(t *testing.T, err error) {
	t.Helper()
	var se *strictjson.Error
	if !errors.As(err, &se) || !fuzzCodes[se.Code] {
		t.Fatalf("refusal is not a *strictjson.Error with a documented code: %T %v", err, err)
	}
}

// FuzzDecode: Validate and Decode never panic and refuse only with a
// documented code; a body Validate accepts canonicalizes (canon.Transform)
// and its canonical form validates again; a body Decode accepts decodes to
// the same value from its canonical form.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"intent_id":"i-1","nonce":"n-1","actor":{"id":"agent-1","type":"agent"},"action":{"type":"payment.send","amount":250,"currency":"EUR"}}`,
		` {"intent_id":"x","tags":["a","b"],"verified":true,"risk_score":0.5,"context":{"s":"[{","n":1e2,"z":null,"l":[1,2.50,-0]}} ` + "\n",
		`{"intent_id":"\u00e9\ud83d\ude00","extra":[{},[],"",0,false,null]}`,
		`{"a":"x","a":"y"}`,
		`{"context":{"k":1,"k":2}}`,
		"{\"intent_id\":\"\xff\"}",
		`{"intent_id":"x"} {}`,
		`{"intent_id":"x"}x`,
		`{"context":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`,
		`{"context":{"d":` + strings.Repeat("[", 62) + strings.Repeat("]", 62) + `}}`,
		`{"zz":1}`,
		`{"intent_id":1}`,
		`{"action":{"amount":"5"}}`,
		`{"risk_score":1e400}`,
		`{"risk_score":9007199254740993}`,
		`null`, `[]`, `"s"`, `1`, ``, ` `, `{`, `{"a":`, `{"\ud800":1}`,
		`{"intent_id":"a\u0000b"}`, `{"intent_id":"a\\u0000b"}`, `{"context":{"\u0000":1}}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, raw []byte, strict bool) {
		verr := strictjson.Validate(raw, strictjson.Options{})
		if verr != nil {
			wantStrictError(t, verr)
		} else {
			c, err := canon.Transform(raw)
			if err != nil {
				t.Fatalf("validated body does not canonicalize: %v\n%q", err, raw)
			}
			if err := strictjson.Validate(c, strictjson.Options{}); err != nil {
				t.Fatalf("canonical form does not validate: %v\n%q", err, c)
			}
		}
		var v fuzzIntent
		err := strictjson.Decode(raw, &v, strictjson.Options{RejectUnknown: strict})
		if err != nil {
			wantStrictError(t, err)
			return
		}
		if verr != nil {
			t.Fatalf("Decode accepted a body Validate refuses (%v): %q", verr, raw)
		}
		c, err := canon.Transform(raw)
		if err != nil {
			t.Fatalf("accepted body does not canonicalize: %v\n%q", err, raw)
		}
		var again fuzzIntent
		if err := strictjson.Decode(c, &again, strictjson.Options{RejectUnknown: strict}); err != nil {
			t.Fatalf("canonical form of an accepted body is refused: %v\n%q\n%q", err, raw, c)
		}
		// reflect.DeepEqual, not cmp.Diff: its diff is exponential in nesting.
		if !reflect.DeepEqual(v, again) {
			t.Fatalf("canonical form decodes differently:\n%#v\n%#v\n%q\n%q", v, again, raw, c)
		}
	})
}
