package policyfile

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/policy"
)

// defaultNow is the evaluation time of a case without `now`.
var defaultNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// CodeUnknownVersion is the Expect.Error of a pin policy.Resolve refuses.
const CodeUnknownVersion = "POLICY_VERSION_UNKNOWN"

// Result is the outcome of one case. Diff, for a case that failed, shows
// what was expected ("-") against what happened ("+"). A file that could
// not be read or parsed is one failed Result with an empty Case and the
// error as its Diff.
type Result struct {
	File, Case string
	Passed     bool
	Diff       string
}

// Report is the results of a run, in file and case order.
type Report struct {
	Results []Result
}

// Passed counts the cases that passed.
func (r Report) Passed() int {
	n := 0
	for _, x := range r.Results {
		if x.Passed {
			n++
		}
	}
	return n
}

// Failed counts the cases (and unreadable files) that failed.
func (r Report) Failed() int { return len(r.Results) - r.Passed() }

// String lists each failure, a line naming it followed by its diff
// indented, then the summary line "N passed, M failed".
func (r Report) String() string {
	var b strings.Builder
	for _, x := range r.Results {
		if x.Passed {
			continue
		}
		if x.Case == "" {
			fmt.Fprintf(&b, "FAIL %s\n", x.File)
		} else {
			fmt.Fprintf(&b, "FAIL %s: %s\n", x.File, x.Case)
		}
		for _, l := range strings.Split(strings.TrimRight(x.Diff, "\n"), "\n") {
			b.WriteString("    ")
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	fmt.Fprintf(&b, "%d passed, %d failed\n", r.Passed(), r.Failed())
	return b.String()
}

// RunDir runs every test file (*.yaml, *.yml) directly in dir of fsys, in
// name order; files that name no bundle use bundle (which may be nil: their
// cases then fail). A file that cannot be read or parsed is a failed
// Result; the error is for a directory that cannot be listed.
func RunDir(fsys fs.FS, dir string, bundle *policy.Compiled) (Report, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return Report{}, err
	}
	var rep Report
	for _, e := range entries {
		ext := strings.ToLower(path.Ext(e.Name()))
		if e.IsDir() || ext != ".yaml" && ext != ".yml" {
			continue
		}
		p := path.Join(dir, e.Name())
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			rep.Results = append(rep.Results, Result{File: p, Diff: err.Error()})
			continue
		}
		f, err := Parse(data)
		if err != nil {
			rep.Results = append(rep.Results, Result{File: p, Diff: err.Error()})
			continue
		}
		rep.Results = append(rep.Results, Run(fsys, p, f, bundle)...)
	}
	return rep, nil
}

// Run runs the cases of f, the test file at p in fsys (bundle_file is
// read from fsys relative to p's directory; fsys may be nil for a file
// without one). A file that names no bundle uses bundle.
func Run(fsys fs.FS, p string, f File, bundle *policy.Compiled) []Result {
	s := subjectOf(fsys, p, f, bundle)
	out := make([]Result, 0, len(f.Cases))
	for _, tc := range f.Cases {
		d := s.run(tc)
		out = append(out, Result{File: p, Case: tc.Name, Passed: d.passed(), Diff: d.String()})
	}
	return out
}

// subject is what a file's cases run against: one bundle, or published
// versions resolved per case.
type subject struct {
	c       *policy.Compiled
	src     *memSource
	loadErr error
}

var errNoBundle = errors.New("the file names no bundle (bundle, bundle_file or published) and no default bundle was given")

func subjectOf(fsys fs.FS, p string, f File, bundle *policy.Compiled) subject {
	var s subject
	switch inline := strings.TrimSpace(f.Bundle); {
	case len(f.Published) > 0:
		s.src, s.loadErr = publish(f.Published)
		if s.src != nil {
			s.src.active = f.Active
		}
	case inline == "starter":
		s.c = policy.Starter()
	case inline != "":
		s.c, s.loadErr = policy.Load([]byte(f.Bundle))
	case f.BundleFile != "":
		bp := path.Join(path.Dir(p), f.BundleFile)
		if fsys == nil {
			s.loadErr = fmt.Errorf("bundle_file %s: no file system to read it from", f.BundleFile)
			break
		}
		if !fs.ValidPath(bp) || path.IsAbs(f.BundleFile) {
			s.loadErr = fmt.Errorf("bundle_file %s: not a path inside the directory the tests run in", f.BundleFile)
			break
		}
		data, err := fs.ReadFile(fsys, bp)
		if err != nil {
			s.loadErr = fmt.Errorf("bundle_file %s: %w", f.BundleFile, err)
			break
		}
		s.c, s.loadErr = ReadBundle(bp, data)
	case bundle != nil:
		s.c = bundle
	default:
		s.loadErr = errNoBundle
	}
	return s
}

