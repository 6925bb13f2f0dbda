package server_test

import (
	"fmt"
	"mime"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/clearancehq/clearance/tenant"
)

// The policy lifecycle's routes in the bad-input suite: drafts (list, put,
// get, delete, validate, promote), diffs, dry runs, replays and their
// progress stream, the reproduction of a dossier, and the explanation of a
// dossier (GET /v1/protocol/dossiers/{dossierId}?explain=true, whose
// cases are added to that route's spec).
//
// policyLifecycleTargets makes, after the ledgers are sealed, what the bad
// requests aim at: drafts of org a (none of them ledgered), a done replay
// of each org, and a draft of org b whose name org a must never reach. The
// accepted requests change only their own draft (put, delete, promote) or
// add a replay; promotion publishes a staged version, last of all.

// Paths of the policy lifecycle.
const (
	plDraftsPath  = "/v1/policies/drafts"
	plDiffPath    = "/v1/policies/diff"
	plDryRunPath  = "/v1/policies/dry-run"
	plReplaysPath = "/v1/policies/replays"
)

// Drafts of the bad-input suite (org a unless named otherwise).
const (
	plKeep    = "bi-keep"    // valid: read, validated, diffed, dry run and replayed
	plPut     = "bi-put"     // valid, revision 1: the accepted PUT replaces it (If-Match "1")
	plDel     = "bi-del"     // the accepted DELETE deletes it
	plGone    = "bi-gone"    // deleted already
	plPromote = "bi-promote" // the accepted promotion publishes it (staged)
	plBroken  = "bi-broken"  // does not compile: every problem listed
	plSignals = "bi-signals" // reads signals no recorded decision has
	plOnlyB   = "bi-b-only"  // org b's only draft
)

// plBundle is a valid SHADOW bundle of version: from 1,000 BLOCK, else
// ALLOW.
func plBundle(version string) string {
	return `{"bundle_id":"lifecycle","version":` + lit(version) + `,"mode":"SHADOW","rules":[` +
		`{"id":"big","match":[{"field":"amount","op":"ge","value":1000}],"outcome":"BLOCK","reason_codes":["BIG"]}],` +
		`"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`
}

// plPutBody is the accepted PUT's body: no member of a free type (a
// predicate's value), so that every wrong type is refused.
const plPutBody = `{"bundle_id":"lifecycle","version":"bi-put-2","mode":"SHADOW","rules":[` +
	`{"id":"refunds","workflow_keys":["refunds"],"outcome":"BLOCK","reason_codes":["REFUNDS"]}],` +
	`"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`

// plBrokenBundle is well formed with six problems: an empty bundle_id, a
// version outside the grammar, an unknown mode, an unknown op, an unknown
// outcome and a rule without reason codes.
const plBrokenBundle = `{"bundle_id":"","version":"bad version!","mode":"LOUD","rules":[` +
	`{"id":"r1","match":[{"field":"amount","op":"gte","value":1}],"outcome":"MAYBE","reason_codes":[]}],` +
	`"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`

// plSignalsBundle blocks on a fraud signal.
const plSignalsBundle = `{"bundle_id":"lifecycle","version":"bi-sig","mode":"SHADOW","rules":[` +
	`{"id":"fraud","match":[{"field":"signals.fraud.alert.data.level","op":"eq","value":"high"}],"outcome":"BLOCK","reason_codes":["FRAUD"]}],` +
	`"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`

// plTargets are what the lifecycle routes' bad requests aim at.
type plTargets struct {
	replayA, replayB   string // done replays
	dossierA, dossierB string // of the suite's accepted decisions
	from, to           string // the replays' window
}

// policyLifecycleTargets makes the drafts and replays of the suite.
func (s *badSuite) policyLifecycleTargets(dec, decB *result) plTargets {
	t, x := s.t, s.x
	put := func(o org, name, body string) {
		x.req(t, "PUT", plDraftsPath+"/"+name, o.Key, body, nil).want(t, http.StatusCreated)
	}
	put(s.a, plKeep, plBundle("bi-keep-1"))
	put(s.a, plPut, plBundle("bi-put-1"))
	put(s.a, plDel, plBundle("bi-del-1"))
	put(s.a, plGone, plBundle("bi-gone-1"))
	x.req(t, "DELETE", plDraftsPath+"/"+plGone, s.a.Key, nil, nil).want(t, http.StatusNoContent)
	put(s.a, plPromote, plBundle("bi-p1"))
	put(s.a, plBroken, plBrokenBundle)
	put(s.a, plSignals, plSignalsBundle)
	put(s.b, plOnlyB, plBundle("bi-b-1"))

	a := plTargets{dossierA: dec.str("dossier_id"), dossierB: decB.str("dossier_id"),
		from: execStart.Add(-24 * time.Hour).Format(time.RFC3339), to: execStart.Add(24 * time.Hour).Format(time.RFC3339)}
	replay := func(o org, body string) string {
		r := x.req(t, "POST", plReplaysPath, o.Key, body, nil).want(t, http.StatusOK)
		if r.str("status") != "done" || r.num("result.total") < 1 {
			t.Fatalf("want a done replay of at least one decision: %s", r)
		}
		return r.str("replay_id")
	}
	a.replayA = replay(s.a, `{"from":`+lit(a.from)+`,"to":`+lit(a.to)+`,"draft":`+lit(plKeep)+`}`)
	a.replayB = replay(s.b, `{"from":`+lit(a.from)+`,"to":`+lit(a.to)+`}`)
	return a
}

// addPolicyLifecycleSpecs adds the lifecycle routes' specs to specs, and
// the explanation's cases to the dossier route's.
func (s *badSuite) addPolicyLifecycleSpecs(specs map[string]routeSpec, dec, decB *result) {
	a := s.policyLifecycleTargets(dec, decB)
	for pattern, spec := range s.policyLifecycleSpecs(a, specs) {
		specs[pattern] = spec
	}
}

// plExact is a case on q with the status and code it must get.
func (s *badSuite) plExact(q req, category, name, body string, status int, code ...string) badCase {
	c := s.variant(q, category, name, body, code...)
	c.status = status
	return c
}

