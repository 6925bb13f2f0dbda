package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/server"
	"github.com/clearancehq/clearance/tenant"
)

// Routes under test.
const (
	pathOrgs        = "/v1/platform/orgs"
	pathEvaluate    = "/v1/protocol/evaluate-decision"
	pathEvaluateOld = "/v1/decisions/evaluate"
	pathGate        = "/v1/action-gate/evaluate"
	pathWorkspace   = "/v1/workspace-app/action-gate"
	pathCloud       = "/v1/cloud/agent/extensions/verify"
	pathBundles     = "/v1/protocol/policies/bundles"
	pathPolicies    = "/v1/policies"
	pathDossiers    = "/v1/protocol/dossiers/"
	pathDossierDec  = "/v1/dossiers/"
	pathLedger      = "/v1/protocol/audit/ledger"
	pathCheckpoint  = "/v1/protocol/audit/ledger/checkpoint"
	pathSeal        = "/v1/protocol/audit/ledger/checkpoints"
	pathVerify      = "/v1/protocol/audit/ledger/verify"
	pathReasons     = "/v1/protocol/reason-codes"
	pathShadow      = "/v1/protocol/shadow-reports"
	pathHealth      = "/v1/health"
)

func pathKeys(orgID string) string { return "/v1/platform/orgs/" + orgID + "/api-keys" }
func pathCRM(orgID string) string  { return "/v1/orgs/" + orgID + "/crm/action-gate" }

var hexID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// ---------------------------------------------------------------------------
// Platform: orgs and keys

func TestPlatformCreateOrg(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})

	r := e.do("POST", pathOrgs, e.platform, `{"name":"Acme"}`, nil).want(t, http.StatusCreated)
	if !clearance.ValidID(r.str("org_id")) || r.str("name") != "Acme" || r.str("key_id") == "" {
		t.Fatalf("create org answer: %s", r)
	}
	key := r.str("api_key")
	if !strings.HasPrefix(key, tenant.PrefixOrg) {
		t.Fatalf("api_key %q does not start with %s", key, tenant.PrefixOrg)
	}
	if got := r.strs("scopes"); !slices.Equal(got, []string{"org:*"}) {
		t.Fatalf("first key scopes %v, want [org:*]", got)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") || r.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("headers: Content-Type %q Cache-Control %q", ct, r.Header.Get("Cache-Control"))
	}

	// The org and its key are ledgered as seq 1 and 2; the secret and its hash never are.
	entries := e.entries(key)
	if len(entries) != 2 || entries[0]["kind"] != ledger.KindOrgCreated || entries[0]["subject_id"] != r.str("org_id") ||
		entries[1]["kind"] != ledger.KindAPIKeyCreated || entries[1]["subject_id"] != r.str("key_id") {
		t.Fatalf("ledger of a new org: %v", entries)
	}
	page := e.do("GET", pathLedger, key, nil, nil).want(t, http.StatusOK)
	if bytes.Contains(page.Raw, []byte(key)) || bytes.Contains(page.Raw, []byte(tenant.HashSecret(key))) {
		t.Fatal("the ledger page contains the key secret or its hash")
	}
	if v := e.verify(key); lookup(v.JSON, "valid") != true {
		t.Fatalf("new org's ledger does not verify: %s", v)
	}

	// The name is trimmed; 200 characters are fine, 201 are not.
	if r := e.do("POST", pathOrgs, e.platform, `{"name":"  Beta  "}`, nil).want(t, http.StatusCreated); r.str("name") != "Beta" {
		t.Fatalf("name not trimmed: %s", r)
	}
	e.do("POST", pathOrgs, e.platform, map[string]string{"name": strings.Repeat("é", 200)}, nil).want(t, http.StatusCreated)

	bad := []struct {
		name, key, body string
		status          int
		code            string
	}{
		{"org key", key, `{"name":"X"}`, 403, clearance.CodePlatformKeyRequired},
		{"no key", "", `{"name":"X"}`, 401, clearance.CodeUnauthenticated},
		{"unknown platform key", tenant.PrefixPlatform + "nope", `{"name":"X"}`, 401, clearance.CodeUnauthenticated},
		{"not a key", "hunter2", `{"name":"X"}`, 401, clearance.CodeUnauthenticated},
		{"empty name", e.platform, `{"name":""}`, 400, clearance.CodeInvalidRequest},
		{"blank name", e.platform, `{"name":"   "}`, 400, clearance.CodeInvalidRequest},
		{"no name", e.platform, `{}`, 400, clearance.CodeInvalidRequest},
		{"long name", e.platform, `{"name":"` + strings.Repeat("x", 201) + `"}`, 400, clearance.CodeInvalidRequest},
		{"name not a string", e.platform, `{"name":5}`, 400, "WRONG_TYPE"},
		{"unknown member", e.platform, `{"name":"X","plan":"pro"}`, 400, "UNKNOWN_MEMBER"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("POST", pathOrgs, c.key, c.body, nil).wantProblem(t, c.status, c.code)
			if c.code == clearance.CodeInvalidRequest && lookup(r.JSON, "errors.0.field") != "name" {
				t.Fatalf("errors[] should name the field: %s", r)
			}
		})
	}
	// Wrong credential kinds in the Authorization header.
	e.do("POST", pathOrgs, "", `{"name":"X"}`, map[string]string{"Authorization": "Basic " + e.platform}).wantProblem(t, 401, clearance.CodeUnauthenticated)
}

func TestPlatformAPIKeysAndScopes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o := e.createOrg("Acme")
	d := e.decide(o.Key, `{"amount":5}`)
	dossierPath := pathDossiers + d.str("dossier_id")
	byDecision := pathDossierDec + d.str("decision_id")
	h0 := e.head(o.Key)

	r := e.do("POST", pathKeys(o.ID), e.platform, `{"scopes":["decision:write","decision:write"]}`, nil).want(t, http.StatusCreated)
	writeOnly := r.str("api_key")
	if !strings.HasPrefix(writeOnly, tenant.PrefixOrg) || r.str("org_id") != o.ID || r.str("key_id") == "" ||
		!slices.Equal(r.strs("scopes"), []string{"decision:write"}) {
		t.Fatalf("issued key: %s", r)
	}
	if h := e.head(o.Key); h != h0+1 {
		t.Fatalf("issuing a key should add one ledger entry: head %d -> %d", h0, h)
	}
	last := e.entries(o.Key)[h0]
	if last["kind"] != ledger.KindAPIKeyCreated || last["subject_id"] != r.str("key_id") {
		t.Fatalf("key ledger entry: %v", last)
	}

	policyRead := e.createKey(o, "policy:read")
	policyWrite := e.createKey(o, "policy:write")
	auditRead := e.createKey(o, "audit:read")
	decisionRead := e.createKey(o, "decision:read")

	// Key issuance errors.
	other := "01900000-0000-7000-8000-000000000000"
	for _, c := range []struct {
		name, path, key, body string
		status                int
		code                  string
	}{
		{"no scopes", pathKeys(o.ID), e.platform, `{"scopes":[]}`, 400, clearance.CodeInvalidRequest},
		{"absent scopes", pathKeys(o.ID), e.platform, `{}`, 400, clearance.CodeInvalidRequest},
		{"unknown scope", pathKeys(o.ID), e.platform, `{"scopes":["root"]}`, 400, clearance.CodeInvalidRequest},
		{"scopes not an array", pathKeys(o.ID), e.platform, `{"scopes":"org:*"}`, 400, "WRONG_TYPE"},
		{"unknown org", pathKeys(other), e.platform, `{"scopes":["org:*"]}`, 404, clearance.CodeOrgNotFound},
		{"malformed org", pathKeys("not-a-uuid"), e.platform, `{"scopes":["org:*"]}`, 404, clearance.CodeOrgNotFound},
		{"org key", pathKeys(o.ID), o.Key, `{"scopes":["org:*"]}`, 403, clearance.CodePlatformKeyRequired},
		{"no key", pathKeys(o.ID), "", `{"scopes":["org:*"]}`, 401, clearance.CodeUnauthenticated},
	} {
		t.Run(c.name, func(t *testing.T) { e.do("POST", c.path, c.key, c.body, nil).wantProblem(t, c.status, c.code) })
	}

	bundle := `{"bundle_id":"b","version":"v-%s","mode":"SHADOW","rules":[],"default":{"outcome":"ALLOW","reason_codes":[]}}`
	const ok, no = http.StatusOK, http.StatusForbidden
	type check struct {
		method, path, body string
		want               int
	}
	matrix := map[string]struct {
		key    string
		checks []check
	}{
		"decision:write": {writeOnly, []check{
			{"POST", pathEvaluate, `{"amount":1}`, ok}, {"POST", pathGate, `{"amount":1}`, ok},
			{"GET", dossierPath, "", no}, {"GET", byDecision, "", no}, {"GET", pathLedger, "", no}, {"GET", pathVerify, "", no},
			{"GET", pathBundles, "", no}, {"POST", pathBundles, fmt.Sprintf(bundle, "w"), no}, {"GET", pathShadow, "", no},
			{"GET", pathReasons, "", ok}, {"POST", pathSeal, `{}`, no},
		}},
		"policy:read": {policyRead, []check{
			{"GET", pathBundles, "", ok}, {"GET", pathPolicies, "", ok},
			{"POST", pathBundles, fmt.Sprintf(bundle, "r"), no}, {"POST", pathPolicies, fmt.Sprintf(bundle, "r"), no},
			{"POST", pathEvaluate, `{"amount":1}`, no}, {"GET", dossierPath, "", no}, {"GET", pathLedger, "", no},
			{"GET", pathReasons, "", ok},
		}},
		"policy:write": {policyWrite, []check{
			{"POST", pathBundles, fmt.Sprintf(bundle, "pw"), http.StatusCreated}, {"GET", pathBundles, "", ok},
			{"GET", pathBundles + "/v-pw", "", ok}, {"POST", pathEvaluate, `{"amount":1}`, no},
		}},
		"audit:read": {auditRead, []check{
			{"GET", pathLedger, "", ok}, {"GET", pathVerify, "", ok}, {"GET", dossierPath, "", ok}, {"GET", byDecision, "", ok},
			{"GET", pathShadow, "", ok}, {"POST", pathEvaluate, `{"amount":1}`, no}, {"GET", pathBundles, "", no},
			{"POST", pathSeal, `{}`, no}, // reads never seal, and sealing is a write
		}},
		"decision:read": {decisionRead, []check{
			{"GET", dossierPath, "", ok}, {"GET", byDecision, "", ok}, {"GET", pathShadow, "", ok},
			{"GET", pathLedger, "", no}, {"GET", pathVerify, "", no}, {"POST", pathEvaluate, `{"amount":1}`, no},
			{"POST", pathCloud, `{"intent":{"action_type":"x"}}`, no},
		}},
	}
	for name, m := range matrix {
		t.Run(name, func(t *testing.T) {
			for _, c := range m.checks {
				var body any
				if c.body != "" {
					body = c.body
				}
				r := e.do(c.method, c.path, m.key, body, nil)
				if c.want == no {
					r.wantProblem(t, no, clearance.CodeInsufficientScope)
					continue
				}
				r.want(t, c.want)
			}
		})
	}
	// Forbidden decisions left no trace: only the two allowed ones were added.
	if v := e.verify(o.Key); lookup(v.JSON, "valid") != true {
		t.Fatalf("ledger after the scope matrix: %s", v)
	}
}

// ---------------------------------------------------------------------------
// evaluate-decision

func TestEvaluateStarterBands(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o := e.createOrg("Acme")
	seq := e.head(o.Key)
	for _, c := range []struct {
		amount  string // JSON literal; "" means absent
		outcome string
		code    string
	}{
		{"0", "ALLOW", "AMOUNT_BELOW_ESCALATION_THRESHOLD"},
		{"999.99", "ALLOW", "AMOUNT_BELOW_ESCALATION_THRESHOLD"},
		{"1000", "ESCALATE", "AMOUNT_IN_ESCALATION_BAND"},
		{"1000.000", "ESCALATE", "AMOUNT_IN_ESCALATION_BAND"},
		{"9999.99", "ESCALATE", "AMOUNT_IN_ESCALATION_BAND"},
		{"9999.999", "ESCALATE", "AMOUNT_IN_ESCALATION_BAND"},
		{"10000", "BLOCK", "AMOUNT_AT_OR_ABOVE_BLOCK_THRESHOLD"},
		{"1000000000000000", "BLOCK", "AMOUNT_AT_OR_ABOVE_BLOCK_THRESHOLD"},
		{"", "ESCALATE", "AMOUNT_MISSING"},
	} {
		name := c.amount
		if name == "" {
			name = "absent"
		}
		t.Run(name, func(t *testing.T) {
			body := `{"decision_type":"PAYMENT","workflow_key":"ap.invoice"}`
			if c.amount != "" {
				body = `{"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":` + c.amount + `}`
			}
			r := e.decide(o.Key, body)
			seq++
			want := []string{"PROTOCOL_OUTCOME_" + c.outcome, "POLICY_MATCHED", c.code}
			if r.str("outcome") != c.outcome || !slices.Equal(r.strs("reason_codes"), want) || r.str("mode") != "SHADOW" {
				t.Fatalf("amount %s: want %s %v SHADOW: %s", name, c.outcome, want, r)
			}
			if r.str("policy_snapshot.policy_version") != "starter-1" || r.str("policy_snapshot.bundle_id") != "starter" ||
				!strings.HasPrefix(r.str("policy_snapshot.bundle_digest"), "sha256:") ||
				r.str("policy_snapshot.evaluator") != policy.EvaluatorVersion {
				t.Fatalf("starter snapshot: %s", r)
			}
			checkDecisionShape(t, r, o.ID, seq)
			dos := e.do("GET", r.str("dossier_url"), o.Key, nil, nil).want(t, http.StatusOK)
			if dos.str("intent_as_received") != body {
				t.Fatalf("dossier intent_as_received %q, sent %q", dos.str("intent_as_received"), body)
			}
		})
	}
}