func (s subject) run(tc Case) *differ {
	d := &differ{}
	if ce := tc.Expect.CompileError; ce != nil {
		d.compile(ce, s.loadErr)
		return d
	}
	if s.loadErr == errNoBundle {
		d.line("bundle", "a bundle", "none", errNoBundle.Error())
		return d
	}
	if s.loadErr != nil {
		d.line("bundle", "loads", "does not load", problemLines(s.loadErr)...)
		return d
	}
	now := defaultNow
	if tc.Now != "" {
		t, err := time.Parse(time.RFC3339, tc.Now)
		if err != nil {
			d.line("now", "an RFC 3339 time", strconv.Quote(tc.Now), err.Error())
			return d
		}
		now = t
	}
	c := s.c
	var res policy.Resolution
	intent, err := policy.DecodeIntent([]byte(tc.Input))
	if err == nil && s.src != nil {
		var pin string
		if pin, err = intent.PolicyPin(); err == nil {
			res, err = policy.Resolve(s.src, pin)
			c = res.Policy
		}
	}
	var in policy.Input
	if err == nil {
		in, err = intent.Input(now)
	}
	if want := tc.Expect.Error; want != "" || err != nil {
		if want == "" {
			want = "none"
		}
		got, note := "none", ""
		if err != nil {
			got, note = errorCode(err), err.Error()
		} else {
			note = "the input was accepted"
		}
		if got == want {
			note = ""
		}
		d.line("error", want, got, note)
		return d
	}
	if a := tc.Approval; a != nil {
		in.Approval = &policy.Approval{Verified: a.Verified, ApproverID: a.ApproverID, Method: a.Method}
	}
	in.Signals, in.Extra = tc.Signals, tc.Extra
	dec := c.Evaluate(&in)
	e := tc.Expect
	d.line("outcome", string(e.Outcome), string(dec.Outcome))
	d.line("reason_codes", list(e.ReasonCodes), list(dec.ReasonCodes))
	if e.MatchedRules != nil {
		d.line("matched_rules", list(e.MatchedRules), list(dec.MatchedRules))
	}
	if e.EvalError || dec.Err != nil {
		var note []string
		if dec.Err != nil && !e.EvalError {
			note = []string{dec.Err.Error()}
		}
		d.line("eval_error", strconv.FormatBool(e.EvalError), strconv.FormatBool(dec.Err != nil), note...)
	}
	if e.Mode != "" {
		got := policy.EffectiveMode(c.Mode(), in.RequestedMode)
		if s.src != nil {
			got = res.Mode(in.RequestedMode)
		}
		d.line("mode", string(e.Mode), string(got))
	}
	return d
}

func (d *differ) compile(ce *CompileError, err error) {
	var want string
	if ce.Code != "" {
		want = "code " + ce.Code
	} else {
		want = fmt.Sprintf("rule_id %q, field %q, message ~%q", ce.RuleID, ce.Field, ce.Message)
	}
	if err == nil {
		d.line("compile_error", want, "none", "the bundle loads")
		return
	}
	var se *strictjson.Error
	var ve *policy.ValidationError
	switch {
	case ce.Code != "" && errors.As(err, &se):
		if se.Code == ce.Code {
			d.line("compile_error", want, want)
			return
		}
		d.line("compile_error", want, "code "+se.Code, se.Detail)
	case ce.Code == "" && errors.As(err, &ve):
		for _, p := range ve.Problems {
			if p.RuleID == ce.RuleID && p.Field == ce.Field && strings.Contains(p.Message, ce.Message) {
				d.line("compile_error", want, want)
				return
			}
		}
		var got []string
		for _, p := range ve.Problems {
			got = append(got, fmt.Sprintf("rule_id %q, field %q, message %q", p.RuleID, p.Field, p.Message))
		}
		d.lines = append(d.lines, dline{key: "compile_error", want: want, got: got})
	default:
		d.line("compile_error", want, "other error", problemLines(err)...)
	}
}

