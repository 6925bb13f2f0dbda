package server_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/server"
)

// rawReq sends a request whose headers are set exactly as given: empty
// values and repeated headers included (env.do removes empty ones).
func (x *execEnv) rawReq(t *testing.T, method, path, key, body string, header http.Header) *result {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	rq, err := http.NewRequest(method, x.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		rq.Header.Set("Content-Type", "application/json")
	}
	rq.Header.Set("Authorization", "Bearer "+key)
	for k, vs := range header {
		rq.Header[k] = vs
	}
	return x.roundTrip(t, rq)
}

// blockedWorkflow blocks the workflow blocked.wf and allows the rest.
const blockedWorkflow = `{"bundle_id":"wf","version":"wf-1","mode":"ENFORCEMENT","rules":[
 {"id":"blocked","workflow_keys":["blocked.wf"],"outcome":"BLOCK","reason_codes":["WORKFLOW_BLOCKED"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`

// TestLookAlikeIdentifiersAreRefused: "blocked.wf" followed by a zero-width
// space reads as the blocked workflow in a dossier, and used to be allowed
// as another workflow. Every decision route refuses it, and look-alike
// decision types and surfaces, with 400 INVALID_IDENTIFIER, changing
// nothing.
func TestLookAlikeIdentifiersAreRefused(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, blockedWorkflow)
	o := x.o
	if r := x.req(t, "POST", pathEvaluate, o.Key, `{"workflow_key":"blocked.wf","amount":5}`, nil).want(t, http.StatusOK); r.str("outcome") != "BLOCK" {
		t.Fatalf("blocked.wf: %s", r)
	}
	head := x.head(o.Key)
	for _, wf := range []string{`blocked.wf\u200b`, `blocked.wf\u202e`, `blocked.wf `, `\ufeffblocked.wf`} {
		for _, c := range []struct{ path, body string }{
			{pathEvaluate, `{"workflow_key":"` + wf + `","amount":5}`},
			{pathEvaluateOld, `{"workflow_key":"` + wf + `","amount":5}`},
			{pathGate, `{"workflow_key":"` + wf + `","amount":5}`},
			{pathCRM(o.ID), `{"workflow_key":"` + wf + `","amount":5}`},
			{pathWorkspace, `{"workflow_key":"` + wf + `","amount":5}`},
			{pathCloud, `{"workflow_key":"` + wf + `","intent":{"action_type":"refund","amount":5}}`},
		} {
			r := x.req(t, "POST", c.path, o.Key, c.body, nil).wantProblem(t, http.StatusBadRequest, "INVALID_IDENTIFIER")
			if f := lookup(r.JSON, "errors.0.field"); f != "workflow_key" {
				t.Errorf("%s %s: errors[0].field %v", c.path, c.body, f)
			}
		}
	}
	// And a signed intent.
	jws, _ := x.intent(t, intentSpec{mutate: func(m map[string]any) { m["workflow_key"] = "blocked.wf\u200b" }})
	x.bind(t, jws, nil).wantProblem(t, http.StatusBadRequest, "INVALID_IDENTIFIER")
	for _, body := range []string{`{"decision_type":"payment","amount":5}`, `{"decision_type":"PAYMENT\u200b","amount":5}`,
		`{"decision_type":"PAY-MENT","amount":5}`, `{"surface":"CRM","amount":5}`, `{"surface":"crm ","amount":5}`,
		`{"surface":"crm\u202e","amount":5}`, `{"workflow_key":` + lit(strings.Repeat("w", 129)) + `,"amount":5}`,
		`{"action":{"type":"refund\u200b"},"amount":5}`, `{"actor":{"id":"agent-7 ","type":"agent"},"amount":5}`,
		`{"actor":{"id":"agent-7","type":"\u2066agent"},"amount":5}`, `{"vertical_pack":"retail\u00a0eu","amount":5}`} {
		x.req(t, "POST", pathGate, o.Key, body, nil).wantProblem(t, http.StatusBadRequest, "INVALID_IDENTIFIER")
	}
	// A bundle whose selector no valid request can carry is refused.
	x.publish(o.Key, strings.Replace(blockedWorkflow, `"blocked.wf"`, `"blocked.wf\u200b"`, 1)).
		wantProblem(t, http.StatusUnprocessableEntity, "POLICY_INVALID")
	if got := x.head(o.Key); got != head {
		t.Errorf("refused requests moved the ledger head %d -> %d", head, got)
	}
}