// checkDecisionShape checks the members every decision answer carries.
func checkDecisionShape(t testing.TB, r *result, orgID string, seq uint64) {
	t.Helper()
	for _, k := range []string{"decision_id", "evaluation_id", "dossier_id"} {
		if !clearance.ValidID(r.str(k)) {
			t.Fatalf("%s is not a UUID: %s", k, r)
		}
	}
	if r.str("org_id") != orgID {
		t.Fatalf("org_id %q, want %q", r.str("org_id"), orgID)
	}
	if r.str("dossier_url") != pathDossiers+r.str("dossier_id") {
		t.Fatalf("dossier_url %q", r.str("dossier_url"))
	}
	if !strings.HasPrefix(r.str("dossier_digest"), "sha256:") || len(r.str("dossier_digest")) != 71 {
		t.Fatalf("dossier_digest %q", r.str("dossier_digest"))
	}
	if seq != 0 && uint64(r.num("ledger_seq")) != seq {
		t.Fatalf("ledger_seq %v, want %d", r.num("ledger_seq"), seq)
	}
	if _, err := time.Parse(time.RFC3339Nano, r.str("created_at")); err != nil {
		t.Fatalf("created_at: %v", err)
	}
}

func TestEvaluateRejectsBadAmounts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o := e.createOrg("Acme")
	h0 := e.head(o.Key)
	for _, c := range []struct{ body, code string }{
		{`{"amount":-1}`, policy.CodeInvalidAmount},
		{`{"amount":-0}`, policy.CodeInvalidAmount},
		{`{"amount":"50000"}`, policy.CodeInvalidAmount},
		{`{"amount":null}`, policy.CodeInvalidAmount},
		{`{"amount":true}`, policy.CodeInvalidAmount},
		{`{"amount":false}`, policy.CodeInvalidAmount},
		{`{"amount":1e3}`, policy.CodeInvalidAmount},
		{`{"amount":1E3}`, policy.CodeInvalidAmount},
		{`{"amount":2.5e2}`, policy.CodeInvalidAmount},
		{`{"amount":1.0000001}`, policy.CodeInvalidAmount},
		{`{"amount":1000000000000001}`, policy.CodeInvalidAmount},
		{`{"amount":{}}`, policy.CodeInvalidAmount},
		{`{"amount":[]}`, policy.CodeInvalidAmount},
		{`{"amount":""}`, policy.CodeInvalidAmount},
		{`{"action":{"amount":"5"}}`, policy.CodeInvalidAmount},
		{`{"amount":5,"action":{"amount":6}}`, policy.CodeAmountConflict},
		{`{"risk_score":"high"}`, policy.CodeInvalidRiskScore},
		{`{"risk_score":null}`, policy.CodeInvalidRiskScore},
		{`{"mode":"ENFORCE"}`, policy.CodeInvalidMode},
		{`{"context":{"policy_version":5}}`, policy.CodeInvalidPin},
		{`{"context":{"policy_version":"  "}}`, policy.CodeInvalidPin},
		{`{"context":[]}`, "WRONG_TYPE"},
	} {
		t.Run(c.body, func(t *testing.T) {
			e.do("POST", pathEvaluate, o.Key, c.body, nil).wantProblem(t, http.StatusBadRequest, c.code)
		})
	}
	if h := e.head(o.Key); h != h0 {
		t.Fatalf("refused requests moved the ledger head %d -> %d", h0, h)
	}
	// Equal amounts in both places agree ("5" and "5.00").
	r := e.decide(o.Key, `{"amount":5,"action":{"amount":5.00}}`)
	if r.str("outcome") != "ALLOW" {
		t.Fatalf("amount 5 with action.amount 5.00: %s", r)
	}
	// action.amount alone is the amount.
	if r := e.decide(o.Key, `{"action":{"type":"pay","amount":20000}}`); r.str("outcome") != "BLOCK" {
		t.Fatalf("action.amount 20000 should block under the starter policy: %s", r)
	}
}

// fieldsBundle has one REVIEW_REQUIRED rule per request member, each with
// its own reason code, so the codes of a decision say which members reached
// the policy.
const fieldsBundle = `{
  "bundle_id": "fields", "version": "fields-1", "mode": "ENFORCEMENT",
  "rules": [
    {"id": "dt", "decision_types": ["PAYMENT"], "outcome": "REVIEW_REQUIRED", "reason_codes": ["DT_SEEN"]},
    {"id": "wf", "workflow_keys": ["ap.invoice"], "outcome": "REVIEW_REQUIRED", "reason_codes": ["WF_SEEN"]},
    {"id": "vp", "when": "intent.vertical_pack == 'fintech'", "outcome": "REVIEW_REQUIRED", "reason_codes": ["VP_SEEN"]},
    {"id": "op", "when": "intent.objective_profile == 'conservative'", "outcome": "REVIEW_REQUIRED", "reason_codes": ["OP_SEEN"]},
    {"id": "risk", "when": "has(intent.risk_score) && intent.risk_score > 80", "outcome": "REVIEW_REQUIRED", "reason_codes": ["RISK_SEEN"]},
    {"id": "amt", "when": "has(intent.amount) && intent.amount == 250.5", "outcome": "REVIEW_REQUIRED", "reason_codes": ["AMOUNT_SEEN"]},
    {"id": "mode", "when": "intent.mode == 'ENFORCEMENT'", "outcome": "REVIEW_REQUIRED", "reason_codes": ["MODE_SEEN"]},
    {"id": "path", "when": "has(intent.context.approval_path) && intent.context.approval_path == 'two-person'", "outcome": "REVIEW_REQUIRED", "reason_codes": ["APPROVAL_PATH_SEEN"]},
    {"id": "pin", "when": "has(intent.context.policy_version) && intent.context.policy_version == 'fields-1'", "outcome": "REVIEW_REQUIRED", "reason_codes": ["PIN_SEEN"]},
    {"id": "struct", "match": [
        {"field": "vertical_pack", "op": "eq", "value": "fintech"},
        {"field": "objective_profile", "op": "in", "value": ["conservative", "balanced"]},
        {"field": "risk_score", "op": "ge", "value": 82.5},
        {"field": "amount", "op": "eq", "value": 250.5},
        {"field": "context.approval_path", "op": "eq", "value": "two-person"},
        {"field": "context.cost_center", "op": "eq", "value": "CC-7"}],
     "outcome": "REVIEW_REQUIRED", "reason_codes": ["STRUCT_SEEN"]}
  ],
  "default": {"outcome": "ALLOW", "reason_codes": ["NOTHING_SEEN"]}
}`

func TestEvaluateEveryFieldReachesThePolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o := e.createOrg("Acme")
	e.publish(o.Key, fieldsBundle).want(t, http.StatusCreated)

	full := func() map[string]any {
		return map[string]any{
			"org_id": o.ID, "decision_type": "PAYMENT", "workflow_key": "ap.invoice", "vertical_pack": "fintech",
			"amount": json.Number("250.5"), "risk_score": json.Number("82.5"), "objective_profile": "conservative",
			"mode":    "ENFORCEMENT",
			"context": map[string]any{"approval_path": "two-person", "policy_version": "fields-1", "cost_center": "CC-7"},
		}
	}
	all := []string{"DT_SEEN", "WF_SEEN", "VP_SEEN", "OP_SEEN", "RISK_SEEN", "AMOUNT_SEEN", "MODE_SEEN", "APPROVAL_PATH_SEEN", "PIN_SEEN", "STRUCT_SEEN"}
	without := func(drop ...string) []string {
		out := []string{"PROTOCOL_OUTCOME_REVIEW_REQUIRED", "POLICY_MATCHED"}
		for _, c := range all {
			if !slices.Contains(drop, c) {
				out = append(out, c)
			}
		}
		return out
	}

	r := e.decide(o.Key, mustJSON(t, full()))
	if r.str("outcome") != "REVIEW_REQUIRED" || r.str("mode") != "ENFORCEMENT" || !slices.Equal(r.strs("reason_codes"), without()) {
		t.Fatalf("every member set: %s", r)
	}
	if r.str("policy_snapshot.policy_version") != "fields-1" || r.str("policy_snapshot.bundle_id") != "fields" {
		t.Fatalf("snapshot: %s", r)
	}
	dos := e.do("GET", r.str("dossier_url"), o.Key, nil, nil).want(t, http.StatusOK)
	if got := dos.strs("matched_rules"); !slices.Equal(got, []string{"dt", "wf", "vp", "op", "risk", "amt", "mode", "path", "pin", "struct"}) {
		t.Fatalf("matched_rules %v", got)
	}
	if dos.str("requested_mode") != "ENFORCEMENT" || dos.str("bundle_mode") != "ENFORCEMENT" || dos.str("intent.vertical_pack") != "fintech" ||
		dos.str("intent.context.approval_path") != "two-person" || dos.num("intent.risk_score") != 82.5 {
		t.Fatalf("dossier does not record the request: %s", dos)
	}

	for _, c := range []struct {
		name   string
		change func(m map[string]any)
		drop   []string
	}{
		{"decision_type", func(m map[string]any) { m["decision_type"] = "REFUND" }, []string{"DT_SEEN"}},
		{"workflow_key", func(m map[string]any) { m["workflow_key"] = "ar.other" }, []string{"WF_SEEN"}},
		{"vertical_pack", func(m map[string]any) { m["vertical_pack"] = "retail" }, []string{"VP_SEEN", "STRUCT_SEEN"}},
		{"objective_profile", func(m map[string]any) { m["objective_profile"] = "aggressive" }, []string{"OP_SEEN", "STRUCT_SEEN"}},
		{"risk_score", func(m map[string]any) { m["risk_score"] = json.Number("10") }, []string{"RISK_SEEN", "STRUCT_SEEN"}},
		{"risk_score absent", func(m map[string]any) { delete(m, "risk_score") }, []string{"RISK_SEEN", "STRUCT_SEEN"}},
		{"amount", func(m map[string]any) { m["amount"] = json.Number("99") }, []string{"AMOUNT_SEEN", "STRUCT_SEEN"}},
		{"amount absent", func(m map[string]any) { delete(m, "amount") }, []string{"AMOUNT_SEEN", "STRUCT_SEEN"}},
		{"mode", func(m map[string]any) { m["mode"] = "SHADOW" }, []string{"MODE_SEEN"}},
		{"approval_path", func(m map[string]any) { m["context"].(map[string]any)["approval_path"] = "single" }, []string{"APPROVAL_PATH_SEEN", "STRUCT_SEEN"}},
		{"context member", func(m map[string]any) { m["context"].(map[string]any)["cost_center"] = "CC-8" }, []string{"STRUCT_SEEN"}},
		{"policy_version absent", func(m map[string]any) { delete(m["context"].(map[string]any), "policy_version") }, []string{"PIN_SEEN"}},
		{"org_id absent", func(m map[string]any) { delete(m, "org_id") }, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := full()
			c.change(m)
			r := e.decide(o.Key, mustJSON(t, m))
			if got := r.strs("reason_codes"); !slices.Equal(got, without(c.drop...)) {
				t.Fatalf("codes %v, want %v", got, without(c.drop...))
			}
			wantMode := "ENFORCEMENT"
			if m["mode"] == "SHADOW" {
				wantMode = "SHADOW"
			}
			if r.str("mode") != wantMode {
				t.Fatalf("mode %q, want %q", r.str("mode"), wantMode)
			}
		})
	}

	// Nothing set: the default decides.
	r = e.decide(o.Key, `{}`)
	if r.str("outcome") != "ALLOW" || !slices.Equal(r.strs("reason_codes"), []string{"PROTOCOL_OUTCOME_ALLOW", "NO_RULE_MATCHED", "NOTHING_SEEN"}) {
		t.Fatalf("empty request: %s", r)
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestEvaluationErrorFailsClosed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o := e.createOrg("Acme")
	e.publish(o.Key, `{"bundle_id":"b","version":"1","mode":"ENFORCEMENT","rules":[
	  {"id":"ok","outcome":"ALLOW","reason_codes":["ALWAYS"]},
	  {"id":"risky","when":"intent.risk_score > 50","outcome":"REVIEW_REQUIRED","reason_codes":["RISKY"]}],
	  "default":{"outcome":"ALLOW","reason_codes":[]}}`).want(t, http.StatusCreated)
	// risk_score is absent: the `when` fails at run time, the decision blocks.
	r := e.decide(o.Key, `{"amount":5}`)
	if r.str("outcome") != "BLOCK" || !slices.Equal(r.strs("reason_codes"), []string{"PROTOCOL_OUTCOME_BLOCK", "EVALUATION_ERROR"}) {
		t.Fatalf("CEL runtime error should fail closed: %s", r)
	}
	dos := e.do("GET", r.str("dossier_url"), o.Key, nil, nil).want(t, http.StatusOK)
	if dos.str("evaluation_error") == "" {
		t.Fatalf("dossier should record the evaluation error: %s", dos)
	}
	if r := e.decide(o.Key, `{"amount":5,"risk_score":60}`); r.str("outcome") != "REVIEW_REQUIRED" {
		t.Fatalf("with risk_score: %s", r)
	}
}

