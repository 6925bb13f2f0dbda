package dossier

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/clearancehq/clearance/internal/jsonw"
)

// The hand-written chain member JSON is byte for byte what encoding/json
// writes (with HTML escaping off), for every string it may meet.
func TestChainMemberJSONMatchesEncodingJSON(t *testing.T) {
	odd := []string{"", "plain", `quo"te`, `back\slash`, "nl\nand\ttab\x00nul\x1f\r\b\f\v", "<html> & ünïcödé \u2028\u2029 😀", "\x7f del", "\u2027\u202a\u20a8 near misses"}
	for _, s := range odd {
		for _, m := range []ChainMember{
			{DecisionID: s, EvaluationID: "e", DossierID: "d", DossierDigest: "sha256:00", Route: s, Outcome: "ALLOW",
				Mode: "SHADOW", CreatedAt: "2026-11-01T12:00:00Z", LedgerSeq: 18446744073709551615},
			{DecisionID: "a", EvaluationID: s, DossierID: s, DossierDigest: s, Route: "enforce-and-bind", Outcome: "BLOCK",
				Mode: "ENFORCEMENT", CreatedAt: s, ParentDecisionID: s, WorkflowKey: s, CorrelationID: s, GrantID: s},
		} {
			want, err := jsonw.Reference(m)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.appendJSON(nil); !bytes.Equal(got, want) {
				t.Errorf("%q:\n got %s\nwant %s", s, got, want)
			}
		}
	}
	// Invalid UTF-8 still yields valid JSON.
	m := ChainMember{WorkflowKey: "a\xffb"}
	if got := m.appendJSON(nil); !json.Valid(got) {
		t.Errorf("invalid JSON for invalid UTF-8: %s", got)
	}
}

func FuzzChainMemberJSON(f *testing.F) {
	for _, s := range []string{"", `a"b\c`, "\n\u2028\x00", "ü😀", "\xe2\x80", "&\xff<"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, workflow, corr string) {
		m := ChainMember{DecisionID: "d", WorkflowKey: workflow, CorrelationID: corr, LedgerSeq: 7}
		got := m.appendJSON(nil)
		if !json.Valid(got) {
			t.Fatalf("invalid JSON: %q", got)
		}
		want, err := jsonw.Reference(m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("got %s\nwant %s", got, want)
		}
	})
}
