package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"

	"github.com/clearancehq/clearance/internal/strictjson"
)

// caseFile is one testdata/cases/*.yaml file.
type caseFile struct {
	// Bundle is an inline JSON bundle, or "starter".
	Bundle string `yaml:"bundle"`
	// Published lists inline JSON bundles published in this order; cases
	// then run against what Resolve picks (the active version, or their pin).
	Published []string `yaml:"published"`
	// Active is the active version among Published: "" means the newest,
	// "none" that no version is active (the starter policy applies).
	Active string     `yaml:"active"`
	Cases  []testCase `yaml:"cases"`
}

type testCase struct {
	Name string `yaml:"name"`
	// Input is the Intent as a JSON string, so amount literals stay exact.
	Input    string `yaml:"input"`
	Approval *struct {
		Verified   bool   `yaml:"verified"`
		ApproverID string `yaml:"approver_id"`
		Method     string `yaml:"method"`
	} `yaml:"approval"`
	Now     string         `yaml:"now"` // RFC 3339; default 2026-01-01T12:00:00Z
	Signals map[string]any `yaml:"signals"`
	Extra   map[string]any `yaml:"extra"`
	Expect  struct {
		Outcome      Outcome  `yaml:"outcome"`
		ReasonCodes  []string `yaml:"reason_codes"`
		MatchedRules []string `yaml:"matched_rules"`
		EvalError    bool     `yaml:"eval_error"`
		// Mode is the decision's effective mode (Resolution.Mode with the
		// input's requested mode), checked when set.
		Mode Mode `yaml:"mode"`
		// Error is an *InputError or *strictjson.Error code from decoding,
		// or POLICY_VERSION_UNKNOWN for a pin Resolve refuses.
		Error string `yaml:"error"`
		// CompileError: the bundle does not load. Code is a strictjson code
		// (400); otherwise a Problem with RuleID, Field and a Message
		// containing the given text (422).
		CompileError *struct {
			Code    string `yaml:"code"`
			RuleID  string `yaml:"rule_id"`
			Field   string `yaml:"field"`
			Message string `yaml:"message"`
		} `yaml:"compile_error"`
	} `yaml:"expect"`
}

func readCaseFiles(t testing.TB) map[string]caseFile {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "cases", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no case files: %v", err)
	}
	files := make(map[string]caseFile, len(paths))
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(f)
		dec.KnownFields(true)
		var cf caseFile
		err = dec.Decode(&cf)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		files[filepath.Base(p)] = cf
	}
	return files
}

func loadCaseBundle(src string) (*Compiled, error) {
	if strings.TrimSpace(src) == "starter" {
		return Starter(), nil
	}
	return Load([]byte(src))
}

// TestCases runs every decision case under testdata/cases.
func TestCases(t *testing.T) {
	for name, cf := range readCaseFiles(t) {
		t.Run(strings.TrimSuffix(name, ".yaml"), func(t *testing.T) {
			t.Parallel()
			if len(cf.Cases) == 0 {
				t.Fatal("file has no cases")
			}
			var c *Compiled
			var loadErr error
			if len(cf.Published) > 0 {
				src, err := publish(cf.Published)
				if err != nil {
					t.Fatalf("published bundles do not load: %v", err)
				}
				src.active = cf.Active
				for _, tc := range cf.Cases {
					t.Run(tc.Name, func(t *testing.T) {
						in, err := DecodeIntent([]byte(tc.Input))
						if err != nil {
							t.Fatal(err)
						}
						pin, err := in.PolicyPin()
						if err != nil {
							t.Fatal(err)
						}
						r, err := Resolve(src, pin)
						if errors.Is(err, ErrUnknownVersion) && tc.Expect.Error == "POLICY_VERSION_UNKNOWN" {
							return
						}
						if err != nil {
							t.Fatalf("Resolve(pin %q): %v", pin, err)
						}
						if want := tc.Expect.Mode; want != "" {
							if got := r.Mode(in.Mode); got != want {
								t.Errorf("mode %s; want %s (evaluated %s, active %s)", got, want,
									r.Policy.Snapshot().PolicyVersion, r.Active.Snapshot().PolicyVersion)
							}
						}
						runCase(t, r.Policy, tc)
					})
				}
				return
			}
			c, loadErr = loadCaseBundle(cf.Bundle)
			for _, tc := range cf.Cases {
				t.Run(tc.Name, func(t *testing.T) {
					if ce := tc.Expect.CompileError; ce != nil {
						checkCompileError(t, loadErr, ce.Code, ce.RuleID, ce.Field, ce.Message)
						return
					}
					if loadErr != nil {
						t.Fatalf("bundle does not load: %v", loadErr)
					}
					runCase(t, c, tc)
				})
			}
		})
	}
}

