package server_test

import "net/http"

// badQueries are the cases of query strings a route refuses with 400
// INVALID_QUERY (or INVALID_REQUEST, when the engine judges the value).
func (s *badSuite) badQueries(values ...string) func(q req) []badCase {
	return func(q req) []badCase {
		out := make([]badCase, 0, len(values))
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

// consoleSpecs are the bad-input cases of the console's data routes: the
// shadow report's window cases, and each filter's bad values.
func (s *badSuite) consoleSpecs() map[string]routeSpec {
	windowAnd := func(values ...string) func(q req) []badCase {
		return func(q req) []badCase { return append(s.shadowQueries(q), s.badQueries(values...)(q)...) }
	}
	return map[string]routeSpec{
		"GET /v1/console/decisions": {org: orgQuery, extra: windowAnd("outcome=allow", "outcome=MAYBE", "outcome=ALLOW&outcome=BLOCK",
			"mode=LIVE", "mode=shadow", "workflow=%20refunds", "workflow=a%00b", "limit=0", "limit=-1", "limit=201",
			"limit=1.5", "limit=abc", "limit=1&limit=2")},
		"GET /v1/console/activity": {org: orgQuery, extra: windowAnd("bucket=week", "bucket=HOUR", "bucket=hour&bucket=day",
			"bucket=hour&from=2025-01-01T00:00:00Z&to=2026-01-01T00:00:00Z")},
		"GET /v1/console/escalations": {org: orgQuery, extra: s.badQueries("limit=0", "limit=-1", "limit=501", "limit=abc",
			"limit=1.5", "limit=1&limit=2")},
	}
}
