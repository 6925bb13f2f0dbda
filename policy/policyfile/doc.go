// Package policyfile reads the files policy authors keep: policy bundles in
// JSON or YAML, and decision test files, and runs those tests.
//
// The package is pure, like package policy: it reads files only through an
// fs.FS the caller supplies, never reads the clock (a case's evaluation time
// is its `now`, else 2026-01-01T12:00:00Z) and keeps no state.
//
// # Bundles
//
// ReadBundle compiles a bundle file named name: JSON when name ends in
// .json, YAML when it ends in .yaml or .yml. YAML is first converted to JSON
// (BundleJSON) and then loaded exactly like JSON, so a bundle means the same
// and has the same digest in either form. The conversion keeps numbers
// exact: a YAML integer or float is written to JSON as its own text, which
// must then be a JSON number literal (no 0x1F, 1_000, +5, .inf or .nan). It
// refuses what JSON cannot say: mapping keys that are not strings, merge
// keys, anchors and aliases, tags other than the core ones (!!binary, !foo),
// duplicate keys and more than one document. A timestamp-looking scalar
// (2026-01-01) is a string. Conversion errors are *SyntaxError with the
// YAML line and column. Load's errors are returned unchanged: a
// *strictjson.Error for JSON that does not decode (a 400 on the wire) and a
// *policy.ValidationError listing every problem (a 422), so that callers
// can show every problem at once.
//
// # Test files
//
// A test file is YAML in the format of the policy package's own case files
// (policy/testdata/cases). It names its bundle one of three ways, or none:
//
//	bundle: |             # an inline JSON bundle, or the word starter
//	  {"bundle_id": "payments", ...}
//	bundle_file: ../payments.yaml   # a bundle file, relative to the test file
//	published: [...]      # inline JSON bundles published in order, with
//	active: v1            # the active version ("" the newest, "none": none)
//
// A file that names no bundle is run against the runner's default bundle.
// Each case has a name, an input (the Intent as a JSON string, so amounts
// stay exact), and optionally approval {verified, approver_id, method},
// now (RFC 3339), signals and extra (visible to CEL), and expects:
//
//	expect:
//	  outcome: ESCALATE
//	  reason_codes: [PROTOCOL_OUTCOME_ESCALATE, POLICY_MATCHED, LARGE_PAYMENT]
//	  matched_rules: [big]   # checked when given
//	  eval_error: false      # evaluation failed closed
//	  mode: ENFORCEMENT      # the effective mode, checked when given
//	  error: INVALID_AMOUNT  # the input is refused with this code
//	  compile_error: {code: UNKNOWN_MEMBER}  # or {rule_id, field, message}
//
// With published bundles a case's context.policy_version pins a version
// (policy.Resolve); a pin that names none is the error
// POLICY_VERSION_UNKNOWN. Unknown keys anywhere in a test file are refused.
//
// # Running
//
// Run runs one parsed file and RunDir every *.yaml and *.yml file directly
// in a directory, in name order. A Result that failed carries a diff of
// what was expected against what happened, one line per compared member
// (outcome, reason_codes, matched_rules, eval_error, mode, error,
// compile_error); Report.String lists the failures and a summary line.
package policyfile
