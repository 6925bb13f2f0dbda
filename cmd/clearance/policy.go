package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	neturl "net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/policy/policyfile"
)

const policyUsage = `usage: author, test and publish policies
  clearance policy check FILE
  clearance policy test DIR [--bundle FILE] [-v]
  clearance policy eval FILE --input JSON|@FILE [--now RFC3339] [--explain]
  clearance policy replay (--draft NAME | --version V) --since DURATION|RFC3339 [--until RFC3339]
                          [--examples N] [--wait=false] [--server URL] [--key KEY]
  clearance policy push FILE [--draft NAME | --stage] [--server URL] [--key KEY]
FILE is a bundle in JSON (.json) or YAML (.yaml, .yml); - reads JSON from standard input.
DIR holds test files (*.yaml, *.yml) in the format of policy/testdata/cases.
--server and --key default to $CLEARANCE_SERVER and $CLEARANCE_API_KEY.
Exit status: 0 success; 1 problems found, a test failed, a replay failed or the
server refused; 2 usage or unreadable input. See clearance policy SUBCOMMAND -h.
`

// policyCmd handles `clearance policy`.
func policyCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, policyUsage)
		return 2
	}
	switch args[0] {
	case "check":
		return policyCheck(args[1:], stdout, stderr)
	case "test":
		return policyTest(args[1:], stdout, stderr)
	case "eval":
		return policyEval(args[1:], stdout, stderr)
	case "replay":
		return policyReplay(ctx, args[1:], stdout, stderr)
	case "push":
		return policyPush(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "-help", "help":
		fmt.Fprint(stdout, policyUsage)
		return 0
	}
	fmt.Fprintf(stderr, "clearance: unknown policy command %q\n%s", args[0], policyUsage)
	return 2
}

// policyFlags is a subcommand's flag set; -h prints its usage to stdout.
type policyFlags struct {
	*flag.FlagSet
	usage          string
	stdout, stderr io.Writer
}