func TestDeprecatedEvaluateAlias(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o := e.createOrg("Acme")
	body := `{"decision_type":"PAYMENT","amount":2500}`
	canonical := e.decide(o.Key, body)
	if canonical.Header.Get("Deprecation") != "" {
		t.Fatal("the canonical route must not be marked deprecated")
	}
	alias := e.do("POST", pathEvaluateOld, o.Key, body, nil).want(t, http.StatusOK)
	if alias.Header.Get("Deprecation") == "" {
		t.Fatal("the alias must send a Deprecation header")
	}
	if l := alias.Header.Get("Link"); !strings.Contains(l, pathEvaluate) || !strings.Contains(l, "successor-version") {
		t.Fatalf("alias Link header %q", l)
	}
	if !slices.Equal(sortedKeys(canonical.JSON), sortedKeys(alias.JSON)) || alias.str("outcome") != canonical.str("outcome") ||
		!slices.Equal(alias.strs("reason_codes"), canonical.strs("reason_codes")) {
		t.Fatalf("alias answer differs in shape:\n%s\n%s", canonical, alias)
	}
	checkDecisionShape(t, alias, o.ID, uint64(canonical.num("ledger_seq"))+1)
	dos := e.do("GET", alias.str("dossier_url"), o.Key, nil, nil).want(t, http.StatusOK)
	if dos.str("route") != string(clearance.RouteEvaluateDecision) {
		t.Fatalf("alias dossier route %q", dos.str("route"))
	}
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestOrgResolution(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	a, b := e.createOrg("A"), e.createOrg("B")
	hb := e.head(b.Key)

	e.do("POST", pathEvaluate, a.Key, `{"org_id":"`+b.ID+`","amount":5}`, nil).wantProblem(t, 403, clearance.CodeOrgMismatch)
	e.do("GET", pathLedger+"?org_id="+b.ID, a.Key, nil, nil).wantProblem(t, 403, clearance.CodeOrgMismatch)
	e.do("GET", pathVerify+"?org_id="+b.ID, a.Key, nil, nil).wantProblem(t, 403, clearance.CodeOrgMismatch)
	if r := e.decide(a.Key, `{"org_id":"`+a.ID+`","amount":5}`); r.str("org_id") != a.ID {
		t.Fatalf("own org_id: %s", r)
	}

	e.do("POST", pathEvaluate, e.platform, `{"amount":5}`, nil).wantProblem(t, 400, clearance.CodeOrgRequired)
	e.do("POST", pathEvaluate, e.platform, `{"org_id":"acme","amount":5}`, nil).wantProblem(t, 400, clearance.CodeInvalidRequest)
	e.do("GET", pathLedger, e.platform, nil, nil).wantProblem(t, 400, clearance.CodeOrgRequired)
	e.do("GET", pathBundles, e.platform, nil, nil).wantProblem(t, 400, clearance.CodeOrgRequired)

	r := e.do("POST", pathEvaluate, e.platform, `{"org_id":"`+b.ID+`","amount":5}`, nil).want(t, http.StatusOK)
	checkDecisionShape(t, r, b.ID, hb+1)
	dos := e.do("GET", r.str("dossier_url")+"?org_id="+b.ID, e.platform, nil, nil).want(t, http.StatusOK)
	if dos.str("actor.credential_kind") != "platform" || dos.str("actor.credential_id") != "platform" {
		t.Fatalf("platform decision actor: %s", dos)
	}
	led := e.do("GET", pathLedger+"?org_id="+b.ID, e.platform, nil, nil).want(t, http.StatusOK)
	if uint64(led.num("head.seq")) != hb+1 || led.str("org_id") != b.ID {
		t.Fatalf("platform ledger read: %s", led)
	}
	// Org A's ledger did not move because of B's decision.
	if h := e.head(a.Key); h != 3 {
		t.Fatalf("org A head %d, want 3", h)
	}
}

// The platform key names an org that does not exist: nothing may be
// recorded for it (a decision would start a ledger for a phantom org).
func TestPlatformKeyDecisionForUnknownOrgIsNotFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	const ghost = "01900000-0000-7000-8000-00000000beef"
	r := e.do("POST", pathEvaluate, e.platform, `{"org_id":"`+ghost+`","amount":5}`, nil)
	page, err := e.engine.Audit.Ledger(context.Background(), ghost, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusNotFound || r.str("code") != clearance.CodeOrgNotFound || page.Head.Seq != 0 {
		t.Fatalf("decision for an unknown org: want 404 %s and no ledger, got %s; ghost ledger head %d",
			clearance.CodeOrgNotFound, r, page.Head.Seq)
	}
}

// ---------------------------------------------------------------------------
// Idempotency and correlation

func TestIdempotency(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o, other := e.createOrg("Acme"), e.createOrg("Other")
	idem := func(k string) map[string]string { return map[string]string{server.HeaderIdempotencyKey: k} }

	body := `{"decision_type":"PAYMENT","amount":2500}`
	first := e.do("POST", pathEvaluate, o.Key, body, idem("invoice-4711")).want(t, http.StatusOK)
	if first.Header.Get(server.HeaderReplayed) != "" || first.str("idempotency_key") != "invoice-4711" {
		t.Fatalf("first use: %s (replayed %q)", first, first.Header.Get(server.HeaderReplayed))
	}
	head := e.head(o.Key)
	counted := metricSum(e.metrics(), "clearance_decisions_total", nil)

	// Same key, same body modulo whitespace and member order: the stored answer, byte for byte.
	for _, b := range []string{body, " {\n \"amount\" : 2500.0 , \"decision_type\":\"PAYMENT\"}"} {
		r := e.do("POST", pathEvaluate, o.Key, b, idem("invoice-4711")).want(t, http.StatusOK)
		if r.Header.Get(server.HeaderReplayed) != "true" || !bytes.Equal(r.Raw, first.Raw) {
			t.Fatalf("replay of %q:\n%s\nfirst:\n%s", b, r, first)
		}
	}
	// The deprecated alias is the same entry route: it replays too.
	if r := e.do("POST", pathEvaluateOld, o.Key, body, idem("invoice-4711")).want(t, http.StatusOK); !bytes.Equal(r.Raw, first.Raw) {
		t.Fatalf("alias replay differs: %s", r)
	}
	if h := e.head(o.Key); h != head {
		t.Fatalf("replays moved the head %d -> %d", head, h)
	}
	if n := metricSum(e.metrics(), "clearance_decisions_total", nil); n != counted {
		t.Fatalf("replays were counted as decisions: %v -> %v", counted, n)
	}

	// Same key, other body: 409, nothing recorded.
	e.do("POST", pathEvaluate, o.Key, `{"decision_type":"PAYMENT","amount":2501}`, idem("invoice-4711")).
		wantProblem(t, http.StatusConflict, clearance.CodeIdempotencyKeyReused)
	if h := e.head(o.Key); h != head {
		t.Fatalf("a refused reuse moved the head %d -> %d", head, h)
	}

	// Same key on another route, or in another org: independent.
	g := e.do("POST", pathGate, o.Key, body, idem("invoice-4711")).want(t, http.StatusOK)
	if g.Header.Get(server.HeaderReplayed) != "" || g.str("decision.decision_id") == first.str("decision_id") {
		t.Fatalf("same key on action-gate should be a new decision: %s", g)
	}
	x := e.do("POST", pathEvaluate, other.Key, body, idem("invoice-4711")).want(t, http.StatusOK)
	if x.Header.Get(server.HeaderReplayed) != "" || x.str("org_id") != other.ID {
		t.Fatalf("same key in another org: %s", x)
	}

	// Keys are 1 to 255 visible ASCII characters.
	for _, k := range []string{"has space", strings.Repeat("k", 256), "tab\there"} {
		e.do("POST", pathEvaluate, o.Key, body, idem(k)).wantProblem(t, 400, clearance.CodeInvalidIdempotencyKey)
	}
	e.do("POST", pathEvaluate, o.Key, body, idem(strings.Repeat("k", 255))).want(t, http.StatusOK)
}

func TestIdempotencyConcurrentSameKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o := e.createOrg("Acme")
	h0 := e.head(o.Key)
	const n = 16
	results := make([]*result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := e.send("POST", pathEvaluate, o.Key, `{"amount":42}`, map[string]string{server.HeaderIdempotencyKey: "same"})
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = r
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	fresh := 0
	for _, r := range results {
		r.want(t, http.StatusOK)
		if r.Header.Get(server.HeaderReplayed) == "" {
			fresh++
		}
		if !bytes.Equal(r.Raw, results[0].Raw) {
			t.Fatalf("concurrent uses of one key gave different answers:\n%s\n%s", r, results[0])
		}
	}
	if fresh != 1 {
		t.Fatalf("%d answers were not replays, want exactly 1", fresh)
	}
	if h := e.head(o.Key); h != h0+1 {
		t.Fatalf("head %d, want %d", h, h0+1)
	}
}

func TestCorrelationAndRequestIDs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o := e.createOrg("Acme")

	r := e.do("POST", pathEvaluate, o.Key, `{"amount":5}`, map[string]string{
		server.HeaderCorrelationID: "run-42", server.HeaderRequestID: "req-abc-1"}).want(t, http.StatusOK)
	if r.Header.Get(server.HeaderCorrelationID) != "run-42" || r.Header.Get(server.HeaderRequestID) != "req-abc-1" || r.str("correlation_id") != "run-42" {
		t.Fatalf("correlation/request id not echoed: %v %s", r.Header, r)
	}
	dos := e.do("GET", r.str("dossier_url"), o.Key, nil, nil).want(t, http.StatusOK)
	if dos.str("correlation_id") != "run-42" || dos.str("request_id") != "req-abc-1" {
		t.Fatalf("dossier does not record the ids: %s", dos)
	}

	// Generated when absent or unusable; different per request.
	seen := map[string]bool{}
	for _, hdr := range []map[string]string{nil, nil, {server.HeaderRequestID: strings.Repeat("r", 129)}, {server.HeaderRequestID: "has space"}} {
		r := e.do("GET", pathHealth, "", nil, hdr).want(t, http.StatusOK)
		id := r.Header.Get(server.HeaderRequestID)
		if !hexID.MatchString(id) || seen[id] {
			t.Fatalf("generated request id %q (seen before: %v)", id, seen[id])
		}
		seen[id] = true
	}
	long := strings.Repeat("r", 128)
	if got := e.do("GET", pathHealth, "", nil, map[string]string{server.HeaderRequestID: long}).Header.Get(server.HeaderRequestID); got != long {
		t.Fatalf("a 128-character request id should be echoed, got %q", got)
	}

	// Problem bodies carry the request id, sent or generated.
	p := e.do("POST", pathEvaluate, o.Key, `{"amount":`, map[string]string{server.HeaderRequestID: "req-bad-1"}).wantProblem(t, 400, "MALFORMED_JSON")
	if p.str("request_id") != "req-bad-1" {
		t.Fatalf("problem request_id %q", p.str("request_id"))
	}
	p = e.do("GET", "/v1/nope", "", nil, nil).wantProblem(t, 404, "ROUTE_NOT_FOUND")
	if !hexID.MatchString(p.str("request_id")) {
		t.Fatalf("generated request id in problem: %s", p)
	}

	// Correlation ids are 1 to 255 visible ASCII characters.
	h := e.head(o.Key)
	for _, c := range []string{"has space", strings.Repeat("c", 256)} {
		e.do("POST", pathEvaluate, o.Key, `{"amount":5}`, map[string]string{server.HeaderCorrelationID: c}).
			wantProblem(t, 400, "INVALID_CORRELATION_ID")
	}
	if got := e.head(o.Key); got != h {
		t.Fatalf("refused correlation ids moved the head %d -> %d", h, got)
	}
}

// ---------------------------------------------------------------------------
// Action gates

const gatesBundle = `{"bundle_id":"gates","version":"gates-1","mode":"ENFORCEMENT","rules":[
  {"id":"small","match":[{"field":"amount","op":"lt","value":100}],"outcome":"ALLOW","reason_codes":["SMALL"]},
  {"id":"medium","match":[{"field":"amount","op":"ge","value":100},{"field":"amount","op":"lt","value":1000}],"outcome":"ESCALATE","reason_codes":["MEDIUM"]},
  {"id":"large","match":[{"field":"amount","op":"ge","value":1000},{"field":"amount","op":"lt","value":5000}],"outcome":"REVIEW_REQUIRED","reason_codes":["LARGE"]},
  {"id":"huge","match":[{"field":"amount","op":"ge","value":5000}],"outcome":"BLOCK","reason_codes":["HUGE"]}],
  "default":{"outcome":"ESCALATE","reason_codes":["NO_AMOUNT"]}}`

