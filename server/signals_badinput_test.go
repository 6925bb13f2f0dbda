package server_test

import (
	"net/http"
	"strings"
	"time"

	"github.com/clearancehq/clearance/signals"
)

// signalSpecs are the bad-input specs of the signal routes. It makes the
// connectors they aim at: one to revoke, one whose ingress takes the
// accepted delivery (unsigned, so that every bad body reaches the body's
// checks), a signing one for the signature cases, and one of the foreign
// org.
func (s *badSuite) signalSpecs() map[string]routeSpec {
	t, x := s.t, s.x
	spare, _ := x.connector(t, s.a.Key, false)
	foreign, _ := x.connector(t, s.b.Key, false)
	id, secret := x.connector(t, s.a.Key, false)
	signed, signedSecret := x.connector(t, s.a.Key, true)
	revoked, revokedSecret := x.connector(t, s.a.Key, false)
	x.req(t, "DELETE", pathSignalConnectors+"/"+revoked, s.a.Key, nil, nil).want(t, http.StatusOK)

	now := x.clock()
	body := `{"events":[{"type":"fraud.alert","timestamp":"` + now.Format(time.RFC3339) + `","data":{}}]}`
	headers := map[string]string{"X-Webhook-Secret": secret, "Webhook-Id": "msg_badinput"}
	event := func(typ, ts, data string) string {
		return `{"events":[{"type":` + typ + `,"timestamp":` + ts + `,"data":` + data + `}]}`
	}
	stamp := lit(now.Format(time.RFC3339))
	invalid := []string{
		`{"events":[]}`, `{}`, `{"events":null}`,
		event(`""`, stamp, `{}`), event(`"bad type"`, stamp, `{}`), event(`".a"`, stamp, `{}`), event(`"a..b"`, stamp, `{}`),
		event(lit(strings.Repeat("a", 129)), stamp, `{}`), event(`"a"`, `"yesterday"`, `{}`), event(`"a"`, `"2026-01-01T00:00:00"`, `{}`),
		event(`"a"`, lit(now.Add(time.Hour).Format(time.RFC3339)), `{}`), event(`"a"`, stamp, `[1]`), event(`"a"`, stamp, `null`),
		event(`"a"`, stamp, `{"x":`+lit(strings.Repeat("a", signals.MaxDataBytes))+`}`), `{"events":[{"type":"a","timestamp":` + stamp + `}]}`,
	}
	ingest := routeSpec{params: map[string]string{"connectorId": id}, paramCodes: []string{signals.CodeWebhookSecretInvalid},
		body: body, headers: headers, openUnknown: []string{"events[0].data"},
		extra: func(q req) []badCase {
			var out []badCase
			for _, b := range invalid {
				out = append(out, s.variant(q, catValue, shorten(b), b))
			}
			for _, wid := range []string{"has space", strings.Repeat("w", 257), "tab\there"} {
				c := s.variant(q, catHeader, "webhook-id "+shorten(wid), q.body, signals.CodeInvalidWebhookID).with("Webhook-Id", wid)
				c.status = http.StatusBadRequest
				out = append(out, c)
			}
			refused := func(name string, edit func(c badCase) badCase, code string) {
				c := edit(s.variant(q, catNoCred, name, q.body, code))
				c.status = http.StatusUnauthorized
				out = append(out, c)
			}
			refused("no secret", func(c badCase) badCase { return c.with("X-Webhook-Secret", "") }, signals.CodeWebhookSecretInvalid)
			refused("wrong secret", func(c badCase) badCase { return c.with("X-Webhook-Secret", secret+"x") }, signals.CodeWebhookSecretInvalid)
			refused("revoked connector", func(c badCase) badCase {
				c.path = strings.Replace(c.path, id, revoked, 1)
				return c.with("X-Webhook-Secret", revokedSecret)
			}, signals.CodeWebhookSecretInvalid)
			refused("another org's connector", func(c badCase) badCase {
				c.path = strings.Replace(c.path, id, foreign, 1)
				return c
			}, signals.CodeWebhookSecretInvalid)
			refused("repeated secret", func(c badCase) badCase {
				c.rawHeaders = http.Header{"X-Webhook-Secret": {secret, secret}}
				return c
			}, signals.CodeWebhookSecretInvalid)
			// The signing connector, its delivery signed but for one defect.
			signedCase := func(at time.Time, edit func(c badCase) badCase) func(c badCase) badCase {
				return func(c badCase) badCase {
					c.path = strings.Replace(c.path, id, signed, 1)
					c = c.with("X-Webhook-Secret", signedSecret)
					for k, v := range sign(signedSecret, "msg_badinput", at, body) {
						c = c.with(k, v)
					}
					return edit(c)
				}
			}
			same := func(c badCase) badCase { return c }
			refused("unsigned", signedCase(now, func(c badCase) badCase {
				return c.with("Webhook-Signature", "").with("Webhook-Timestamp", "")
			}), signals.CodeSignatureInvalid)
			refused("bad signature", signedCase(now, func(c badCase) badCase { return c.with("Webhook-Signature", "v1,AAAA") }), signals.CodeSignatureInvalid)
			refused("signature of another id", signedCase(now, func(c badCase) badCase { return c.with("Webhook-Id", "msg_other") }), signals.CodeSignatureInvalid)
			refused("signature of another body", signedCase(now, func(c badCase) badCase { c.body += " "; return c }), signals.CodeSignatureInvalid)
			refused("bad timestamp", signedCase(now, func(c badCase) badCase { return c.with("Webhook-Timestamp", "yesterday") }), signals.CodeSignatureInvalid)
			refused("stale timestamp", signedCase(now.Add(-time.Hour), same), signals.CodeTimestampOutOfTolerance)
			refused("future timestamp", signedCase(now.Add(time.Hour), same), signals.CodeTimestampOutOfTolerance)
			return out
		}}
	create := routeSpec{org: orgQuery, body: `{"name":"feed","require_signature":false}`, idents: []string{`{"name":@@}`},
		extra: func(q req) []badCase {
			return s.values(q, []string{`{"name":""}`, `{"name":"   "}`, `{"name":` + lit(strings.Repeat("n", 121)) + `}`, `{}`,
				`{"name":"a\u0007b"}`, `{"require_signature":true}`})
		}}
	list := routeSpec{org: orgQuery}
	revoke := routeSpec{org: orgQuery, params: map[string]string{"connectorId": spare},
		paramCodes: []string{signals.CodeInvalidConnectorID, signals.CodeConnectorNotFound},
		extra: func(q req) []badCase {
			p := q
			p.path = strings.Replace(q.path, spare, foreign, 1)
			c := s.variant(p, catForeign, "another org's connector", "", signals.CodeConnectorNotFound)
			c.status = http.StatusNotFound
			return []badCase{c}
		}}
	return map[string]routeSpec{
		"POST /v1/signals/connectors":                 create,
		"GET /v1/signals/connectors":                  list,
		"DELETE /v1/signals/connectors/{connectorId}": revoke,
		"POST /v1/signals/webhooks/{connectorId}":     ingest,
	}
}