func newPolicyFlags(name, usage string, stdout, stderr io.Writer) *policyFlags {
	fs := flag.NewFlagSet("policy "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {} // printed by parse, to the right stream
	return &policyFlags{FlagSet: fs, usage: usage, stdout: stdout, stderr: stderr}
}

func (f *policyFlags) printUsage(w io.Writer) {
	fmt.Fprint(w, f.usage)
	f.SetOutput(w)
	f.PrintDefaults()
	f.SetOutput(f.stderr)
}

// parse parses flags anywhere among the arguments (FILE --flag and --flag
// FILE alike; after "--" everything is positional) and returns the
// positional ones, and an exit code >= 0 when the command is done: 0
// after -h, 2 on a bad flag or when the count of positional arguments is
// not npos.
func (f *policyFlags) parse(args []string, npos int) ([]string, int) {
	var pos []string
	for {
		err := f.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			f.printUsage(f.stdout)
			return nil, 0
		}
		if err != nil {
			f.printUsage(f.stderr)
			return nil, 2
		}
		rest := f.Args()
		if len(rest) == 0 {
			break
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	if len(pos) != npos {
		fmt.Fprintf(f.stderr, "clearance: %s takes %d argument(s), got %d\n", f.Name(), npos, len(pos))
		f.printUsage(f.stderr)
		return nil, 2
	}
	return pos, -1
}

// readBundleFile reads and compiles the bundle file name; on failure it
// has printed why and returns the exit code: 1 for a bundle with
// problems (each listed on stdout), 2 for a file that cannot be read.
func readBundleFile(cmd, name string, stdout, stderr io.Writer) (*policy.Compiled, int) {
	data, err := readInput(name)
	if err != nil {
		fmt.Fprintf(stderr, "clearance: %s: %v\n", cmd, err)
		return nil, 2
	}
	c, err := policyfile.ReadBundle(bundleName(name), data)
	if err != nil {
		n := printBundleProblems(stdout, err)
		fmt.Fprintf(stderr, "clearance: %s: %s: %d problem(s)\n", cmd, name, n)
		return nil, 1
	}
	return c, -1
}

// bundleName is the name whose extension says how to read the file: the
// standard input is JSON.
func bundleName(name string) string {
	if name == "-" {
		return "stdin.json"
	}
	return name
}

// printBundleProblems writes every problem of a bundle error, one per line,
// and returns how many.
func printBundleProblems(w io.Writer, err error) int {
	var ve *policy.ValidationError
	var se *strictjson.Error
	switch {
	case errors.As(err, &ve):
		for _, p := range ve.Problems {
			fmt.Fprintln(w, policyfile.FormatProblem(p))
		}
		return len(ve.Problems)
	case errors.As(err, &se):
		if se.Field != "" {
			fmt.Fprintf(w, "%s: %s: %s\n", se.Field, se.Code, se.Detail)
		} else {
			fmt.Fprintf(w, "%s: %s\n", se.Code, se.Detail)
		}
	default:
		fmt.Fprintln(w, err)
	}
	return 1
}

const policyCheckUsage = `usage: clearance policy check FILE
Compiles the bundle FILE (.json, .yaml or .yml) and prints
  ok: BUNDLE_ID VERSION N rules, digest sha256:…
or every problem, one per line, and exits 1.
`

func policyCheck(args []string, stdout, stderr io.Writer) int {
	f := newPolicyFlags("check", policyCheckUsage, stdout, stderr)
	pos, code := f.parse(args, 1)
	if code >= 0 {
		return code
	}
	c, code := readBundleFile("policy check", pos[0], stdout, stderr)
	if c == nil {
		return code
	}
	n := len(c.Bundle().Rules)
	rules := "rules"
	if n == 1 {
		rules = "rule"
	}
	s := c.Snapshot()
	fmt.Fprintf(stdout, "ok: %s %s %d %s, digest %s\n", s.BundleID, s.PolicyVersion, n, rules, s.BundleDigest)
	return 0
}

const policyTestUsage = `usage: clearance policy test DIR [--bundle FILE] [-v]
Runs every test file (*.yaml, *.yml) directly in DIR, in name order. A file
names its bundle (bundle, bundle_file relative to the file, or published);
one that names none is run against --bundle. Prints each failing case with
a diff of what it expected (-) against what happened (+), then
"N passed, M failed". Exit status: 0 all passed, 1 any failed, 2 usage or
an unreadable DIR or --bundle.
`

func policyTest(args []string, stdout, stderr io.Writer) int {
	f := newPolicyFlags("test", policyTestUsage, stdout, stderr)
	bundleFile := f.String("bundle", "", "default bundle `FILE` for test files that name none")
	verbose := f.Bool("v", false, "also list the cases that passed")
	pos, code := f.parse(args, 1)
	if code >= 0 {
		return code
	}
	dir := pos[0]
	var def *policy.Compiled
	if *bundleFile != "" {
		if def, code = readBundleFile("policy test: --bundle", *bundleFile, stdout, stderr); def == nil {
			return code
		}
	}
	// The file system is rooted at the volume so that bundle_file may name
	// a bundle beside the test directory (../payments.yaml).
	abs, err := filepath.Abs(dir)
	if err != nil {
		fmt.Fprintf(stderr, "clearance: policy test: %v\n", err)
		return 2
	}
	vol := filepath.VolumeName(abs)
	rel := filepath.ToSlash(strings.TrimLeft(abs[len(vol):], string(filepath.Separator)))
	if rel == "" {
		rel = "."
	}
	rep, err := policyfile.RunDir(os.DirFS(vol+string(filepath.Separator)), rel, def)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		fmt.Fprintf(stderr, "clearance: policy test: %s: %v\n", dir, err)
		return 2
	}
	if len(rep.Results) == 0 {
		fmt.Fprintf(stderr, "clearance: policy test: no test files (*.yaml, *.yml) in %s\n", dir)
		return 2
	}
	for i := range rep.Results {
		rep.Results[i].File = filepath.Join(dir, path.Base(rep.Results[i].File))
	}
	if *verbose {
		for _, r := range rep.Results {
			if r.Passed {
				fmt.Fprintf(stdout, "ok   %s: %s\n", r.File, r.Case)
			}
		}
	}
	fmt.Fprint(stdout, rep.String())
	if rep.Failed() > 0 {
		return 1
	}
	return 0
}

const policyEvalUsage = `usage: clearance policy eval FILE --input JSON|@FILE [--now RFC3339] [--explain]
Evaluates one intent (the evaluate-decision body: decision_type, workflow_key,
amount, context, actor, action, …) against the bundle FILE as if it were the
active policy, and prints {outcome, reason_codes, matched_rules, mode,
policy_snapshot} as JSON; --explain adds the explanation of every rule.
--input @FILE reads the intent from FILE, @- from standard input.
`

// policyEvalOutput is what eval prints.
type policyEvalOutput struct {
	Outcome         policy.Outcome      `json:"outcome"`
	ReasonCodes     []string            `json:"reason_codes"`
	MatchedRules    []string            `json:"matched_rules"`
	Mode            policy.Mode         `json:"mode"`
	PolicySnapshot  policy.Snapshot     `json:"policy_snapshot"`
	EvaluationError string              `json:"evaluation_error,omitempty"`
	Explanation     *policy.Explanation `json:"explanation,omitempty"`
}

func policyEval(args []string, stdout, stderr io.Writer) int {
	f := newPolicyFlags("eval", policyEvalUsage, stdout, stderr)
	input := f.String("input", "", "the intent as `JSON`, or @FILE (required)")
	nowFlag := f.String("now", "", "evaluation time, `RFC3339` (default: now)")
	explain := f.Bool("explain", false, "add the explanation of every rule")
	pos, code := f.parse(args, 1)
	if code >= 0 {
		return code
	}
	if *input == "" {
		fmt.Fprintln(stderr, "clearance: policy eval: --input is required")
		f.printUsage(stderr)
		return 2
	}
	now := time.Now().UTC()
	if *nowFlag != "" {
		t, err := time.Parse(time.RFC3339, *nowFlag)
		if err != nil {
			fmt.Fprintf(stderr, "clearance: policy eval: --now: %v\n", err)
			return 2
		}
		now = t
	}
	raw := []byte(*input)
	if name, ok := strings.CutPrefix(*input, "@"); ok {
		var err error
		if raw, err = readInput(name); err != nil {
			fmt.Fprintf(stderr, "clearance: policy eval: --input: %v\n", err)
			return 2
		}
	}
	c, code := readBundleFile("policy eval", pos[0], stdout, stderr)
	if c == nil {
		return code
	}
	intent, err := policy.DecodeIntent(raw)
	var in policy.Input
	if err == nil {
		in, err = intent.Input(now)
	}
	if err != nil {
		fmt.Fprintf(stderr, "clearance: policy eval: the input is refused: %v\n", err)
		return 1
	}
	d := c.Evaluate(&in)
	out := policyEvalOutput{
		Outcome:        d.Outcome,
		ReasonCodes:    d.ReasonCodes,
		MatchedRules:   d.MatchedRules,
		Mode:           policy.EffectiveMode(c.Mode(), in.RequestedMode),
		PolicySnapshot: c.Snapshot(),
	}
	if out.MatchedRules == nil {
		out.MatchedRules = []string{}
	}
	if d.Err != nil {
		out.EvaluationError = d.Err.Error()
	}
	if *explain {
		e := c.Explain(&in)
		out.Explanation = &e
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		fmt.Fprintf(stderr, "clearance: policy eval: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s\n", b)
	return 0
}

// serverFlags are --server and --key with their environment defaults.
type serverFlags struct{ server, key *string }

func addServerFlags(f *policyFlags) serverFlags {
	return serverFlags{
		server: f.String("server", env("CLEARANCE_SERVER", "http://127.0.0.1:8080"), "server `URL` (env CLEARANCE_SERVER)"),
		key:    f.String("key", os.Getenv("CLEARANCE_API_KEY"), "the org's API `KEY` (env CLEARANCE_API_KEY)"),
	}
}

func (s serverFlags) check(f *policyFlags) bool {
	if strings.TrimSpace(*s.key) == "" {
		fmt.Fprintf(f.stderr, "clearance: %s: --key or CLEARANCE_API_KEY is required\n", f.Name())
		return false
	}
	if u, err := neturl.Parse(*s.server); err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		fmt.Fprintf(f.stderr, "clearance: %s: --server %q is not an http(s) URL\n", f.Name(), *s.server)
		return false
	}
	return true
}

func (s serverFlags) url(p string) string { return strings.TrimRight(*s.server, "/") + p }

// apiAnswer is one HTTP answer of the server.
type apiAnswer struct {
	status int
	body   []byte
}

func (s serverFlags) do(ctx context.Context, method, p string, body []byte) (apiAnswer, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.url(p), rd)
	if err != nil {
		return apiAnswer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+*s.key)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return apiAnswer{}, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return apiAnswer{}, err
	}
	return apiAnswer{status: res.StatusCode, body: raw}, nil
}