// plAt is q on another path (the body kept).
func (s *badSuite) plAt(q req, category, name, path string, status int, code ...string) badCase {
	p := q
	p.path = path
	return s.plExact(p, category, name, p.body, status, code...)
}

// plQuery is q with another query (the body kept).
func (s *badSuite) plQuery(q req, category, name, query string, status int, code ...string) badCase {
	p := q
	p.query = query
	return s.plExact(p, category, name, p.body, status, code...)
}

// plAcceptedOnNull drops the battery's case that sends the body's first
// member as null: strict JSON reads a null member as absent, and a draft
// without its bundle_id is still a well-formed draft (kept, not refused;
// validation reports it), so that case would be the accepted PUT.
func plAcceptedOnNull(cases []badCase, first string) []badCase {
	out := cases[:0]
	for _, c := range cases {
		if c.category == catNonObject && c.name == first+" null" {
			continue
		}
		out = append(out, c)
	}
	return out
}

// plIfMatch are the If-Match values refused as malformed (400
// INVALID_REQUEST): not one positive integer, quoted or not.
var plIfMatch = []struct {
	name string
	vs   []string
}{
	{"empty", []string{""}}, {"blank", []string{"  "}}, {"star", []string{"*"}}, {"weak tag", []string{`W/"1"`}},
	{"zero", []string{`"0"`}}, {"zero unquoted", []string{"0"}}, {"negative", []string{`"-1"`}},
	{"not a number", []string{`"abc"`}}, {"empty tag", []string{`""`}}, {"unbalanced quote", []string{`"1`}},
	{"trailing space", []string{`"1 "`}}, {"decimal", []string{`"1.0"`}}, {"exponent", []string{"1e0"}},
	{"hex", []string{"0x1"}}, {"overflow", []string{"99999999999999999999"}}, {"two tags", []string{`"1", "2"`}},
	{"sent twice", []string{`"1"`, `"1"`}}, {"sent twice, differing", []string{`"1"`, `"2"`}},
	{"fullwidth digit", []string{"\uff11"}}, {"C1", []string{"1\u0085"}}, {"zero-width space", []string{"1\u200b"}},
}

// ifMatchCases are q with bad If-Match headers: malformed (400) and stale
// (409 DRAFT_REVISION_MISMATCH).
func (s *badSuite) ifMatchCases(q req, stale string) []badCase {
	var out []badCase
	for _, v := range plIfMatch {
		c := s.plExact(q, catHeader, "If-Match "+v.name, q.body, http.StatusBadRequest, "INVALID_REQUEST")
		c.rawHeaders = http.Header{"If-Match": v.vs}
		out = append(out, c)
	}
	out = append(out, s.plExact(q, catValue, "If-Match of another revision", q.body, http.StatusConflict,
		"DRAFT_REVISION_MISMATCH").with("If-Match", stale))
	return out
}

// plNames are draft names no draft has: outside the grammar, look-alikes
// of a draft's name, another org's draft, a deleted one.
func plNames(name string) []struct{ name, seg string } {
	return []struct{ name, seg string }{
		{"101 characters", strings.Repeat("n", 101)}, {"a space", "bi%20keep"}, {"a colon", "draft:" + name},
		{"a zero-width space", name + "%E2%80%8B"}, {"a bidi override", "%E2%80%AE" + name}, {"a no-break space", name + "%C2%A0"},
		{"a Cyrillic look-alike", strings.Replace(name, "i", "%D1%96", 1)}, {"another case", strings.ToUpper(name)},
		{"a trailing dot", name + "."}, {"an accented letter", "caf%C3%A9"}, {"a tab", name + "%09"}, {"a plus", name + "+"},
	}
}

