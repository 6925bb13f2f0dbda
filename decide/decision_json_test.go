package decide_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/internal/jsonw"
	"github.com/clearancehq/clearance/policy"
)

// decisionOfStrings fills every member of a Decision with s (optional ones
// too when full).
func decisionOfStrings(s string, full bool, codes []string) decide.Decision {
	d := decide.Decision{DecisionID: s, EvaluationID: s, DossierID: s, OrgID: s, Outcome: policy.Outcome(s), ReasonCodes: codes,
		PolicySnapshot: policy.Snapshot{PolicyVersion: s, BundleID: s, BundleDigest: s, Evaluator: s}, Mode: policy.Mode(s),
		DossierURL: s, DossierDigest: s, LedgerSeq: 1<<64 - 1, CreatedAt: s}
	if full {
		d.CorrelationID, d.IdempotencyKey, d.ChainID, d.ParentDecisionID, d.ActivePolicyVersion, d.VerificationEnvelope = s, s, s, s, s, s
		d.Replayed = true
	}
	return d
}

func encodingJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := jsonw.Reference(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The evaluate-decision answer written by hand is byte for byte what
// encoding/json writes for it.
func TestDecisionJSONMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `quo"te\`, "nl\n\t\x00\x1f", "<&> ü 😀 \u2028", "a\xffb"} {
		for _, codes := range [][]string{nil, {}, {s, "POLICY_MATCHED"}} {
			for _, full := range []bool{false, true} {
				d := decisionOfStrings(s, full, codes)
				if got, want := d.AppendJSON(nil), encodingJSON(t, d); !bytes.Equal(got, want) {
					t.Errorf("%q (full %v, codes %q):\n got %s\nwant %s", s, full, codes, got, want)
				}
			}
		}
	}
}

func FuzzDecisionJSON(f *testing.F) {
	f.Add("d", "ALLOW", "k", "POLICY_MATCHED")
	f.Add("", "", "", "")
	f.Add("<\u2028>", "\x00", "a\xff", `"\`)
	f.Fuzz(func(t *testing.T, id, outcome, key, code string) {
		d := decisionOfStrings(id, key != "", []string{code})
		d.Outcome, d.IdempotencyKey = policy.Outcome(outcome), key
		got := d.AppendJSON(nil)
		if !json.Valid(got) {
			t.Fatalf("invalid JSON: %q", got)
		}
		if want := encodingJSON(t, d); !bytes.Equal(got, want) {
			t.Fatalf("got %s\nwant %s", got, want)
		}
	})
}