// TestClientTokenHeaders: Idempotency-Key and X-Correlation-Id are
// refused, never ignored or echoed, when empty, blank, repeated or not
// visible ASCII; a bad X-Request-Id is replaced, never echoed.
func TestClientTokenHeaders(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, "")
	o := x.o
	head := x.head(o.Key)
	bad := map[string][]string{
		"empty":       {""},
		"blank":       {"   "},
		"repeated":    {"k-1", "k-2"},
		"repeated eq": {"k-1", "k-1"},
		"zero-width":  {"k-1\u200b"},
		"bidi":        {"\u202ek-1"},
		"no-break":    {"k\u00a0"},
	}
	jws, id := x.intent(t, intentSpec{})
	for name, vs := range bad {
		for _, h := range []struct{ name, code string }{
			{server.HeaderIdempotencyKey, "INVALID_IDEMPOTENCY_KEY"}, {server.HeaderCorrelationID, "INVALID_CORRELATION_ID"},
		} {
			for _, path := range []string{pathEvaluate, pathGate, pathCloud} {
				body := `{"amount":5}`
				if path == pathCloud {
					body = `{"intent":{"action_type":"refund","amount":5}}`
				}
				r := x.rawReq(t, "POST", path, o.Key, body, http.Header{h.name: vs}).wantProblem(t, http.StatusBadRequest, h.code)
				if r.Header.Get(server.HeaderCorrelationID) != "" {
					t.Errorf("%s %s %s: a correlation id echoed: %s", path, h.name, name, r.Header.Get(server.HeaderCorrelationID))
				}
			}
			if name == "repeated eq" && h.name == server.HeaderIdempotencyKey {
				vs = []string{id, id}
			}
			x.rawReq(t, "POST", pathBind, o.Key, mustJSON(t, map[string]any{"signed_intent": jws}), http.Header{h.name: vs}).
				wantProblem(t, http.StatusBadRequest, h.code)
		}
	}
	// Hook bodies: a member sent empty or blank is refused too.
	for _, body := range []string{`{"amount":5,"idempotency_key":""}`, `{"amount":5,"idempotency_key":"  "}`,
		`{"amount":5,"idempotency_key":"k\u200b"}`} {
		x.req(t, "POST", pathGate, o.Key, body, nil).wantProblem(t, http.StatusBadRequest, "INVALID_IDEMPOTENCY_KEY")
	}
	for _, body := range []string{`{"amount":5,"correlation_id":""}`, `{"amount":5,"correlation_id":"c\u202e"}`} {
		x.req(t, "POST", pathGate, o.Key, body, nil).wantProblem(t, http.StatusBadRequest, "INVALID_CORRELATION_ID")
	}
	if got := x.head(o.Key); got != head {
		t.Errorf("refused requests moved the ledger head %d -> %d", head, got)
	}
	// A request id that is not visible ASCII, or sent twice, is replaced.
	for _, vs := range [][]string{{"r\u200b"}, {"\u202er"}, {"r-1", "r-2"}, {""}} {
		r := x.rawReq(t, "GET", pathReasons, o.Key, "", http.Header{server.HeaderRequestID: vs}).want(t, http.StatusOK)
		if got := r.Header.Get(server.HeaderRequestID); !clearance.ValidToken(got) || got == vs[0] {
			t.Errorf("X-Request-Id %q answered %q", vs, got)
		}
	}
	r := x.rawReq(t, "GET", pathReasons, o.Key, "", http.Header{server.HeaderRequestID: {"req-1"}}).want(t, http.StatusOK)
	if got := r.Header.Get(server.HeaderRequestID); got != "req-1" {
		t.Errorf("a valid X-Request-Id answered %q", got)
	}
	// The one valid key still works, and a retry with it is a replay.
	for i, want := range []string{"", "true"} {
		r := x.rawReq(t, "POST", pathEvaluate, o.Key, `{"amount":5}`, http.Header{server.HeaderIdempotencyKey: {"k-ok"}}).
			want(t, http.StatusOK)
		if got := r.Header.Get(server.HeaderReplayed); got != want {
			t.Errorf("request %d: Idempotent-Replayed %q, want %q", i, got, want)
		}
	}
}