type gateRoute struct {
	name, path, route string
	body              func(amount string, extra string) string // extra: more top-level members, "" or `,"k":v`
}

func gateRoutes(orgID string) []gateRoute {
	hook := func(a, extra string) string { return `{"workflow_key":"wf","amount":` + a + extra + `}` }
	return []gateRoute{
		{"action-gate", pathGate, string(clearance.RouteActionGate), hook},
		{"crm", pathCRM(orgID), string(clearance.RouteCRMActionGate), hook},
		{"workspace-app", pathWorkspace, string(clearance.RouteWorkspaceApp), hook},
		{"cloud-agent", pathCloud, string(clearance.RouteCloudAgentVerify), func(a, extra string) string {
			return `{"workflow_key":"wf","intent":{"action_type":"pay","amount":` + a + `}` + extra + `}`
		}},
	}
}

func TestActionGateVerdicts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o := e.createOrg("Acme")
	e.publish(o.Key, gatesBundle).want(t, http.StatusCreated)
	cases := []struct{ amount, outcome, verdict string }{
		{"50", "ALLOW", server.VerdictContinue},
		{"500", "ESCALATE", server.VerdictHandOff},
		{"2000", "REVIEW_REQUIRED", server.VerdictReview},
		{"9000", "BLOCK", server.VerdictStop},
	}
	for _, g := range gateRoutes(o.ID) {
		t.Run(g.name, func(t *testing.T) {
			for _, c := range cases {
				// ENFORCEMENT: the verdict is enforced.
				r := e.do("POST", g.path, o.Key, g.body(c.amount, ""), nil).want(t, http.StatusOK)
				if r.str("verdict") != c.verdict || lookup(r.JSON, "enforced") != true || r.str("enforced_verdict") != c.verdict ||
					r.str("outcome") != c.outcome || r.str("decision.outcome") != c.outcome || r.str("decision.mode") != "ENFORCEMENT" {
					t.Fatalf("amount %s: want %s/%s enforced: %s", c.amount, c.outcome, c.verdict, r)
				}
				checkGateLinks(t, e, o.Key, r, g.route)

				// SHADOW requested: nothing is enforced, enforced_verdict tells.
				s := e.do("POST", g.path, o.Key, g.body(c.amount, `,"mode":"SHADOW"`), nil).want(t, http.StatusOK)
				if s.str("verdict") != server.VerdictContinue || lookup(s.JSON, "enforced") != false ||
					s.str("enforced_verdict") != c.verdict || s.str("outcome") != c.outcome || s.str("decision.mode") != "SHADOW" {
					t.Fatalf("amount %s in SHADOW: %s", c.amount, s)
				}
			}
		})
	}
	if v := e.verify(o.Key); lookup(v.JSON, "valid") != true {
		t.Fatalf("ledger after gate decisions: %s", v)
	}
}

// checkGateLinks checks the envelope's links resolve to the decision's evidence.
func checkGateLinks(t *testing.T, e *env, key string, r *result, route string) {
	t.Helper()
	want := map[string]string{
		"links.dossier":             pathDossiers + r.str("decision.dossier_id"),
		"links.dossier_by_decision": pathDossierDec + r.str("decision.decision_id"),
		"links.ledger_verify":       pathVerify,
	}
	for k, v := range want {
		if r.str(k) != v {
			t.Fatalf("%s = %q, want %q", k, r.str(k), v)
		}
	}
	d1 := e.do("GET", r.str("links.dossier"), key, nil, nil).want(t, http.StatusOK)
	d2 := e.do("GET", r.str("links.dossier_by_decision"), key, nil, nil).want(t, http.StatusOK)
	if !bytes.Equal(d1.Raw, d2.Raw) || d1.Header.Get(server.HeaderDossierDigest) != r.str("decision.dossier_digest") {
		t.Fatal("the two dossier links disagree with each other or with the decision")
	}
	if d1.str("route") != route {
		t.Fatalf("dossier route %q, want %q", d1.str("route"), route)
	}
	if v := e.do("GET", r.str("links.ledger_verify"), key, nil, nil).want(t, http.StatusOK); lookup(v.JSON, "valid") != true {
		t.Fatalf("ledger_verify link: %s", v)
	}
}

func TestActionGateStarterShadow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o := e.createOrg("Acme")
	for _, g := range gateRoutes(o.ID) {
		r := e.do("POST", g.path, o.Key, g.body("20000", ""), nil).want(t, http.StatusOK)
		if r.str("outcome") != "BLOCK" || r.str("verdict") != server.VerdictContinue || lookup(r.JSON, "enforced") != false ||
			r.str("enforced_verdict") != server.VerdictStop || r.str("decision.policy_snapshot.policy_version") != "starter-1" {
			t.Fatalf("%s under the starter policy: %s", g.name, r)
		}
	}
}

func TestActionGateSurfacesAndAgentIntent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o := e.createOrg("Acme")
	e.publish(o.Key, `{"bundle_id":"surfaces","version":"s1","mode":"ENFORCEMENT","rules":[
	  {"id":"http","surfaces":["http"],"outcome":"ALLOW","reason_codes":["SURFACE_HTTP"]},
	  {"id":"crm","surfaces":["crm"],"outcome":"ALLOW","reason_codes":["SURFACE_CRM"]},
	  {"id":"ws","surfaces":["workspace_app"],"outcome":"ALLOW","reason_codes":["SURFACE_WORKSPACE"]},
	  {"id":"cloud","surfaces":["cloud_agent"],"outcome":"ALLOW","reason_codes":["SURFACE_CLOUD"]},
	  {"id":"custom","when":"intent.surface == 'zapier'","outcome":"ALLOW","reason_codes":["SURFACE_CUSTOM"]},
	  {"id":"sor","when":"has(intent.system_of_record) && intent.system_of_record == 'salesforce'","outcome":"ALLOW","reason_codes":["SOR_SEEN"]},
	  {"id":"atype","match":[{"field":"action.type","op":"eq","value":"send_email"},{"field":"currency","op":"eq","value":"EUR"},
	     {"field":"action.target","op":"eq","value":"cust-9"},{"field":"actor.id","op":"eq","value":"agent-7"}],
	   "outcome":"ALLOW","reason_codes":["AGENT_ACTION_SEEN"]}],
	  "default":{"outcome":"ESCALATE","reason_codes":["NO_SURFACE"]}}`).want(t, http.StatusCreated)
	codes := func(extra ...string) []string {
		return append([]string{"PROTOCOL_OUTCOME_ALLOW", "POLICY_MATCHED"}, extra...)
	}
	for _, c := range []struct {
		name, path, body string
		want             []string
	}{
		{"http default", pathGate, `{}`, codes("SURFACE_HTTP")},
		{"explicit surface", pathGate, `{"surface":"zapier"}`, codes("SURFACE_CUSTOM")},
		{"crm default", pathCRM(o.ID), `{}`, codes("SURFACE_CRM")},
		{"workspace default", pathWorkspace, `{}`, codes("SURFACE_WORKSPACE")},
		{"cloud agent", pathCloud, `{"system_of_record":"salesforce","intent":{"action_type":"send_email","amount":5,
		  "currency":"EUR","target":"cust-9","actor":{"id":"agent-7","type":"agent"},"channel":"email"}}`,
			codes("SURFACE_CLOUD", "SOR_SEEN", "AGENT_ACTION_SEEN")},
		{"cloud agent minimal", pathCloud, `{"intent":{"action_type":"noop"}}`, codes("SURFACE_CLOUD")},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("POST", c.path, o.Key, c.body, nil).want(t, http.StatusOK)
			if got := r.strs("decision.reason_codes"); !slices.Equal(got, c.want) {
				t.Fatalf("codes %v, want %v", got, c.want)
			}
		})
	}
}

// Members of the cloud agent's intent beyond the known ones reach CEL as
// intent.intent (docs/decisions.md, "Cloud agent extension").
func TestCloudAgentExtraIntentMembersReachCEL(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o := e.createOrg("Acme")
	e.publish(o.Key, `{"bundle_id":"agent","version":"a1","mode":"ENFORCEMENT","rules":[
	  {"id":"extra","when":"has(intent.intent) && has(intent.intent.channel) && intent.intent.channel == 'email'",
	   "outcome":"BLOCK","reason_codes":["AGENT_EXTRA_SEEN"]}],
	  "default":{"outcome":"ALLOW","reason_codes":["NO_EXTRA"]}}`).want(t, http.StatusCreated)
	r := e.do("POST", pathCloud, o.Key, `{"intent":{"action_type":"send","channel":"email","recipients":3}}`, nil).want(t, http.StatusOK)
	if r.str("outcome") != "BLOCK" || !slices.Contains(r.strs("decision.reason_codes"), "AGENT_EXTRA_SEEN") {
		t.Fatalf("intent.channel did not reach the policy as intent.intent.channel: %s", r)
	}
}

func TestActionGateErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	a, b := e.createOrg("A"), e.createOrg("B")
	h := e.head(a.Key)

	// CRM: the path names the org.
	e.do("POST", pathCRM(b.ID), a.Key, `{"amount":5}`, nil).wantProblem(t, 403, clearance.CodeOrgMismatch)
	e.do("POST", pathCRM("not-a-uuid"), a.Key, `{"amount":5}`, nil).wantProblem(t, 403, clearance.CodeOrgMismatch)
	e.do("POST", pathCRM(a.ID), a.Key, `{"org_id":"`+b.ID+`","amount":5}`, nil).wantProblem(t, 400, "PATH_BODY_MISMATCH")
	e.do("POST", pathCRM("not-a-uuid"), e.platform, `{"amount":5}`, nil).wantProblem(t, 400, clearance.CodeInvalidRequest)
	e.do("POST", pathGate, a.Key, `{"org_id":"`+b.ID+`","amount":5}`, nil).wantProblem(t, 403, clearance.CodeOrgMismatch)

	// Cloud agent: intent.action_type is required.
	for _, body := range []string{`{}`, `{"intent":{}}`, `{"intent":{"amount":5}}`, `{"intent":{"action_type":""}}`} {
		r := e.do("POST", pathCloud, a.Key, body, nil).wantProblem(t, 400, "MISSING_FIELD")
		if lookup(r.JSON, "errors.0.field") != "intent.action_type" {
			t.Fatalf("missing action_type should be named: %s", r)
		}
	}
	e.do("POST", pathCloud, a.Key, `{"intent":{"action_type":"pay","amount":"5"}}`, nil).wantProblem(t, 400, policy.CodeInvalidAmount)
	e.do("POST", pathCloud, a.Key, `{"intent":"pay"}`, nil).wantProblem(t, 400, "WRONG_TYPE")
	e.do("POST", pathCloud, a.Key, `{"intent":{"action_type":"pay"},"idempotency_key":"x"}`, nil).wantProblem(t, 400, "UNKNOWN_MEMBER")

	// Body idempotency_key and correlation_id must agree with their headers.
	e.do("POST", pathGate, a.Key, `{"amount":5,"idempotency_key":"g-1"}`, map[string]string{server.HeaderIdempotencyKey: "g-2"}).
		wantProblem(t, 400, "HEADER_BODY_MISMATCH")
	e.do("POST", pathGate, a.Key, `{"amount":5,"correlation_id":"c-1"}`, map[string]string{server.HeaderCorrelationID: "c-2"}).
		wantProblem(t, 400, "HEADER_BODY_MISMATCH")
	if got := e.head(a.Key); got != h {
		t.Fatalf("refused gate requests moved the head %d -> %d", h, got)
	}

	// The platform key acts for the org in the CRM path.
	if r := e.do("POST", pathCRM(b.ID), e.platform, `{"amount":5}`, nil).want(t, http.StatusOK); r.str("decision.org_id") != b.ID {
		t.Fatalf("platform key on the CRM path: %s", r)
	}
}