// problem describes a refusal: the problem+json title, code and detail
// and each field error on a line of its own, or the status and body.
func (a apiAnswer) problem() string {
	var p struct {
		Title  string `json:"title"`
		Detail string `json:"detail"`
		Code   string `json:"code"`
		Errors []struct {
			Field   string `json:"field"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	if json.Unmarshal(a.body, &p) != nil || p.Code == "" && p.Title == "" {
		return fmt.Sprintf("HTTP %d %s: %s", a.status, http.StatusText(a.status), strings.TrimSpace(string(a.body)))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d %s", a.status, p.Title)
	if p.Code != "" {
		fmt.Fprintf(&b, " (%s)", p.Code)
	}
	if p.Detail != "" {
		fmt.Fprintf(&b, ": %s", p.Detail)
	}
	for _, e := range p.Errors {
		fmt.Fprintf(&b, "\n  %s: %s", e.Field, e.Message)
	}
	return b.String()
}

// printJSON writes a JSON answer indented, numbers as sent.
func printJSON(w io.Writer, raw []byte) {
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		w.Write(raw)
		return
	}
	b.WriteByte('\n')
	w.Write(b.Bytes())
}

const policyPushUsage = `usage: clearance policy push FILE [--draft NAME | --stage] [--server URL] [--key KEY]
Checks the bundle FILE (.json, .yaml or .yml) locally, then sends its JSON form:
  (default)     POST /v1/policies                 publish and activate
  --stage       POST /v1/policies?activate=false  publish without activating
  --draft NAME  PUT /v1/policies/drafts/NAME      save as the draft NAME
Prints the server's answer. A bundle with problems is listed and never sent (exit 1).
`

func policyPush(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newPolicyFlags("push", policyPushUsage, stdout, stderr)
	srv := addServerFlags(f)
	draft := f.String("draft", "", "save as the draft `NAME`")
	stage := f.Bool("stage", false, "publish without activating")
	pos, code := f.parse(args, 1)
	if code >= 0 {
		return code
	}
	if *draft != "" && *stage {
		fmt.Fprintln(stderr, "clearance: policy push: give --draft or --stage, not both")
		return 2
	}
	if !srv.check(f) {
		return 2
	}
	data, err := readInput(pos[0])
	if err != nil {
		fmt.Fprintf(stderr, "clearance: policy push: %v\n", err)
		return 2
	}
	js, err := policyfile.BundleJSON(bundleName(pos[0]), data)
	if err == nil {
		_, err = policy.Load(js)
	}
	if err != nil {
		n := printBundleProblems(stdout, err)
		fmt.Fprintf(stderr, "clearance: policy push: %s: %d problem(s); nothing was sent\n", pos[0], n)
		return 1
	}
	method, p := http.MethodPost, "/v1/policies"
	switch {
	case *draft != "":
		method, p = http.MethodPut, "/v1/policies/drafts/"+neturl.PathEscape(*draft)
	case *stage:
		p += "?activate=false"
	}
	a, err := srv.do(ctx, method, p, js)
	if err != nil {
		fmt.Fprintf(stderr, "clearance: policy push: %v\n", err)
		return 1
	}
	if a.status != http.StatusOK && a.status != http.StatusCreated {
		fmt.Fprintf(stderr, "clearance: policy push: %s\n", a.problem())
		return 1
	}
	printJSON(stdout, a.body)
	return 0
}

const policyReplayUsage = `usage: clearance policy replay (--draft NAME | --version V) --since DURATION|RFC3339
                              [--until RFC3339] [--examples N] [--wait=false] [--server URL] [--key KEY]
Replays the org's recorded decisions of [since, until) against a draft or a
published version (POST /v1/policies/replays) and prints what would change.
--since 24h means 24 hours before now; --until defaults to now. A queued
replay is followed (GET /v1/policies/replays/{id}, every 500ms, progress on
stderr) until it is done or failed, unless --wait=false.
Exit status: 0 done (or queued with --wait=false), 1 failed or refused, 2 usage.
`

func policyReplay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newPolicyFlags("replay", policyReplayUsage, stdout, stderr)
	srv := addServerFlags(f)
	draft := f.String("draft", "", "replay the draft `NAME`")
	version := f.String("version", "", "replay the published version `V`")
	since := f.String("since", "", "start of the window: a `DURATION` before now (24h) or an RFC 3339 time (required)")
	until := f.String("until", "", "end of the window, `RFC3339` (default: now)")
	examples := f.Int("examples", 0, "at most `N` changed decisions to show (default: the server's)")
	wait := f.Bool("wait", true, "follow a queued replay until it is done or failed")
	if _, code := f.parse(args, 0); code >= 0 {
		return code
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "clearance: policy replay: "+format+"\n", a...)
		f.printUsage(stderr)
		return 2
	}
	if (*draft == "") == (*version == "") {
		return usageErr("give one of --draft and --version")
	}
	if *since == "" {
		return usageErr("--since is required")
	}
	if *examples < 0 {
		return usageErr("--examples must not be negative")
	}
	now := time.Now().UTC()
	from, err := replaySince(*since, now)
	if err != nil {
		return usageErr("--since: %v", err)
	}
	to := now
	if *until != "" {
		if to, err = time.Parse(time.RFC3339, *until); err != nil {
			return usageErr("--until: %v", err)
		}
	}
	if !from.Before(to) {
		return usageErr("--since must be before --until")
	}
	if !srv.check(f) {
		return 2
	}
	req := map[string]any{"from": from.Format(time.RFC3339Nano), "to": to.Format(time.RFC3339Nano)}
	if *draft != "" {
		req["draft"] = *draft
	} else {
		req["version"] = *version
	}
	examplesSet := false
	f.Visit(func(fl *flag.Flag) { examplesSet = examplesSet || fl.Name == "examples" })
	if examplesSet {
		req["examples"] = *examples
	}
	body, _ := json.Marshal(req)
	a, err := srv.do(ctx, http.MethodPost, "/v1/policies/replays", body)
	if err != nil {
		fmt.Fprintf(stderr, "clearance: policy replay: %v\n", err)
		return 1
	}
	switch {
	case a.status == http.StatusOK:
		return replayFinished(a.body, stdout, stderr)
	case a.status == http.StatusAccepted && !*wait:
		printJSON(stdout, a.body)
		return 0
	case a.status != http.StatusAccepted:
		fmt.Fprintf(stderr, "clearance: policy replay: %s\n", a.problem())
		return 1
	}
	st := readReplayStatus(a.body)
	if st.ID == "" {
		fmt.Fprintf(stderr, "clearance: policy replay: the server queued the replay without a replay_id: %s\n", a.body)
		return 1
	}
	lastProgress := st.progress()
	if lastProgress != "" {
		fmt.Fprintln(stderr, lastProgress)
	}
	ticker := time.NewTicker(500 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintf(stderr, "clearance: policy replay: %v\n", ctx.Err())
			return 1
		case <-ticker.C:
		}
		a, err := srv.do(ctx, http.MethodGet, "/v1/policies/replays/"+neturl.PathEscape(st.ID), nil)
		if err != nil {
			fmt.Fprintf(stderr, "clearance: policy replay: %v\n", err)
			return 1
		}
		if a.status != http.StatusOK {
			fmt.Fprintf(stderr, "clearance: policy replay: %s\n", a.problem())
			return 1
		}
		cur := readReplayStatus(a.body)
		if p := cur.progress(); p != "" && p != lastProgress {
			fmt.Fprintln(stderr, p)
			lastProgress = p
		}
		if cur.Status == "done" || cur.Status == "failed" {
			return replayFinished(a.body, stdout, stderr)
		}
	}
}

// replaySince reads --since: a positive duration before now, or a time.
func replaySince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, errors.New("the duration must be positive")
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither a duration (24h) nor an RFC 3339 time", s)
	}
	return t, nil
}

// replayStatus is what the CLI reads of a replay job: its id, status and
// progress, at the top level or under "progress".
type replayStatus struct {
	ID        string `json:"replay_id"`
	Status    string `json:"status"`
	Processed *int64 `json:"processed"`
	Total     *int64 `json:"total"`
	Progress  *struct {
		Processed *int64 `json:"processed"`
		Total     *int64 `json:"total"`
	} `json:"progress"`
	Failure string `json:"failure"`
}

func readReplayStatus(raw []byte) replayStatus {
	var st replayStatus
	_ = json.Unmarshal(raw, &st)
	if st.Progress != nil {
		if st.Processed == nil {
			st.Processed = st.Progress.Processed
		}
		if st.Total == nil {
			st.Total = st.Progress.Total
		}
	}
	return st
}

func (st replayStatus) progress() string {
	if st.Processed == nil || st.Total == nil {
		return ""
	}
	return fmt.Sprintf("processed %d of %d", *st.Processed, *st.Total)
}

// replayFinished prints a finished replay: exit 0 unless it failed.
func replayFinished(raw []byte, stdout, stderr io.Writer) int {
	printJSON(stdout, raw)
	if st := readReplayStatus(raw); st.Status == "failed" {
		why := st.Failure
		if why == "" {
			why = "no reason given"
		}
		fmt.Fprintf(stderr, "clearance: policy replay: the replay failed: %s\n", why)
		return 1
	}
	return 0
}
