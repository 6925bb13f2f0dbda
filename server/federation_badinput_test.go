package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/clearancehq/clearance/federation"
)

// The trust list entries the bad requests aim at: fedKept is read and
// replaced, fedSpare deleted by the accepted request.
const (
	fedKept  = "clearance" // the test server's own issuer: its envelopes verify
	fedSpare = "https://spare.example"
)

// addFederationSpecs adds the specs of the federation routes, and bad
// federated_decisions to the routes that take them. Both orgs' trust lists
// are full, so that a PUT of a new issuer id (every path segment the
// battery tries that is an id at all) is refused with
// TRUSTED_ISSUER_LIMIT_REACHED instead of trusting it.
func (s *badSuite) addFederationSpecs(specs map[string]routeSpec, dec, decB *result) {
	t, x := s.t, s.x
	jwks := json.RawMessage(x.req(t, "GET", "/.well-known/clearance-execution-grant-jwks.json", "", nil, nil).want(t, http.StatusOK).Raw)
	// Every entry trusts org a of the test server: its envelopes verify.
	orgs := `"orgs":[` + lit(s.a.ID) + `],`
	inline, _ := json.Marshal(map[string]any{"orgs": []string{s.a.ID}, "jwks": jwks})
	fill := func(o org, names ...string) {
		for i := 0; len(names) < federation.MaxTrustedIssuers; i++ {
			names = append(names, fmt.Sprintf("issuer-%s-%d", o.ID[len(o.ID)-4:], i))
		}
		for _, n := range names {
			x.req(t, "PUT", pathFedIssuers+"/"+url.PathEscape(n), o.Key, string(inline), nil).want(t, http.StatusCreated)
		}
	}
	fill(s.a, fedKept, fedSpare)
	fill(s.b)
	audA := x.req(t, "GET", pathFedIssuers, s.a.Key, nil, nil).want(t, http.StatusOK).str("audience")
	audB := x.req(t, "GET", pathFedIssuers, s.b.Key, nil, nil).want(t, http.StatusOK).str("audience")
	envelope := func(key, dossierID, aud string) string {
		return x.req(t, "POST", pathFedEnvelopes, key, map[string]any{"dossier_id": dossierID, "audience": aud}, nil).
			want(t, http.StatusOK).str("envelope")
	}
	forB := envelope(s.a.Key, dec.str("dossier_id"), audB) // verifies, but for org b
	parts := strings.Split(envelope(s.a.Key, dec.str("dossier_id"), audA), ".")
	tampered := parts[0] + "." + parts[1] + "." + strings.ToUpper(parts[2][:4]) + parts[2][4:]
	if tampered == strings.Join(parts, ".") {
		tampered = parts[0] + "." + parts[1] + "." + strings.ToLower(parts[2][:4]) + parts[2][4:]
	}

	// Bad federated decisions on the routes that take them, added to each
	// route's accepted body.
	fedValues := func(q req) []badCase {
		with := func(list string) string {
			return strings.TrimSuffix(strings.TrimSpace(q.body), "}") + `,"federated_decisions":` + list + `}`
		}
		many := make([]string, federation.MaxFederatedDecisions+1)
		for i := range many {
			many[i] = "a.b.c"
		}
		manyJSON, _ := json.Marshal(many)
		out := s.values(q, []string{with(`"x"`), with(`[1]`), with(`{}`), with(`[null]`)})
		for _, c := range []struct{ name, list string }{
			{"an empty envelope", `[""]`},
			{"not a JWS", `["a.b.c"]`},
			{"too many envelopes", string(manyJSON)},
			{"an overlong envelope", `[` + lit(strings.Repeat("a", federation.MaxEnvelopeBytes+1)) + `]`},
			{"another org's audience", `[` + lit(forB) + `]`},
			{"a tampered signature", `[` + lit(tampered) + `]`},
		} {
			c := s.variant(q, catValue, "federated_decisions: "+c.name, with(c.list), federation.CodeFederatedDecisionInvalid)
			c.status = http.StatusBadRequest
			out = append(out, c)
		}
		return out
	}
	for _, pattern := range []string{"POST /v1/protocol/evaluate-decision", "POST /v1/decisions/evaluate", "POST /v1/policies/dry-run",
		"POST /v1/authority/enforce-and-bind"} {
		spec, ok := specs[pattern]
		if !ok {
			t.Fatalf("no spec of %s to add federated decisions to", pattern)
		}
		extra := spec.extra
		spec.extra = func(q req) []badCase {
			var out []badCase
			if extra != nil {
				out = extra(q)
			}
			return append(out, fedValues(q)...)
		}
		specs[pattern] = spec
	}

	// Issuing envelopes.
	dossier := lit(dec.str("dossier_id"))
	envBody := `{"dossier_id":` + dossier + `,"audience":"https://partner.example/federation/x"}`
	specs["POST "+pathFedEnvelopes] = routeSpec{org: orgQuery, body: envBody, foreign: true,
		idents:  []string{`{"dossier_id":` + dossier + `,"audience":@@}`, `{"dossier_id":@@,"audience":"a"}`},
		numbers: []string{`{"dossier_id":` + dossier + `,"audience":"a","ttl_seconds":@@}`},
		extra: func(q req) []badCase {
			return s.values(q, []string{
				`{"audience":"a"}`, `{"dossier_id":` + dossier + `}`, `{"dossier_id":"not-a-uuid","audience":"a"}`,
				`{"dossier_id":` + lit(unknownID) + `,"audience":"a"}`, `{"dossier_id":` + lit(decB.str("dossier_id")) + `,"audience":"a"}`,
				`{"dossier_id":` + dossier + `,"audience":""}`, `{"dossier_id":` + dossier + `,"audience":"has space"}`,
				`{"dossier_id":` + dossier + `,"audience":"a","ttl_seconds":0}`,
				`{"dossier_id":` + dossier + `,"audience":"a","ttl_seconds":3601}`,
				`{"dossier_id":` + dossier + `,"audience":"a","ttl_seconds":"60"}`,
			})
		}}

	// The trust list.
	params := map[string]string{"issuerId": url.PathEscape(fedKept)}
	specs["GET "+pathFedIssuers] = routeSpec{org: orgQuery}
	specs["GET "+pathFedIssuers+"/{issuerId}"] = routeSpec{org: orgQuery, params: params,
		paramCodes: []string{federation.CodeInvalidIssuerID, federation.CodeTrustedIssuerNotFound}}
	put := string(inline)
	specs["PUT "+pathFedIssuers+"/{issuerId}"] = routeSpec{org: orgQuery, params: params, body: put,
		openUnknown: []string{"jwks"},
		paramCodes:  []string{federation.CodeInvalidIssuerID, federation.CodeTrustedIssuerLimitReached},
		idents: []string{`{` + orgs + `"jwks_url":@@}`, `{` + orgs + `"jwks":` + string(jwks) + `,"audiences":[@@]}`,
			`{"orgs":[@@],"jwks":` + string(jwks) + `}`},
		numbers: []string{`{` + orgs + `"jwks":` + string(jwks) + `,"max_age_seconds":@@}`},
		extra: func(q req) []badCase {
			private := strings.Replace(string(jwks), `"kty":"OKP"`, `"kty":"OKP","d":"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"`, 1)
			j := string(jwks)
			out := s.values(q, []string{
				`{}`, `{` + orgs + `"jwks":null}`, `{` + orgs + `"jwks_url":"https://a.example/jwks.json","jwks":` + j + `}`,
				`{` + orgs + `"jwks_url":"ftp://a.example/jwks.json"}`, `{` + orgs + `"jwks_url":"https://user:pw@a.example/jwks.json"}`,
				`{` + orgs + `"jwks_url":"not a url"}`, `{` + orgs + `"jwks_url":` + lit("https://a.example/"+strings.Repeat("a", federation.MaxJWKSURLLen)) + `}`,
				`{` + orgs + `"jwks":{"keys":[]}}`, `{` + orgs + `"jwks":{"keys":[{"kty":"EC"}]}}`, `{` + orgs + `"jwks":[]}`, `{` + orgs + `"jwks":"x"}`,
				`{` + orgs + `"jwks":` + private + `}`,
				`{` + orgs + `"jwks":` + j + `,"audiences":[""]}`, `{` + orgs + `"jwks":` + j + `,"audiences":"a"}`,
				`{` + orgs + `"jwks":` + j + `,"audiences":["clearance/federation/` + s.b.ID + `"]}`,
				`{` + orgs + `"jwks":` + j + `,"audiences":["a","b","c","d","e","f","g","h","i"]}`,
				`{` + orgs + `"jwks":` + j + `,"max_age_seconds":0}`, `{` + orgs + `"jwks":` + j + `,"max_age_seconds":2592001}`,
				`{"orgs":` + lit(s.a.ID) + `,"jwks":` + j + `}`, `{"orgs":[1],"jwks":` + j + `}`, `{"orgs":{},"jwks":` + j + `}`,
			})
			// The orgs trusted on the issuer: required, 1 to MaxTrustedOrgs
			// distinct org ids.
			many := make([]string, federation.MaxTrustedOrgs+1)
			for i := range many {
				many[i] = fmt.Sprintf("0190f4b2-0000-7000-8000-%012x", i)
			}
			manyJSON, _ := json.Marshal(many)
			for _, c := range []struct{ name, body string }{
				{"orgs missing", `{"jwks":` + j + `}`},
				{"orgs null", `{"orgs":null,"jwks":` + j + `}`},
				{"orgs empty", `{"orgs":[],"jwks":` + j + `}`},
				{"an org id that is no UUID", `{"orgs":["acme"],"jwks":` + j + `}`},
				{"an empty org id", `{"orgs":[""],"jwks":` + j + `}`},
				{"an upper-case org id", `{"orgs":[` + lit(strings.ToUpper(s.a.ID)) + `],"jwks":` + j + `}`},
				{"an org id with a space", `{"orgs":[` + lit(" "+s.a.ID) + `],"jwks":` + j + `}`},
				{"too many orgs", `{"orgs":` + string(manyJSON) + `,"jwks":` + j + `}`},
				{"an org twice", `{"orgs":[` + lit(s.a.ID) + `,` + lit(s.a.ID) + `],"jwks":` + j + `}`},
			} {
				v := s.variant(q, catValue, "orgs: "+c.name, c.body, federation.CodeInvalidTrustedIssuer)
				v.status = http.StatusBadRequest
				out = append(out, v)
			}
			return out
		}}
	specs["DELETE "+pathFedIssuers+"/{issuerId}"] = routeSpec{org: orgQuery, params: map[string]string{"issuerId": url.PathEscape(fedSpare)},
		paramCodes: []string{federation.CodeInvalidIssuerID, federation.CodeTrustedIssuerNotFound}}
}
