package clearance_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/claim"
)

// controlChars are one control character of each family: C0 (NUL, tab,
// newline, escape), DEL and C1 (U+0080, NEL U+0085, CSI U+009B, U+009F).
var controlChars = []string{"\x00", "\t", "\n", "\x1b", "\x7f", "\u0080", "\u0085", "\u009b", "\u009f"}

func TestValidToken(t *testing.T) {
	for _, s := range []string{"k", "order-1:refund/2", "~", "!", "a,b;c=d", strings.Repeat("k", clearance.MaxKeyLength)} {
		if !clearance.ValidToken(s) {
			t.Errorf("ValidToken(%q) = false", s)
		}
	}
	// Visible ASCII only: what is not (a zero-width space, a bidi
	// override, a no-break space, any other letter) could make two keys
	// that read the same.
	bad := []string{"", " ", "a b", "k ", " k", "a\xffb", "\xc3\x28", "clé-返金", "a\u00a0b", "k\u200b", "\u202ek", "\ufeffk",
		strings.Repeat("k", clearance.MaxKeyLength+1)}
	for _, c := range controlChars {
		bad = append(bad, "a"+c+"b", c)
	}
	for _, s := range bad {
		if clearance.ValidToken(s) {
			t.Errorf("ValidToken(%q) = true", s)
		}
	}
}

// wantInvalidEvidence asserts err is a 400-kind INVALID_EFFECT_EVIDENCE.
func wantInvalidEvidence(t *testing.T, what string, err error) {
	t.Helper()
	var ce *clearance.Error
	if !errors.Is(err, clearance.ErrInvalidRequest) || !errors.As(err, &ce) || ce.Code != clearance.CodeInvalidEvidence {
		t.Errorf("%s: got %v; want %s", what, err, clearance.CodeInvalidEvidence)
	}
}

func TestEffectEvidenceRefusesControlCharacters(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, enforceAll)
	org := x.org.Org.ID
	digest := effectDigest("refund-42")
	var bad []clearance.EffectEvidence
	for _, c := range controlChars {
		bad = append(bad, clearance.EffectEvidence{Kind: "psp" + c + "charge", Status: "CONFIRMED", EffectDigest: digest},
			clearance.EffectEvidence{Kind: "psp.charge", Status: "CONFIRMED" + c, EffectDigest: digest})
	}
	bad = append(bad, clearance.EffectEvidence{Kind: "psp\xffcharge", Status: "CONFIRMED", EffectDigest: digest},
		clearance.EffectEvidence{Kind: "psp.charge", Status: "\xc3\x28", EffectDigest: digest})
	good := clearance.EffectEvidence{Kind: "psp.charge", Status: "CONFIRMED — réglé", EffectDigest: digest}

	// Finalize: each refusal leaves the claim as it was.
	jws, _ := x.intent(t, 120, "", "")
	d := x.bind(t, jws)
	c, err := x.e.Claim(ctx, clearance.ClaimRequest{OrgID: org, ExecutionToken: d.ExecutionToken, IntentHash: d.IntentHash})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range bad {
		_, err := x.e.Finalize(ctx, clearance.FinalizeRequest{OrgID: org, ExecutionToken: d.ExecutionToken, ClaimToken: c.ClaimToken,
			Outcome: claim.OutcomeCommitted, Evidence: &ev})
		wantInvalidEvidence(t, "Finalize "+ev.Kind+" "+ev.Status, err)
	}
	f, err := x.e.Finalize(ctx, clearance.FinalizeRequest{OrgID: org, ExecutionToken: d.ExecutionToken, ClaimToken: c.ClaimToken,
		Outcome: claim.OutcomeCommitted, Evidence: &good})
	if err != nil || f.Evidence == nil || f.Evidence.Kind != good.Kind || f.Evidence.Status != good.Status {
		t.Fatalf("Finalize with printable evidence after the refusals: %+v, %v", f, err)
	}

	// Reconcile: each refusal leaves the grant INDETERMINATE.
	jws, _ = x.intent(t, 120, "", "")
	d = x.bind(t, jws)
	if _, err := x.e.Claim(ctx, clearance.ClaimRequest{OrgID: org, ExecutionToken: d.ExecutionToken, IntentHash: d.IntentHash}); err != nil {
		t.Fatal(err)
	}
	x.advance(31 * time.Second) // the lease lapses: INDETERMINATE
	if list, err := x.e.Execution.Indeterminate(ctx, org, 0); err != nil || len(list) != 1 || list[0].GrantID != d.GrantID {
		t.Fatalf("not indeterminate: %+v %v", list, err)
	}
	for _, ev := range bad {
		_, err := x.e.Execution.Reconcile(ctx, clearance.ReconcileRequest{OrgID: org, GrantID: d.GrantID, Resolution: claim.OutcomeCommitted, Evidence: &ev})
		wantInvalidEvidence(t, "Reconcile "+ev.Kind+" "+ev.Status, err)
	}
	if _, err := x.e.Execution.Reconcile(ctx, clearance.ReconcileRequest{OrgID: org, GrantID: d.GrantID, Resolution: claim.OutcomeCommitted, Evidence: &good}); err != nil {
		t.Fatalf("Reconcile with printable evidence after the refusals: %v", err)
	}
	if rep, err := x.e.Audit.VerifyLedger(ctx, org); err != nil || !rep.Valid {
		t.Fatalf("ledger %+v %v", rep, err)
	}
}
