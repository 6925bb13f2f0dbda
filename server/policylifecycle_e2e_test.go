package server_test

// End-to-end tests of the policy lifecycle over HTTP, on Pebble or
// PostgreSQL (CLEARANCE_E2E_STORE): an author drafts a policy, edits it
// under If-Match, validates, diffs and dry-runs it, replays it over
// decisions recorded through evaluate-decision (inline and queued, the
// queued one followed by GET and by its event stream), promotes it, and
// reproduces and explains recorded decisions; another org reaches none of
// it. Every expectation is computed by the test from what it sent (its
// own model of the bundles), never taken from the server's answers.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/server"
)

// plRule is the test's own model of a bundle rule: it matches amount >=
// min (when min > 0) and workflow_key == workflow (when set).
type plRule struct {
	id, outcome, code string
	min               float64
	workflow          string
}

// plModel is the test's model of a bundle: evaluate is written here from
// the documented semantics (every matching rule contributes, the most
// restrictive outcome wins, codes are PROTOCOL_OUTCOME_<outcome>, then
// POLICY_MATCHED or NO_RULE_MATCHED, then the winning rules' codes in
// rule order).
type plModel struct {
	version string
	rules   []plRule
	def     string // the default's reason code (outcome ALLOW)
}

var plRank = map[string]int{"ALLOW": 0, "ESCALATE": 1, "REVIEW_REQUIRED": 2, "BLOCK": 3}

// plVerdict is an outcome with its reason codes and matched rules.
type plVerdict struct {
	outcome string
	codes   []string
	rules   []string
}

func (m plModel) evaluate(amount float64, workflow string) plVerdict {
	var winners []plRule
	for _, r := range m.rules {
		if r.min > 0 && amount < r.min || r.workflow != "" && workflow != r.workflow {
			continue
		}
		switch {
		case len(winners) == 0 || plRank[r.outcome] > plRank[winners[0].outcome]:
			winners = []plRule{r}
		case plRank[r.outcome] == plRank[winners[0].outcome]:
			winners = append(winners, r)
		}
	}
	if len(winners) == 0 {
		return plVerdict{outcome: "ALLOW", codes: []string{"PROTOCOL_OUTCOME_ALLOW", "NO_RULE_MATCHED", m.def}}
	}
	v := plVerdict{outcome: winners[0].outcome, codes: []string{"PROTOCOL_OUTCOME_" + winners[0].outcome, "POLICY_MATCHED"}}
	for _, r := range winners {
		v.rules = append(v.rules, r.id)
		if !slices.Contains(v.codes[2:], r.code) {
			v.codes = append(v.codes, r.code)
		}
	}
	return v
}

// bundle is the model as a bundle document.
func (m plModel) bundle(bundleID, mode string) string {
	var rules []string
	for _, r := range m.rules {
		var sel string
		if r.workflow != "" {
			sel = `"workflow_keys":[` + lit(r.workflow) + `],`
		}
		var match string
		if r.min > 0 {
			match = fmt.Sprintf(`"match":[{"field":"amount","op":"ge","value":%g}],`, r.min)
		}
		rules = append(rules, `{"id":`+lit(r.id)+`,`+sel+match+`"outcome":`+lit(r.outcome)+`,"reason_codes":[`+lit(r.code)+`]}`)
	}
	return `{"bundle_id":` + lit(bundleID) + `,"version":` + lit(m.version) + `,"mode":` + lit(mode) + `,"rules":[` +
		strings.Join(rules, ",") + `],"default":{"outcome":"ALLOW","reason_codes":[` + lit(m.def) + `]}}`
}

// plV1 is bandsBundle (v1, ENFORCEMENT), as the test models it.
var plV1 = plModel{version: "v1", def: "OK", rules: []plRule{
	{id: "esc", outcome: "ESCALATE", code: "MID", min: 1000},
	{id: "rev", outcome: "REVIEW_REQUIRED", code: "HIGH", min: 5000},
	{id: "blk", outcome: "BLOCK", code: "TOO_BIG", min: 10000},
}}

// plV2First is the draft as first written; plV2 as edited: escalation from
// 500, payouts to review, a block from 7,000 with another reason code, and
// no review band (stricter below 1,000, more lenient from 5,000 to 7,000).
var (
	plV2First = plModel{version: "v2", def: "OK", rules: []plRule{
		{id: "esc", outcome: "ESCALATE", code: "MID", min: 800},
	}}
	plV2 = plModel{version: "v2", def: "OK", rules: []plRule{
		{id: "esc", outcome: "ESCALATE", code: "MID", min: 500},
		{id: "payouts", outcome: "REVIEW_REQUIRED", code: "PAYOUT_REVIEW", workflow: "payouts"},
		{id: "blk", outcome: "BLOCK", code: "OVER_LIMIT", min: 7000},
	}}
)

// plDecision is a decision the test recorded.
type plDecision struct {
	dossierID, workflow, decisionType string
	amount                            float64
	recorded                          plVerdict
}