func checkCompileError(t *testing.T, err error, code, ruleID, field, msg string) {
	t.Helper()
	if err == nil {
		t.Fatal("bundle loaded; want a compile error")
	}
	if code != "" {
		var se *strictjson.Error
		if !errors.As(err, &se) || se.Code != code {
			t.Fatalf("error %v; want strictjson code %s", err, code)
		}
		return
	}
	var ve *ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, ErrInvalidBundle) {
		t.Fatalf("error %T %v; want *ValidationError", err, err)
	}
	for _, p := range ve.Problems {
		if p.RuleID == ruleID && p.Field == field && strings.Contains(p.Message, msg) {
			return
		}
	}
	t.Fatalf("no problem {rule %q, field %q, message ~%q} in %+v", ruleID, field, msg, ve.Problems)
}

func runCase(t *testing.T, c *Compiled, tc testCase) {
	t.Helper()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	if tc.Now != "" {
		var err error
		if now, err = time.Parse(time.RFC3339, tc.Now); err != nil {
			t.Fatal(err)
		}
	}
	in, err := inputFromJSON(tc.Input, now)
	if want := tc.Expect.Error; want != "" {
		if got := errorCode(err); got != want {
			t.Fatalf("error %v (code %q); want code %s", err, got, want)
		}
		return
	}
	if err != nil {
		t.Fatalf("input: %v", err)
	}
	if a := tc.Approval; a != nil {
		in.Approval = &Approval{Verified: a.Verified, ApproverID: a.ApproverID, Method: a.Method}
	}
	in.Signals, in.Extra = tc.Signals, tc.Extra
	d := c.Evaluate(&in)
	if d.Outcome != tc.Expect.Outcome {
		t.Errorf("outcome %s; want %s (err %v)", d.Outcome, tc.Expect.Outcome, d.Err)
	}
	if diff := cmp.Diff(tc.Expect.ReasonCodes, d.ReasonCodes); diff != "" {
		t.Errorf("reason codes (-want +got):\n%s", diff)
	}
	if tc.Expect.MatchedRules != nil {
		if diff := cmp.Diff(tc.Expect.MatchedRules, d.MatchedRules); diff != "" {
			t.Errorf("matched rules (-want +got):\n%s", diff)
		}
	}
	if (d.Err != nil) != tc.Expect.EvalError {
		t.Errorf("Err = %v; want eval_error %v", d.Err, tc.Expect.EvalError)
	}
	if d.Err != nil && !errors.Is(d.Err, ErrEvaluation) {
		t.Errorf("Err %v does not match ErrEvaluation", d.Err)
	}
}

func inputFromJSON(raw string, now time.Time) (Input, error) {
	intent, err := DecodeIntent([]byte(raw))
	if err != nil {
		return Input{}, err
	}
	return intent.Input(now)
}

func errorCode(err error) string {
	var ie *InputError
	var se *strictjson.Error
	switch {
	case errors.As(err, &ie):
		return ie.Code
	case errors.As(err, &se):
		return se.Code
	case err != nil:
		return "unclassified: " + err.Error()
	}
	return ""
}

// memSource is a Source over bundles published in order; active names the
// active version ("" the newest, "none" no active version).
type memSource struct {
	order  []*Compiled
	active string
}

func publish(bodies []string) (*memSource, error) {
	m := &memSource{}
	for _, b := range bodies {
		c, err := Load([]byte(b))
		if err != nil {
			return nil, err
		}
		m.order = append(m.order, c)
	}
	return m, nil
}

func (m *memSource) Version(v string) (*Compiled, error) {
	for _, c := range m.order {
		if c.Bundle().Version == v {
			return c, nil
		}
	}
	return nil, ErrUnknownVersion
}

func (m *memSource) Active() (*Compiled, error) {
	switch {
	case m.active == "none" || len(m.order) == 0:
		return nil, nil
	case m.active == "":
		return m.order[len(m.order)-1], nil
	}
	return m.Version(m.active)
}

func TestResolveWithoutBundlesIsStarter(t *testing.T) {
	r, err := Resolve(&memSource{}, "")
	if err != nil || r.Policy != Starter() || r.Active != Starter() || !r.Authorizes() || r.Mode("") != ModeShadow {
		t.Fatalf("%+v %v", r, err)
	}
	if _, err := Resolve(&memSource{}, "v1"); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("a pin without bundles must fail: %v", err)
	}
}
