package server_test

import (
	"net/http"
	"strings"

	"github.com/clearancehq/clearance"
)

// badInputBundle is bandsBundle with a spend gate on a workflow only the
// spend targets use, so that every other grant of the battery is as
// before.
var badInputBundle = strings.Replace(bandsBundle, `"mode":"ENFORCEMENT",`,
	`"mode":"ENFORCEMENT","spend_gates":[{"id":"payouts.daily","workflow_keys":["payouts"],"currency":"EUR","limit":"1000000","window":"DAY"}],`, 1)

// spendTargets claims a grant that the gate charges: the reservation the
// spend routes read.
func (s *badSuite) spendTargets() string {
	t, x := s.t, s.x
	g := x.grantFor(t, intentSpec{mutate: func(m map[string]any) { m["workflow_key"] = "payouts" }})
	x.claimed(t, g)
	return g.grantID
}

// spendSpecs are the bad-input specs of the spend-gate routes.
func (s *badSuite) spendSpecs(grantID string) map[string]routeSpec {
	actorQueries := func(q req) []badCase {
		var out []badCase
		for _, v := range []string{"actor_id=" + strings.Repeat("a", 257), "actor_id=a%07b", "actor_id=%ff", "actor_id=a&actor_id=b"} {
			p := q
			if p.query == "" {
				p.query = "?" + v
			} else {
				p.query += "&" + v
			}
			c := s.variant(p, catQuery, shorten(v), "", "INVALID_REQUEST", "INVALID_QUERY")
			c.status = http.StatusBadRequest
			out = append(out, c)
		}
		return out
	}
	foreignGrant := func(q req) []badCase {
		p := q
		p.path = strings.Replace(q.path, grantID, "0190f4b2-0000-7000-8000-000000000000", 1)
		c := s.variant(p, catValue, "an unknown grant", "", clearance.CodeSpendGateNotFound)
		c.status = http.StatusNotFound
		return []badCase{c}
	}
	return map[string]routeSpec{
		"GET /v1/execution/spend-gates": {org: orgQuery, extra: actorQueries},
		"GET /v1/execution/spend-gates/{gateId}": {org: orgQuery, params: map[string]string{"gateId": "payouts.daily"},
			paramCodes: []string{clearance.CodeSpendGateNotFound}, extra: actorQueries},
		"GET /v1/execution/spend-reservations/{grantId}": {org: orgQuery, params: map[string]string{"grantId": grantID},
			paramCodes: []string{clearance.CodeSpendGateNotFound}, extra: foreignGrant},
	}
}
