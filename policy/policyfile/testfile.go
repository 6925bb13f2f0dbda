package policyfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/clearancehq/clearance/policy"
)

// File is one test file.
type File struct {
	// Bundle is an inline JSON bundle, or "starter".
	Bundle string `yaml:"bundle"`
	// BundleFile names a bundle file (JSON or YAML) relative to the test
	// file's directory.
	BundleFile string `yaml:"bundle_file"`
	// Published lists inline JSON bundles published in this order; cases
	// then run against what policy.Resolve picks (the active version, or
	// their pin).
	Published []string `yaml:"published"`
	// Active is the active version among Published: "" means the newest,
	// "none" that no version is active (the starter policy applies).
	Active string `yaml:"active"`
	Cases  []Case `yaml:"cases"`
}

// Case is one decision and what it must give.
type Case struct {
	Name string `yaml:"name"`
	// Input is the Intent as a JSON string, so amount literals stay exact.
	Input    string    `yaml:"input"`
	Approval *Approval `yaml:"approval"`
	// Now is the evaluation time, RFC 3339; default 2026-01-01T12:00:00Z.
	Now     string         `yaml:"now"`
	Signals map[string]any `yaml:"signals"`
	Extra   map[string]any `yaml:"extra"`
	Expect  Expect         `yaml:"expect"`
}

// Approval is approval evidence the case supplies, as already verified.
type Approval struct {
	Verified   bool   `yaml:"verified"`
	ApproverID string `yaml:"approver_id"`
	Method     string `yaml:"method"`
}

// Expect is what a case must give.
type Expect struct {
	Outcome     policy.Outcome `yaml:"outcome"`
	ReasonCodes []string       `yaml:"reason_codes"`
	// MatchedRules are checked when given (an empty list: no rule).
	MatchedRules []string `yaml:"matched_rules"`
	// EvalError: evaluation failed closed (BLOCK, EVALUATION_ERROR).
	EvalError bool `yaml:"eval_error"`
	// Mode is the decision's effective mode, checked when set: with
	// published bundles Resolution.Mode, else the bundle's mode with the
	// input's requested mode (policy.EffectiveMode).
	Mode policy.Mode `yaml:"mode"`
	// Error is the code of an input refused before evaluation: an
	// *policy.InputError or strictjson code, or POLICY_VERSION_UNKNOWN for
	// a pin that names no published version.
	Error string `yaml:"error"`
	// CompileError: the bundle does not load.
	CompileError *CompileError `yaml:"compile_error"`
}

// CompileError is an expected load failure: Code is a strictjson code (a
// 400); otherwise some policy.Problem has RuleID, Field and a Message
// containing Message (a 422).
type CompileError struct {
	Code    string `yaml:"code"`
	RuleID  string `yaml:"rule_id"`
	Field   string `yaml:"field"`
	Message string `yaml:"message"`
}

// Parse reads a test file. Unknown keys are refused, and so are a file
// that names its bundle more than one way, active without published, a
// file without cases and a case without a name.
func Parse(data []byte) (File, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f File
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return File{}, errors.New("empty test file")
		}
		return File{}, err
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		if err != nil {
			return File{}, err
		}
		return File{}, fmt.Errorf("line %d: more than one YAML document", more.Line)
	}
	var named []string
	if strings.TrimSpace(f.Bundle) != "" {
		named = append(named, "bundle")
	}
	if f.BundleFile != "" {
		named = append(named, "bundle_file")
	}
	if len(f.Published) > 0 {
		named = append(named, "published")
	}
	if len(named) > 1 {
		return File{}, fmt.Errorf("the file names its bundle by %s: give one", strings.Join(named, " and "))
	}
	if f.Active != "" && len(f.Published) == 0 {
		return File{}, errors.New("active needs published bundles")
	}
	if len(f.Cases) == 0 {
		return File{}, errors.New("the file has no cases")
	}
	for i, c := range f.Cases {
		if strings.TrimSpace(c.Name) == "" {
			return File{}, fmt.Errorf("cases[%d]: name is required", i)
		}
	}
	return f, nil
}
