package server_test

import (
	"net/http"
	"strings"
)

// webhookArgs are the WEBHOOK integrations and deliveries the bad
// requests aim at.
type webhookArgs struct {
	url       string // org a's receiver
	delivered string // org a's delivery, delivered
	foreign   string // org b's delivery, delivered
}

// webhookTargets connects both orgs to a receiver on 127.0.0.1 and
// delivers one decision.resolved event of each.
func (s *badSuite) webhookTargets() webhookArgs {
	t, x := s.t, s.x
	rv := newReceiver(t)
	a := webhookArgs{url: rv.srv.URL + "/hook"}
	for _, o := range []org{s.a, s.b} {
		x.req(t, "POST", hooksPath(o.ID)+"/connect", o.Key, connectBody(a.url, hookSecret, ""), nil).want(t, http.StatusCreated)
		x.req(t, "POST", pathEvaluate, o.Key, `{"amount":5}`, nil).want(t, http.StatusOK)
	}
	if n, err := x.engine.Webhooks.Dispatch(t.Context()); n != 2 || err != nil {
		t.Fatalf("deliver the target events: %d, %v", n, err)
	}
	ids := map[string]string{}
	for _, o := range []org{s.a, s.b} {
		r := x.req(t, "GET", hooksPath(o.ID)+"/deliveries", o.Key, nil, nil).want(t, http.StatusOK)
		if r.str("deliveries.0.state") != "delivered" {
			t.Fatalf("target delivery: %s", r)
		}
		ids[o.ID] = r.str("deliveries.0.delivery_id")
	}
	a.delivered, a.foreign = ids[s.a.ID], ids[s.b.ID]
	return a
}