// policyLifecycleSpecs describes the lifecycle routes; specs is the
// suite's table so far (the dry run reuses evaluate-decision's cases, the
// dossier route gets the explanation's).
func (s *badSuite) policyLifecycleSpecs(a plTargets, specs map[string]routeSpec) map[string]routeSpec {
	draftPath := func(name string) string { return plDraftsPath + "/" + name }
	// notFound are a draft route's cases on names no draft of org a has
	// (status and code of a route that reads the draft).
	notFound := func(q req, suffix string) []badCase {
		var out []badCase
		for _, v := range plNames(plKeep) {
			out = append(out, s.plAt(q, catPath, "name with "+v.name, draftPath(v.seg)+suffix, http.StatusNotFound, "POLICY_DRAFT_NOT_FOUND"))
		}
		out = append(out, s.plAt(q, catPath, "a deleted draft", draftPath(plGone)+suffix, http.StatusNotFound, "POLICY_DRAFT_NOT_FOUND"))
		out = append(out, s.plAt(q, catForeign, "another org's draft", draftPath(plOnlyB)+suffix, http.StatusNotFound, "POLICY_DRAFT_NOT_FOUND"))
		return out
	}

	list := routeSpec{org: orgQuery}

	// PUT: the suite sends bodies with POST only, so the body cases are
	// added here; every one carries the accepted If-Match, so that what
	// would be a well-formed draft elsewhere could not be written either.
	put := routeSpec{org: orgQuery, params: map[string]string{"name": plPut}, body: plPutBody,
		headers:    map[string]string{"If-Match": `"1"`},
		paramCodes: []string{"INVALID_REQUEST", "DRAFT_REVISION_MISMATCH"}}
	put.extra = func(q req) []badCase {
		out := plAcceptedOnNull(s.bodyCases(q, put), "bundle_id")
		out = append(out, s.ifMatchCases(q, `"2"`)...)
		for _, v := range plNames(plPut) {
			want := "INVALID_REQUEST"
			if v.name == "another case" || v.name == "a trailing dot" {
				want = "DRAFT_REVISION_MISMATCH" // in the grammar: no draft of that name at revision 1
			}
			status := map[string]int{"INVALID_REQUEST": http.StatusBadRequest, "DRAFT_REVISION_MISMATCH": http.StatusConflict}[want]
			out = append(out, s.plAt(q, catPath, "name with "+v.name, draftPath(v.seg), status, want))
		}
		// Another org's draft of the same name is no draft of this org.
		out = append(out, s.plAt(q, catForeign, "another org's draft name", draftPath(plOnlyB), http.StatusConflict, "DRAFT_REVISION_MISMATCH"))
		out = append(out, s.plAt(q, catValue, "a deleted draft at its last revision", draftPath(plGone), http.StatusConflict, "DRAFT_REVISION_MISMATCH"))
		// Well-formed JSON that is no bundle document.
		for _, b := range []string{`{"bundle_id":"x","rules":{}}`, `{"rules":[{"id":"r","match":{}}]}`,
			`{"rules":[{"id":"r","match":[{"field":5}]}]}`, `{"default":[]}`, `{"source":"repo"}`,
			`{"source":{"repository":"r","commit":"c","branch":"main"}}`, `{"rules":[{"id":"r","when":5}]}`,
			`{"rules":[{"id":"r","reason_codes":"BIG"}]}`, `{"bundle":` + plPutBody + `}`} {
			out = append(out, s.plExact(q, catValue, b, b, http.StatusBadRequest, "WRONG_TYPE", "UNKNOWN_MEMBER"))
		}
		return out
	}

	get := routeSpec{org: orgQuery, params: map[string]string{"name": plKeep}, paramCodes: []string{"POLICY_DRAFT_NOT_FOUND"},
		extra: func(q req) []badCase { return notFound(q, "") }}

	del := routeSpec{org: orgQuery, params: map[string]string{"name": plDel}, paramCodes: []string{"POLICY_DRAFT_NOT_FOUND"},
		headers: map[string]string{"If-Match": `"1"`}}
	del.extra = func(q req) []badCase {
		out := notFound(q, "")
		return append(out, s.ifMatchCases(q, `"2"`)...)
	}

	validate := routeSpec{org: orgQuery, params: map[string]string{"name": plKeep}, paramCodes: []string{"POLICY_DRAFT_NOT_FOUND"},
		body: `{}`, emptyOK: true}
	validate.extra = func(q req) []badCase {
		out := notFound(q, "/validate")
		out = append(out, s.plAt(q, catValue, "a draft that does not compile", draftPath(plBroken)+"/validate",
			http.StatusUnprocessableEntity, "POLICY_INVALID"))
		for _, b := range []string{`{"name":"bi-keep"}`, `{"revision":1}`, `[]`, `null`, `"bi-keep"`} {
			out = append(out, s.plExact(q, catUnknown, "a body "+b, b, http.StatusBadRequest, "UNKNOWN_MEMBER", "WRONG_TYPE"))
		}
		return out
	}

	// Promotion: staged (activate false), so that the accepted request
	// changes no active version; last of all the phases all the same. Its
	// expected_active_version holds only when activating: the battery's
	// "activate null" (activating) is refused by it, and changes nothing.
	promote := routeSpec{org: orgQuery, params: map[string]string{"name": plPromote}, paramCodes: []string{"POLICY_DRAFT_NOT_FOUND"},
		body:    `{"activate":false,"expected_active_version":"bi-not-active","expected_revision":1}`,
		emptyOK: true, // no body promotes under the draft's version and activates
		phase:   phaseRevokes + 1,
		numbers: []string{`{"activate":false,"expected_revision":@@}`},
		idents:  []string{`{"activate":false,"version":@@}`, `{"activate":false,"expected_active_version":@@}`}}
	promote.extra = func(q req) []badCase {
		out := notFound(q, "/promote")
		out = append(out, s.plAt(q, catValue, "a draft that does not compile", draftPath(plBroken)+"/promote",
			http.StatusUnprocessableEntity, "POLICY_INVALID"))
		for _, v := range []struct {
			body   string
			status int
			code   string
		}{
			{`{"activate":false,"expected_revision":-1}`, 400, "INVALID_REQUEST"},
			{`{"activate":false,"expected_revision":2}`, 409, "DRAFT_REVISION_MISMATCH"},
			{`{"activate":false,"expected_revision":1.5}`, 400, "WRONG_TYPE"},
			{`{"activate":false,"expected_revision":"1"}`, 400, "WRONG_TYPE"},
			{`{"activate":false,"version":"bad version"}`, 400, "INVALID_REQUEST"},
			{`{"activate":false,"version":` + lit(strings.Repeat("v", 101)) + `}`, 400, "INVALID_REQUEST"},
			{`{"activate":false,"version":"v1"}`, 409, "POLICY_VERSION_CONFLICT"},
			{`{"activate":true,"expected_active_version":"bi-not-active"}`, 409, "ACTIVE_VERSION_MISMATCH"},
			{`{"expected_active_version":"bi-not-active"}`, 409, "ACTIVE_VERSION_MISMATCH"},
			{`{"activate":false,"expected_active_version":"v 1"}`, 400, "INVALID_REQUEST"},
			{`{"activate":"false"}`, 400, "WRONG_TYPE"},
			{`{"activate":0}`, 400, "WRONG_TYPE"},
			{`{"activate":false,"draft":"bi-keep"}`, 400, "UNKNOWN_MEMBER"},
			{`{"activate":false,"Version":"x"}`, 400, "UNKNOWN_MEMBER"},
		} {
			out = append(out, s.plExact(q, catValue, v.body, v.body, v.status, v.code))
		}
		for _, l := range lookAlikes {
			b := `{"activate":false,"version":` + l + `}`
			out = append(out, s.plExact(q, catLookAlike, "version "+shorten(l), b, http.StatusBadRequest, "INVALID_REQUEST"))
		}
		return out
	}

	diff := routeSpec{org: orgQuery, query: "?from=v1&to=draft:" + plKeep}
	diff.extra = func(q req) []badCase {
		var out []badCase
		for _, v := range []string{"", "?from=v1", "?to=v1", "?from=&to=v1", "?from=v1&to=", "?from=v1&from=v1&to=v1",
			"?from=v1&to=v1&to=draft:bi-keep", "?from=%zz&to=v1", "?from=v1;to=v1", "?from[]=v1&to=v1", "?FROM=v1&TO=v1"} {
			out = append(out, s.plQuery(q, catQuery, "query "+plQueryName(v), v, http.StatusBadRequest, "INVALID_QUERY"))
		}
		for _, v := range []struct{ query, code string }{
			{"?from=never-published&to=v1", "POLICY_VERSION_NOT_FOUND"},
			{"?from=v1&to=draft:never-drafted", "POLICY_DRAFT_NOT_FOUND"},
			{"?from=draft:&to=v1", "POLICY_DRAFT_NOT_FOUND"},
			{"?from=draft:" + plGone + "&to=v1", "POLICY_DRAFT_NOT_FOUND"},
			{"?from=draft:%00&to=v1", "POLICY_DRAFT_NOT_FOUND"},
			{"?from=draft:bi-keep%0A&to=v1", "POLICY_DRAFT_NOT_FOUND"},
			{"?from=v1%00&to=v1", "POLICY_VERSION_NOT_FOUND"},
			{"?from=v1%C2%85&to=v1", "POLICY_VERSION_NOT_FOUND"},
			{"?from=%FF%FE&to=v1", "POLICY_VERSION_NOT_FOUND"},
			{"?from=v1%20&to=v1", "POLICY_VERSION_NOT_FOUND"},
			{"?from=" + strings.Repeat("v", 4096) + "&to=v1", "POLICY_VERSION_NOT_FOUND"},
			{"?from=DRAFT:" + plKeep + "&to=v1", "POLICY_VERSION_NOT_FOUND"},
			{"?from=draft:" + strings.ToUpper(plKeep) + "&to=v1", "POLICY_DRAFT_NOT_FOUND"},
			{"?from=draft:draft:" + plKeep + "&to=v1", "POLICY_DRAFT_NOT_FOUND"},
			{"?from=v1&to=bad-1", "POLICY_VERSION_NOT_FOUND"}, // refused by every publish of the battery
		} {
			out = append(out, s.plQuery(q, catQuery, "query "+shorten(v.query), v.query, http.StatusNotFound, v.code))
		}
		out = append(out, s.plQuery(q, catForeign, "another org's draft", "?from=v1&to=draft:"+plOnlyB,
			http.StatusNotFound, "POLICY_DRAFT_NOT_FOUND"))
		c := s.plExact(q, catForeign, "another org's key on this org's draft", "", http.StatusNotFound, "POLICY_DRAFT_NOT_FOUND",
			"POLICY_VERSION_NOT_FOUND")
		c.key = s.b.Key
		return append(out, c)
	}

	// The dry run takes evaluate-decision's body and answers its refusals
	// with the same codes: its spec is evaluate-decision's, with the
	// candidate and explanation queries.
	dry := specs["POST /v1/protocol/evaluate-decision"]
	if dry.body == "" {
		s.t.Fatal("the bad-input suite has no evaluate-decision spec to derive the dry run's from")
	}
	dry.query = "?explain=true"
	evalExtra := dry.extra
	dry.extra = func(q req) []badCase {
		var out []badCase
		if evalExtra != nil {
			out = evalExtra(q)
		}
		for _, v := range []string{"?explain=maybe", "?explain=", "?explain=TRUE", "?explain=1", "?explain=yes",
			"?explain=true&explain=true", "?explain=true&explain=false", "?explain=true%00", "?explain=%zz",
			"?draft=" + plKeep + "&version=v1", "?draft=", "?version=", "?draft=&version=", "?draft=" + plKeep + "&draft=" + plKeep,
			"?version=v1&version=v1", "?draft=%zz", "?draft=bi-keep;version=v1"} {
			out = append(out, s.plQuery(q, catQuery, "query "+plQueryName(v), v, http.StatusBadRequest, "INVALID_QUERY"))
		}
		for _, v := range []struct {
			query  string
			status int
			code   string
		}{
			{"?draft=never-drafted", 404, "POLICY_DRAFT_NOT_FOUND"},
			{"?draft=" + plGone, 404, "POLICY_DRAFT_NOT_FOUND"},
			{"?draft=%00", 404, "POLICY_DRAFT_NOT_FOUND"},
			{"?draft=bi-keep%E2%80%8B", 404, "POLICY_DRAFT_NOT_FOUND"},
			{"?draft=" + strings.Repeat("d", 4096), 404, "POLICY_DRAFT_NOT_FOUND"},
			{"?version=never-published", 404, "POLICY_VERSION_NOT_FOUND"},
			{"?version=v1%0A", 404, "POLICY_VERSION_NOT_FOUND"},
			{"?version=draft:" + plKeep, 404, "POLICY_VERSION_NOT_FOUND"},
			{"?draft=" + plBroken + "&explain=true", 422, "POLICY_INVALID"},
		} {
			out = append(out, s.plQuery(q, catQuery, "query "+shorten(v.query), v.query, v.status, v.code))
		}
		out = append(out, s.plQuery(q, catForeign, "another org's draft", "?draft="+plOnlyB, http.StatusNotFound, "POLICY_DRAFT_NOT_FOUND"))
		c := s.plQuery(q, catForeign, "another org's key naming this org's draft", "?draft="+plKeep, http.StatusNotFound,
			"POLICY_DRAFT_NOT_FOUND")
		c.key = s.b.Key
		return append(out, c)
	}

	// Replays: "from" first, so that the null battery case is a request
	// without a window (MISSING_FIELD).
	replayBody := func(members string) string {
		return `{"from":` + lit(a.from) + `,"to":` + lit(a.to) + members + `}`
	}
	replays := routeSpec{org: orgQuery, body: replayBody(`,"draft":` + lit(plKeep) + `,"examples":5`),
		numbers: []string{`{"from":` + lit(a.from) + `,"draft":"bi-keep","examples":@@}`},
		idents:  []string{`{"from":` + lit(a.from) + `,"draft":@@}`, `{"from":` + lit(a.from) + `,"version":@@}`}}
	replays.extra = func(q req) []badCase {
		var out []badCase
		for _, v := range []struct {
			body   string
			status int
			code   string
		}{
			{`{"draft":"bi-keep"}`, 400, "MISSING_FIELD"},
			{`{"draft":"bi-keep","from":""}`, 400, "MISSING_FIELD"},
			{`{"draft":"bi-keep","from":"yesterday"}`, 400, "INVALID_REQUEST"},
			{`{"draft":"bi-keep","from":"2026-11-01"}`, 400, "INVALID_REQUEST"},
			{`{"draft":"bi-keep","from":"2026-13-01T00:00:00Z"}`, 400, "INVALID_REQUEST"},
			{`{"draft":"bi-keep","from":"2026-11-01T00:00:00+25:00"}`, 400, "INVALID_REQUEST"},
			{`{"draft":"bi-keep","from":"1e3"}`, 400, "INVALID_REQUEST"},
			{`{"draft":"bi-keep","from":1730000000}`, 400, "WRONG_TYPE"},
			{`{"draft":"bi-keep","from":` + lit(a.from) + `,"to":"tomorrow"}`, 400, "INVALID_REQUEST"},
			{`{"draft":"bi-keep","from":` + lit(a.to) + `,"to":` + lit(a.from) + `}`, 400, "INVALID_REQUEST"},
			{`{"draft":"bi-keep","from":` + lit(a.from) + `,"to":` + lit(a.from) + `}`, 400, "INVALID_REQUEST"},
			{`{"draft":"bi-keep","from":"2100-01-01T00:00:00Z"}`, 400, "INVALID_REQUEST"}, // after now: an empty window
			{replayBody(`,"draft":"bi-keep","examples":-1`), 400, "INVALID_REQUEST"},
			{replayBody(`,"draft":"bi-keep","examples":101`), 400, "INVALID_REQUEST"},
			{replayBody(`,"draft":"bi-keep","examples":1.5`), 400, "WRONG_TYPE"},
			{replayBody(`,"draft":"bi-keep","version":"v1"`), 400, "INVALID_REQUEST"},
			{replayBody(`,"draft":"never-drafted"`), 404, "POLICY_DRAFT_NOT_FOUND"},
			{replayBody(`,"draft":` + lit(plGone)), 404, "POLICY_DRAFT_NOT_FOUND"},
			{replayBody(`,"draft":` + lit(plOnlyB)), 404, "POLICY_DRAFT_NOT_FOUND"},
			{replayBody(`,"version":"never-published"`), 404, "POLICY_VERSION_NOT_FOUND"},
			{replayBody(`,"version":"bad version"`), 404, "POLICY_VERSION_NOT_FOUND"},
			{replayBody(`,"draft":` + lit(plBroken)), 422, "POLICY_INVALID"},
			{replayBody(`,"draft":"bi-keep","candidate":{"draft":"bi-keep"}`), 400, "UNKNOWN_MEMBER"},
			{replayBody(`,"draft":"bi-keep","Examples":5`), 400, "UNKNOWN_MEMBER"},
			{replayBody(`,"draft":"bi-keep","org_id":` + lit(s.a.ID)), 400, "UNKNOWN_MEMBER"},
		} {
			out = append(out, s.plExact(q, catValue, shorten(v.body), v.body, v.status, v.code))
		}
		c := s.plExact(q, catForeign, "another org's key naming this org's draft", q.body, http.StatusNotFound, "POLICY_DRAFT_NOT_FOUND")
		c.key = s.b.Key
		return append(out, c)
	}

	// A replay and its progress stream.
	replayRead := func(suffix string) routeSpec {
		return routeSpec{org: orgQuery, params: map[string]string{"replayId": a.replayA}, paramCodes: []string{"REPLAY_NOT_FOUND"},
			extra: func(q req) []badCase {
				out := []badCase{s.plAt(q, catForeign, "another org's replay", plReplaysPath+"/"+a.replayB+suffix,
					http.StatusNotFound, "REPLAY_NOT_FOUND")}
				for _, v := range []struct{ name, seg string }{
					{"a draft's name", plKeep}, {"a dossier id", a.dossierA}, {"513 bytes", strings.Repeat("r", 513)},
					{"a replay id with a NUL", a.replayA + "%00"}, {"a replay id with a newline", a.replayA + "%0A"},
					{"a replay id with C1", a.replayA + "%C2%85"}, {"invalid UTF-8", a.replayA + "%FF"},
					{"a replay id with a zero-width space", a.replayA + "%E2%80%8B"},
				} {
					out = append(out, s.plAt(q, catPath, v.name, plReplaysPath+"/"+v.seg+suffix, http.StatusNotFound, "REPLAY_NOT_FOUND"))
				}
				return out
			}}
	}

	reproduce := routeSpec{org: orgQuery, params: map[string]string{"dossierId": a.dossierA}, paramCodes: []string{"DOSSIER_NOT_FOUND"},
		extra: func(q req) []badCase {
			return []badCase{s.plAt(q, catForeign, "another org's dossier", pathDossiers+a.dossierB+"/reproduce",
				http.StatusNotFound, "DOSSIER_NOT_FOUND")}
		}}

	// The dossier route explains with ?explain=true: its bad queries and
	// credentials are added to its spec.
	const dossierRoute = "GET /v1/protocol/dossiers/{dossierId}"
	dossier, ok := specs[dossierRoute]
	if !ok {
		s.t.Fatalf("the bad-input suite has no spec of %s to add the explanation's cases to", dossierRoute)
	}
	dossierExtra := dossier.extra
	dossier.extra = func(q req) []badCase {
		var out []badCase
		if dossierExtra != nil {
			out = dossierExtra(q)
		}
		for _, v := range []string{"?explain=maybe", "?explain=", "?explain=TRUE", "?explain=1", "?explain=true&explain=true",
			"?explain=true&explain=false", "?explain=%zz", "?explain=true&draft=" + plKeep + "&version=v1", "?explain=true&draft=",
			"?explain=true&version=", "?explain=true&draft=a&draft=b", "?explain=true&version=v1&version=v1"} {
			out = append(out, s.plQuery(q, catQuery, "query "+plQueryName(v), v, http.StatusBadRequest, "INVALID_QUERY"))
		}
		for _, v := range []struct {
			query  string
			status int
			code   string
		}{
			{"?explain=true&draft=never-drafted", 404, "POLICY_DRAFT_NOT_FOUND"},
			{"?explain=true&draft=" + plGone, 404, "POLICY_DRAFT_NOT_FOUND"},
			{"?explain=true&draft=%00", 404, "POLICY_DRAFT_NOT_FOUND"},
			{"?explain=true&version=never-published", 404, "POLICY_VERSION_NOT_FOUND"},
			{"?explain=true&draft=" + plBroken, 422, "POLICY_INVALID"},
			{"?explain=true&draft=" + plSignals, 409, "NOT_REPLAYABLE"},
		} {
			out = append(out, s.plQuery(q, catQuery, "query "+v.query, v.query, v.status, v.code))
		}
		out = append(out, s.plQuery(q, catForeign, "another org's draft", "?explain=true&draft="+plOnlyB, http.StatusNotFound,
			"POLICY_DRAFT_NOT_FOUND"))
		c := s.plQuery(q, catForeign, "another org's key, explained", "?explain=true", http.StatusNotFound, "DOSSIER_NOT_FOUND")
		c.key = s.b.Key
		out = append(out, c)
		// Reading the dossier is not reading a policy: an explanation
		// needs a policy scope too.
		for _, sc := range []tenant.Scope{tenant.ScopeDecisionRead, tenant.ScopeAuditRead} {
			c := s.plQuery(q, catScope, "explained with only "+string(sc), "?explain=true", http.StatusForbidden, "INSUFFICIENT_SCOPE")
			c.key = s.scoped[string(sc)]
			out = append(out, c)
		}
		return out
	}

	return map[string]routeSpec{
		"GET /v1/policies/drafts":                         list,
		"PUT /v1/policies/drafts/{name}":                  put,
		"GET /v1/policies/drafts/{name}":                  get,
		"DELETE /v1/policies/drafts/{name}":               del,
		"POST /v1/policies/drafts/{name}/validate":        validate,
		"POST /v1/policies/drafts/{name}/promote":         promote,
		"GET /v1/policies/diff":                           diff,
		"POST /v1/policies/dry-run":                       dry,
		"POST /v1/policies/replays":                       replays,
		"GET /v1/policies/replays/{replayId}":             replayRead(""),
		"GET /v1/policies/replays/{replayId}/events":      replayRead("/events"),
		"GET /v1/protocol/dossiers/{dossierId}/reproduce": reproduce,
		dossierRoute: dossier,
	}
}

