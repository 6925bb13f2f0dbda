package server_test

import (
	"net/http"
	"strings"

	"github.com/clearancehq/clearance/privacy"
)

// The personal-data routes in the bad-input suite: the data-protection
// setting, an org's erasure of a subject and the platform's deletion
// notice. Org a gets a setting before the battery (so that reading it is
// accepted) whose subject no decision of the suite names, so that the
// suite's other decisions are stored as they are.

// privacySpecs are the bad-input specs of the personal-data routes.
func (s *badSuite) privacySpecs() map[string]routeSpec {
	t, x := s.t, s.x
	const setting = `{"subject":"/context/badinput_subject","personal":["/context/badinput_email"]}`
	x.req(t, "PUT", pathDataProtection(s.a.ID), s.a.Key, setting, nil).want(t, http.StatusOK)

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
	// exact is a body refused with 400 and code.
	exact := func(q req, body, code string) badCase {
		c := s.variant(q, catValue, shorten(body), body, code)
		c.status = http.StatusBadRequest
		return c
	}
	params := map[string]string{"orgId": s.a.ID}
	put := routeSpec{org: orgPath, params: params, paramCodes: []string{"ORG_MISMATCH"}, body: setting,
		idents: []string{`{"subject":@@}`, `{"subject":"/a","personal":[@@]}`},
		extra: func(q req) []badCase {
			out := platformOrg(q)
			for _, b := range []string{`{}`, `{"personal":["/a"]}`} {
				out = append(out, exact(q, b, "MISSING_FIELD"))
			}
			for _, b := range []string{`{"subject":""}`, `{"subject":"/"}`, `{"subject":"actor/id"}`, `{"subject":"/a//b"}`,
				`{"subject":"/a~2b"}`, `{"subject":"/a~"}`, `{"subject":"/a","personal":["/a"]}`,
				`{"subject":"/a","personal":["/b","/b"]}`, `{"subject":"/a","personal":[""]}`,
				`{"subject":"/` + strings.Repeat("a", 300) + `"}`,
				`{"subject":"/a","personal":[` + strings.TrimSuffix(strings.Repeat(`"/p",`, 33), ",") + `]}`} {
				out = append(out, exact(q, b, privacy.CodeInvalidSetting))
			}
			return out
		}}
	get := routeSpec{org: orgPath, params: params, paramCodes: []string{"ORG_MISMATCH"},
		extra: func(q req) []badCase {
			out := platformOrg(q)
			// Another org's setting is not this org's to read, even
			// through its own (settingless) path: 404, nothing shown.
			p := q
			p.path, p.key = pathDataProtection(s.b.ID), s.b.Key
			c := s.variant(p, catValue, "an org without a setting", "", privacy.CodeSettingNotFound)
			c.status = http.StatusNotFound
			return append(out, c)
		}}
	// Turning the setting off spoils reading it: its accepted request goes
	// after theirs.
	del := routeSpec{org: orgPath, params: params, paramCodes: []string{"ORG_MISMATCH"}, phase: phaseRevokes,
		extra: func(q req) []badCase {
			out := platformOrg(q)
			p := q
			p.path, p.key = pathDataProtection(s.b.ID), s.b.Key
			c := s.variant(p, catValue, "an org without a setting", "", privacy.CodeSettingNotFound)
			c.status = http.StatusNotFound
			return append(out, c)
		}}
	erase := routeSpec{org: orgPath, params: params, paramCodes: []string{"ORG_MISMATCH"},
		body:   `{"subject_id":"badinput-subject-1"}`,
		idents: []string{`{"subject_id":@@}`},
		extra: func(q req) []badCase {
			out := platformOrg(q)
			out = append(out, exact(q, `{}`, "MISSING_FIELD"),
				exact(q, `{"subject_id":""}`, privacy.CodeInvalidSubject),
				exact(q, `{"subject_id":"`+strings.Repeat("s", 513)+`"}`, privacy.CodeInvalidSubject))
			return out
		}}
	notice := routeSpec{org: orgPath, params: params, paramCodes: []string{"ORG_NOT_FOUND", "INVALID_REQUEST"},
		body: `{"subject_id":"badinput-subject-2"}`, emptyOK: true,
		idents: []string{`{"subject_id":@@}`},
		extra: func(q req) []badCase {
			return []badCase{exact(q, `{"subject_id":""}`, privacy.CodeInvalidSubject),
				exact(q, `{"subject_id":"`+strings.Repeat("s", 513)+`"}`, privacy.CodeInvalidSubject)}
		}}
	return map[string]routeSpec{
		"PUT /v1/orgs/{orgId}/data-protection":    put,
		"GET /v1/orgs/{orgId}/data-protection":    get,
		"DELETE /v1/orgs/{orgId}/data-protection": del,
		"POST /v1/orgs/{orgId}/erasures":          erase,
		"POST /v1/platform/orgs/{orgId}/erasures": notice,
	}
}
