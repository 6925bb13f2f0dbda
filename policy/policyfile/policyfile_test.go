package policyfile

import (
	"errors"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/policy"
)

// TestRepoCases runs the policy package's own case files: every case
// passes, as it does under policy's TestCases.
func TestRepoCases(t *testing.T) {
	rep, err := RunDir(os.DirFS("../testdata/cases"), ".", nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed() != 0 {
		t.Fatalf("repository cases fail:\n%s", rep)
	}
	if rep.Passed() < 100 {
		t.Fatalf("only %d cases ran", rep.Passed())
	}
	if !strings.HasSuffix(rep.String(), "0 failed\n") {
		t.Fatalf("summary: %q", rep.String())
	}
}

const paymentsJSON = `{"bundle_id": "payments", "version": "1", "mode": "ENFORCEMENT",
  "rules": [{"id": "big", "match": [{"field": "amount", "op": "ge", "value": 5000}],
             "outcome": "ESCALATE", "reason_codes": ["LARGE_PAYMENT"]}],
  "default": {"outcome": "ALLOW", "reason_codes": []}}`

func mustLoad(t *testing.T, src string) *policy.Compiled {
	t.Helper()
	c, err := policy.Load([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestFailingCaseHasDiff(t *testing.T) {
	fsys := fstest.MapFS{"a.yaml": {Data: []byte(`
cases:
  - name: passes
    input: '{"amount": 10}'
    expect: {outcome: ALLOW, reason_codes: [PROTOCOL_OUTCOME_ALLOW, NO_RULE_MATCHED]}
  - name: wrong codes
    input: '{"amount": 6000}'
    expect: {outcome: ESCALATE, reason_codes: [PROTOCOL_OUTCOME_ESCALATE, POLICY_MATCHED, HUGE_PAYMENT], matched_rules: [big]}
`)}, "notes.txt": {Data: []byte("not a test file")}}
	rep, err := RunDir(fsys, ".", mustLoad(t, paymentsJSON))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Passed() != 1 || rep.Failed() != 1 {
		t.Fatalf("passed %d failed %d:\n%s", rep.Passed(), rep.Failed(), rep)
	}
	r := rep.Results[1]
	if r.Passed || r.File != "a.yaml" || r.Case != "wrong codes" {
		t.Fatalf("result %+v", r)
	}
	for _, want := range []string{
		"  outcome: ESCALATE\n",
		"- reason_codes: [PROTOCOL_OUTCOME_ESCALATE, POLICY_MATCHED, HUGE_PAYMENT]\n",
		"+ reason_codes: [PROTOCOL_OUTCOME_ESCALATE, POLICY_MATCHED, LARGE_PAYMENT]\n",
		"  matched_rules: [big]\n",
	} {
		if !strings.Contains(r.Diff, want) {
			t.Errorf("diff lacks %q:\n%s", want, r.Diff)
		}
	}
	s := rep.String()
	if !strings.Contains(s, "FAIL a.yaml: wrong codes\n") || !strings.HasSuffix(s, "1 passed, 1 failed\n") || strings.Contains(s, "passes") {
		t.Fatalf("report:\n%s", s)
	}
}

func TestMismatchKinds(t *testing.T) {
	f, err := Parse([]byte(`
bundle: starter
cases:
  - {name: wanted an error, input: '{"amount": 5}', expect: {error: INVALID_AMOUNT}}
  - {name: unexpected error, input: '{"amount": -5}', expect: {outcome: ALLOW, reason_codes: []}}
  - {name: eval error expected, input: '{"amount": 5}', expect: {outcome: BLOCK, eval_error: true, reason_codes: [PROTOCOL_OUTCOME_BLOCK, EVALUATION_ERROR]}}
  - {name: mode, input: '{"amount": 5}', expect: {outcome: ALLOW, mode: ENFORCEMENT, reason_codes: [PROTOCOL_OUTCOME_ALLOW, POLICY_MATCHED, AMOUNT_BELOW_ESCALATION_THRESHOLD]}}
  - {name: compile error expected, expect: {compile_error: {code: UNKNOWN_MEMBER}}}
  - {name: bad now, now: yesterday, input: '{}', expect: {outcome: ALLOW}}
`))
	if err != nil {
		t.Fatal(err)
	}
	wants := [][]string{
		{"- error: INVALID_AMOUNT\n", "+ error: none (the input was accepted)\n"},
		{"- error: none\n", "+ error: INVALID_AMOUNT (policy: INVALID_AMOUNT: amount:"},
		{"- eval_error: true\n", "+ eval_error: false\n"},
		{"- mode: ENFORCEMENT\n", "+ mode: SHADOW\n"},
		{"- compile_error: code UNKNOWN_MEMBER\n", "+ compile_error: none (the bundle loads)\n"},
		{"- now: an RFC 3339 time\n", `+ now: "yesterday"`},
	}
	res := Run(nil, "x.yaml", f, nil)
	for i, r := range res {
		if r.Passed {
			t.Errorf("%s passed", r.Case)
			continue
		}
		for _, w := range wants[i] {
			if !strings.Contains(r.Diff, w) {
				t.Errorf("%s: diff lacks %q:\n%s", r.Case, w, r.Diff)
			}
		}
	}
}

func TestBundleFile(t *testing.T) {
	fsys := fstest.MapFS{
		"policies/payments.yaml": {Data: []byte(`
bundle_id: payments
version: "1"
mode: ENFORCEMENT
rules:
  - id: big
    match: [{field: amount, op: ge, value: 5000}]
    outcome: ESCALATE
    reason_codes: [LARGE_PAYMENT]
default: {outcome: ALLOW, reason_codes: []}
`)},
		"policies/broken.json": {Data: []byte(`{"bundle_id": "b", "version": "1", "mode": "SHADOW", "rules": [],
		  "default": {"outcome": "NOPE", "reason_codes": []}}`)},
		"policies/tests/payments.yml": {Data: []byte(`
bundle_file: ../payments.yaml
cases:
  - name: big
    input: '{"amount": 5000}'
    expect: {outcome: ESCALATE, mode: ENFORCEMENT, reason_codes: [PROTOCOL_OUTCOME_ESCALATE, POLICY_MATCHED, LARGE_PAYMENT]}
`)},
		"policies/tests/broken.yaml": {Data: []byte(`
bundle_file: ../broken.json
cases:
  - name: refused
    expect: {compile_error: {field: default.outcome, message: outcome must be}}
`)},
		"policies/tests/missing.yaml": {Data: []byte(`
bundle_file: ../nowhere.yaml
cases:
  - {name: missing, input: '{}', expect: {outcome: ALLOW}}
`)},
		"policies/tests/outside.yaml": {Data: []byte(`
bundle_file: ../../../etc/passwd
cases:
  - {name: outside, input: '{}', expect: {outcome: ALLOW}}
`)},
	}
	rep, err := RunDir(fsys, "policies/tests", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Result{}
	for _, r := range rep.Results {
		got[r.Case] = r
	}
	if !got["big"].Passed || !got["refused"].Passed {
		t.Fatalf("bundle_file cases fail:\n%s", rep)
	}
	if r := got["missing"]; r.Passed || !strings.Contains(r.Diff, "bundle_file ../nowhere.yaml") {
		t.Fatalf("missing bundle file: %+v", r)
	}
	if r := got["outside"]; r.Passed || !strings.Contains(r.Diff, "not a path inside") {
		t.Fatalf("bundle file outside the FS: %+v", r)
	}
	// Files run in name order.
	var files []string
	for _, r := range rep.Results {
		files = append(files, r.File)
	}
	want := "policies/tests/broken.yaml policies/tests/missing.yaml policies/tests/outside.yaml policies/tests/payments.yml"
	if strings.Join(files, " ") != want {
		t.Fatalf("order %v", files)
	}
}

func TestDefaultBundle(t *testing.T) {
	fsys := fstest.MapFS{"t.yaml": {Data: []byte(`
cases:
  - name: uses the default
    input: '{"amount": 7000}'
    expect: {outcome: ESCALATE, reason_codes: [PROTOCOL_OUTCOME_ESCALATE, POLICY_MATCHED, LARGE_PAYMENT]}
`)}}
	rep, err := RunDir(fsys, ".", mustLoad(t, paymentsJSON))
	if err != nil || rep.Failed() != 0 || rep.Passed() != 1 {
		t.Fatalf("%v\n%s", err, rep)
	}
	rep, err = RunDir(fsys, ".", nil)
	if err != nil || rep.Failed() != 1 || !strings.Contains(rep.Results[0].Diff, "no default bundle") {
		t.Fatalf("without a default: %v\n%s", err, rep)
	}
}

func TestUnreadableFilesFail(t *testing.T) {
	fsys := fstest.MapFS{
		"a.yaml": {Data: []byte("cases:\n  - name: x\n    inptu: '{}'\n")},
		"b.yaml": {Data: []byte("cases: [\n")},
	}
	rep, err := RunDir(fsys, ".", nil)
	if err != nil || rep.Failed() != 2 || rep.Results[0].Case != "" || !strings.Contains(rep.Results[0].Diff, "inptu") {
		t.Fatalf("%v\n%s", err, rep)
	}
	if _, err := RunDir(fsys, "nowhere", nil); err == nil {
		t.Fatal("a missing directory must be an error")
	}
}

func TestParseRefuses(t *testing.T) {
	for name, src := range map[string]string{
		"unknown top-level key": "bundel: starter\ncases: [{name: a, input: '{}'}]\n",
		"unknown expect key":    "bundle: starter\ncases: [{name: a, input: '{}', expect: {outcom: ALLOW}}]\n",
		"unknown case key":      "bundle: starter\ncases: [{name: a, inptu: '{}'}]\n",
		"two bundles":           "bundle: starter\nbundle_file: b.yaml\ncases: [{name: a}]\n",
		"active alone":          "bundle: starter\nactive: v1\ncases: [{name: a}]\n",
		"no cases":              "bundle: starter\n",
		"nameless case":         "bundle: starter\ncases: [{input: '{}'}]\n",
		"two documents":         "bundle: starter\ncases: [{name: a}]\n---\ncases: []\n",
		"empty":                 "",
	} {
		if _, err := Parse([]byte(src)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestYAMLBundleKeepsNumbersExact(t *testing.T) {
	yamlSrc := []byte(`
bundle_id: exact
version: "1"
mode: ENFORCEMENT
rules:
  - id: cents
    match:
      - {field: amount, op: ge, value: 1234567.89}
    outcome: BLOCK
    reason_codes: [AT_LIMIT]
  - id: exact-int
    match:
      - {field: context.n, op: eq, value: 9007199254740993}
    outcome: ESCALATE
    reason_codes: [BIG_INT]
default: {outcome: ALLOW, reason_codes: []}
`)
	js, err := BundleJSON("exact.yaml", yamlSrc)
	if err != nil {
		t.Fatal(err)
	}
	for _, lit := range []string{`"value":1234567.89`, `"value":9007199254740993`} {
		if !strings.Contains(string(js), lit) {
			t.Errorf("JSON form lacks %s: %s", lit, js)
		}
	}
	fromYAML, err := ReadBundle("exact.yaml", yamlSrc)
	if err != nil {
		t.Fatal(err)
	}
	fromJSON, err := ReadBundle("exact.json", js)
	if err != nil {
		t.Fatal(err)
	}
	if fromYAML.Digest() != fromJSON.Digest() {
		t.Fatalf("digests differ: %s %s", fromYAML.Digest(), fromJSON.Digest())
	}
	f, err := Parse([]byte(`
cases:
  - name: just below
    input: '{"amount": 1234567.88}'
    expect: {outcome: ALLOW, reason_codes: [PROTOCOL_OUTCOME_ALLOW, NO_RULE_MATCHED]}
  - name: at the limit
    input: '{"amount": 1234567.89}'
    expect: {outcome: BLOCK, reason_codes: [PROTOCOL_OUTCOME_BLOCK, POLICY_MATCHED, AT_LIMIT]}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range Run(nil, "t.yaml", f, fromYAML) {
		if !r.Passed {
			t.Errorf("%s:\n%s", r.Case, r.Diff)
		}
	}
}

func TestYAMLRefusals(t *testing.T) {
	for name, src := range map[string]string{
		"non-string key": "bundle_id: x\n1: one\n",
		"bool key":       "true: x\n",
		"null key":       "~: x\n",
		"complex key":    "? [a, b]\n: x\n",
		"anchor":         "a: &x 1\n",
		"alias":          "a: 1\nb: *x\n",
		"merge key":      "base: {a: 1}\nc:\n  <<: {a: 1}\n",
		"hex":            "v: 0x1F\n",
		"underscore":     "v: 1_000\n",
		"plus":           "v: +5\n",
		"octal":          "v: 012\n",
		"infinity":       "v: .inf\n",
		"nan":            "v: .nan\n",
		"trailing dot":   "v: 1.\n",
		"binary":         "v: !!binary aGVsbG8=\n",
		"custom tag":     "v: !money 5\n",
		"duplicate key":  "a: 1\nb: 2\na: 3\n",
		"two documents":  "a: 1\n---\nb: 2\n",
		"empty":          "",
		"syntax":         "a: [1, 2\n",
		"invalid UTF-8":  "a: \xff\n",
	} {
		_, err := BundleJSON("b.yaml", []byte(src))
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%s: %v (%T), want *SyntaxError", name, err, err)
			continue
		}
		if !strings.HasPrefix(se.Error(), "b.yaml") {
			t.Errorf("%s: error %q does not name the file", name, se)
		}
	}
	_, err := BundleJSON("b.yaml", []byte("a: 1\nb:\n  c: 0x10\n"))
	var se *SyntaxError
	if !errors.As(err, &se) || se.Line != 3 || !strings.Contains(se.Error(), "b.yaml:3:") {
		t.Fatalf("position: %v", err)
	}
	if _, err := BundleJSON("b.toml", nil); !errors.As(err, &se) {
		t.Fatalf("unknown extension: %v", err)
	}
}

func TestYAMLFeaturesJSONHas(t *testing.T) {
	js, err := BundleJSON("b.YML", []byte(`
s: 'quoted: yes'
n: ~
t: true
f: False
d: 2026-01-01
i: -0
e: 1.5e3
l: [1, "2", {k: <tag&>}]
q: "5"
m: |
  two
  lines
`))
	want := `{"s":"quoted: yes","n":null,"t":true,"f":false,"d":"2026-01-01","i":-0,"e":1.5e3,"l":[1,"2",{"k":"<tag&>"}],"q":"5","m":"two\nlines\n"}`
	if err != nil || string(js) != want {
		t.Fatalf("got %s, %v\nwant %s", js, err, want)
	}
}

func TestLoadErrorsPassThrough(t *testing.T) {
	_, err := ReadBundle("b.yaml", []byte(`
bundle_id: b
version: "1"
mode: SHADOW
rules:
  - {id: a, outcome: ALLOW, reason_codes: [lower]}
  - {id: a, when: "intnet.x", outcome: ALLOW, reason_codes: [X]}
default: {outcome: ALLOW, reason_codes: []}
`))
	var ve *policy.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) < 3 {
		t.Fatalf("want every problem: %v", err)
	}
	_, err = ReadBundle("b.yml", []byte("bundle_id: b\nextra: 1\n"))
	var sj *strictjson.Error
	if !errors.As(err, &sj) || sj.Code != strictjson.CodeUnknownMember {
		t.Fatalf("unknown member: %v", err)
	}
	_, err = ReadBundle("b.json", []byte(`{"bundle_id": "b", "bundle_id": "c"}`))
	if !errors.As(err, &sj) || sj.Code != strictjson.CodeDuplicate {
		t.Fatalf("duplicate member: %v", err)
	}
}

func TestPublishedFiles(t *testing.T) {
	f, err := Parse([]byte(`
published:
  - '{"bundle_id": "p", "version": "v1", "mode": "ENFORCEMENT", "rules": [], "default": {"outcome": "BLOCK", "reason_codes": ["V1"]}}'
  - '{"bundle_id": "p", "version": "v2", "mode": "ENFORCEMENT", "rules": [], "default": {"outcome": "ALLOW", "reason_codes": ["V2"]}}'
active: v1
cases:
  - name: active
    input: '{}'
    expect: {outcome: BLOCK, mode: ENFORCEMENT, reason_codes: [PROTOCOL_OUTCOME_BLOCK, NO_RULE_MATCHED, V1]}
  - name: pinned
    input: '{"context": {"policy_version": "v2"}}'
    expect: {outcome: ALLOW, mode: SHADOW, reason_codes: [PROTOCOL_OUTCOME_ALLOW, NO_RULE_MATCHED, V2]}
  - name: unknown pin
    input: '{"context": {"policy_version": "v3"}}'
    expect: {error: POLICY_VERSION_UNKNOWN}
  - name: bad pin
    input: '{"context": {"policy_version": 3}}'
    expect: {error: INVALID_POLICY_VERSION}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range Run(nil, "p.yaml", f, nil) {
		if !r.Passed {
			t.Errorf("%s:\n%s", r.Case, r.Diff)
		}
	}
}