// plQueryName quotes a query for a case name ("" names the empty query).
func plQueryName(q string) string {
	if q == "" {
		return "(none)"
	}
	return q
}

// TestBadInputPolicyLifecycleExactAnswers pins what the battery checks as
// "a 4xx with a stable code": the status, the code and the errors[] field
// of each refusal of the lifecycle routes, and that none of them changes
// the store, the org's drafts or its ledger. It also holds the draft limit:
// an org keeps 100 drafts.
func TestBadInputPolicyLifecycleExactAnswers(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	o, other := x.o, x.createOrg("Other")
	readOnly := x.createKey(o, "decision:read")
	dossier := x.req(t, "POST", pathEvaluate, o.Key, `{"amount":1500}`, nil).want(t, http.StatusOK).str("dossier_id")
	put := func(name, body string) {
		x.req(t, "PUT", plDraftsPath+"/"+name, o.Key, body, nil).want(t, http.StatusCreated)
	}
	put(plKeep, plBundle("bi-keep-1"))
	put(plBroken, plBrokenBundle)
	put(plSignals, plSignalsBundle)
	for i := 3; i < 100; i++ {
		put(fmt.Sprintf("filler-%03d", i), plBundle("filler"))
	}
	// At the limit a draft is still edited, and deleting one makes room.
	x.req(t, "PUT", plDraftsPath+"/"+plKeep, o.Key, plBundle("bi-keep-1"), nil).want(t, http.StatusOK)
	x.req(t, "DELETE", plDraftsPath+"/filler-099", o.Key, nil, nil).want(t, http.StatusNoContent)
	put("filler-099", plBundle("filler"))
	x.advance(time.Minute)
	from := execStart.Add(-time.Hour).Format(time.RFC3339)
	replay := x.req(t, "POST", plReplaysPath, o.Key, `{"from":`+lit(from)+`,"draft":"bi-keep"}`, nil).want(t, http.StatusOK).str("replay_id")

	type exactCase struct {
		name, method, path, key, body string
		headers                       http.Header
		status                        int
		code, field                   string
	}
	draft := plDraftsPath + "/" + plKeep
	keep := plBundle("bi-keep-2")
	window := `"from":` + lit(from)
	cases := []exactCase{
		{"a 101st draft", "PUT", plDraftsPath + "/one-too-many", o.Key, keep, nil, 409, "DRAFT_LIMIT_REACHED", ""},
		{"a draft name of 101 characters", "PUT", plDraftsPath + "/" + strings.Repeat("n", 101), o.Key, keep, nil, 400, "INVALID_REQUEST", "name"},
		{"a draft name with a colon", "PUT", plDraftsPath + "/draft:x", o.Key, keep, nil, 400, "INVALID_REQUEST", "name"},
		{"a draft name with a newline", "PUT", plDraftsPath + "/a%0Ab", o.Key, keep, nil, 400, "INVALID_REQUEST", "name"},
		{"If-Match not a number", "PUT", draft, o.Key, keep, http.Header{"If-Match": {`"abc"`}}, 400, "INVALID_REQUEST", "If-Match"},
		{"If-Match zero", "PUT", draft, o.Key, keep, http.Header{"If-Match": {"0"}}, 400, "INVALID_REQUEST", "If-Match"},
		{"If-Match star", "PUT", draft, o.Key, keep, http.Header{"If-Match": {"*"}}, 400, "INVALID_REQUEST", "If-Match"},
		{"If-Match weak", "PUT", draft, o.Key, keep, http.Header{"If-Match": {`W/"2"`}}, 400, "INVALID_REQUEST", "If-Match"},
		{"If-Match twice", "PUT", draft, o.Key, keep, http.Header{"If-Match": {`"2"`, `"2"`}}, 400, "INVALID_REQUEST", "If-Match"},
		{"If-Match stale", "PUT", draft, o.Key, keep, http.Header{"If-Match": {`"1"`}}, 409, "DRAFT_REVISION_MISMATCH", ""},
		{"If-Match ahead", "PUT", draft, o.Key, keep, http.Header{"If-Match": {`"3"`}}, 409, "DRAFT_REVISION_MISMATCH", ""},
		// At the limit, a name without a live draft is refused for the
		// limit first (the battery has the revision mismatch below it).
		{"If-Match of no draft, at the limit", "PUT", plDraftsPath + "/nothing", o.Key, keep, http.Header{"If-Match": {`"1"`}}, 409, "DRAFT_REVISION_MISMATCH", ""},
		{"a draft with an unknown member", "PUT", draft, o.Key, `{"bundle_id":"x","owner":"me"}`, nil, 400, "UNKNOWN_MEMBER", ""},
		{"a draft whose rules are an object", "PUT", draft, o.Key, `{"rules":{}}`, nil, 400, "WRONG_TYPE", ""},
		{"a draft member twice", "PUT", draft, o.Key, `{"version":"a","version":"b"}`, nil, 400, "DUPLICATE_MEMBER", ""},
		{"a draft without a body", "PUT", draft, o.Key, "", nil, 400, "EMPTY_BODY", ""},
		{"a draft that is an array", "PUT", draft, o.Key, `[]`, nil, 400, "WRONG_TYPE", ""},
		{"a draft with a NUL", "PUT", draft, o.Key, `{"bundle_id":"a\u0000"}`, nil, 400, "JSON_NUL_CHARACTER", ""},
		{"a draft of another org", "GET", plDraftsPath + "/" + plKeep, other.Key, "", nil, 404, "POLICY_DRAFT_NOT_FOUND", ""},
		{"deleting with a stale If-Match", "DELETE", draft, o.Key, "", http.Header{"If-Match": {`"1"`}}, 409, "DRAFT_REVISION_MISMATCH", ""},
		{"deleting with a bad If-Match", "DELETE", draft, o.Key, "", http.Header{"If-Match": {"two"}}, 400, "INVALID_REQUEST", "If-Match"},
		{"deleting no draft", "DELETE", plDraftsPath + "/nothing", o.Key, "", nil, 404, "POLICY_DRAFT_NOT_FOUND", ""},
		{"validating a broken draft", "POST", plDraftsPath + "/" + plBroken + "/validate", o.Key, "", nil, 422, "POLICY_INVALID", ""},
		{"validating with a member", "POST", draft + "/validate", o.Key, `{"strict":true}`, nil, 400, "UNKNOWN_MEMBER", ""},
		{"promoting under a bad version", "POST", draft + "/promote", o.Key, `{"version":"v 2"}`, nil, 400, "INVALID_REQUEST", "version"},
		{"promoting expecting a bad version", "POST", draft + "/promote", o.Key, `{"expected_active_version":"v/1"}`, nil, 400, "INVALID_REQUEST", "expected_active_version"},
		{"promoting a negative revision", "POST", draft + "/promote", o.Key, `{"expected_revision":-2}`, nil, 400, "INVALID_REQUEST", "expected_revision"},
		{"promoting a stale revision", "POST", draft + "/promote", o.Key, `{"expected_revision":1}`, nil, 409, "DRAFT_REVISION_MISMATCH", ""},
		{"promoting over another active version", "POST", draft + "/promote", o.Key, `{"expected_active_version":"v0"}`, nil, 409, "ACTIVE_VERSION_MISMATCH", ""},
		{"promoting onto a published version", "POST", draft + "/promote", o.Key, `{"version":"v1"}`, nil, 409, "POLICY_VERSION_CONFLICT", ""},
		{"promoting a broken draft", "POST", plDraftsPath + "/" + plBroken + "/promote", o.Key, "", nil, 422, "POLICY_INVALID", ""},
		{"a diff without from", "GET", plDiffPath + "?to=v1", o.Key, "", nil, 400, "INVALID_QUERY", "from"},
		{"a diff with to twice", "GET", plDiffPath + "?from=v1&to=v1&to=v1", o.Key, "", nil, 400, "INVALID_QUERY", "to"},
		{"a diff of no version", "GET", plDiffPath + "?from=v9&to=v1", o.Key, "", nil, 404, "POLICY_VERSION_NOT_FOUND", ""},
		{"a diff of no draft", "GET", plDiffPath + "?from=v1&to=draft:nothing", o.Key, "", nil, 404, "POLICY_DRAFT_NOT_FOUND", ""},
		{"a dry run explained maybe", "POST", plDryRunPath + "?explain=maybe", o.Key, `{"amount":5}`, nil, 400, "INVALID_QUERY", "explain"},
		{"a dry run of a draft and a version", "POST", plDryRunPath + "?draft=bi-keep&version=v1", o.Key, `{"amount":5}`, nil, 400, "INVALID_QUERY", "draft"},
		{"a dry run of an empty draft name", "POST", plDryRunPath + "?draft=", o.Key, `{"amount":5}`, nil, 400, "INVALID_QUERY", "draft"},
		{"a dry run of a broken draft", "POST", plDryRunPath + "?draft=" + plBroken, o.Key, `{"amount":5}`, nil, 422, "POLICY_INVALID", ""},
		{"a dry run of another org's draft", "POST", plDryRunPath + "?draft=bi-keep", other.Key, `{"amount":5}`, nil, 404, "POLICY_DRAFT_NOT_FOUND", ""},
		{"a dry run with a bad amount", "POST", plDryRunPath, o.Key, `{"amount":-1}`, nil, 400, "INVALID_AMOUNT", ""},
		{"a dry run pinned to no version", "POST", plDryRunPath, o.Key, `{"amount":5,"context":{"policy_version":"v9"}}`, nil, 409, "POLICY_VERSION_UNKNOWN", ""},
		{"a dry run with only decision:read", "POST", plDryRunPath, readOnly, `{"amount":5}`, nil, 403, "INSUFFICIENT_SCOPE", ""},
		{"a replay without a window", "POST", plReplaysPath, o.Key, `{"draft":"bi-keep"}`, nil, 400, "MISSING_FIELD", "from"},
		{"a replay from no time", "POST", plReplaysPath, o.Key, `{"draft":"bi-keep","from":"monday"}`, nil, 400, "INVALID_REQUEST", "from"},
		{"a replay to no time", "POST", plReplaysPath, o.Key, `{"draft":"bi-keep",` + window + `,"to":"friday"}`, nil, 400, "INVALID_REQUEST", "to"},
		{"a replay of an empty window", "POST", plReplaysPath, o.Key, `{"draft":"bi-keep",` + window + `,"to":` + lit(from) + `}`, nil, 400, "INVALID_REQUEST", "to"},
		{"a replay of 101 examples", "POST", plReplaysPath, o.Key, `{"draft":"bi-keep",` + window + `,"examples":101}`, nil, 400, "INVALID_REQUEST", "examples"},
		{"a replay of a draft and a version", "POST", plReplaysPath, o.Key, `{"draft":"bi-keep","version":"v1",` + window + `}`, nil, 400, "INVALID_REQUEST", "draft"},
		{"a replay of no draft", "POST", plReplaysPath, o.Key, `{"draft":"nothing",` + window + `}`, nil, 404, "POLICY_DRAFT_NOT_FOUND", ""},
		{"a replay of a broken draft", "POST", plReplaysPath, o.Key, `{"draft":"bi-broken",` + window + `}`, nil, 422, "POLICY_INVALID", ""},
		{"another org's replay", "GET", plReplaysPath + "/" + replay, other.Key, "", nil, 404, "REPLAY_NOT_FOUND", ""},
		{"another org's replay stream", "GET", plReplaysPath + "/" + replay + "/events", other.Key, "", nil, 404, "REPLAY_NOT_FOUND", ""},
		{"a replay id with a NUL", "GET", plReplaysPath + "/" + replay + "%00", o.Key, "", nil, 404, "REPLAY_NOT_FOUND", ""},
		{"a replay id with a newline", "GET", plReplaysPath + "/a%0Ab/events", o.Key, "", nil, 404, "REPLAY_NOT_FOUND", ""},
		{"a replay id not UTF-8", "GET", plReplaysPath + "/%FF", o.Key, "", nil, 404, "REPLAY_NOT_FOUND", ""},
		{"reproducing another org's dossier", "GET", pathDossiers + dossier + "/reproduce", other.Key, "", nil, 404, "DOSSIER_NOT_FOUND", ""},
		{"reproducing no dossier", "GET", pathDossiers + unknownID + "/reproduce", o.Key, "", nil, 404, "DOSSIER_NOT_FOUND", ""},
		{"explaining maybe", "GET", pathDossiers + dossier + "?explain=maybe", o.Key, "", nil, 400, "INVALID_QUERY", "explain"},
		{"explaining without a policy scope", "GET", pathDossiers + dossier + "?explain=true", readOnly, "", nil, 403, "INSUFFICIENT_SCOPE", ""},
		{"explaining under a draft and a version", "GET", pathDossiers + dossier + "?explain=true&draft=a&version=b", o.Key, "", nil, 400, "INVALID_QUERY", "draft"},
		{"explaining under a broken draft", "GET", pathDossiers + dossier + "?explain=true&draft=" + plBroken, o.Key, "", nil, 422, "POLICY_INVALID", ""},
		{"explaining under a policy reading signals", "GET", pathDossiers + dossier + "?explain=true&draft=" + plSignals, o.Key, "", nil, 409, "NOT_REPLAYABLE", ""},
		{"explaining another org's dossier", "GET", pathDossiers + dossier + "?explain=true", other.Key, "", nil, 404, "DOSSIER_NOT_FOUND", ""},
	}

	s := &badSuite{t: t, x: x}
	drafts := func() string {
		return string(x.req(t, "GET", plDraftsPath, o.Key, nil, nil).want(t, http.StatusOK).Raw)
	}
	beforeDrafts, beforeHead, beforeStore := drafts(), x.head(o.Key), x.fingerprint(t)
	for _, c := range cases {
		r := s.send(t, badCase{category: "exact answer", name: c.name, method: c.method, path: c.path, key: c.key,
			body: c.body, hasBody: c.method == "POST" || c.method == "PUT", rawHeaders: c.headers})
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); r.Status != c.status || r.str("code") != c.code ||
			mt != "application/problem+json" {
			t.Errorf("%s: want %d %s as a problem: %s", c.name, c.status, c.code, r)
			continue
		}
		if c.field != "" && r.str("errors.0.field") != c.field {
			t.Errorf("%s: want errors[0].field %q: %s", c.name, c.field, r)
		}
	}
	// The broken draft's validation lists each of its six problems.
	r := x.req(t, "POST", plDraftsPath+"/"+plBroken+"/validate", o.Key, nil, nil).wantProblem(t, http.StatusUnprocessableEntity, "POLICY_INVALID")
	if n := len(lookup(r.JSON, "errors").([]any)); n < 6 {
		t.Errorf("validation of the broken draft lists %d problems, it has 6: %s", n, r)
	}
	if got := drafts(); got != beforeDrafts {
		t.Errorf("the refused requests changed the org's drafts:\n%s\n%s", beforeDrafts, got)
	}
	if got := x.head(o.Key); got != beforeHead {
		t.Errorf("the refused requests moved the ledger head %d -> %d", beforeHead, got)
	}
	if got := x.fingerprint(t); got != beforeStore {
		t.Errorf("the refused requests changed the store: %s -> %s", beforeStore, got)
	}
}
