package server_test

import (
	"net/http"
	"strings"
)

// platformSpecs are the bad-input cases of the platform's tenant routes:
// listing orgs and an org's API keys, revoking one.
func (s *badSuite) platformSpecs() map[string]routeSpec {
	t, x := s.t, s.x
	// The accepted revocation spends a spare key of org a; org b's key is
	// the foreign one.
	spare := x.do("POST", "/v1/platform/orgs/"+s.a.ID+"/api-keys", x.platform, map[string]any{"scopes": []string{"audit:read"}}, nil).
		want(t, http.StatusCreated).str("key_id")
	return map[string]routeSpec{
		"GET /v1/platform/orgs": {extra: s.badQueries("limit=0", "limit=-1", "limit=abc", "limit=1001", "limit=1.5", "limit=1&limit=2",
			"after=a&after=b", "after=%00", "after="+strings.Repeat("a", 256), "after=a%20b", "limit=%zz")},
		"GET /v1/platform/orgs/{orgId}/api-keys": {params: map[string]string{"orgId": s.a.ID}, paramCodes: []string{"ORG_NOT_FOUND"}},
		"DELETE /v1/platform/orgs/{orgId}/api-keys/{keyId}": {params: map[string]string{"orgId": s.a.ID, "keyId": spare},
			paramCodes: []string{"ORG_NOT_FOUND", "API_KEY_NOT_FOUND"},
			extra: func(q req) []badCase {
				p := q
				p.path = strings.Replace(q.path, s.a.ID, s.b.ID, 1) // org b does not hold the key
				return []badCase{s.variant(p, catForeign, "another org's key id", "", "API_KEY_NOT_FOUND")}
			}},
	}
}