func TestActionGateBodyIdempotency(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o := e.createOrg("Acme")
	for _, path := range []string{pathGate, pathCRM(o.ID), pathWorkspace} {
		t.Run(path, func(t *testing.T) {
			body := `{"amount":5,"idempotency_key":"g-1","correlation_id":"c-1"}`
			first := e.do("POST", path, o.Key, body, nil).want(t, http.StatusOK)
			if first.Header.Get(server.HeaderReplayed) != "" || first.str("decision.idempotency_key") != "g-1" ||
				first.str("decision.correlation_id") != "c-1" || first.Header.Get(server.HeaderCorrelationID) != "c-1" {
				t.Fatalf("first: %s", first)
			}
			head := e.head(o.Key)
			for _, hdr := range []map[string]string{nil, {server.HeaderIdempotencyKey: "g-1", server.HeaderCorrelationID: "c-1"}} {
				r := e.do("POST", path, o.Key, body, hdr).want(t, http.StatusOK)
				if r.Header.Get(server.HeaderReplayed) != "true" || !bytes.Equal(r.Raw, first.Raw) {
					t.Fatalf("replay with headers %v: %s", hdr, r)
				}
			}
			e.do("POST", path, o.Key, `{"amount":6,"idempotency_key":"g-1"}`, nil).wantProblem(t, 409, clearance.CodeIdempotencyKeyReused)
			if h := e.head(o.Key); h != head {
				t.Fatalf("head moved %d -> %d", head, h)
			}
		})
	}
	// The cloud extension takes the header.
	hdr := map[string]string{server.HeaderIdempotencyKey: "cloud-1"}
	first := e.do("POST", pathCloud, o.Key, `{"intent":{"action_type":"pay"}}`, hdr).want(t, http.StatusOK)
	again := e.do("POST", pathCloud, o.Key, `{"intent":{"action_type":"pay"}}`, hdr).want(t, http.StatusOK)
	if again.Header.Get(server.HeaderReplayed) != "true" || !bytes.Equal(first.Raw, again.Raw) {
		t.Fatalf("cloud replay: %s", again)
	}
}

// ---------------------------------------------------------------------------
// Policy bundles

func bundleJSON(version, mode string, limit int) string {
	return fmt.Sprintf(`{"bundle_id":"payments","version":%q,"mode":%q,"rules":[
	  {"id":"small","match":[{"field":"amount","op":"lt","value":%d}],"outcome":"ALLOW","reason_codes":["SMALL"]}],
	  "default":{"outcome":"ESCALATE","reason_codes":["NOT_SMALL"]}}`, version, mode, limit)
}

func TestPolicyBundles(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o, other := e.createOrg("Acme"), e.createOrg("Other")
	h := e.head(o.Key)

	v1 := bundleJSON("2026-01-01", "ENFORCEMENT", 1000)
	p1 := e.publish(o.Key, v1).want(t, http.StatusCreated)
	if p1.str("org_id") != o.ID || p1.str("bundle_id") != "payments" || p1.str("version") != "2026-01-01" || p1.str("mode") != "ENFORCEMENT" ||
		p1.num("rule_count") != 1 || lookup(p1.JSON, "active") != true || uint64(p1.num("ledger_seq")) != h+1 ||
		!strings.HasPrefix(p1.str("bundle_digest"), "sha256:") || p1.str("published_at") == "" {
		t.Fatalf("publish answer: %s", p1)
	}
	// Published, then activated (publishing activates by default).
	entries := e.entries(o.Key)
	for i, kind := range []string{ledger.KindPolicyPublished, ledger.KindPolicyActivated} {
		en := entries[len(entries)-2+i]
		if en["kind"] != kind || en["subject_id"] != "2026-01-01" || en["payload_digest"] != p1.str("bundle_digest") {
			t.Fatalf("publish ledger entry %d: %v", i, en)
		}
	}

	// The identical version again (other whitespace and member order): 200, same digest, not ledgered.
	var m map[string]any
	if err := json.Unmarshal([]byte(v1), &m); err != nil {
		t.Fatal(err)
	}
	again := e.publish(o.Key, mustJSON(t, m)).want(t, http.StatusOK)
	if again.str("bundle_digest") != p1.str("bundle_digest") || lookup(again.JSON, "ledger_seq") != nil {
		t.Fatalf("identical republish: %s", again)
	}
	if got := e.head(o.Key); got != h+2 {
		t.Fatalf("identical republish moved the head to %d", got)
	}

	// The alias publishes too; the newest version is active.
	v2 := bundleJSON("2026-02-01", "SHADOW", 10)
	p2 := e.do("POST", pathPolicies, o.Key, v2, nil).want(t, http.StatusCreated)

	// Same version, other content.
	e.publish(o.Key, bundleJSON("2026-01-01", "ENFORCEMENT", 999)).wantProblem(t, http.StatusConflict, clearance.CodePolicyVersionConflict)

	// Semantically invalid: 422 naming the rule.
	r := e.publish(o.Key, `{"bundle_id":"b","version":"bad","mode":"ENFORCEMENT","rules":[
	  {"id":"fine","outcome":"ALLOW","reason_codes":["OK"]},
	  {"id":"bad-rule","when":"intent.amount >","outcome":"ALLOW","reason_codes":["X"]}],
	  "default":{"outcome":"ESCALATE","reason_codes":[]}}`).wantProblem(t, http.StatusUnprocessableEntity, clearance.CodePolicyInvalid)
	if f, _ := lookup(r.JSON, "errors.0.field").(string); f != "rules[1].when" ||
		!strings.Contains(fmt.Sprint(lookup(r.JSON, "errors.0.message")), "bad-rule") {
		t.Fatalf("422 should name the rule and its member: %s", r)
	}
	r = e.publish(o.Key, `{"bundle_id":"b","version":"bad","mode":"SOMETIMES","rules":[
	  {"id":"r1","outcome":"MAYBE","reason_codes":["POLICY_MATCHED"]}],"default":{"outcome":"ESCALATE","reason_codes":[]}}`).
		wantProblem(t, http.StatusUnprocessableEntity, clearance.CodePolicyInvalid)
	if errs, _ := r.JSON["errors"].([]any); len(errs) < 3 {
		t.Fatalf("every problem should be listed (mode, outcome, reserved code): %s", r)
	}
	// Syntactically invalid: 400.
	e.publish(o.Key, `{"bundle_id":`).wantProblem(t, 400, "MALFORMED_JSON")
	e.publish(o.Key, `{"bundle_id":"b","version":"x","mode":"SHADOW","rules":[],"default":{"outcome":"ALLOW","reason_codes":[]},"owner":"me"}`).
		wantProblem(t, 400, "UNKNOWN_MEMBER")
	e.publish(o.Key, `{"bundle_id":"b","bundle_id":"c"}`).wantProblem(t, 400, "DUPLICATE_MEMBER")
	if got := e.head(o.Key); got != h+4 {
		t.Fatalf("refused publishes moved the head: %d, want %d", got, h+4)
	}

	// List, oldest first; the newest is active.
	list := e.do("GET", pathBundles, o.Key, nil, nil).want(t, http.StatusOK)
	if list.str("active_version") != "2026-02-01" || list.str("bundles.0.version") != "2026-01-01" || list.str("bundles.1.version") != "2026-02-01" ||
		lookup(list.JSON, "bundles.0.active") != false || lookup(list.JSON, "bundles.1.active") != true || lookup(list.JSON, "bundles.2") != nil {
		t.Fatalf("bundle list: %s", list)
	}
	if alias := e.do("GET", pathPolicies, o.Key, nil, nil).want(t, http.StatusOK); !bytes.Equal(alias.Raw, list.Raw) {
		t.Fatalf("list alias differs:\n%s\n%s", alias, list)
	}
	if empty := e.do("GET", pathBundles, other.Key, nil, nil).want(t, http.StatusOK); lookup(empty.JSON, "bundles.0") != nil ||
		lookup(empty.JSON, "active_version") != nil {
		t.Fatalf("another org sees bundles: %s", empty)
	}

	// One version, with its content.
	one := e.do("GET", pathBundles+"/2026-01-01", o.Key, nil, nil).want(t, http.StatusOK)
	if one.str("version") != "2026-01-01" || lookup(one.JSON, "active") != false || one.str("bundle.rules.0.id") != "small" ||
		one.str("bundle_digest") != p1.str("bundle_digest") {
		t.Fatalf("one version: %s", one)
	}
	if alias := e.do("GET", pathPolicies+"/2026-01-01", o.Key, nil, nil).want(t, http.StatusOK); !bytes.Equal(alias.Raw, one.Raw) {
		t.Fatal("version alias differs")
	}
	if cur := e.do("GET", pathBundles+"/2026-02-01", o.Key, nil, nil).want(t, http.StatusOK); lookup(cur.JSON, "active") != true {
		t.Fatalf("newest version not active: %s", cur)
	}
	e.do("GET", pathBundles+"/2099-01-01", o.Key, nil, nil).wantProblem(t, 404, clearance.CodePolicyNotFound)
	e.do("GET", pathPolicies+"/2099-01-01", o.Key, nil, nil).wantProblem(t, 404, clearance.CodePolicyNotFound)
	e.do("GET", pathBundles+"/2026-01-01", other.Key, nil, nil).wantProblem(t, 404, clearance.CodePolicyNotFound)

	// Decisions use the active (here the newest) version unless
	// context.policy_version pins one; a pin to another version is
	// evaluated and recorded, in SHADOW: it never authorizes.
	d := e.decide(o.Key, `{"amount":5}`)
	if d.str("policy_snapshot.policy_version") != "2026-02-01" || d.str("policy_snapshot.bundle_digest") != p2.str("bundle_digest") ||
		d.str("mode") != "SHADOW" || d.str("outcome") != "ALLOW" {
		t.Fatalf("active version decision: %s", d)
	}
	d = e.decide(o.Key, `{"amount":50,"context":{"policy_version":"2026-01-01"}}`)
	if d.str("policy_snapshot.policy_version") != "2026-01-01" || d.str("policy_snapshot.bundle_digest") != p1.str("bundle_digest") ||
		d.str("mode") != "SHADOW" || d.str("outcome") != "ALLOW" || d.str("active_policy_version") != "2026-02-01" {
		t.Fatalf("pinned decision: %s", d)
	}
	// A request can turn enforcement off, never on.
	if d := e.decide(o.Key, `{"amount":50,"mode":"SHADOW","context":{"policy_version":"2026-01-01"}}`); d.str("mode") != "SHADOW" {
		t.Fatalf("ENFORCEMENT bundle with SHADOW request: %s", d)
	}
	if d := e.decide(o.Key, `{"amount":50,"mode":"ENFORCEMENT"}`); d.str("mode") != "SHADOW" {
		t.Fatalf("SHADOW bundle with ENFORCEMENT request: %s", d)
	}
	hh := e.head(o.Key)
	e.do("POST", pathEvaluate, o.Key, `{"amount":5,"context":{"policy_version":"2099-01-01"}}`, nil).
		wantProblem(t, http.StatusConflict, clearance.CodePolicyPinUnknown)
	e.do("POST", pathEvaluate, other.Key, `{"amount":5,"context":{"policy_version":"2026-01-01"}}`, nil).
		wantProblem(t, http.StatusConflict, clearance.CodePolicyPinUnknown)
	if got := e.head(o.Key); got != hh {
		t.Fatalf("unknown pin moved the head %d -> %d", hh, got)
	}

	// The platform key publishes and reads for a named org.
	e.do("POST", pathBundles+"?org_id="+other.ID, e.platform, bundleJSON("p-1", "SHADOW", 5), nil).want(t, http.StatusCreated)
	if l := e.do("GET", pathBundles+"?org_id="+other.ID, e.platform, nil, nil).want(t, http.StatusOK); l.str("active_version") != "p-1" {
		t.Fatalf("platform list: %s", l)
	}
	e.do("POST", pathBundles, e.platform, bundleJSON("p-2", "SHADOW", 5), nil).wantProblem(t, 400, clearance.CodeOrgRequired)
}

// Republishing the identical newest version answers 200 with that version;
// it is the active one, and the answer must say so (GET says active: true).
func TestRepublishIdenticalActiveBundleReportsActive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o := e.createOrg("Acme")
	b := bundleJSON("v1", "ENFORCEMENT", 100)
	e.publish(o.Key, b).want(t, http.StatusCreated)
	again := e.publish(o.Key, b).want(t, http.StatusOK)
	got := e.do("GET", pathBundles+"/v1", o.Key, nil, nil).want(t, http.StatusOK)
	if lookup(got.JSON, "active") != true {
		t.Fatalf("GET: %s", got)
	}
	if lookup(again.JSON, "active") != true {
		t.Fatalf("republish of the active version answers active=%v: %s", lookup(again.JSON, "active"), again)
	}
}

// A 422's errors[].field should be one path to the offending member, not
// the rule path twice ("rules[bad-rule].rules[1].when").
func TestPolicyInvalidFieldPathIsWellFormed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o := e.createOrg("Acme")
	r := e.publish(o.Key, `{"bundle_id":"b","version":"bad","mode":"ENFORCEMENT","rules":[
	  {"id":"fine","outcome":"ALLOW","reason_codes":["OK"]},
	  {"id":"bad-rule","when":"intent.amount >","outcome":"ALLOW","reason_codes":["X"]}],
	  "default":{"outcome":"ESCALATE","reason_codes":[]}}`).wantProblem(t, http.StatusUnprocessableEntity, clearance.CodePolicyInvalid)
	f, _ := lookup(r.JSON, "errors.0.field").(string)
	if strings.Count(f, "rules[") != 1 || !strings.HasSuffix(f, ".when") {
		t.Fatalf("errors[0].field = %q, want one path such as rules[1].when or rules[bad-rule].when", f)
	}
}

// ---------------------------------------------------------------------------
// Evidence: dossiers and ledger

