package server_test

import (
	"context"
	"net/http"
	"strings"

	"github.com/clearancehq/clearance/export"
)

// exportArgs are the validation packs the bad requests aim at.
type exportArgs struct {
	built   string // org a's, SUCCEEDED
	foreign string // org b's, SUCCEEDED
	pending string // org a's, PENDING
}

// exportTargets builds a pack of each org and queues one more of org a.
// Builds seal the ledgers and append to them: run it before the battery's
// own seal.
func (s *badSuite) exportTargets() exportArgs {
	t, x := s.t, s.x
	queue := func(o org) string {
		return x.req(t, "POST", exportsPath(o.ID), o.Key, `{"format":"pdf","include_events":true}`, nil).
			want(t, http.StatusAccepted).str("export_id")
	}
	a := exportArgs{built: queue(s.a), foreign: queue(s.b)}
	if n, err := x.engine.Exports.Process(context.Background(), export.WorkerOptions{}); n != 2 || err != nil {
		t.Fatalf("build the target packs: %d built, %v", n, err)
	}
	a.pending = queue(s.a)
	return a
}

// exportSpecs describes the validation pack routes.
func (s *badSuite) exportSpecs(a exportArgs) map[string]routeSpec {
	x := s.x
	platformOrg := func(q req) []badCase {
		var out []badCase
		for _, c := range []struct{ name, id, code string }{
			{"platform key, malformed path org", "not-a-uuid", "INVALID_REQUEST"},
			{"platform key, unknown path org", unknownID, "ORG_NOT_FOUND"},
			{"platform key, uppercase path org", strings.ToUpper(s.a.ID), "INVALID_REQUEST"},
		} {
			p := q
			p.path, p.key = strings.Replace(q.path, s.a.ID, c.id, 1), x.platform
			out = append(out, s.variant(p, catOrg, c.name, p.body, c.code))
		}
		return out
	}
	retarget := func(q req, cat, name, id string, want ...string) badCase {
		p := q
		p.path = strings.Replace(q.path, a.built, id, 1)
		return s.variant(p, cat, name, p.body, want...)
	}
	const body = `{"format":"csv","from":"2026-01-01T00:00:00Z","include_events":true}`
	create := routeSpec{org: orgPath, params: map[string]string{"orgId": s.a.ID}, paramCodes: []string{"ORG_MISMATCH"},
		body: body, idem: true,
		idents: []string{`{"format":@@}`, `{"format":"csv","from":@@}`, `{"format":"csv","to":@@}`},
		extra: func(q req) []badCase {
			out := s.values(q, []string{`{"format":"xml"}`, `{"format":"JSON"}`, `{"format":""}`, `{}`, `{"include_events":true}`,
				`{"format":"csv","from":"yesterday"}`, `{"format":"csv","to":"2026-11-01"}`,
				`{"format":"csv","from":"2026-11-02T00:00:00Z","to":"2026-11-01T00:00:00Z"}`,
				`{"format":"csv","from":"2026-11-01T00:00:00Z","to":"2026-11-01T00:00:00.0000005Z"}`,
				`{"format":"csv","to":"1969-12-31T23:59:59Z"}`, `{"format":"csv","from":"0001-01-01T00:00:00Z"}`,
				`{"format":"csv","from":"2026-11-01T00:00:00+25:00"}`, `{"format":"csv","from":"2026-11-01T00:00:00Z\n"}`})
			return append(out, platformOrg(q)...)
		}}
	list := routeSpec{org: orgPath, params: map[string]string{"orgId": s.a.ID}, paramCodes: []string{"ORG_MISMATCH"},
		extra: func(q req) []badCase {
			out := platformOrg(q)
			for _, v := range []string{"limit=-1", "limit=0", "limit=abc", "limit=1.5", "limit=101", "limit=99999999999999999999",
				"limit=%00", "limit=1&limit=2", "limit=%zz", "limit=1;x=2"} {
				p := q
				p.query = "?" + v
				c := s.variant(p, catQuery, v, "", "INVALID_QUERY", "INVALID_REQUEST")
				c.status = http.StatusBadRequest
				out = append(out, c)
			}
			return out
		}}
	one := func(download bool) routeSpec {
		return routeSpec{org: orgPath, params: map[string]string{"orgId": s.a.ID, "exportId": a.built},
			paramCodes: []string{"ORG_MISMATCH", "EXPORT_NOT_FOUND"},
			extra: func(q req) []badCase {
				out := append(platformOrg(q), retarget(q, catForeign, "another org's pack", a.foreign, "EXPORT_NOT_FOUND"))
				if download {
					c := retarget(q, catValue, "a pack still PENDING", a.pending, "EXPORT_NOT_READY")
					c.status = http.StatusConflict
					out = append(out, c)
				}
				return out
			}}
	}
	return map[string]routeSpec{
		"POST /v1/orgs/{orgId}/audit-exports":                    create,
		"GET /v1/orgs/{orgId}/audit-exports":                     list,
		"GET /v1/orgs/{orgId}/audit-exports/{exportId}":          one(false),
		"GET /v1/orgs/{orgId}/audit-exports/{exportId}/download": one(true),
	}
}
