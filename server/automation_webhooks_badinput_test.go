package server_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/clearancehq/clearance/webhook"
)

// automationWebhookArgs are the credentials automationSpecs makes for the
// callback URL routes.
type automationWebhookArgs struct {
	token   string // an automation credential of the owner's workspace (the accepted requests')
	foreign string // an automation credential of another account's workspace
	narrow  string // a key of the owner's workspace with decision:write and decision:read only
	grant   string // the owner's onboarding grant of the workspace
	revoked string // an automation credential revoked by a replayed code
	code    string // an authorization code, not exchanged
}

// automationWebhookSpecs are the bad-input specs of the automation
// credential's callback URLs (POST, GET and DELETE /v1/automation/webhooks).
// Before the battery it registers, with the credentials of a:
//
//   - one callback of the owner's workspace on a loopback receiver (the
//     engine of the battery may call private destinations): the accepted
//     DELETE's target, and the URL a second registration conflicts with;
//   - webhook.MaxCallbacks callbacks of the other workspace: it can
//     register no more, and its credential aims at the first one's.
//
// The accepted POST registers another URL; its late step checks through
// the API that the battery registered and removed nothing.
func (s *badSuite) automationWebhookSpecs(a automationWebhookArgs) map[string]routeSpec {
	t, x := s.t, s.x
	const path = "/v1/automation/webhooks"
	rv := newReceiver(t)
	register := func(key, body string) string {
		t.Helper()
		r := x.req(t, "POST", path, key, body, nil).want(t, http.StatusCreated)
		if r.str("subscription_id") == "" || !strings.HasPrefix(r.str("signing_secret"), webhook.PrefixCallbackSecret) {
			t.Fatalf("register a callback: %s", r)
		}
		return r.str("subscription_id")
	}
	existingURL := rv.srv.URL + "/existing"
	existing := register(a.token, `{"url":`+lit(existingURL)+`}`)
	var foreignIDs []string
	for i := range webhook.MaxCallbacks {
		foreignIDs = append(foreignIDs, register(a.foreign, `{"url":`+lit("https://hooks-foreign.example/"+strconv.Itoa(i))+`}`))
	}
	x.req(t, "POST", path, a.foreign, `{"url":"https://hooks-foreign.example/more"}`, nil).
		wantProblem(t, http.StatusConflict, "CALLBACK_LIMIT_REACHED")
	// listed returns key's callbacks' subscription ids and URLs.
	listed := func(t *testing.T, key string) (ids, urls []string) {
		t.Helper()
		r := x.req(t, "GET", path, key, nil, nil).want(t, http.StatusOK)
		list, _ := r.JSON["webhooks"].([]any)
		for i := range list {
			ids = append(ids, r.str("webhooks."+strconv.Itoa(i)+".subscription_id"))
			urls = append(urls, r.str("webhooks."+strconv.Itoa(i)+".url"))
		}
		return ids, urls
	}

	acceptedURL := rv.srv.URL + "/accepted?source=badinput"
	const public = "https://hooks.example.com/clearance"
	withURL := func(u string) string { return `{"url":` + lit(u) + `}` }
	withFilter := func(filter string) string { return `{"url":` + lit(public) + `,"filter":` + filter + `}` }

	// credentials are the refused credentials of every callback route,
	// beside credentialCases' (no key, malformed keys, org a's keys of
	// every other scope): this workspace's keys without the scope, its
	// onboarding grant, a revoked credential, an authorization code, and
	// the platform key, which acts for no org here.
	credentials := func(q req, platform bool) []badCase {
		var out []badCase
		add := func(cat, name, key string, status int, code string) {
			c := s.variant(q, cat, name, q.body, code)
			c.key, c.status = key, status
			out = append(out, c)
		}
		add(catScope, "the workspace's key with decision:write and decision:read", a.narrow, http.StatusForbidden, "INSUFFICIENT_SCOPE")
		add(catScope, "the workspace's onboarding grant", a.grant, http.StatusForbidden, "INSUFFICIENT_SCOPE")
		add(catNoCred, "a credential revoked by a replayed code", a.revoked, http.StatusUnauthorized, "UNAUTHENTICATED")
		add(catNoCred, "an authorization code", a.code, http.StatusUnauthorized, "UNAUTHENTICATED")
		add(catNoCred, "the credential with its last character changed", a.token[:len(a.token)-1]+flipChar(a.token[len(a.token)-1]),
			http.StatusUnauthorized, "UNAUTHENTICATED")
		add(catNoCred, "the credential as access_token in the query, no key", "", http.StatusUnauthorized, "UNAUTHENTICATED")
		out[len(out)-1].path += "?access_token=" + url.QueryEscape(a.token)
		if platform {
			add(catPlatform, "the platform key", x.platform, http.StatusNotFound, "ORG_NOT_FOUND")
		}
		return out
	}

	// POST: the body, then what the registration finds.
	postValues := func(q req) []badCase {
		out := credentials(q, true)
		add := func(cat, name, key, body string, status int, code string) {
			c := s.variant(q, cat, name, body, code)
			c.key, c.status = key, status
			out = append(out, c)
		}
		invalid := func(name, body string) {
			add(catValue, name+": "+shorten(body), a.token, body, http.StatusBadRequest, "INVALID_CALLBACK")
		}
		forbidden := func(u string) {
			add(catValue, "url "+shorten(lit(u)), a.token, withURL(u), http.StatusBadRequest, "DESTINATION_FORBIDDEN")
		}
		unknown := func(name, body string) {
			add(catUnknown, name, a.token, body, http.StatusBadRequest, "UNKNOWN_MEMBER")
		}
		// The URL: required, at most 2048 bytes, and a destination the
		// outbound client may call.
		invalid("no url", `{}`)
		invalid("url null", `{"url":null}`)
		invalid("a filter, no url", `{"filter":{"outcomes":["BLOCK"]}}`)
		invalid("a 2049-byte url", withURL("https://hooks.example.com/"+strings.Repeat("p", 2049-len("https://hooks.example.com/"))))
		invalid("a 64 KiB url", withURL("https://hooks.example.com/"+strings.Repeat("p", 64<<10)))
		for _, u := range []string{"", " ", "not a url", "/relative", "hooks.example.com/x", "//hooks.example.com/x",
			"ftp://hooks.example.com/x", "ftp://127.0.0.1/x", "file:///etc/passwd", "gopher://hooks.example.com/", "javascript:alert(1)",
			"data:text/plain,x", "mailto:ops@example.com", "ws://hooks.example.com/", "https:hooks.example.com", "https:///x",
			"https://user:pw@hooks.example.com/", "https://user@hooks.example.com/", "http://user:pw@127.0.0.1:1/x",
			"https://hooks.example.com@127.0.0.1/", "https://:pw@hooks.example.com/", "https://hooks.example.com/#frag",
			"https://hooks.example.com/x#", "https://hooks.example.com:0/", "https://hooks.example.com:65536/",
			"https://hooks.example.com:080/", "https://hooks.example.com:/", "https://hooks.example.com:x/",
			"https://[fe80::1%25eth0]/", "https://hooks%2Eexample.com/", "https://0x7f000001/", "https://2130706433/",
			"https://127.1/", "https://0177.0.0.1/", "https://[127.0.0.1]/", "https://exämple.com/", "https://xn--.example/",
			"https://-hooks.example.com/", "https://hooks..example.com/", "https://" + strings.Repeat("a", 64) + ".example/",
			"https://hooks.example.com /", "https://hooks.example.com/\x7f", " https://hooks.example.com/", "https://hooks.example.com/\n",
		} {
			forbidden(u)
		}
		// The filter, as the WEBHOOK integration's.
		for _, f := range []string{`{"outcomes":["MAYBE"]}`, `{"outcomes":["block"]}`, `{"outcomes":[""]}`, `{"outcomes":["BLOCK "]}`,
			`{"outcomes":[null]}`, `{"modes":["LIVE"]}`, `{"modes":["shadow"]}`, `{"modes":["ENFORCE"]}`, `{"workflow_keys":[""]}`,
			`{"workflow_keys":[null]}`, `{"decision_types":[""]}`, `{"workflow_keys":[` + lit(strings.Repeat("w", 201)) + `]}`,
			`{"decision_types":[` + lit(strings.Repeat("d", 201)) + `]}`, `{"workflow_keys":["a\u0007b"]}`, `{"decision_types":["a\u009bb"]}`,
			`{"outcomes":[` + strings.TrimSuffix(strings.Repeat(`"BLOCK",`, 51), ",") + `]}`,
			`{"workflow_keys":[` + strings.TrimSuffix(strings.Repeat(`"w",`, 51), ",") + `]}`,
			`{"outcomes":["ALLOW"],"modes":["SHADOW","LIVE"]}`} {
			invalid("filter "+shorten(f), withFilter(f))
		}
		for _, f := range []string{`"BLOCK"`, `["BLOCK"]`, `{"outcomes":"BLOCK"}`, `{"outcomes":[5]}`, `{"outcomes":[["BLOCK"]]}`,
			`{"modes":{"SHADOW":true}}`, `{"workflow_keys":[{}]}`, `{"decision_types":true}`} {
			add(catWrongType, "filter "+f, a.token, withFilter(f), http.StatusBadRequest, "WRONG_TYPE")
		}
		for _, m := range []string{`"event":"decision.resolved"`, `"events":["decision.resolved"]`, `"signing_secret":"clr_whsec_mine"`,
			`"secret":"mine-0123456789abcdef"`, `"subscription_id":` + lit(existing), `"org_id":` + lit(s.b.ID), `"enabled":true`,
			`"Url":"https://hooks.example.com/other"`, `"url ":"https://hooks.example.com/other"`} {
			unknown("member "+m, `{"url":`+lit(public)+`,`+m+`}`)
		}
		for _, m := range []string{`"amount_over":5`, `"event_name":"decision.resolved"`, `"Outcomes":["BLOCK"]`, `"outcome":"BLOCK"`} {
			unknown("filter member "+m, withFilter(`{`+m+`}`))
		}
		add(catDuplicate, "url twice, the second another", a.token, `{"url":`+lit(public)+`,"url":`+lit(public+"/2")+`}`,
			http.StatusBadRequest, "DUPLICATE_MEMBER")
		add(catDuplicate, "filter twice", a.token, `{"url":`+lit(public)+`,"filter":{},"filter":{"outcomes":["BLOCK"]}}`,
			http.StatusBadRequest, "DUPLICATE_MEMBER")
		// A URL bad and a filter bad: the destination is judged first.
		add(catValue, "a forbidden url and a bad filter", a.token, `{"url":"ftp://x.example/","filter":{"outcomes":["MAYBE"]}}`,
			http.StatusBadRequest, "DESTINATION_FORBIDDEN")
		// Well-formed, but not registrable: the workspace's URL again (any
		// filter; a bad filter is refused first), the other workspace at
		// its limit.
		add(catValue, "the registered URL again", a.token, withURL(existingURL), http.StatusConflict, "CALLBACK_EXISTS")
		add(catValue, "the registered URL again, another filter", a.token, `{"url":`+lit(existingURL)+`,"filter":{"outcomes":["BLOCK"]}}`,
			http.StatusConflict, "CALLBACK_EXISTS")
		add(catValue, "the registered URL again, a bad filter", a.token, `{"url":`+lit(existingURL)+`,"filter":{"modes":["LIVE"]}}`,
			http.StatusBadRequest, "INVALID_CALLBACK")
		add(catForeign, "a workspace at its limit of callbacks", a.foreign, withURL(public), http.StatusConflict, "CALLBACK_LIMIT_REACHED")
		add(catForeign, "a workspace at its limit, one of its URLs", a.foreign, withURL("https://hooks-foreign.example/0"),
			http.StatusConflict, "CALLBACK_EXISTS")
		return out
	}
	post := routeSpec{key: a.token,
		body: `{"url":` + lit(acceptedURL) + `,"filter":{"outcomes":["BLOCK","ESCALATE"],"modes":["SHADOW"],` +
			`"workflow_keys":["ap.invoice"],"decision_types":["PAYMENT"]}}`,
		idents: []string{`{"url":@@}`, withFilter(`{"workflow_keys":[@@]}`), withFilter(`{"decision_types":[@@]}`),
			withFilter(`{"outcomes":[@@]}`), withFilter(`{"modes":[@@]}`)},
		extra: postValues,
		// The accepted registration is the only one since the setup: the
		// battery registered and removed nothing, in either workspace.
		late: func(t *testing.T) {
			t.Helper()
			ids, urls := listed(t, a.token)
			if len(ids) != 2 || ids[0] != existing || urls[0] != existingURL || urls[1] != acceptedURL {
				t.Errorf("POST %s: after the battery and the accepted request the workspace has %v %v, want %s and the accepted one",
					path, ids, urls, existing)
			}
			if ids, _ := listed(t, a.foreign); strings.Join(ids, " ") != strings.Join(foreignIDs, " ") {
				t.Errorf("POST %s: the other workspace's callbacks changed: %v, want %v", path, ids, foreignIDs)
			}
		},
	}

	// GET: nothing to read wrong but the credential. (Another workspace's
	// credential reads its own list, an answer, not a refusal.)
	get := routeSpec{key: a.token, extra: func(q req) []badCase { return credentials(q, true) }}

	// DELETE: the subscription id, and whose it is.
	delValues := func(q req) []badCase {
		out := credentials(q, true)
		add := func(cat, name, key, id string, status int, code string) {
			p := q
			p.path = path + "/" + id
			c := s.variant(p, cat, name, "", code)
			c.key, c.status = key, status
			out = append(out, c)
		}
		add(catForeign, "another workspace's credential on this workspace's callback", a.foreign, existing,
			http.StatusNotFound, "CALLBACK_NOT_FOUND")
		add(catForeign, "another workspace's callback", a.token, foreignIDs[0], http.StatusNotFound, "CALLBACK_NOT_FOUND")
		add(catForeign, "org b's org:* key on this workspace's callback", s.b.Key, existing, http.StatusNotFound, "CALLBACK_NOT_FOUND")
		for _, v := range []struct{ name, id string }{
			{"the id with a trailing space", existing + "%20"}, {"the id with a zero-width space", existing + "%E2%80%8B"},
			{"the id with a newline", existing + "%0A"}, {"the id with a character less", existing[:35]},
			{"the id with a character more", existing + "0"}, {"the id as a destination name", "automation:" + existing},
			{"the id with its last digit changed", existing[:35] + map[bool]string{true: "1", false: "0"}[existing[35] == '0']},
			{"the nil UUID", "00000000-0000-0000-0000-000000000000"}, {"the id base64url", "AZIA" + strings.Repeat("A", 18)},
		} {
			add(catPath, v.name, a.token, v.id, http.StatusNotFound, "CALLBACK_NOT_FOUND")
		}
		// The collection takes no DELETE, whatever names the callback.
		for _, query := range []string{"?subscription_id=" + existing, "?id=" + existing} {
			c := s.variant(q, catQuery, "DELETE on the collection "+query, "", "METHOD_NOT_ALLOWED")
			c.path, c.status = path+query, http.StatusMethodNotAllowed
			out = append(out, c)
		}
		return out
	}
	del := routeSpec{key: a.token, params: map[string]string{"subscriptionId": existing},
		paramCodes: []string{"CALLBACK_NOT_FOUND"}, extra: delValues,
		phase: phaseRevokes} // the delivery log's accepted request reads the callback it removes

	// GET deliveries: the subscription id, whose it is, and the query.
	logValues := func(q req) []badCase {
		out := credentials(q, true)
		add := func(cat, name, key, id string, status int, code string) {
			p := q
			p.path = path + "/" + id + "/deliveries"
			c := s.variant(p, cat, name, "", code)
			c.key, c.status = key, status
			out = append(out, c)
		}
		add(catForeign, "another workspace's credential on this workspace's callback", a.foreign, existing,
			http.StatusNotFound, "CALLBACK_NOT_FOUND")
		add(catForeign, "another workspace's callback", a.token, foreignIDs[0], http.StatusNotFound, "CALLBACK_NOT_FOUND")
		add(catForeign, "org b's org:* key on this workspace's callback", s.b.Key, existing, http.StatusNotFound, "CALLBACK_NOT_FOUND")
		for _, v := range []struct{ name, id string }{
			{"the id with a trailing space", existing + "%20"}, {"the id with a character less", existing[:35]},
			{"the id with a character more", existing + "0"}, {"the id as a destination name", "automation:" + existing},
			{"the nil UUID", "00000000-0000-0000-0000-000000000000"}, {"WEBHOOK", "WEBHOOK"},
		} {
			add(catPath, v.name, a.token, v.id, http.StatusNotFound, "CALLBACK_NOT_FOUND")
		}
		for _, v := range []string{"limit=-1", "limit=0", "limit=abc", "limit=501", "limit=1&limit=2", "day=2026-13-01",
			"day=yesterday", "state=lost", "state=DELIVERED", "state=%00", "day=%zz"} {
			p := q
			p.query = "?" + v
			c := s.variant(p, catQuery, v, "", "INVALID_DELIVERY_FILTER", "INVALID_QUERY", "INVALID_REQUEST", "UNKNOWN_QUERY_PARAMETER")
			c.status = http.StatusBadRequest
			out = append(out, c)
		}
		return out
	}
	deliveries := routeSpec{key: a.token, params: map[string]string{"subscriptionId": existing},
		paramCodes: []string{"CALLBACK_NOT_FOUND"}, extra: logValues}

	return map[string]routeSpec{
		"GET " + path + "/{subscriptionId}/deliveries": deliveries,
		"POST " + path:                         post,
		"GET " + path:                          get,
		"DELETE " + path + "/{subscriptionId}": del,
	}
}