// plTally is the test's recount of one slice of a replay.
type plTally struct {
	Replayed    int            `json:"replayed"`
	Changed     int            `json:"changed"`
	ByDirection map[string]int `json:"by_direction"`
}

// plRecount is what the test expects a replay of m over ds to say.
type plRecount struct {
	Total, Replayed, Skipped, Changed, Unchanged int
	MoreRestrictive, LessRestrictive             int
	ReasonCodesChanged                           int
	ByDirection                                  map[string]int
	ByWorkflow, ByDecisionType                   map[string]*plTally
	Examples                                     []string // dossier ids
}

func plRecountOf(m plModel, ds []plDecision, examples int) plRecount {
	r := plRecount{ByDirection: map[string]int{}, ByWorkflow: map[string]*plTally{}, ByDecisionType: map[string]*plTally{}}
	for _, d := range ds {
		r.Total++
		r.Replayed++
		got := m.evaluate(d.amount, d.workflow)
		changed := got.outcome != d.recorded.outcome
		dir := d.recorded.outcome + "->" + got.outcome
		for key, tallies := range map[string]map[string]*plTally{d.workflow: r.ByWorkflow, d.decisionType: r.ByDecisionType} {
			t := tallies[key]
			if t == nil {
				t = &plTally{}
				tallies[key] = t
			}
			t.Replayed++
			if changed {
				t.Changed++
				if t.ByDirection == nil {
					t.ByDirection = map[string]int{}
				}
				t.ByDirection[dir]++
			}
		}
		if !changed {
			r.Unchanged++
			if !slices.Equal(got.codes, d.recorded.codes) {
				r.ReasonCodesChanged++
			}
			continue
		}
		r.Changed++
		r.ByDirection[dir]++
		if plRank[got.outcome] > plRank[d.recorded.outcome] {
			r.MoreRestrictive++
		} else {
			r.LessRestrictive++
		}
		if len(r.Examples) < examples {
			r.Examples = append(r.Examples, d.dossierID)
		}
	}
	return r
}

// check compares a replay's result with the recount.
func (want plRecount) check(t *testing.T, what string, result any) {
	t.Helper()
	res, ok := result.(map[string]any)
	if !ok {
		t.Fatalf("%s: no result: %v", what, result)
	}
	num := func(k string) int { f, _ := res[k].(float64); return int(f) }
	for k, v := range map[string]int{"total": want.Total, "replayed": want.Replayed, "skipped": want.Skipped, "changed": want.Changed,
		"unchanged": want.Unchanged, "more_restrictive": want.MoreRestrictive, "less_restrictive": want.LessRestrictive,
		"reason_codes_changed": want.ReasonCodesChanged} {
		if num(k) != v {
			t.Errorf("%s: %s = %d, the recount says %d", what, k, num(k), v)
		}
	}
	var got struct {
		ByDirection    map[string]int      `json:"by_direction"`
		ByWorkflow     map[string]*plTally `json:"by_workflow"`
		ByDecisionType map[string]*plTally `json:"by_decision_type"`
		Examples       []struct {
			DossierID string `json:"dossier_id"`
		} `json:"examples"`
	}
	raw, _ := json.Marshal(res)
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.ByDirection, want.ByDirection) {
		t.Errorf("%s: by_direction %v, the recount says %v", what, got.ByDirection, want.ByDirection)
	}
	for name, pair := range map[string][2]map[string]*plTally{"by_workflow": {got.ByWorkflow, want.ByWorkflow},
		"by_decision_type": {got.ByDecisionType, want.ByDecisionType}} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			t.Errorf("%s: %s %s, the recount says %s", what, name, mustJSON(t, pair[0]), mustJSON(t, pair[1]))
		}
	}
	ids := make([]string, 0, len(got.Examples))
	for _, e := range got.Examples {
		ids = append(ids, e.DossierID)
	}
	if !slices.Equal(ids, want.Examples) && !(len(ids) == 0 && len(want.Examples) == 0) {
		t.Errorf("%s: examples %v, the recount says %v (the first changed, oldest first)", what, ids, want.Examples)
	}
}

// plEvent is one server-sent event.
type plEvent struct {
	name string
	data map[string]any
}

// plStream reads a replay's event stream.
type plStream struct {
	t    *testing.T
	res  *http.Response
	rd   *bufio.Reader
	stop context.CancelFunc
}

func plOpenStream(t *testing.T, x *execEnv, path, key string) *plStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	rq, err := http.NewRequestWithContext(ctx, http.MethodGet, x.srv.URL+path, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	rq.Header.Set("Authorization", "Bearer "+key)
	res, err := x.client.Do(rq)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &plStream{t: t, res: res, rd: bufio.NewReader(res.Body), stop: cancel}
	t.Cleanup(s.close)
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%s: want 200 text/event-stream, got %d %q", path, res.StatusCode, res.Header.Get("Content-Type"))
	}
	return s
}

func (s *plStream) close() {
	s.stop()
	s.res.Body.Close()
}

