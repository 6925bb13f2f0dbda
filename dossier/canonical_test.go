package dossier

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/policy"
)

// fullBody sets every member, the optional ones included.
func fullBody() Body {
	return Body{DossierID: "0190f4b2-0000-7000-8000-0000000000d1", DecisionID: "0190f4b2-0000-7000-8000-0000000000d2",
		EvaluationID: "0190f4b2-0000-7000-8000-0000000000d3", OrgID: "0190f4b2-0000-7000-8000-00000000000a", Route: "enforce-and-bind",
		Intent:           json.RawMessage(`{"b":[1,2.50,-0,1e21],"a":{"z":"\u2028","y":null},"€":true}`),
		IntentAsReceived: "{\"a\": 1,\t\"b\": \"\\u00e9\"}\n", IntentDigest: "sha256:" + string(bytes.Repeat([]byte("1"), 64)),
		IntentProfile: canon.Profile, Outcome: policy.OutcomeAllow, ReasonCodes: []string{"WITHIN_LIMIT", "é\"\\\u0001"},
		MatchedRules: []string{}, EvaluationError: "none", Mode: policy.ModeEnforcement, RequestedMode: policy.ModeShadow,
		PolicySnapshot: policy.Snapshot{PolicyVersion: "3", BundleID: "payments", BundleDigest: "sha256:22", Evaluator: "clearance-policy/1"},
		BundleMode:     policy.ModeEnforcement, Actor: Actor{CredentialID: "key_1", CredentialKind: "agent", ID: "agent-7", Type: "agent"},
		IdempotencyKey: "idem-1", CorrelationID: "corr-1", RequestID: "req-1", CreatedAt: "2026-03-01T12:00:00.123456789Z",
		LedgerSeq: 42, GrantID: "g", ChainID: "c", ParentDecisionID: "p", PolicyPin: "2", ActivePolicyVersion: "3",
		EscalationID: "e", Approval: &Approval{Issuer: "https://approvals.example", RequestID: "r", ReceiptID: "j",
			Receipt: "eyJ.eyJ.sig", Approver: "ana@example.com", Presence: "webauthn-uv", DecidedAt: "2026-03-01T12:00:00Z"},
		Signals: []Signal{{Type: "fraud.alert", EventID: "0190f4b2-0000-7000-8000-0000000000s1", Timestamp: "2026-03-01T11:59:00Z",
			ReceivedAt: "2026-03-01T11:59:01.5Z", DataDigest: "sha256:33"}, {Type: "maintenance", EventID: "s2",
			Timestamp: "2026-03-01T11:00:00Z", ReceivedAt: "2026-03-01T11:00:00Z", DataDigest: "sha256:44"}}}
}

// The direct writer answers what canon.Marshal answers, byte for byte: the
// dossier's digest is the ledger's payload digest.
func TestCanonicalIsCanonMarshal(t *testing.T) {
	minimal := Body{ReasonCodes: nil, MatchedRules: nil}
	controls := fullBody()
	controls.IntentAsReceived = "\x00\x07\b\t\n\v\f\r\x1f\x7f \u2028\u2029 \"\\/<>&"
	sourced := fullBody()
	sourced.PolicySnapshot.SourceCommit = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
	for name, b := range map[string]Body{"full": fullBody(), "minimal": minimal, "controls": controls, "sourced": sourced} {
		got, ok, err := b.canonical()
		want, werr := canon.Marshal(&b)
		if err != nil || werr != nil || !ok {
			t.Fatalf("%s: ok %v, %v, %v", name, ok, err, werr)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
}

// What the direct writer cannot write it leaves to canon.Marshal.
func TestCanonicalFallsBack(t *testing.T) {
	b := fullBody()
	b.RequestID = "bad \xff utf-8"
	if _, ok, err := b.canonical(); ok || err != nil {
		t.Fatalf("invalid UTF-8: ok %v, %v", ok, err)
	}
	b = fullBody()
	b.LedgerSeq = canon.MaxExactInteger + 1
	if _, ok, err := b.canonical(); ok || err != nil {
		t.Fatalf("seq above 2^53: ok %v, %v", ok, err)
	}
}

func FuzzCanonical(f *testing.F) {
	f.Add("agent-7", "PAYMENT \u2028 é", "\x01\"\\", `{"amount":250.5,"z":[1,2]}`, uint64(1))
	f.Add("", "", "", `null`, uint64(0))
	f.Fuzz(func(t *testing.T, s1, s2, s3, intent string, seq uint64) {
		b := fullBody()
		b.Actor.ID, b.ReasonCodes, b.CorrelationID, b.EvaluationError, b.LedgerSeq = s1, []string{s2, s3}, s3, s2, seq
		b.Intent = nil
		if json.Valid([]byte(intent)) {
			b.Intent = json.RawMessage(intent)
		}
		got, ok, err := b.canonical()
		if err != nil {
			return // an intent canon refuses (e.g. duplicate names): Record fails either way
		}
		valid := utf8.ValidString(s1) && utf8.ValidString(s2) && utf8.ValidString(s3)
		if ok != (valid && seq <= canon.MaxExactInteger) {
			t.Fatalf("ok %v for valid %v seq %d", ok, valid, seq)
		}
		if !ok {
			return
		}
		want, err := canon.Marshal(&b)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
	})
}

func BenchmarkCanonical(b *testing.B) {
	body := fullBody()
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := body.canonical(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("canon.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := canon.Marshal(&body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
