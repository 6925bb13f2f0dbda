package decide

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The byte scan of canonical dossiers reads what the JSON decoder reads,
// and gives way to it for anything else.
func TestScanRecordedAgreesWithTheDecoder(t *testing.T) {
	bodies := map[string][]byte{
		"escaped intent":    []byte(`{"created_at":"2026-01-01T00:00:00Z","dossier_id":"d1","intent":{"context":{"note":"a \"quoted\" \\ } ] , : {"}},"intent_as_received":"{\"x\":\"\\\\\\\"\"}","matched_rules":[],"outcome":"ALLOW","policy_snapshot":{"bundle_digest":"sha256:00","bundle_id":"b","evaluator":"e","policy_version":"1"},"reason_codes":["PROTOCOL_OUTCOME_ALLOW","NO_RULE_MATCHED"],"route":"evaluate-decision"}`),
		"numbers and nulls": []byte(`{"approval":null,"created_at":"2026-01-01T00:00:00Z","dossier_id":"d2","intent":{"amount":1.5,"flag":true,"n":null},"ledger_seq":12,"outcome":"BLOCK","reason_codes":[],"route":"action-gate"}`),
	}
	for _, name := range []string{"dossier.json", "dossier_signals.json"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "golden", name))
		if err != nil {
			t.Fatal(err)
		}
		bodies[name] = b
	}
	for name, body := range bodies {
		var fast, slow Recorded
		if !scanRecorded(body, &fast) {
			t.Errorf("%s: the scan gave way on a canonical body", name)
			continue
		}
		if err := readRecorded(body, &slow); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d := cmp.Diff(slow, fast, cmp.AllowUnexported(Recorded{})); d != "" {
			t.Errorf("%s: scan and decoder differ (-decoder +scan):\n%s", name, d)
		}
	}
	for name, body := range map[string]string{
		"whitespace":     `{ "dossier_id": "d"}`,
		"escaped name":   `{"dossier\u005fid":"d"}`,
		"escaped value":  `{"route":"evaluate\u002ddecision"}`,
		"truncated":      `{"intent":{"a":1}`,
		"trailing comma": `{"route":"x",}`,
	} {
		var r Recorded
		if scanRecorded([]byte(body), &r) {
			t.Errorf("%s: scanned %+v", name, r)
		}
	}
}