func TestDossiers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o, other := e.createOrg("Acme"), e.createOrg("Other")
	writeOnly := e.createKey(o, "decision:write")
	body := `{"decision_type":"PAYMENT", "workflow_key":"ap.invoice","amount":2500,"context":{"b":1,"a":[true,null]}}`
	d := e.do("POST", pathEvaluate, o.Key, body, map[string]string{server.HeaderCorrelationID: "run-7"}).want(t, http.StatusOK)
	seq := uint64(d.num("ledger_seq"))

	r := e.do("GET", pathDossiers+d.str("dossier_id"), o.Key, nil, nil).want(t, http.StatusOK)
	digest := r.Header.Get(server.HeaderDossierDigest)
	if digest != sha256Digest(r.Raw) || digest != d.str("dossier_digest") {
		t.Fatalf("dossier digest: header %s, sha256(body) %s, decision %s", digest, sha256Digest(r.Raw), d.str("dossier_digest"))
	}
	entry := e.entries(o.Key)[seq-1]
	if entry["kind"] != ledger.KindDecision || entry["subject_id"] != d.str("dossier_id") || entry["payload_digest"] != digest {
		t.Fatalf("ledger entry %d does not bind the dossier: %v", seq, entry)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("dossier Content-Type %q", ct)
	}
	// The body is canonical JSON (RFC 8785).
	if c, err := canon.Transform(r.Raw); err != nil || !bytes.Equal(c, r.Raw) {
		t.Fatalf("dossier body is not canonical JSON (err %v)", err)
	}
	var dos struct {
		Intent json.RawMessage `json:"intent"`
	}
	if err := json.Unmarshal(r.Raw, &dos); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"dossier_id": d.str("dossier_id"), "decision_id": d.str("decision_id"), "evaluation_id": d.str("evaluation_id"),
		"org_id": o.ID, "route": "evaluate-decision", "intent_as_received": body, "intent_digest": sha256Digest(dos.Intent),
		"intent_digest_profile": "JCS-SHA256", "outcome": "ESCALATE", "mode": "SHADOW", "bundle_mode": "SHADOW",
		"correlation_id": "run-7", "actor.credential_id": o.KeyID, "actor.credential_kind": "org",
		"policy_snapshot.policy_version": "starter-1", "policy_snapshot.bundle_digest": d.str("policy_snapshot.bundle_digest"),
		"created_at": d.str("created_at"),
	} {
		if got := r.str(k); got != want {
			t.Errorf("dossier %s = %q, want %q", k, got, want)
		}
	}
	if uint64(r.num("ledger_seq")) != seq || !slices.Equal(r.strs("reason_codes"), d.strs("reason_codes")) ||
		!slices.Equal(r.strs("matched_rules"), []string{"amount-escalation-band"}) {
		t.Fatalf("dossier decision members: %s", r)
	}

	// The same bytes by decision id, and for the platform key naming the org.
	byDec := e.do("GET", pathDossierDec+d.str("decision_id"), o.Key, nil, nil).want(t, http.StatusOK)
	plat := e.do("GET", pathDossiers+d.str("dossier_id")+"?org_id="+o.ID, e.platform, nil, nil).want(t, http.StatusOK)
	if !bytes.Equal(byDec.Raw, r.Raw) || !bytes.Equal(plat.Raw, r.Raw) || byDec.Header.Get(server.HeaderDossierDigest) != digest {
		t.Fatal("dossier by decision id or via the platform key differs")
	}

	for _, c := range []struct {
		name, path, key string
		status          int
		code            string
	}{
		{"other org", pathDossiers + d.str("dossier_id"), other.Key, 404, clearance.CodeDossierNotFound},
		{"other org by decision", pathDossierDec + d.str("decision_id"), other.Key, 404, clearance.CodeDossierNotFound},
		{"platform key for other org", pathDossiers + d.str("dossier_id") + "?org_id=" + other.ID, e.platform, 404, clearance.CodeDossierNotFound},
		{"malformed id", pathDossiers + "abc", o.Key, 404, clearance.CodeDossierNotFound},
		{"upper-case id", pathDossiers + strings.ToUpper(d.str("dossier_id")), o.Key, 404, clearance.CodeDossierNotFound},
		{"decision id as dossier id", pathDossiers + d.str("decision_id"), o.Key, 404, clearance.CodeDossierNotFound},
		{"dossier id as decision id", pathDossierDec + d.str("dossier_id"), o.Key, 404, clearance.CodeDossierNotFound},
		{"unknown id", pathDossiers + "01900000-0000-7000-8000-000000000000", o.Key, 404, clearance.CodeDossierNotFound},
		{"write-only key", pathDossiers + d.str("dossier_id"), writeOnly, 403, clearance.CodeInsufficientScope},
		{"write-only key by decision", pathDossierDec + d.str("decision_id"), writeOnly, 403, clearance.CodeInsufficientScope},
		{"platform key without org", pathDossiers + d.str("dossier_id"), e.platform, 400, clearance.CodeOrgRequired},
		{"no key", pathDossiers + d.str("dossier_id"), "", 401, clearance.CodeUnauthenticated},
	} {
		t.Run(c.name, func(t *testing.T) { e.do("GET", c.path, c.key, nil, nil).wantProblem(t, c.status, c.code) })
	}
}

func TestLedgerPagingAndVerify(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o, other := e.createOrg("Acme"), e.createOrg("Other")
	var dossiers []string
	for i := range 7 {
		dossiers = append(dossiers, e.decide(o.Key, fmt.Sprintf(`{"amount":%d}`, i*1000)).str("dossier_id"))
	}
	e.decide(other.Key, `{"amount":1}`)

	var all []any
	after := 0
	for page := 0; ; page++ {
		r := e.do("GET", fmt.Sprintf("%s?limit=4&after_seq=%d", pathLedger, after), o.Key, nil, nil).want(t, http.StatusOK)
		if r.num("head.seq") != 9 || r.str("org_id") != o.ID {
			t.Fatalf("page %d: %s", page, r)
		}
		list := r.JSON["entries"].([]any)
		all = append(all, list...)
		next := r.num("next_after_seq")
		wantNext := map[int]float64{0: 4, 1: 8, 2: -1}[page]
		if next != wantNext {
			t.Fatalf("page %d next_after_seq %v, want %v: %s", page, next, wantNext, r)
		}
		if next < 0 {
			break
		}
		after = int(next)
	}
	if len(all) != 9 {
		t.Fatalf("paged %d entries, want 9", len(all))
	}
	prev := ledger.Genesis
	for i, v := range all {
		en := v.(map[string]any)
		if en["seq"].(float64) != float64(i+1) || en["org_id"] != o.ID || en["prev_entry_hash"] != prev {
			t.Fatalf("entry %d breaks the chain: %v", i+1, en)
		}
		if i >= 2 && (en["kind"] != ledger.KindDecision || en["subject_id"] != dossiers[i-2]) {
			t.Fatalf("entry %d: %v", i+1, en)
		}
		prev = en["entry_hash"].(string)
	}
	tail := e.do("GET", pathLedger+"?after_seq=9", o.Key, nil, nil).want(t, http.StatusOK)
	if !bytes.Contains(tail.Raw, []byte(`"entries":[]`)) {
		t.Fatalf("past the head: %s", tail)
	}
	if r := e.do("GET", pathLedger+"?limit=1000", o.Key, nil, nil).want(t, http.StatusOK); len(r.JSON["entries"].([]any)) != 9 {
		t.Fatalf("limit=1000: %s", r)
	}
	for _, q := range []string{"limit=abc", "limit=0", "limit=-1", "limit=1.5", "after_seq=-1", "after_seq=x"} {
		e.do("GET", pathLedger+"?"+q, o.Key, nil, nil).wantProblem(t, 400, "INVALID_QUERY")
	}
	e.do("GET", pathLedger+"?limit=1001", o.Key, nil, nil).wantProblem(t, 400, clearance.CodeInvalidRequest)

	v := e.verify(o.Key)
	if lookup(v.JSON, "valid") != true || v.num("entries_checked") != 9 || v.num("head_seq") != 9 || v.str("head_hash") != prev ||
		lookup(v.JSON, "first_broken_seq") != nil || v.str("org_id") != o.ID {
		t.Fatalf("verify: %s", v)
	}

	// Another org sees only its own ledger.
	theirs := e.entries(other.Key)
	if len(theirs) != 3 {
		t.Fatalf("other org has %d entries, want 3", len(theirs))
	}
	for _, en := range theirs {
		if en["org_id"] != other.ID || slices.Contains(dossiers, en["subject_id"].(string)) {
			t.Fatalf("other org sees %v", en)
		}
	}
	if v := e.verify(other.Key); lookup(v.JSON, "valid") != true || v.num("head_seq") != 3 {
		t.Fatalf("other org verify: %s", v)
	}
}

// ---------------------------------------------------------------------------
// Reason codes, shadow reports, health, metrics

func TestReasonCodes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o := e.createOrg("Acme")
	writeOnly := e.createKey(o, "decision:write")
	r := e.do("GET", pathReasons, writeOnly, nil, nil).want(t, http.StatusOK)
	list, _ := r.JSON["reason_codes"].([]any)
	got := map[string]bool{}
	for _, v := range list {
		m := v.(map[string]any)
		if m["description"] == "" || m["category"] == "" {
			t.Fatalf("undocumented code %v", m)
		}
		got[m["code"].(string)] = true
	}
	for _, c := range []string{"POLICY_MATCHED", "NO_RULE_MATCHED", "PROTOCOL_OUTCOME_ALLOW", "PROTOCOL_OUTCOME_ESCALATE",
		"PROTOCOL_OUTCOME_REVIEW_REQUIRED", "PROTOCOL_OUTCOME_BLOCK", "APPROVAL_VERIFIED", "EVALUATION_ERROR", "AMOUNT_MISSING",
		"AMOUNT_BELOW_ESCALATION_THRESHOLD", "AMOUNT_IN_ESCALATION_BAND", "AMOUNT_AT_OR_ABOVE_BLOCK_THRESHOLD"} {
		if !got[c] {
			t.Errorf("reason-codes lacks %s", c)
		}
	}
	e.do("GET", pathReasons, "", nil, nil).wantProblem(t, 401, clearance.CodeUnauthenticated)
	e.do("GET", pathReasons, e.platform, nil, nil).want(t, http.StatusOK)
}

func TestShadowReports(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o := e.createOrg("Acme")
	decRead := e.createKey(o, "decision:read")
	policyRead := e.createKey(o, "policy:read")
	for _, b := range []string{
		`{"workflow_key":"wf-a","amount":5}`, `{"workflow_key":"wf-a","amount":10}`, `{"workflow_key":"wf-a","amount":20000}`,
		`{"workflow_key":"wf-b","amount":2000}`,
	} {
		e.decide(o.Key, b)
	}
	e.publish(o.Key, `{"bundle_id":"b","version":"1","mode":"ENFORCEMENT","rules":[{"id":"all","outcome":"REVIEW_REQUIRED","reason_codes":["ALWAYS"]}],
	  "default":{"outcome":"ALLOW","reason_codes":[]}}`).want(t, http.StatusCreated)
	e.decide(o.Key, `{"workflow_key":"wf-a","amount":5}`)                 // ENFORCEMENT: not in the report
	e.decide(o.Key, `{"workflow_key":"wf-b","amount":5,"mode":"SHADOW"}`) // SHADOW by request: counted

	now := time.Now().UTC()
	window := "?from=" + now.Add(-time.Hour).Format(time.RFC3339) + "&to=" + now.Add(time.Hour).Format(time.RFC3339)
	for _, q := range []string{"", window} {
		r := e.do("GET", pathShadow+q, decRead, nil, nil).want(t, http.StatusOK)
		if r.num("total") != 5 || r.str("org_id") != o.ID {
			t.Fatalf("report %q: %s", q, r)
		}
		for k, want := range map[string]float64{"ALLOW": 2, "ESCALATE": 1, "REVIEW_REQUIRED": 1, "BLOCK": 1} {
			if got := r.num("by_outcome." + k); got != want {
				t.Errorf("by_outcome.%s = %v, want %v", k, got, want)
			}
		}
		for path, want := range map[string]any{
			"by_workflow.0.workflow_key": "wf-a", "by_workflow.0.total": 3.0, "by_workflow.0.by_outcome.ALLOW": 2.0,
			"by_workflow.0.by_outcome.BLOCK": 1.0, "by_workflow.0.by_outcome.ESCALATE": 0.0,
			"by_workflow.1.workflow_key": "wf-b", "by_workflow.1.total": 2.0, "by_workflow.1.by_outcome.ESCALATE": 1.0,
			"by_workflow.1.by_outcome.REVIEW_REQUIRED": 1.0, "by_workflow.2": nil,
		} {
			if got := lookup(r.JSON, path); got != want {
				t.Errorf("%s = %v, want %v", path, got, want)
			}
		}
	}
	future := "?from=" + now.Add(time.Hour).Format(time.RFC3339) + "&to=" + now.Add(2*time.Hour).Format(time.RFC3339)
	if r := e.do("GET", pathShadow+future, o.Key, nil, nil).want(t, http.StatusOK); r.num("total") != 0 ||
		r.num("by_outcome.ALLOW") != 0 || lookup(r.JSON, "by_workflow.0") != nil || !bytes.Contains(r.Raw, []byte(`"by_workflow":[]`)) {
		t.Fatalf("empty window: %s", r)
	}
	e.do("GET", pathShadow+"?org_id="+o.ID, e.platform, nil, nil).want(t, http.StatusOK)

	for _, q := range []string{"?from=yesterday", "?to=2026-13-01T00:00:00Z", "?from=2026-01-01"} {
		e.do("GET", pathShadow+q, o.Key, nil, nil).wantProblem(t, 400, "INVALID_QUERY")
	}
	for _, q := range []string{
		"?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z", // from after to
		"?from=2026-01-01T00:00:00Z&to=2026-01-01T00:00:00Z", // empty
		"?from=2024-01-01T00:00:00Z&to=2026-01-01T00:00:00Z", // more than 366 days
	} {
		e.do("GET", pathShadow+q, o.Key, nil, nil).wantProblem(t, 400, clearance.CodeInvalidRequest)
	}
	e.do("GET", pathShadow, policyRead, nil, nil).wantProblem(t, 403, clearance.CodeInsufficientScope)
}

func TestHealthAndMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	h := e.do("GET", pathHealth, "", nil, nil).want(t, http.StatusOK)
	if h.str("status") != "ok" || h.str("store") != "ok" || h.str("version") != clearance.Version || h.Header.Get(server.HeaderRequestID) == "" {
		t.Fatalf("health: %s", h)
	}
	o := e.createOrg("Acme")
	e.decide(o.Key, `{"amount":2500}`)
	e.decide(o.Key, `{"amount":2600}`)
	e.do("POST", pathGate, o.Key, `{"amount":20000}`, nil).want(t, http.StatusOK)
	e.do("GET", "/v1/nope", "", nil, nil).want(t, http.StatusNotFound)

	page := e.metrics()
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"clearance_http_requests_total", map[string]string{"route": "POST " + pathEvaluate, "method": "POST", "code": "200"}, 2},
		{"clearance_http_requests_total", map[string]string{"route": "POST " + pathOrgs, "code": "201"}, 1},
		{"clearance_http_requests_total", map[string]string{"route": "GET " + pathHealth, "code": "200"}, 1},
		{"clearance_http_requests_total", map[string]string{"route": "/", "method": "GET", "code": "404"}, 1},
		{"clearance_decisions_total", map[string]string{"outcome": "ESCALATE", "mode": "SHADOW", "route": "evaluate-decision"}, 2},
		{"clearance_decisions_total", map[string]string{"outcome": "BLOCK", "route": "action-gate"}, 1},
		{"clearance_http_request_duration_seconds_count", map[string]string{"route": "POST " + pathEvaluate}, 2},
	} {
		if got := metricSum(page, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if !strings.Contains(page, "# TYPE clearance_http_requests_total counter") {
		t.Error("metrics page lacks the request counter's TYPE line")
	}
}

// TestMetricsAreNotPublic: the counts cover every org, so on the API
// listener /metrics needs the platform key; the separate metrics handler
// (a private listener) serves only /metrics.
func TestMetricsAreNotPublic(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o := e.createOrg("Acme")
	e.decide(o.Key, `{"amount":2500}`)
	e.do("GET", "/metrics", "", nil, nil).wantProblem(t, http.StatusUnauthorized, clearance.CodeUnauthenticated)
	e.do("GET", "/metrics", o.Key, nil, nil).wantProblem(t, http.StatusForbidden, clearance.CodePlatformKeyRequired)
	if metricSum(e.metrics(), "clearance_decisions_total", nil) != 1 {
		t.Error("the platform key does not read the decision count")
	}

	private := httptest.NewServer(e.server.MetricsHandler())
	defer private.Close()
	res, err := http.Get(private.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || metricSum(string(page), "clearance_decisions_total", nil) != 1 {
		t.Fatalf("metrics listener: %d %.200s", res.StatusCode, page)
	}
	for _, p := range []string{"/v1/health", "/v1/protocol/evaluate-decision", "/"} {
		res, err := http.Get(private.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("metrics listener GET %s = %d, want 404", p, res.StatusCode)
		}
	}
}

// A store that stops answering never yields a decision: 503, and health says so.
func TestStoreUnavailableFailsClosed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o := e.createOrg("Acme")
	e.decide(o.Key, `{"amount":5}`)
	if err := e.store.Close(); err != nil {
		t.Fatal(err)
	}
	e.do("POST", pathEvaluate, o.Key, `{"amount":5}`, nil).wantProblem(t, http.StatusServiceUnavailable, clearance.CodeStoreUnavailable)
	e.do("POST", pathGate, o.Key, `{"amount":5}`, nil).wantProblem(t, http.StatusServiceUnavailable, clearance.CodeStoreUnavailable)
	e.do("GET", pathVerify, o.Key, nil, nil).wantProblem(t, http.StatusServiceUnavailable, clearance.CodeStoreUnavailable)
	h := e.do("GET", pathHealth, "", nil, nil).want(t, http.StatusServiceUnavailable)
	if h.str("status") != "degraded" || h.str("store") == "ok" {
		t.Fatalf("health with a closed store: %s", h)
	}
}

// ---------------------------------------------------------------------------
// Bad input on every POST route

type postRoute struct {
	name, path, key string
	valid           string // a body the route accepts
	wrongType       string // a body with a member of the wrong type
}

func postRoutes(e *env, o org) []postRoute {
	return []postRoute{
		{"platform orgs", pathOrgs, e.platform, `{"name":"X"}`, `{"name":5}`},
		{"platform api-keys", pathKeys(o.ID), e.platform, `{"scopes":["audit:read"]}`, `{"scopes":"audit:read"}`},
		{"bundles", pathBundles, o.Key, bundleJSON("ok-1", "SHADOW", 5), `{"bundle_id":"b","version":5}`},
		{"policies alias", pathPolicies, o.Key, bundleJSON("ok-2", "SHADOW", 5), `{"rules":{}}`},
		{"evaluate-decision", pathEvaluate, o.Key, `{"amount":5}`, `{"decision_type":5}`},
		{"decisions alias", pathEvaluateOld, o.Key, `{"amount":5}`, `{"context":"x"}`},
		{"action-gate", pathGate, o.Key, `{"amount":5}`, `{"workflow_key":true}`},
		{"crm", pathCRM(o.ID), o.Key, `{"amount":5}`, `{"actor":[]}`},
		{"workspace-app", pathWorkspace, o.Key, `{"amount":5}`, `{"idempotency_key":1}`},
		{"cloud verify", pathCloud, o.Key, `{"intent":{"action_type":"x"}}`, `{"intent":{"action_type":5}}`},
	}
}

func nested(levels int) string {
	return `{"a":` + strings.Repeat("[", levels-1) + strings.Repeat("]", levels-1) + `}`
}

func TestBadInputOnEveryPostRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o := e.createOrg("Acme")
	head := e.head(o.Key)
	cases := []struct {
		name, body, contentType string
		status                  int
		code                    string
	}{
		{"malformed", `{"a":`, "", 400, "MALFORMED_JSON"},
		{"not json", `hello`, "", 400, "MALFORMED_JSON"},
		{"duplicate member", `{"a":1,"a":2}`, "", 400, "DUPLICATE_MEMBER"},
		{"nested duplicate member", `{"a":{"b":1,"b":2}}`, "", 400, "DUPLICATE_MEMBER"},
		{"invalid utf-8", "{\"a\":\"\xff\xfe\"}", "", 400, "INVALID_UTF8"},
		{"invalid utf-8 name", "{\"\xc3\x28\":1}", "", 400, "INVALID_UTF8"},
		{"trailing data", `{} {}`, "", 400, "TRAILING_DATA"},
		{"trailing garbage", `{}x`, "", 400, "TRAILING_DATA"},
		{"too deep", nested(65), "", 400, "JSON_TOO_DEEP"},
		{"deep but allowed", nested(64), "", 400, "UNKNOWN_MEMBER"},
		{"array body", `[]`, "", 400, "WRONG_TYPE"},
		{"string body", `"x"`, "", 400, "WRONG_TYPE"},
		{"number body", `5`, "", 400, "WRONG_TYPE"},
		{"unknown member", `{"ammount":5}`, "", 400, "UNKNOWN_MEMBER"},
		{"empty body", ``, "", 400, "EMPTY_BODY"},
		{"text/plain", `{}`, "text/plain", 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"form", `a=b`, "application/x-www-form-urlencoded", 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"bad media type", `{}`, "json;;;", 415, "UNSUPPORTED_MEDIA_TYPE"},
	}
	for _, rt := range postRoutes(e, o) {
		t.Run(rt.name, func(t *testing.T) {
			for _, c := range cases {
				hdr := map[string]string(nil)
				if c.contentType != "" {
					hdr = map[string]string{"Content-Type": c.contentType}
				}
				r := e.do("POST", rt.path, rt.key, c.body, hdr)
				if r.Status >= 500 {
					t.Fatalf("%s: server error %s", c.name, r)
				}
				if r.Status != c.status || r.str("code") != c.code {
					t.Errorf("%s: want %d %s, got %s", c.name, c.status, c.code, r)
					continue
				}
				checkProblemShape(t, r)
			}
			e.do("POST", rt.path, rt.key, rt.wrongType, nil).wantProblem(t, 400, "WRONG_TYPE")
			// A missing Content-Type is accepted, and so is a +json one.
			for _, ct := range []string{"", "application/vnd.clearance+json; charset=utf-8"} {
				if r := e.do("POST", rt.path, rt.key, rt.valid, map[string]string{"Content-Type": ct}); r.Status >= 300 {
					t.Fatalf("Content-Type %q: %s", ct, r)
				}
			}
		})
	}
	// Nothing refused was recorded: the head moved only for the accepted
	// bodies (two keys, two bundle versions published and activated, twice
	// six decisions).
	if got := e.head(o.Key); got != head+18 {
		t.Fatalf("head %d, want %d", got, head+18)
	}
	if v := e.verify(o.Key); lookup(v.JSON, "valid") != true {
		t.Fatalf("verify: %s", v)
	}
}

// A body of JSON null is not an object: it must be refused like [] or "x",
// not evaluated as an empty request.
func TestNullBodyIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o := e.createOrg("Acme")
	head := e.head(o.Key)
	for _, rt := range postRoutes(e, o) {
		r := e.do("POST", rt.path, rt.key, `null`, nil)
		if r.Status/100 != 4 {
			t.Errorf("%s: body null answered %s", rt.name, r)
		}
	}
	if got := e.head(o.Key); got != head {
		t.Errorf("body null recorded %d ledger entries", got-head)
	}
}

func TestBodyTooLarge(t *testing.T) {
	t.Parallel()
	const limit = 512
	e := newEnv(t, server.Options{MaxBodyBytes: limit})
	o := e.createOrg("Acme")
	head := e.head(o.Key)
	pad := func(body string, size int) string { // pads a JSON object with spaces to size bytes
		return body[:len(body)-1] + strings.Repeat(" ", size-len(body)) + "}"
	}
	for _, rt := range postRoutes(e, o) {
		e.do("POST", rt.path, rt.key, pad(rt.valid, limit+1), nil).wantProblem(t, http.StatusRequestEntityTooLarge, "BODY_TOO_LARGE")
	}
	if got := e.head(o.Key); got != head {
		t.Fatalf("oversize bodies moved the head %d -> %d", head, got)
	}
	// Exactly at the limit is fine.
	e.decide(o.Key, pad(`{"amount":5}`, limit))

	// The default limit is 1 MiB.
	d := newEnv(t, server.Options{})
	od := d.createOrg("Acme")
	big := pad(`{"amount":5}`, server.DefaultMaxBodyBytes+1)
	d.do("POST", pathEvaluate, od.Key, big, nil).wantProblem(t, http.StatusRequestEntityTooLarge, "BODY_TOO_LARGE")
	d.decide(od.Key, pad(`{"amount":5}`, server.DefaultMaxBodyBytes))
}

func TestUnknownRoutesAndMethods(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o := e.createOrg("Acme")
	// Paths the table does not serve: 404.
	for _, c := range []struct{ method, path string }{
		{"GET", "/"}, {"GET", "/v1/nope"}, {"GET", "/v2/protocol/evaluate-decision"}, {"POST", "/v1/protocol/dossiers"},
		{"GET", "/v1/protocol/dossiers/a/b"}, {"DELETE", "/v1/platform"},
	} {
		e.do(c.method, c.path, o.Key, nil, nil).wantProblem(t, http.StatusNotFound, "ROUTE_NOT_FOUND")
	}
	// A served path with another method: 405 with an Allow header naming the served methods.
	for _, c := range []struct{ method, path, allow string }{
		{"GET", pathEvaluate, "POST"}, {"PUT", pathEvaluate, "POST"}, {"DELETE", pathHealth, "GET"}, {"POST", pathHealth, "GET"},
		{"PUT", pathBundles, "GET, POST"}, {"DELETE", pathBundles + "/v1", "GET"}, {"PATCH", pathOrgs, "GET, POST"},
		{"POST", pathLedger, "GET"}, {"DELETE", pathOrgs, "GET, POST"}, {"POST", pathDossiers + "x", "GET"}, {"POST", "/metrics", "GET"},
		{"GET", pathCRM(o.ID), "POST"},
	} {
		r := e.do(c.method, c.path, o.Key, nil, nil).wantProblem(t, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
		var got []string
		for _, m := range strings.Split(r.Header.Get("Allow"), ",") {
			got = append(got, strings.TrimSpace(m))
		}
		slices.Sort(got)
		if strings.Join(got, ", ") != c.allow {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, r.Header.Get("Allow"), c.allow)
		}
	}
	if got := e.head(o.Key); got != 2 {
		t.Fatalf("wrong methods recorded something: head %d", got)
	}
}