// problemLines is err as lines: each problem of a *policy.ValidationError.
func problemLines(err error) []string {
	var ve *policy.ValidationError
	if !errors.As(err, &ve) {
		return []string{err.Error()}
	}
	out := make([]string, 0, len(ve.Problems))
	for _, p := range ve.Problems {
		out = append(out, FormatProblem(p))
	}
	return out
}

// FormatProblem writes a bundle problem as one line: its field, the rule
// when known, and the message, e.g. `rules[1].when (rule "big"): …`. A
// message of several lines (a CEL error with its source excerpt) is joined
// with "; " without the excerpt lines (those starting with "|").
func FormatProblem(p policy.Problem) string {
	var b strings.Builder
	b.WriteString(p.Field)
	if p.RuleID != "" {
		if p.Field != "" {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "(rule %q)", p.RuleID)
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	var msg []string
	for _, l := range strings.Split(p.Message, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "|") {
			msg = append(msg, l)
		}
	}
	b.WriteString(strings.Join(msg, "; "))
	return b.String()
}

func errorCode(err error) string {
	var ie *policy.InputError
	var se *strictjson.Error
	switch {
	case errors.As(err, &ie):
		return ie.Code
	case errors.As(err, &se):
		return se.Code
	case errors.Is(err, policy.ErrUnknownVersion):
		return CodeUnknownVersion
	}
	return "unclassified"
}

func list(s []string) string { return "[" + strings.Join(s, ", ") + "]" }

// differ collects the compared members of one case.
type differ struct {
	lines []dline
}

// dline is one compared member: equal when got is exactly [want].
type dline struct {
	key  string
	want string
	got  []string
}

// line records key; notes, shown only on a mismatch, say more about got.
func (d *differ) line(key, want, got string, notes ...string) {
	l := dline{key: key, want: want, got: []string{got}}
	if want != got && len(notes) > 0 {
		if len(notes) == 1 {
			l.got[0] += " (" + notes[0] + ")"
		} else {
			l.got = append(l.got, notes...)
		}
	}
	d.lines = append(d.lines, l)
}

func (l dline) equal() bool { return len(l.got) == 1 && l.got[0] == l.want }

func (d *differ) passed() bool {
	for _, l := range d.lines {
		if !l.equal() {
			return false
		}
	}
	return true
}

// String is the diff of a failed case, "" for one that passed.
func (d *differ) String() string {
	if d.passed() {
		return ""
	}
	var b strings.Builder
	b.WriteString("--- want\n+++ got\n")
	for _, l := range d.lines {
		if l.equal() {
			fmt.Fprintf(&b, "  %s: %s\n", l.key, l.want)
			continue
		}
		fmt.Fprintf(&b, "- %s: %s\n", l.key, l.want)
		for _, g := range l.got {
			fmt.Fprintf(&b, "+ %s: %s\n", l.key, g)
		}
	}
	return b.String()
}

// memSource is a policy.Source over bundles published in order; active
// names the active version ("" the newest, "none" no active version).
type memSource struct {
	order  []*policy.Compiled
	active string
}

func publish(bodies []string) (*memSource, error) {
	m := &memSource{}
	for i, b := range bodies {
		c, err := policy.Load([]byte(b))
		if err != nil {
			return nil, fmt.Errorf("published[%d]: %w", i, err)
		}
		m.order = append(m.order, c)
	}
	return m, nil
}

func (m *memSource) Version(v string) (*policy.Compiled, error) {
	for _, c := range m.order {
		if c.Snapshot().PolicyVersion == v {
			return c, nil
		}
	}
	return nil, fmt.Errorf("%w: %q", policy.ErrUnknownVersion, v)
}

func (m *memSource) Active() (*policy.Compiled, error) {
	switch {
	case m.active == "none" || len(m.order) == 0:
		return nil, nil
	case m.active == "":
		return m.order[len(m.order)-1], nil
	}
	return m.Version(m.active)
}