// webhookSpecs describes the WEBHOOK integration routes.
func (s *badSuite) webhookSpecs(a webhookArgs) map[string]routeSpec {
	x := s.x
	lit := func(v string) string { return `"` + v + `"` }
	platformOrg := func(q req) []badCase {
		var out []badCase
		for _, c := range []struct{ name, id, code string }{
			{"platform key, malformed path org", "not-a-uuid", "INVALID_REQUEST"},
			{"platform key, unknown path org", unknownID, "ORG_NOT_FOUND"},
		} {
			p := q
			p.path, p.key = strings.Replace(q.path, s.a.ID, c.id, 1), x.platform
			out = append(out, s.variant(p, catOrg, c.name, p.body, c.code))
		}
		return out
	}
	orgOnly := routeSpec{org: orgPath, params: map[string]string{"orgId": s.a.ID}, paramCodes: []string{"ORG_MISMATCH"}, extra: platformOrg}
	secret := `"credentials":{"webhook_secret":` + lit(hookSecret) + `}`
	cfg := func(url string) string { return `{"config":{"endpoint_url":` + lit(url) + `},` + secret + `}` }
	connect := routeSpec{org: orgPath, params: map[string]string{"orgId": s.a.ID}, paramCodes: []string{"ORG_MISMATCH"},
		body: connectBody(a.url, hookSecret, `[{"event_name":"decision.resolved","is_enabled":true,"filter":{"outcomes":["BLOCK"]}}]`),
		extra: func(q req) []badCase {
			out := s.values(q, []string{`{}`, `{"config":{}}`, `{"config":{"endpoint_url":""},` + secret + `}`,
				cfg("not a url"), cfg("/relative"), cfg("ftp://127.0.0.1/x"), cfg("http://user:pw@127.0.0.1/x"),
				cfg("https://" + strings.Repeat("a", 2100) + ".example/"),
				`{"config":{"endpoint_url":` + lit(a.url) + `},"credentials":{"webhook_secret":"short"}}`,
				`{"config":{"endpoint_url":` + lit(a.url) + `},"credentials":{"webhook_secret":"has a space in it!!"}}`,
				`{"config":{"endpoint_url":` + lit(a.url) + `},"credentials":{"webhook_secret":` + lit(strings.Repeat("s", 513)) + `}}`,
				`{"config":{"endpoint_url":` + lit(a.url) + `,"provider_name":` + lit(strings.Repeat("p", 201)) + `},` + secret + `}`,
				`{"config":{"endpoint_url":` + lit(a.url) + `,"workflow_id":"a\u0000b"},` + secret + `}`,
				`{"config":{"endpoint_url":` + lit(a.url) + `},` + secret + `,"subscriptions":[{"event_name":"order.created","is_enabled":true}]}`,
				`{"config":{"endpoint_url":` + lit(a.url) + `},` + secret + `,"subscriptions":[{"event_name":"decision.resolved"}]}`,
				`{"config":{"endpoint_url":` + lit(a.url) + `},` + secret + `,"subscriptions":[{"is_enabled":true}]}`,
				`{"config":{"endpoint_url":` + lit(a.url) + `},` + secret + `,"subscriptions":[{"event_name":"decision.resolved","is_enabled":true,"filter":{"outcomes":["MAYBE"]}}]}`,
				`{"config":{"endpoint_url":` + lit(a.url) + `},` + secret + `,"subscriptions":[{"event_name":"decision.resolved","is_enabled":true,"filter":{"modes":["LIVE"]}}]}`,
				`{"config":{"endpoint_url":` + lit(a.url) + `},` + secret + `,"subscriptions":[{"event_name":"decision.resolved","is_enabled":true,"filter":{"workflow_keys":[""]}}]}`,
				`{"config":{"endpoint_url":` + lit(a.url) + `},` + secret + `,"subscriptions":[{"event_name":"decision.resolved","is_enabled":true,"filter":{"amount_over":5}}]}`,
				`{"config":{"endpoint_url":` + lit(a.url) + `},` + secret + `,"subscriptions":` + strings.Repeat(`[{"event_name":"decision.resolved","is_enabled":true}`, 1) + strings.Repeat(`,{"event_name":"decision.resolved","is_enabled":true}`, 10) + `]}`,
			})
			return append(out, platformOrg(q)...)
		}}
	deliveries := routeSpec{org: orgPath, params: map[string]string{"orgId": s.a.ID}, paramCodes: []string{"ORG_MISMATCH"},
		extra: func(q req) []badCase {
			out := platformOrg(q)
			for _, v := range []string{"limit=-1", "limit=0", "limit=abc", "limit=501", "limit=1&limit=2", "day=2026-13-01",
				"day=yesterday", "day=2026-11-01T00:00:00Z", "state=lost", "state=DELIVERED", "state=%00", "day=%zz"} {
				p := q
				p.query = "?" + v
				c := s.variant(p, catQuery, v, "", "INVALID_DELIVERY_FILTER", "INVALID_QUERY", "INVALID_REQUEST")
				c.status = http.StatusBadRequest
				out = append(out, c)
			}
			return out
		}}
	redeliver := routeSpec{org: orgPath, params: map[string]string{"orgId": s.a.ID, "deliveryId": a.delivered}, body: `{}`,
		paramCodes: []string{"ORG_MISMATCH", "DELIVERY_NOT_FOUND"},
		extra: func(q req) []badCase {
			p := q
			p.path = strings.Replace(q.path, a.delivered, a.foreign, 1)
			return append(platformOrg(q), s.variant(p, catForeign, "another org's delivery", `{}`, "DELIVERY_NOT_FOUND"))
		}}
	del := orgOnly
	del.phase = phaseRevokes // the other routes' accepted requests need the integration
	return map[string]routeSpec{
		"POST /v1/orgs/{orgId}/integrations/WEBHOOK/connect":                           connect,
		"GET /v1/orgs/{orgId}/integrations/WEBHOOK":                                    orgOnly,
		"DELETE /v1/orgs/{orgId}/integrations/WEBHOOK":                                 del,
		"GET /v1/orgs/{orgId}/integrations/WEBHOOK/deliveries":                         deliveries,
		"POST /v1/orgs/{orgId}/integrations/WEBHOOK/deliveries/{deliveryId}/redeliver": redeliver,
	}
}