func TestEveryRouteNeedsACredential(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o := e.createOrg("Acme")
	id := "01900000-0000-7000-8000-000000000000"
	routes := []struct{ method, path string }{
		{"POST", pathOrgs}, {"POST", pathKeys(o.ID)}, {"POST", pathBundles}, {"POST", pathPolicies}, {"GET", pathBundles},
		{"GET", pathPolicies}, {"GET", pathBundles + "/v1"}, {"GET", pathPolicies + "/v1"}, {"POST", pathEvaluate},
		{"POST", pathEvaluateOld}, {"POST", pathGate}, {"POST", pathCRM(o.ID)}, {"POST", pathWorkspace}, {"POST", pathCloud},
		{"GET", pathReasons}, {"GET", pathShadow}, {"GET", pathDossierDec + id}, {"GET", pathDossiers + id}, {"GET", pathLedger},
		{"GET", pathVerify},
	}
	head := e.head(o.Key)
	for _, rt := range routes {
		for _, hdr := range []map[string]string{nil, {"Authorization": "Bearer " + tenant.PrefixOrg + "unknown"}, {"Authorization": "Bearer"}, {"Authorization": o.Key}} {
			var body any
			if rt.method == "POST" {
				body = `{}`
			}
			e.do(rt.method, rt.path, "", body, hdr).wantProblem(t, http.StatusUnauthorized, clearance.CodeUnauthenticated)
		}
	}
	if got := e.head(o.Key); got != head {
		t.Fatalf("unauthenticated requests moved the head %d -> %d", head, got)
	}
	e.do("GET", pathHealth, "", nil, nil).want(t, http.StatusOK)
}

// ---------------------------------------------------------------------------
// Rate limit

func TestRateLimitPerCredential(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{RateLimit: 1, RateBurst: 2})
	ctx := context.Background()
	a, err := e.engine.Admin.CreateOrg(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.engine.Admin.CreateOrg(ctx, "B")
	if err != nil {
		t.Fatal(err)
	}
	ka, kb := a.Key.Secret, b.Key.Secret

	e.do("GET", pathReasons, ka, nil, nil).want(t, http.StatusOK)
	e.do("POST", pathEvaluate, ka, `{"amount":5}`, nil).want(t, http.StatusOK)
	r := e.do("POST", pathEvaluate, ka, `{"amount":6}`, nil).wantProblem(t, http.StatusTooManyRequests, "RATE_LIMITED")
	if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	page, err := e.engine.Audit.Ledger(ctx, a.Org.ID, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if page.Head.Seq != 3 {
		t.Fatalf("a rate-limited decision was recorded: head %d, want 3", page.Head.Seq)
	}
	// Another credential has its own bucket; public routes are not limited.
	e.do("GET", pathReasons, kb, nil, nil).want(t, http.StatusOK)
	e.do("POST", pathEvaluate, kb, `{"amount":5}`, nil).want(t, http.StatusOK)
	for range 5 {
		e.do("GET", pathHealth, "", nil, nil).want(t, http.StatusOK)
	}
}

// ---------------------------------------------------------------------------
// Concurrency

func TestConcurrentEvaluations(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{})
	o := e.createOrg("Acme")
	h0 := e.head(o.Key)
	const n = 32
	paths := []string{pathEvaluate, pathGate, pathWorkspace, pathCRM(o.ID)}
	seqs := make([]uint64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			path := paths[i%len(paths)]
			r, err := e.send("POST", path, o.Key, fmt.Sprintf(`{"workflow_key":"wf-%d","amount":%d}`, i%3, i*500), nil)
			if err != nil {
				t.Error(err)
				return
			}
			if r.Status != http.StatusOK {
				t.Errorf("request %d: %s", i, r)
				return
			}
			s := r.num("ledger_seq")
			if path != pathEvaluate {
				s = r.num("decision.ledger_seq")
			}
			seqs[i] = uint64(s)
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	slices.Sort(seqs)
	for i, s := range seqs {
		if s != h0+1+uint64(i) {
			t.Fatalf("ledger seqs are not %d..%d: %v", h0+1, h0+n, seqs)
		}
	}
	v := e.verify(o.Key)
	if lookup(v.JSON, "valid") != true || uint64(v.num("head_seq")) != h0+n || uint64(v.num("entries_checked")) != h0+n {
		t.Fatalf("after %d concurrent decisions: %s", n, v)
	}
}

// ---------------------------------------------------------------------------
// Tampering with the stored evidence

// tamperSetup records four decisions (seqs 3..6) and returns their answers.
func tamperSetup(t *testing.T) (*env, org, []*result) {
	e := newEnv(t, server.Options{})
	o := e.createOrg("Acme")
	var ds []*result
	for i := range 4 {
		ds = append(ds, e.decide(o.Key, fmt.Sprintf(`{"amount":%d}`, 100+i)))
	}
	if v := e.verify(o.Key); lookup(v.JSON, "valid") != true || v.num("head_seq") != 6 {
		t.Fatalf("before tampering: %s", v)
	}
	return e, o, ds
}

func wantBroken(t *testing.T, e *env, key string, seq uint64, reason string) *result {
	t.Helper()
	v := e.verify(key)
	if lookup(v.JSON, "valid") != false || uint64(v.num("first_broken_seq")) != seq || v.str("reason") != reason || v.str("detail") == "" {
		t.Fatalf("want first_broken_seq %d reason %s: %s", seq, reason, v)
	}
	return v
}

func TestLedgerTamperingIsDetected(t *testing.T) {
	t.Parallel()
	t.Run("entry modified", func(t *testing.T) {
		t.Parallel()
		e, o, _ := tamperSetup(t)
		e.tamper(func(db rawDB) {
			en := db.entry(o.ID, 4)
			en.PayloadDigest = "sha256:" + strings.Repeat("0", 64)
			db.putEntry(o.ID, 4, en)
		})
		wantBroken(t, e, o.Key, 4, ledger.ReasonHashMismatch)
	})
	t.Run("entry rewritten with a fresh hash", func(t *testing.T) {
		t.Parallel()
		e, o, _ := tamperSetup(t)
		e.tamper(func(db rawDB) {
			en := db.entry(o.ID, 4)
			en.RecordedAt = "2020-01-01T00:00:00Z"
			h, err := en.ComputeHash()
			if err != nil {
				t.Fatal(err)
			}
			en.EntryHash = h
			db.putEntry(o.ID, 4, en)
		})
		wantBroken(t, e, o.Key, 5, ledger.ReasonPrevMismatch)
	})
	t.Run("entry deleted", func(t *testing.T) {
		t.Parallel()
		e, o, _ := tamperSetup(t)
		e.tamper(func(db rawDB) { db.deleteEntry(o.ID, 4) })
		wantBroken(t, e, o.Key, 4, ledger.ReasonSeqGap)
	})
	t.Run("entries reordered", func(t *testing.T) {
		t.Parallel()
		e, o, _ := tamperSetup(t)
		e.tamper(func(db rawDB) {
			en4, en5 := db.entry(o.ID, 4), db.entry(o.ID, 5)
			db.putEntry(o.ID, 4, en5)
			db.putEntry(o.ID, 5, en4)
		})
		// PostgreSQL keeps seq only in the row key, so entry 4 reads back as
		// seq 4 with entry 5's contents: its hash (over seq) breaks instead.
		wantBroken(t, e, o.Key, 4, byBackend(t, ledger.ReasonSeqGap, ledger.ReasonHashMismatch))
	})
	t.Run("tail truncated", func(t *testing.T) {
		t.Parallel()
		e, o, _ := tamperSetup(t)
		e.tamper(func(db rawDB) { db.deleteEntry(o.ID, 6) })
		wantBroken(t, e, o.Key, 6, ledger.ReasonHeadMismatch)
	})
	t.Run("head rolled back", func(t *testing.T) {
		t.Parallel()
		e, o, _ := tamperSetup(t)
		e.tamper(func(db rawDB) {
			en := db.entry(o.ID, 5)
			db.putHead(o.ID, ledger.Head{Seq: en.Seq, EntryHash: en.EntryHash})
		})
		wantBroken(t, e, o.Key, 6, ledger.ReasonHeadMismatch)
	})
	t.Run("entry of another org", func(t *testing.T) {
		t.Parallel()
		e, o, _ := tamperSetup(t)
		x := e.createOrg("Other")
		e.decide(x.Key, `{"amount":1}`)
		e.decide(x.Key, `{"amount":2}`)
		e.tamper(func(db rawDB) { db.putEntry(o.ID, 4, db.entry(x.ID, 4)) })
		// PostgreSQL keeps org_id only in the row key, so the copied entry
		// reads back as o's: its hash (over org_id) breaks instead.
		wantBroken(t, e, o.Key, 4, byBackend(t, ledger.ReasonOrgMismatch, ledger.ReasonHashMismatch))
		if v := e.verify(x.Key); lookup(v.JSON, "valid") != true {
			t.Fatalf("the other org's ledger is untouched: %s", v)
		}
	})
	t.Run("dossier body modified", func(t *testing.T) {
		t.Parallel()
		e, o, ds := tamperSetup(t)
		target := ds[2] // seq 5
		e.tamper(func(db rawDB) {
			id := target.str("dossier_id")
			v := db.dossierBody(o.ID, id)
			i := bytes.Index(v, []byte(`"outcome":"ALLOW"`))
			if i < 0 {
				t.Fatalf("stored dossier body has no ALLOW outcome: %q", v)
			}
			v = append(v[:i:i], append([]byte(`"outcome":"BLOCK"`), v[i+len(`"outcome":"ALLOW"`):]...)...)
			db.putDossierBody(o.ID, id, v)
		})
		v := wantBroken(t, e, o.Key, 5, clearance.ReasonRecordDigestMismatch)
		if !strings.Contains(v.str("detail"), target.str("dossier_id")) {
			t.Fatalf("detail should name the dossier: %s", v)
		}
		// The client who kept the decision's digest sees the change too.
		r := e.do("GET", target.str("dossier_url"), o.Key, nil, nil).want(t, http.StatusOK)
		if r.Header.Get(server.HeaderDossierDigest) == target.str("dossier_digest") || sha256Digest(r.Raw) == target.str("dossier_digest") {
			t.Fatal("a modified dossier still carries its original digest")
		}
	})
	t.Run("dossier deleted", func(t *testing.T) {
		t.Parallel()
		e, o, ds := tamperSetup(t)
		e.tamper(func(db rawDB) { db.deleteDossier(o.ID, ds[1].str("dossier_id")) })
		wantBroken(t, e, o.Key, 4, clearance.ReasonRecordDigestMismatch)
	})
	t.Run("entry bytes corrupted", func(t *testing.T) {
		t.Parallel()
		e, o, _ := tamperSetup(t)
		e.tamper(func(db rawDB) { db.corruptEntry(o.ID, 4) })
		// Pebble cannot decode the value; PostgreSQL's typed row reads back
		// with garbage in hashed columns.
		wantBroken(t, e, o.Key, 4, byBackend(t, ledger.ReasonUnreadable, ledger.ReasonHashMismatch))
	})
	t.Run("dossier bytes corrupted", func(t *testing.T) {
		t.Parallel()
		e, o, ds := tamperSetup(t)
		id := ds[1].str("dossier_id") // seq 4
		e.tamper(func(db rawDB) { db.corruptDossier(o.ID, id) })
		v := wantBroken(t, e, o.Key, 4, byBackend(t, clearance.ReasonRecordUnreadable, clearance.ReasonRecordDigestMismatch))
		if !strings.Contains(v.str("detail"), id) {
			t.Fatalf("detail should name the dossier: %s", v)
		}
	})
	t.Run("untouched reopen stays valid", func(t *testing.T) {
		t.Parallel()
		e, o, ds := tamperSetup(t)
		e.tamper(func(rawDB) {})
		if v := e.verify(o.Key); lookup(v.JSON, "valid") != true || v.num("head_seq") != 6 {
			t.Fatalf("after a clean reopen: %s", v)
		}
		r := e.do("GET", ds[0].str("dossier_url"), o.Key, nil, nil).want(t, http.StatusOK)
		if r.Header.Get(server.HeaderDossierDigest) != ds[0].str("dossier_digest") {
			t.Fatal("dossier digest changed across a reopen")
		}
		// The chain continues after the reopen.
		if d := e.decide(o.Key, `{"amount":1}`); d.num("ledger_seq") != 7 {
			t.Fatalf("first decision after reopen: %s", d)
		}
	})
}
