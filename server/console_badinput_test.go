package server_test

import "net/http"

// consoleSpecs are the bad-input cases of the console's data routes: the
// shadow report's window cases, and each filter's bad values.
func (s *badSuite) consoleSpecs() map[string]routeSpec {
	queries := func(values ...string) func(q req) []badCase {
		return func(q req) []badCase {
			out := s.shadowQueries(q)
			for _, v := range values {
				p := q
				p.query = "?" + v
				c := s.variant(p, catQuery, v, "", "INVALID_QUERY", "INVALID_REQUEST")
				c.status = http.StatusBadRequest
				out = append(out, c)
			}
			return out
		}
	}
	return map[string]routeSpec{
		"GET /v1/console/decisions": {org: orgQuery, extra: queries("outcome=allow", "outcome=MAYBE", "outcome=ALLOW&outcome=BLOCK",
			"mode=LIVE", "mode=shadow", "workflow=%20refunds", "workflow=a%00b", "limit=0", "limit=-1", "limit=201",
			"limit=1.5", "limit=abc", "limit=1&limit=2")},
		"GET /v1/console/activity": {org: orgQuery, extra: queries("bucket=week", "bucket=HOUR", "bucket=hour&bucket=day",
			"bucket=hour&from=2025-01-01T00:00:00Z&to=2026-01-01T00:00:00Z")},
	}
}