// TestIntentFreshness: an intent issued in 2001 or 2100 (or just outside
// the window) gets no grant and changes nothing; one inside it does.
func TestIntentFreshness(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	o := x.o
	head := x.head(o.Key)
	at := func(s string) func(m map[string]any) { return func(m map[string]any) { m["issued_at"] = s } }
	for _, c := range []struct{ issuedAt, code string }{
		{"2001-09-09T01:46:40Z", clearance.CodeIntentStale},
		{"2100-01-01T00:00:00Z", clearance.CodeIntentNotYetValid},
		{x.clock().Add(-clearance.DefaultIntentMaxAge - time.Second).Format(time.RFC3339), clearance.CodeIntentStale},
		{x.clock().Add(clearance.DefaultMaxClockSkew + time.Second).Format(time.RFC3339), clearance.CodeIntentNotYetValid},
	} {
		jws, _ := x.intent(t, intentSpec{mutate: at(c.issuedAt)})
		r := x.bind(t, jws, nil).wantProblem(t, http.StatusBadRequest, c.code)
		if authorizes(r.JSON) {
			t.Errorf("issued_at %s: %s", c.issuedAt, r)
		}
	}
	if got := x.head(o.Key); got != head {
		t.Errorf("refused intents moved the ledger head %d -> %d", head, got)
	}
	jws, _ := x.intent(t, intentSpec{mutate: at(x.clock().Add(-clearance.DefaultIntentMaxAge).Format(time.RFC3339))})
	if r := x.bind(t, jws, nil).want(t, http.StatusOK); r.str("execution_token") == "" {
		t.Errorf("an intent at the edge of the window: %s", r)
	}
}

// TestJSONLimits: 100,000 context members in a 930 KB body used to be
// accepted, stored and synced; too many members or elements and NUL in a
// string are refused on every route, and nothing is stored.
func TestJSONLimits(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, "")
	o := x.o
	head := x.head(o.Key)
	var b bytes.Buffer
	b.WriteString(`{"amount":5,"context":{`)
	for i := range 100_000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%05d":0`, i)
	}
	b.WriteString(`}}`)
	if b.Len() < 900_000 || b.Len() > server.DefaultMaxBodyBytes {
		t.Fatalf("body of %d bytes", b.Len())
	}
	big := b.String()
	elements := `{"amount":5,"context":{"l":[` + strings.TrimSuffix(strings.Repeat("0,", clearance.DefaultMaxJSONElements+1), ",") + `]}}`
	for _, path := range []string{pathEvaluate, pathGate, pathWorkspace} {
		x.req(t, "POST", path, o.Key, big, nil).wantProblem(t, http.StatusBadRequest, "JSON_TOO_MANY_MEMBERS")
		x.req(t, "POST", path, o.Key, elements, nil).wantProblem(t, http.StatusBadRequest, "JSON_TOO_MANY_ELEMENTS")
		x.req(t, "POST", path, o.Key, `{"amount":5,"context":{"note":"a\u0000b"}}`, nil).wantProblem(t, http.StatusBadRequest, "JSON_NUL_CHARACTER")
	}
	x.req(t, "POST", pathAgentKeys, o.Key, `{"kid":"k-1","iss":"a\u0000b","public_jwk":{}}`, nil).
		wantProblem(t, http.StatusBadRequest, "JSON_NUL_CHARACTER")
	jws, _ := x.intent(t, intentSpec{mutate: func(m map[string]any) {
		ctx := map[string]any{}
		for i := range clearance.DefaultMaxJSONMembers + 1 {
			ctx[fmt.Sprint(i)] = i
		}
		m["context"] = ctx
	}})
	x.bind(t, jws, nil).wantProblem(t, http.StatusBadRequest, "JSON_TOO_MANY_MEMBERS")
	if got := x.head(o.Key); got != head {
		t.Errorf("refused requests moved the ledger head %d -> %d", head, got)
	}
	// The limits are the engine's: at the limit is accepted.
	var m strings.Builder
	m.WriteString(`{"amount":5,"context":{`)
	for i := range clearance.DefaultMaxJSONMembers {
		if i > 0 {
			m.WriteByte(',')
		}
		fmt.Fprintf(&m, `"%d":0`, i)
	}
	m.WriteString(`}}`)
	x.req(t, "POST", pathEvaluate, o.Key, m.String(), nil).want(t, http.StatusOK)
}

// TestRevokeImpossibleKID: the spec's "kid 1 to 200 chars" makes an
// overlong kid a 400 on key revocation, as at registration, not a 404.
func TestRevokeImpossibleKID(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, "")
	o := x.o
	head := x.head(o.Key)
	for _, path := range []string{pathAgentKeys, pathProvKeys} {
		for _, kid := range []string{strings.Repeat("k", 201), strings.Repeat("k", 8192), "k%E2%80%8B", "k%20", "%00"} {
			r := x.req(t, "DELETE", path+"/"+kid, o.Key, nil, nil).wantProblem(t, http.StatusBadRequest, "INVALID_KID")
			if f := lookup(r.JSON, "errors.0.field"); f != "kid" {
				t.Errorf("%s: errors[0].field %v", kid, f)
			}
		}
		x.req(t, "DELETE", path+"/"+strings.Repeat("k", 200), o.Key, nil, nil).wantProblem(t, http.StatusNotFound, "KEY_NOT_FOUND")
	}
	if got := x.head(o.Key); got != head {
		t.Errorf("refused requests moved the ledger head %d -> %d", head, got)
	}
}
