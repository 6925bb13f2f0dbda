package server_test

import (
	"net/http"
	"strings"

	"github.com/clearancehq/clearance"
)

// shareTrioSpecs describes the public routes a share link opens beside
// verify to the bad-input suite (see badinput_test.go): reproduce and the
// proof bundle of dossierID, org a's; dossierB is org b's.
func (s *badSuite) shareTrioSpecs(dossierID, dossierB string) map[string]routeSpec {
	reproduce := s.publicShareSpec(dossierID, dossierB, clearance.ShareRouteReproduce)
	bundle := s.publicShareSpec(dossierID, dossierB, clearance.ShareRouteProofBundle)
	// A link made without the proof bundle never opens it.
	plain := s.x.req(s.t, "POST", pathShareLinks(dossierID), s.a.Key, `{}`, nil).want(s.t, http.StatusCreated).str("sig")
	more := bundle.extra
	bundle.extra = func(q req) []badCase {
		p := q
		p.query = "?sig=" + plain
		c := s.variant(p, catValue, "a link made without proof_bundle", "", clearance.CodeShareLinkInvalid)
		c.status = http.StatusNotFound
		return append(more(q), c)
	}
	return map[string]routeSpec{
		"GET /v1/public/decision-dossiers/{dossierId}/reproduce":    reproduce,
		"GET /v1/public/decision-dossiers/{dossierId}/proof-bundle": bundle,
	}
}

// publicShareSpec describes one public route of a share link (verify,
// reproduce, proof-bundle): malformed, overlong, tampered and foreign sigs,
// and bad dossier ids, are the one 404; a malformed query is 400. The links
// it makes (with the proof bundle, so that every route opens) store nothing.
func (s *badSuite) publicShareSpec(dossierID, dossierB, route string) routeSpec {
	t, x := s.t, s.x
	sig := x.req(t, "POST", pathShareLinks(dossierID), s.a.Key, `{"proof_bundle":true}`, nil).want(t, http.StatusCreated).str("sig")
	sigB := x.req(t, "POST", pathShareLinks(dossierB), s.b.Key, `{"proof_bundle":true}`, nil).want(t, http.StatusCreated).str("sig")
	payload, mac, _ := strings.Cut(sig, ".")
	payloadB, macB, _ := strings.Cut(sigB, ".")
	return routeSpec{params: map[string]string{"dossierId": dossierID}, paramCodes: []string{clearance.CodeShareLinkInvalid},
		query: "?sig=" + sig, extra: func(q req) []badCase {
			var out []badCase
			add := func(cat, name, path, query string, status int, want ...string) {
				p := q
				p.path, p.query = path, query
				c := s.variant(p, cat, name, "", want...)
				c.status = status
				out = append(out, c)
			}
			here, there := q.path, pathPublicDoss+dossierB+"/"+route
			for _, c := range []struct{ name, query string }{
				{"no sig", ""}, {"empty sig", "?sig="}, {"sig[]", "?sig[]=" + sig}, {"signature", "?signature=" + sig},
				{"NUL sig", "?sig=%00"}, {"overlong sig", "?sig=" + sig + strings.Repeat("A", 600)},
				{"70000-byte sig", "?sig=" + strings.Repeat("A", 70000)}, {"sig with a space", "?sig=" + payload + "+." + mac},
			} {
				add(catQuery, c.name, here, c.query, http.StatusNotFound, clearance.CodeShareLinkInvalid)
			}
			for _, c := range []struct{ name, query string }{
				{"sig twice", "?sig=" + sig + "&sig=" + sig}, {"malformed escape", "?sig=%zz"}, {"semicolon", "?sig=" + sig + ";x=1"},
			} {
				add(catQuery, c.name, here, c.query, http.StatusBadRequest, "INVALID_QUERY")
			}
			for _, c := range []struct{ name, sig string }{
				{"payload tampered", flipAt(payload, 12) + "." + mac}, {"grants tampered", flipAt(payload, 23) + "." + mac},
				{"mac tampered", payload + "." + flipAt(mac, 3)},
				{"no mac", payload}, {"no payload", "." + mac}, {"parts swapped", mac + "." + payload},
				{"padded", sig + "="}, {"three parts", sig + "." + mac}, {"another org's payload", payloadB + "." + mac},
				{"another org's mac", payload + "." + macB}, {"not base64", "!!.??"},
			} {
				add(catValue, c.name, here, "?sig="+c.sig, http.StatusNotFound, clearance.CodeShareLinkInvalid)
			}
			add(catForeign, "another org's link on this dossier", here, "?sig="+sigB, http.StatusNotFound, clearance.CodeShareLinkInvalid)
			add(catForeign, "this org's link on another org's dossier", there, "?sig="+sig, http.StatusNotFound, clearance.CodeShareLinkInvalid)
			return out
		}}
}
