package server_test

import (
	"encoding/base64"
	"net/http"

	"github.com/clearancehq/clearance"
)

// The reader's routes in the bad-input suite. The accepted request posts a
// real proof packet of this org as a file (artifact_base64); every bad
// request is refused with a 400 and a reader or strict-JSON code, and none
// changes anything (the reader stores nothing). Evidence that is read but
// does not verify is a 200 report, tested in reader_e2e_test.go.
func (s *badSuite) readerSpecs(a specArgs) map[string]routeSpec {
	t, x := s.t, s.x
	pkt := x.req(t, "GET", pathDossiers+a.dossierID+"/proof-packet?org_id="+s.a.ID, s.a.Key, nil, nil).want(t, http.StatusOK).Raw
	file := base64.StdEncoding.EncodeToString(pkt)
	link := pathPublicDoss + a.dossierID + "/verify?sig=AAAA.BBBB"
	verify := routeSpec{body: `{"kind":"packet","artifact_base64":"` + file + `"}`,
		extra: func(q req) []badCase {
			var out []badCase
			add := func(body string, codes ...string) {
				c := s.variant(q, catValue, shorten(body), body, codes...)
				c.status = http.StatusBadRequest
				out = append(out, c)
			}
			add(`{"kind":"receipt","artifact_base64":"`+file+`"}`, clearance.CodeReaderKindUnknown)
			add(`{"kind":"PACKET","artifact_base64":"`+file+`"}`, clearance.CodeReaderKindUnknown)
			add(`{"kind":"","artifact_base64":"`+file+`"}`, clearance.CodeReaderKindUnknown)
			add(`{"artifact":{"hello":"world"}}`, clearance.CodeReaderKindUndetected)
			add(`{"artifact_base64":"aGVsbG8="}`, clearance.CodeReaderKindUndetected)
			add(`{}`, clearance.CodeReaderArtifactRequired)
			add(`{"kind":"packet"}`, clearance.CodeReaderArtifactRequired)
			add(`{"artifact_base64":"`+file+`","share_link":"`+link+`"}`, clearance.CodeReaderArtifactRequired)
			add(`{"artifact":{},"artifact_base64":"`+file+`"}`, clearance.CodeReaderArtifactRequired)
			add(`{"kind":"share_link","artifact_base64":"`+file+`"}`, clearance.CodeReaderArtifactRequired)
			add(`{"kind":"packet","share_link":"`+link+`"}`, clearance.CodeReaderArtifactRequired)
			add(`{"artifact_base64":"not base64"}`, clearance.CodeReaderArtifactInvalid)
			add(`{"artifact_base64":"aGVsbG8"}`, clearance.CodeReaderArtifactInvalid)
			add(`{"artifact_base64":""}`, clearance.CodeReaderArtifactInvalid)
			add(`{"artifact_base64":"`+base64.URLEncoding.EncodeToString(pkt)+`_-"}`, clearance.CodeReaderArtifactInvalid)
			add(`{"share_link":""}`, clearance.CodeReaderArtifactInvalid)
			add(`{"share_link":"https://elsewhere.example/"}`, clearance.CodeReaderArtifactInvalid)
			add(`{"share_link":"`+pathPublicDoss+a.dossierID+`/verify"}`, clearance.CodeReaderArtifactInvalid)
			add(`{"share_link":"`+link+`&sig=CCCC"}`, clearance.CodeReaderArtifactInvalid)
			add(`{"share_link":"`+link+`","ledger_key":"`+x.engine.Audit.LedgerVerifierKey()+`"}`, clearance.CodeReaderArtifactInvalid)
			add(`{"artifact_base64":"`+file+`","envelopes":{"envelopes":[]}}`, clearance.CodeReaderArtifactInvalid)
			add(`{"artifact_base64":"`+file+`","export_record":{"bundle_sha256":"x"}}`, clearance.CodeReaderArtifactInvalid)
			add(`{"artifact_base64":"`+file+`","ledger_key":"not-a-key"}`, clearance.CodeReaderLedgerKeyInvalid)
			add(`{"artifact_base64":"`+file+`","ledger_key":"a+b+c"}`, clearance.CodeReaderLedgerKeyInvalid)
			add(`{"artifact":[1]}`, "WRONG_TYPE")
			add(`{"artifact":"x"}`, "WRONG_TYPE")
			add(`{"artifact":null}`, "WRONG_TYPE")
			add(`{"share_link":null}`, "WRONG_TYPE")
			add(`{"artifact_base64":"`+file+`","ledger_key":null}`, "WRONG_TYPE")
			add(`{"artifact_base64":"`+file+`","envelopes":"x"}`, "WRONG_TYPE")
			return out
		}}
	return map[string]routeSpec{
		"POST /v1/reader/verify": verify,
		"GET /reader":            {},
	}
}