// next reads the next event; ok is false at the end of the stream.
func (s *plStream) next() (ev plEvent, ok bool) {
	s.t.Helper()
	for {
		line, err := s.rd.ReadString('\n')
		if err != nil {
			if line != "" {
				s.t.Fatalf("event stream ends inside a line: %q", line)
			}
			return ev, false
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev.name == "" {
				s.t.Fatal("an event without a name")
			}
			return ev, true
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.data); err != nil {
				s.t.Fatalf("event data %q: %v", line, err)
			}
		default:
			s.t.Fatalf("unexpected event stream line %q", line)
		}
	}
}

func TestPolicyLifecycleEndToEnd(t *testing.T) {
	t.Parallel()
	const inlineLimit = 6
	x := newExecEnvWith(t, bandsBundle, func(x *execEnv) {
		x.tune = func(o *clearance.Options) { o.ReplayInlineLimit = inlineLimit }
	})
	a, b := x.o, x.createOrg("Lifecycle B")
	draft := func(name string) string { return plDraftsPath + "/" + name }
	headA := x.head(a.Key)
	if headA == 0 {
		t.Fatal("org a's ledger is empty: its bundle was published")
	}

	// --- Drafts: create, read, edit under If-Match. Nothing is ledgered.
	r := x.req(t, "PUT", draft("next"), a.Key, plV2First.bundle("exec", "ENFORCEMENT"), nil).want(t, http.StatusCreated)
	if r.Header.Get("ETag") != `"1"` || r.num("revision") != 1 || r.str("name") != "next" || r.str("org_id") != a.ID {
		t.Fatalf("create draft: %s %v", r, r.Header)
	}
	r = x.req(t, "PUT", draft("next"), a.Key, plV2.bundle("exec", "ENFORCEMENT"), map[string]string{"If-Match": `"1"`}).
		want(t, http.StatusOK)
	if r.Header.Get("ETag") != `"2"` || r.num("revision") != 2 {
		t.Fatalf("update draft: %s %v", r, r.Header)
	}
	// A stale edit changes nothing.
	x.req(t, "PUT", draft("next"), a.Key, plV2First.bundle("exec", "ENFORCEMENT"), map[string]string{"If-Match": `"1"`}).
		wantProblem(t, http.StatusConflict, "DRAFT_REVISION_MISMATCH")
	x.req(t, "PUT", draft("never"), a.Key, plV2.bundle("exec", "ENFORCEMENT"), map[string]string{"If-Match": "1"}).
		wantProblem(t, http.StatusConflict, "DRAFT_REVISION_MISMATCH")
	r = x.req(t, "GET", draft("next"), a.Key, nil, nil).want(t, http.StatusOK)
	if r.Header.Get("ETag") != `"2"` || r.num("revision") != 2 || !sameJSON(t, lookup(r.JSON, "bundle"), plV2.bundle("exec", "ENFORCEMENT")) {
		t.Fatalf("the draft is not the edit: %s", r)
	}
	// Delete under If-Match; a name created again continues counting.
	x.req(t, "PUT", draft("scratch"), a.Key, plV2.bundle("exec", "SHADOW"), nil).want(t, http.StatusCreated)
	x.req(t, "DELETE", draft("scratch"), a.Key, nil, map[string]string{"If-Match": `"2"`}).
		wantProblem(t, http.StatusConflict, "DRAFT_REVISION_MISMATCH")
	x.req(t, "DELETE", draft("scratch"), a.Key, nil, map[string]string{"If-Match": `"1"`}).want(t, http.StatusNoContent)
	x.req(t, "GET", draft("scratch"), a.Key, nil, nil).wantProblem(t, http.StatusNotFound, "POLICY_DRAFT_NOT_FOUND")
	x.req(t, "DELETE", draft("scratch"), a.Key, nil, nil).wantProblem(t, http.StatusNotFound, "POLICY_DRAFT_NOT_FOUND")
	if r := x.req(t, "PUT", draft("scratch"), a.Key, plV2.bundle("exec", "SHADOW"), nil).want(t, http.StatusCreated); r.num("revision") != 2 {
		t.Errorf("a draft created again under a deleted name: want revision 2: %s", r)
	}
	x.req(t, "DELETE", draft("scratch"), a.Key, nil, nil).want(t, http.StatusNoContent)

	// A broken draft is kept as written; validating it lists every problem.
	const broken = `{"bundle_id":"","version":"bad version!","mode":"LOUD","rules":[` +
		`{"id":"r1","match":[{"field":"amount","op":"gte","value":1}],"outcome":"MAYBE","reason_codes":[]}],` +
		`"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`
	x.req(t, "PUT", draft("broken"), a.Key, broken, nil).want(t, http.StatusCreated)
	r = x.req(t, "GET", draft("broken"), a.Key, nil, nil).want(t, http.StatusOK)
	if !sameJSON(t, lookup(r.JSON, "bundle"), broken) {
		t.Errorf("the broken draft is not kept as written: %s", r)
	}
	r = x.req(t, "POST", draft("broken")+"/validate", a.Key, nil, nil).wantProblem(t, http.StatusUnprocessableEntity, "POLICY_INVALID")
	var fields []string
	for _, e := range lookup(r.JSON, "errors").([]any) {
		fields = append(fields, fmt.Sprint(lookup(e, "field"), ": ", lookup(e, "message")))
	}
	all := strings.Join(fields, "\n")
	for _, problem := range []string{"bundle_id", "version", "mode", "op", "outcome", "reason_codes"} {
		if !strings.Contains(all, problem) {
			t.Errorf("validation of the broken draft does not list its %s problem:\n%s", problem, all)
		}
	}
	if len(fields) < 6 {
		t.Errorf("validation lists %d problems, the draft has 6:\n%s", len(fields), all)
	}
	// The valid draft validates to what publishing it makes (its digest,
	// computed here from the document sent).
	wantDigest := plDigest(t, plV2.bundle("exec", "ENFORCEMENT"))
	r = x.req(t, "POST", draft("next")+"/validate", a.Key, nil, nil).want(t, http.StatusOK)
	if r.str("bundle_digest") != wantDigest || lookup(r.JSON, "valid") != true || r.num("rule_count") != 3 || r.str("version") != "v2" ||
		r.num("revision") != 2 {
		t.Errorf("validate: %s (want digest %s)", r, wantDigest)
	}
	r = x.req(t, "GET", plDraftsPath, a.Key, nil, nil).want(t, http.StatusOK)
	var listed []string
	for _, d := range lookup(r.JSON, "drafts").([]any) {
		listed = append(listed, lookup(d, "name").(string))
		if lookup(d, "bundle") != nil {
			t.Errorf("a listed draft carries its bundle: %s", r)
		}
	}
	sort.Strings(listed)
	if !slices.Equal(listed, []string{"broken", "next"}) {
		t.Errorf("draft list %v, want [broken next]", listed)
	}

	// --- Diff against the active version.
	r = x.req(t, "GET", plDiffPath+"?from=v1&to=draft:next", a.Key, nil, nil).want(t, http.StatusOK)
	if lookup(r.JSON, "identical") != false || !slices.Equal(r.strs("rules_added"), []string{"payouts"}) ||
		!slices.Equal(r.strs("rules_removed"), []string{"rev"}) || lookup(r.JSON, "bundle_id") != nil || lookup(r.JSON, "mode") != nil ||
		r.str("from") != "v1" || r.str("to") != "draft:next" {
		t.Errorf("diff v1 -> draft:next: %s", r)
	}
	var changedRules []string
	for _, c := range lookup(r.JSON, "rules_changed").([]any) {
		changedRules = append(changedRules, fmt.Sprint(lookup(c, "rule_id"), lookup(c, "fields")))
	}
	if !slices.Equal(changedRules, []string{"esc[match]", "blk[match reason_codes]"}) {
		t.Errorf("diff v1 -> draft:next: rules changed %v, want esc (match) and blk (match, reason codes)", changedRules)
	}
	if r := x.req(t, "GET", plDiffPath+"?from=draft:next&to=draft:next", a.Key, nil, nil).want(t, http.StatusOK); lookup(r.JSON, "identical") != true {
		t.Errorf("a draft against itself is not identical: %s", r)
	}
	x.req(t, "GET", plDiffPath+"?from=v1&to=draft:broken", a.Key, nil, nil).want(t, http.StatusOK) // a draft need not be valid

	// --- Dry runs record nothing: no dossier, ledger entry or idempotency
	// record; they never authorize.
	decideKey, readKey := x.createKey(a, "decision:write"), x.createKey(a, "decision:read")
	fp := x.fingerprint(t)
	head := x.head(a.Key)
	dryBody := `{"amount":700,"workflow_key":"refunds","decision_type":"REFUND"}`
	idem := map[string]string{server.HeaderIdempotencyKey: "lifecycle-dry-1"}
	r = x.req(t, "POST", plDryRunPath+"?draft=next&explain=true", a.Key, dryBody, idem).want(t, http.StatusOK)
	want := plV2.evaluate(700, "refunds")
	if r.Header.Get(server.HeaderDryRun) != "true" || lookup(r.JSON, "dry_run") != true || lookup(r.JSON, "authorizes") != false ||
		lookup(r.JSON, "should_execute") != false || r.str("outcome") != want.outcome || !slices.Equal(r.strs("reason_codes"), want.codes) ||
		r.str("mode") != "SHADOW" || r.str("policy_snapshot.policy_version") != "v2" || r.str("policy_snapshot.bundle_digest") != wantDigest ||
		r.str("dossier_id") != "" || r.str("org_id") != a.ID {
		t.Errorf("dry run under the draft: want %s %v, SHADOW, marked: %s %v", want.outcome, want.codes, r, r.Header)
	}
	if !plHasFlip(r.JSON, "explanation.flips", "amount", "ALLOW") || lookup(r.JSON, "explanation.rules") == nil {
		t.Errorf("dry run explanation: want a flip of amount to ALLOW: %s", r)
	}
	// The active policy, without a candidate: ENFORCEMENT, and still no authority.
	r = x.req(t, "POST", plDryRunPath, a.Key, `{"amount":50}`, idem).want(t, http.StatusOK)
	if v := plV1.evaluate(50, ""); r.str("outcome") != v.outcome || r.str("mode") != "ENFORCEMENT" || lookup(r.JSON, "authorizes") != false ||
		lookup(r.JSON, "should_execute") != false || lookup(r.JSON, "explanation") != nil {
		t.Errorf("dry run under the active policy: %s", r)
	}
	x.req(t, "POST", plDryRunPath+"?version=v1", decideKey, dryBody, nil).want(t, http.StatusOK)
	x.req(t, "POST", plDryRunPath, readKey, dryBody, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	x.req(t, "POST", plDryRunPath+"?draft=broken", a.Key, dryBody, nil).wantProblem(t, http.StatusUnprocessableEntity, "POLICY_INVALID")
	if got := x.head(a.Key); got != head {
		t.Errorf("dry runs moved the ledger head %d -> %d", head, got)
	}
	if got := x.fingerprint(t); got != fp {
		t.Errorf("dry runs changed the store: %s -> %s", fp, got)
	}
	// The Idempotency-Key of a dry run names nothing: a decision may use it.
	x.req(t, "POST", pathEvaluate, a.Key, `{"amount":1}`, idem).want(t, http.StatusOK)
	x.advance(time.Minute)

	// --- Decisions recorded through evaluate-decision, one a minute.
	start := x.clock()
	var ds []plDecision
	for i, d := range []struct {
		amount   float64
		workflow string
	}{
		{50, "refunds"}, {700, "refunds"}, {1500, "refunds"}, {3000, "payouts"}, {6000, "refunds"},
		{12000, "refunds"}, {400, "payouts"}, {900, "refunds"}, {2500, "refunds"}, {800, "payouts"},
	} {
		dt := map[string]string{"refunds": "REFUND", "payouts": "PAYOUT"}[d.workflow]
		r := x.req(t, "POST", pathEvaluate, a.Key, fmt.Sprintf(`{"amount":%g,"workflow_key":%q,"decision_type":%q}`, d.amount, d.workflow, dt),
			nil).want(t, http.StatusOK)
		rec := plVerdict{outcome: r.str("outcome"), codes: r.strs("reason_codes")}
		// The test's model of v1 must predict what was recorded.
		if want := plV1.evaluate(d.amount, d.workflow); rec.outcome != want.outcome || !slices.Equal(rec.codes, want.codes) {
			t.Fatalf("decision %d: recorded %s %v, the model of v1 says %s %v", i, rec.outcome, rec.codes, want.outcome, want.codes)
		}
		ds = append(ds, plDecision{dossierID: r.str("dossier_id"), workflow: d.workflow, decisionType: dt, amount: d.amount, recorded: rec})
		x.advance(time.Minute)
	}
	end := x.clock()
	window := func(from, to time.Time) string {
		return `"from":` + lit(from.Format(time.RFC3339)) + `,"to":` + lit(to.Format(time.RFC3339))
	}

	// --- Replays. A window within the inline limit is answered done.
	head = x.head(a.Key)
	firstFive := ds[:5]
	r = x.req(t, "POST", plReplaysPath, a.Key, `{"draft":"next",`+window(start, start.Add(5*time.Minute))+`,"examples":2}`, nil).
		want(t, http.StatusOK)
	if r.str("status") != "done" || r.Header.Get("Location") != plReplaysPath+"/"+r.str("replay_id") || r.str("policy_version") != "v2" ||
		r.str("bundle_digest") != wantDigest || r.str("candidate.draft") != "next" || r.num("processed") != 5 || r.num("total") != 5 {
		t.Errorf("inline replay: %s %v", r, r.Header)
	}
	plRecountOf(plV2, firstFive, 2).check(t, "inline replay", lookup(r.JSON, "result"))
	inline := r.str("replay_id")
	if g := x.req(t, "GET", plReplaysPath+"/"+inline, a.Key, nil, nil).want(t, http.StatusOK); !sameJSON(t, g.JSON, string(r.Raw)) {
		t.Errorf("GET of a done replay differs from its answer:\n%s\n%s", g, r)
	}
	// A replay of a policy that reads signals skips every decision: none
	// recorded signals, so what they were is unknown.
	x.req(t, "PUT", draft("signals"), a.Key, plSignalsBundle, nil).want(t, http.StatusCreated)
	r = x.req(t, "POST", plReplaysPath, a.Key, `{"draft":"signals",`+window(start, start.Add(5*time.Minute))+`}`, nil).want(t, http.StatusOK)
	if r.num("result.total") != 5 || r.num("result.skipped") != 5 || r.num("result.replayed") != 0 ||
		r.num("result.skipped_by_reason.SIGNALS_NOT_RECORDED") != 5 {
		t.Errorf("replay of a signals policy: want every decision skipped: %s", r)
	}
	// A version replays too: v1 over its own decisions changes nothing.
	r = x.req(t, "POST", plReplaysPath, a.Key, `{"version":"v1",`+window(start, start.Add(5*time.Minute))+`}`, nil).want(t, http.StatusOK)
	plRecountOf(plV1, firstFive, 10).check(t, "replay of v1", lookup(r.JSON, "result"))

	// A window of more decisions than the inline limit is queued; the test
	// server runs no worker, so the test runs it: GET and the event stream
	// follow it to done.
	r = x.req(t, "POST", plReplaysPath, a.Key, `{"draft":"next",`+window(start, end)+`,"examples":3}`, nil).want(t, http.StatusAccepted)
	queued := r.str("replay_id")
	loc := plReplaysPath + "/" + queued
	if r.str("status") != "queued" || r.Header.Get("Location") != loc || r.num("total") != float64(len(ds)) || r.num("processed") != 0 ||
		lookup(r.JSON, "result") != nil {
		t.Fatalf("queued replay: %s %v", r, r.Header)
	}
	if g := x.req(t, "GET", loc, a.Key, nil, nil).want(t, http.StatusOK); g.str("status") != "queued" || g.num("total") != float64(len(ds)) {
		t.Fatalf("GET of a queued replay: %s", g)
	}
	stream := plOpenStream(t, x, loc+"/events", a.Key)
	ev, ok := stream.next()
	if !ok || ev.name != "progress" || ev.data["status"] != "queued" || ev.data["processed"] != 0.0 || ev.data["total"] != float64(len(ds)) {
		t.Fatalf("first event of a queued replay: %v %v", ev, ok)
	}
	n, err := x.engine.Policies.ProcessReplays(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("ProcessReplays: %d, %v", n, err)
	}
	var done plEvent
	for {
		ev, ok := stream.next()
		if !ok {
			t.Fatal("the event stream ended without a done event")
		}
		if ev.name == "progress" {
			continue
		}
		if ev.name != "done" {
			t.Fatalf("want done, got %q: %v", ev.name, ev.data)
		}
		done = ev
		break
	}
	if _, ok := stream.next(); ok {
		t.Error("the event stream goes on after done")
	}
	g := x.req(t, "GET", loc, a.Key, nil, nil).want(t, http.StatusOK)
	if g.str("status") != "done" || g.num("processed") != float64(len(ds)) || g.str("finished_at") == "" || !sameJSON(t, done.data, string(g.Raw)) {
		t.Errorf("the done event and GET disagree:\n%v\n%s", done.data, g)
	}
	plRecountOf(plV2, ds, 3).check(t, "queued replay", lookup(g.JSON, "result"))
	// A finished replay streams its one done event.
	again := plOpenStream(t, x, loc+"/events", a.Key)
	if ev, ok := again.next(); !ok || ev.name != "done" || !sameJSON(t, ev.data, string(g.Raw)) {
		t.Errorf("the stream of a done replay: %v", ev)
	}
	if _, ok := again.next(); ok {
		t.Error("the stream of a done replay goes on")
	}
	if got := x.head(a.Key); got != head {
		t.Errorf("replays moved the ledger head %d -> %d", head, got)
	}

	// --- Reproduce and explain recorded decisions (under v1).
	d := ds[2] // 1,500 refunds: ESCALATE under v1, and under the draft
	r = x.req(t, "GET", pathDossiers+d.dossierID+"/reproduce", a.Key, nil, nil).want(t, http.StatusOK)
	if lookup(r.JSON, "matches") != true || r.str("policy_version") != "v1" || r.str("reproduced.outcome") != d.recorded.outcome ||
		!slices.Equal(r.strs("reproduced.reason_codes"), d.recorded.codes) || !slices.Equal(r.strs("recorded.reason_codes"), d.recorded.codes) {
		t.Errorf("reproduce: %s", r)
	}
	plain := x.req(t, "GET", pathDossiers+d.dossierID, a.Key, nil, nil).want(t, http.StatusOK)
	r = x.req(t, "GET", pathDossiers+d.dossierID+"?explain=true", a.Key, nil, nil).want(t, http.StatusOK)
	if !sameJSON(t, lookup(r.JSON, "dossier"), string(plain.Raw)) || r.Header.Get(server.HeaderDossierDigest) != sha256Digest(plain.Raw) ||
		r.str("explanation.outcome") != d.recorded.outcome || r.str("explanation.policy_version") != "v1" ||
		r.str("explanation.recorded.outcome") != d.recorded.outcome || lookup(r.JSON, "explanation.candidate") != nil {
		t.Errorf("explained dossier: %s", r)
	}
	// Under v1, 1,500 escalates; below 1,000 it would have been allowed.
	if !plHasFlip(r.JSON, "explanation.flips", "amount", "ALLOW") {
		t.Errorf("explained dossier: want a flip of amount to ALLOW: %s", r)
	}
	// How the draft would have decided the same recorded input.
	r = x.req(t, "GET", pathDossiers+ds[4].dossierID+"?explain=true&draft=next", a.Key, nil, nil).want(t, http.StatusOK)
	if want := plV2.evaluate(ds[4].amount, ds[4].workflow); r.str("explanation.outcome") != want.outcome ||
		r.str("explanation.candidate.draft") != "next" || r.str("explanation.recorded.outcome") != ds[4].recorded.outcome {
		t.Errorf("explained under the draft: want %s: %s", want.outcome, r)
	}
	readOnly := readKey
	x.req(t, "GET", pathDossiers+d.dossierID+"?explain=true", readOnly, nil, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	x.req(t, "GET", pathDossiers+d.dossierID, readOnly, nil, nil).want(t, http.StatusOK)
	x.req(t, "GET", pathDossiers+d.dossierID+"?explain=true", x.createKey(a, "decision:read", "policy:read"), nil, nil).want(t, http.StatusOK)
	x.req(t, "GET", pathDossiers+d.dossierID+"/reproduce", readOnly, nil, nil).want(t, http.StatusOK)

	// --- Another org reaches none of it (404, nothing changed).
	fp = x.fingerprint(t)
	headB := x.head(b.Key)
	if r := x.req(t, "GET", plDraftsPath, b.Key, nil, nil).want(t, http.StatusOK); len(lookup(r.JSON, "drafts").([]any)) != 0 {
		t.Errorf("org b lists drafts: %s", r)
	}
	x.req(t, "GET", draft("next"), b.Key, nil, nil).wantProblem(t, http.StatusNotFound, "POLICY_DRAFT_NOT_FOUND")
	x.req(t, "PUT", draft("next"), b.Key, plV2.bundle("x", "SHADOW"), map[string]string{"If-Match": `"2"`}).
		wantProblem(t, http.StatusConflict, "DRAFT_REVISION_MISMATCH")
	x.req(t, "DELETE", draft("next"), b.Key, nil, nil).wantProblem(t, http.StatusNotFound, "POLICY_DRAFT_NOT_FOUND")
	x.req(t, "POST", draft("next")+"/validate", b.Key, nil, nil).wantProblem(t, http.StatusNotFound, "POLICY_DRAFT_NOT_FOUND")
	x.req(t, "POST", draft("next")+"/promote", b.Key, nil, nil).wantProblem(t, http.StatusNotFound, "POLICY_DRAFT_NOT_FOUND")
	x.req(t, "GET", plDiffPath+"?from=draft:next&to=draft:next", b.Key, nil, nil).wantProblem(t, http.StatusNotFound, "POLICY_DRAFT_NOT_FOUND")
	x.req(t, "POST", plDryRunPath+"?draft=next", b.Key, dryBody, nil).wantProblem(t, http.StatusNotFound, "POLICY_DRAFT_NOT_FOUND")
	x.req(t, "POST", plReplaysPath, b.Key, `{"draft":"next",`+window(start, end)+`}`, nil).wantProblem(t, http.StatusNotFound, "POLICY_DRAFT_NOT_FOUND")
	for _, id := range []string{inline, queued} {
		x.req(t, "GET", plReplaysPath+"/"+id, b.Key, nil, nil).wantProblem(t, http.StatusNotFound, "REPLAY_NOT_FOUND")
		x.req(t, "GET", plReplaysPath+"/"+id+"/events", b.Key, nil, nil).wantProblem(t, http.StatusNotFound, "REPLAY_NOT_FOUND")
	}
	x.req(t, "GET", pathDossiers+d.dossierID+"/reproduce", b.Key, nil, nil).wantProblem(t, http.StatusNotFound, "DOSSIER_NOT_FOUND")
	x.req(t, "GET", pathDossiers+d.dossierID+"?explain=true", b.Key, nil, nil).wantProblem(t, http.StatusNotFound, "DOSSIER_NOT_FOUND")
	x.req(t, "GET", plDraftsPath+"?org_id="+a.ID, b.Key, nil, nil).wantProblem(t, http.StatusForbidden, "ORG_MISMATCH")
	x.req(t, "GET", plReplaysPath+"/"+queued+"?org_id="+a.ID, b.Key, nil, nil).wantProblem(t, http.StatusForbidden, "ORG_MISMATCH")
	if got := x.head(b.Key); got != headB {
		t.Errorf("org b's refused requests moved its ledger head %d -> %d", headB, got)
	}
	if got := x.fingerprint(t); got != fp {
		t.Errorf("org b's refused requests changed the store")
	}
	// The platform key reads org a's drafts by naming it.
	if r := x.req(t, "GET", plDraftsPath+"?org_id="+a.ID, x.platform, nil, nil).want(t, http.StatusOK); len(lookup(r.JSON, "drafts").([]any)) != 3 {
		t.Errorf("the platform key's view of org a's drafts: %s", r)
	}

	// --- Promote: published, then activated (ledgered), the draft gone.
	head = x.head(a.Key)
	x.req(t, "POST", draft("next")+"/promote", a.Key, `{"expected_revision":1}`, nil).wantProblem(t, http.StatusConflict, "DRAFT_REVISION_MISMATCH")
	x.req(t, "POST", draft("next")+"/promote", a.Key, `{"expected_active_version":"v0"}`, nil).
		wantProblem(t, http.StatusConflict, "ACTIVE_VERSION_MISMATCH")
	x.req(t, "POST", draft("broken")+"/promote", a.Key, nil, nil).wantProblem(t, http.StatusUnprocessableEntity, "POLICY_INVALID")
	if got := x.head(a.Key); got != head {
		t.Fatalf("refused promotions moved the ledger head %d -> %d", head, got)
	}
	r = x.req(t, "POST", draft("next")+"/promote", a.Key, `{"expected_active_version":"v1","expected_revision":2}`, nil).
		want(t, http.StatusCreated)
	if r.str("draft") != "next" || r.num("revision") != 2 || lookup(r.JSON, "created") != true || r.str("published.version") != "v2" ||
		r.str("published.bundle_digest") != wantDigest || lookup(r.JSON, "published.active") != true ||
		r.str("activation.active_version") != "v2" || r.str("activation.previous_version") != "v1" || lookup(r.JSON, "activation.changed") != true {
		t.Errorf("promote: %s", r)
	}
	entries := x.entries(a.Key)
	if len(entries) < 2 || uint64(len(entries)) != head+2 {
		t.Fatalf("promotion: want two new ledger entries after %d, got %d", head, len(entries))
	}
	for i, kind := range []string{"policy.published", "policy.activated"} {
		en := entries[len(entries)-2+i]
		if en["kind"] != kind || en["subject_id"] != "v2" || en["payload_digest"] != wantDigest {
			t.Errorf("promotion's ledger entry %d: want %s of v2 (%s): %v", i, kind, wantDigest, en)
		}
	}
	if float64(head+1) != r.num("published.ledger_seq") || float64(head+2) != r.num("activation.ledger_seq") {
		t.Errorf("promotion: ledger seqs %v, %v after head %d", r.num("published.ledger_seq"), r.num("activation.ledger_seq"), head)
	}
	x.ledgerOK(t)
	x.req(t, "GET", draft("next"), a.Key, nil, nil).wantProblem(t, http.StatusNotFound, "POLICY_DRAFT_NOT_FOUND")
	x.req(t, "POST", draft("next")+"/promote", a.Key, nil, nil).wantProblem(t, http.StatusNotFound, "POLICY_DRAFT_NOT_FOUND")
	if r := x.req(t, "GET", pathBundles, a.Key, nil, nil).want(t, http.StatusOK); r.str("active_version") != "v2" {
		t.Errorf("after promotion the active version is %q: %s", r.str("active_version"), r)
	}
	// Decisions now go by v2, in ENFORCEMENT; earlier dossiers still
	// reproduce under v1.
	r = x.req(t, "POST", pathEvaluate, a.Key, `{"amount":700,"workflow_key":"payouts","decision_type":"PAYOUT"}`, nil).want(t, http.StatusOK)
	if want := plV2.evaluate(700, "payouts"); r.str("outcome") != want.outcome || !slices.Equal(r.strs("reason_codes"), want.codes) ||
		r.str("mode") != "ENFORCEMENT" || r.str("policy_snapshot.policy_version") != "v2" {
		t.Errorf("a decision under the promoted version: want %s %v: %s", want.outcome, want.codes, r)
	}
	for _, id := range []string{r.str("dossier_id"), ds[5].dossierID} {
		if rep := x.req(t, "GET", pathDossiers+id+"/reproduce", a.Key, nil, nil).want(t, http.StatusOK); lookup(rep.JSON, "matches") != true {
			t.Errorf("reproduce %s: %s", id, rep)
		}
	}
}

// TestPolicyLifecycleDryRunRateLimit: a dry run spends the credential's
// token bucket like evaluate-decision.
func TestPolicyLifecycleDryRunRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{RateLimit: 0.001, RateBurst: 3, AuthRateLimit: -1})
	o := e.createOrg("Limited")
	body := `{"amount":5}`
	e.do("POST", plDryRunPath, o.Key, body, nil).want(t, http.StatusOK)
	e.do("POST", pathEvaluate, o.Key, body, nil).want(t, http.StatusOK)
	e.do("POST", plDryRunPath, o.Key, body, nil).want(t, http.StatusOK)
	r := e.do("POST", plDryRunPath, o.Key, body, nil).wantProblem(t, http.StatusTooManyRequests, "RATE_LIMITED")
	if r.Header.Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After: %v", r.Header)
	}
	e.do("POST", pathEvaluate, o.Key, body, nil).wantProblem(t, http.StatusTooManyRequests, "RATE_LIMITED")
}

// plDigest is Clearance's digest of a bundle document: sha256 of its RFC
// 8785 form.
func plDigest(t *testing.T, doc string) string {
	t.Helper()
	b, err := canon.Transform([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return sha256Digest(b)
}

// sameJSON reports whether v (decoded JSON) and doc are the same JSON value.
func sameJSON(t *testing.T, v any, doc string) bool {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(doc), &w); err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var g any
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(g, w)
}

// plHasFlip reports whether the flips at path include one of field that
// turns the outcome into outcome.
func plHasFlip(v map[string]any, path, field, outcome string) bool {
	flips, _ := lookup(v, path).([]any)
	for _, f := range flips {
		if lookup(f, "field") == field && lookup(f, "outcome") == outcome {
			return true
		}
	}
	return false
}
