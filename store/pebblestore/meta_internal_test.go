package pebblestore

import (
	"encoding/json"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
)

// The byte scan of dossier metadata reads what JSON v2 reads, and gives
// way to it for anything with an escape.
func TestScanMetaAgreesWithJSON(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC)
	for name, m := range map[string]dossierMeta{
		"full":    {"d1", "e1", at, "ALLOW", "SHADOW", "ap.invoice", "PAYMENT"},
		"minimal": {DecisionID: "d2", CreatedAt: at},
		"escaped": {"d3", "e3", at, "BLOCK", "ENFORCEMENT", "a<b>&c", "PAYMENT"},
		"offset":  {DecisionID: "d4", CreatedAt: at.In(time.FixedZone("x", 7200))},
	} {
		raw, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var want, got dossierMeta
		if err := jsonv2.Unmarshal(raw, &want); err != nil {
			t.Fatal(err)
		}
		if !scanMeta(raw, &got) {
			if name != "escaped" {
				t.Errorf("%s: the scan gave way on %s", name, raw)
			}
			continue
		}
		if name == "escaped" {
			t.Errorf("escaped: scanned %s", raw)
		}
		if got.CreatedAt.Equal(want.CreatedAt) {
			got.CreatedAt = want.CreatedAt
		}
		if got != want {
			t.Errorf("%s: scan %+v, JSON %+v", name, got, want)
		}
	}
	for _, raw := range []string{`{"decision_id":1}`, `{"other":"x"}`, `{"decision_id":"a" }`, `{"decision_id":"a",}`, `{`} {
		var m dossierMeta
		if scanMeta([]byte(raw), &m) {
			t.Errorf("scanned %s", raw)
		}
	}
}
