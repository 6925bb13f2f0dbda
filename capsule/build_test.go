package capsule_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clearancehq/clearance/capsule"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

var t0 = time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)

func digest(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }

// decision returns the evidence of one decision without a grant.
func decision(o capsule.Outcome, m capsule.Mode) capsule.Evidence {
	return capsule.Evidence{
		Operator: "0190f4b2-0000-7000-8000-000000000001", Developer: "agent-7",
		DecisionID: "0190f4b2-0000-7000-8000-0000000000d1", DossierID: "0190f4b2-0000-7000-8000-0000000000d2",
		DossierDigest: digest('a'), Outcome: o, Mode: m, ReasonCodes: []string{"PROTOCOL_OUTCOME_" + string(o)},
		Policy:       capsule.PolicyRef{BundleID: "starter", PolicyVersion: "3", BundleDigest: digest('b'), Evaluator: "clearance-policy/1"},
		IntentDigest: digest('c'), DecidedAt: t0,
	}
}

// granted returns an ALLOW/ENFORCEMENT decision whose grant has fin.
func granted(fin *capsule.Finalization) capsule.Evidence {
	e := decision(capsule.OutcomeAllow, capsule.ModeEnforcement)
	e.Grant = &capsule.Grant{GrantID: "0190f4b2-0000-7000-8000-0000000000g1", IssuedAt: t0, ExpiresAt: t0.Add(2 * time.Minute),
		PayloadDigest: digest('d'), Finalization: fin}
	return e
}

func confirming() *capsule.EffectEvidence {
	return &capsule.EffectEvidence{Kind: "CONFIRMED", Status: "CONFIRMED", EffectDigest: digest('e'), Source: "effect_evidence"}
}

// want is one row of MAPPING.md: what each capsule of the chain says.
type want struct {
	ActionType   capsule.ActionType
	Decision     capsule.Decision
	VerdictClass capsule.VerdictClass
	EffectStatus capsule.EffectStatus // "" = no effect record
	EffectMode   capsule.EffectMode
	Relation     capsule.Relation // "" = no chain
}

var buildCases = []struct {
	name string
	ev   capsule.Evidence
	want []want
}{
	{"allow enforcement, no grant", decision(capsule.OutcomeAllow, capsule.ModeEnforcement),
		[]want{{capsule.ActionDecide, capsule.DecisionAccept, "", "", capsule.EffectModeNotApplicable, ""}}},
	{"allow enforcement, grant issued not finalized", granted(nil),
		[]want{{capsule.ActionDecide, capsule.DecisionAccept, "", "", capsule.EffectModeNotApplicable, ""}}},
	{"block", decision(capsule.OutcomeBlock, capsule.ModeEnforcement),
		[]want{{capsule.ActionDecide, capsule.DecisionReject, capsule.VerdictBlocked, "", capsule.EffectModeNotApplicable, ""}}},
	{"block after evaluation failure", func() capsule.Evidence {
		e := decision(capsule.OutcomeBlock, capsule.ModeEnforcement)
		e.EvaluationFailed = true
		return e
	}(), []want{{capsule.ActionDecide, capsule.DecisionReject, capsule.VerdictEngineFailure, "", capsule.EffectModeNotApplicable, ""}}},
	{"escalate", decision(capsule.OutcomeEscalate, capsule.ModeEnforcement),
		[]want{{capsule.ActionDecide, capsule.DecisionNeedsInput, capsule.VerdictEscalated, "", capsule.EffectModeNotApplicable, ""}}},
	{"review required", decision(capsule.OutcomeReviewRequired, capsule.ModeEnforcement),
		[]want{{capsule.ActionDecide, capsule.DecisionNeedsInput, capsule.VerdictNeedsDecision, "", capsule.EffectModeNotApplicable, ""}}},
	{"shadow allow", decision(capsule.OutcomeAllow, capsule.ModeShadow),
		[]want{{capsule.ActionFYI, capsule.DecisionAccept, "", "", capsule.EffectModeNotApplicable, ""}}},
	{"shadow block", decision(capsule.OutcomeBlock, capsule.ModeShadow),
		[]want{{capsule.ActionFYI, capsule.DecisionReject, "", "", capsule.EffectModeNotApplicable, ""}}},
	{"shadow escalate", decision(capsule.OutcomeEscalate, capsule.ModeShadow),
		[]want{{capsule.ActionFYI, capsule.DecisionNeedsInput, "", "", capsule.EffectModeNotApplicable, ""}}},
	{"shadow review required", decision(capsule.OutcomeReviewRequired, capsule.ModeShadow),
		[]want{{capsule.ActionFYI, capsule.DecisionNeedsInput, "", "", capsule.EffectModeNotApplicable, ""}}},
	{"committed, effect confirmed", granted(&capsule.Finalization{State: capsule.StateCommitted, FinalizedAt: t0.Add(time.Second),
		EffectConfirmed: true, Evidence: confirming()}), []want{
		{capsule.ActionDecide, capsule.DecisionAccept, "", "", capsule.EffectModeNotApplicable, ""},
		{capsule.ActionDecide, capsule.DecisionAccept, capsule.VerdictExecuted, capsule.EffectConfirmed, capsule.EffectModeConfirmed, capsule.RelationConfirms}}},
	{"committed without evidence", granted(&capsule.Finalization{State: capsule.StateCommitted, FinalizedAt: t0.Add(time.Second)}), []want{
		{capsule.ActionDecide, capsule.DecisionAccept, "", "", capsule.EffectModeNotApplicable, ""},
		{capsule.ActionDecide, capsule.DecisionAccept, capsule.VerdictExecuted, capsule.EffectDispatched, capsule.EffectModeDispatchedUnconfirmed, capsule.RelationConfirms}}},
	{"committed, evidence did not confirm", granted(&capsule.Finalization{State: capsule.StateCommitted, FinalizedAt: t0.Add(time.Second),
		Evidence: &capsule.EffectEvidence{Kind: "SIGNED_RECEIPT", Status: "DIGEST_MISMATCH", EffectDigest: digest('f'), Source: "effect_receipt"}}), []want{
		{capsule.ActionDecide, capsule.DecisionAccept, "", "", capsule.EffectModeNotApplicable, ""},
		{capsule.ActionDecide, capsule.DecisionAccept, capsule.VerdictExecuted, capsule.EffectDispatched, capsule.EffectModeDispatchedUnconfirmed, capsule.RelationConfirms}}},
	{"failed", granted(&capsule.Finalization{State: capsule.StateFailed, FinalizedAt: t0.Add(time.Second)}), []want{
		{capsule.ActionDecide, capsule.DecisionAccept, "", "", capsule.EffectModeNotApplicable, ""},
		{capsule.ActionDecide, capsule.DecisionAccept, capsule.VerdictExecuted, capsule.EffectFailed, capsule.EffectModeDispatchedUnconfirmed, capsule.RelationConfirms}}},
	{"indeterminate, reported", granted(&capsule.Finalization{State: capsule.StateIndeterminate, FinalizedAt: t0.Add(time.Second)}), []want{
		{capsule.ActionDecide, capsule.DecisionAccept, "", "", capsule.EffectModeNotApplicable, ""},
		{capsule.ActionDecide, capsule.DecisionAccept, capsule.VerdictErrored, capsule.EffectDispatched, capsule.EffectModeDispatchedUnconfirmed, capsule.RelationConfirms}}},
	{"indeterminate, lease expired (refused)", granted(&capsule.Finalization{State: capsule.StateIndeterminate, FinalCode: capsule.FinalCodeLeaseExpired,
		FinalizedAt: t0.Add(time.Minute), Evidence: confirming()}), []want{
		{capsule.ActionDecide, capsule.DecisionAccept, "", "", capsule.EffectModeNotApplicable, ""},
		{capsule.ActionDecide, capsule.DecisionAccept, capsule.VerdictTimeout, capsule.EffectDispatched, capsule.EffectModeDispatchedUnconfirmed, capsule.RelationConfirms}}},
	{"indeterminate, scope invariant (refused)", granted(&capsule.Finalization{State: capsule.StateIndeterminate, FinalCode: capsule.FinalCodeScopeInvariant,
		FinalizedAt: t0.Add(time.Second)}), []want{
		{capsule.ActionDecide, capsule.DecisionAccept, "", "", capsule.EffectModeNotApplicable, ""},
		{capsule.ActionDecide, capsule.DecisionAccept, capsule.VerdictErrored, capsule.EffectDispatched, capsule.EffectModeDispatchedUnconfirmed, capsule.RelationConfirms}}},
	{"indeterminate, reconciled committed", granted(&capsule.Finalization{State: capsule.StateIndeterminate, FinalCode: capsule.FinalCodeLeaseExpired,
		FinalizedAt: t0.Add(time.Minute), Reconciliation: &capsule.Reconciliation{Resolution: capsule.StateCommitted, EffectConfirmed: true,
			Evidence: confirming(), ReconciledAt: t0.Add(time.Hour)}}), []want{
		{capsule.ActionDecide, capsule.DecisionAccept, "", "", capsule.EffectModeNotApplicable, ""},
		{capsule.ActionDecide, capsule.DecisionAccept, capsule.VerdictTimeout, capsule.EffectDispatched, capsule.EffectModeDispatchedUnconfirmed, capsule.RelationConfirms},
		{capsule.ActionDecide, capsule.DecisionAccept, capsule.VerdictExecuted, capsule.EffectConfirmed, capsule.EffectModeConfirmed, capsule.RelationSupersedes}}},
	{"reconciled failed, given with the resolved state", granted(&capsule.Finalization{State: capsule.StateFailed,
		FinalizedAt: t0.Add(time.Minute), Reconciliation: &capsule.Reconciliation{Resolution: capsule.StateFailed, ReconciledAt: t0.Add(time.Hour)}}), []want{
		{capsule.ActionDecide, capsule.DecisionAccept, "", "", capsule.EffectModeNotApplicable, ""},
		{capsule.ActionDecide, capsule.DecisionAccept, capsule.VerdictErrored, capsule.EffectDispatched, capsule.EffectModeDispatchedUnconfirmed, capsule.RelationConfirms},
		{capsule.ActionDecide, capsule.DecisionAccept, capsule.VerdictExecuted, capsule.EffectFailed, capsule.EffectModeDispatchedUnconfirmed, capsule.RelationSupersedes}}},
}

// wire is the part of a capsule's JSON the mapping decides.
type wire struct {
	ActionType  capsule.ActionType `json:"action_type"`
	Disposition struct {
		Decision      capsule.Decision     `json:"decision"`
		Approver      capsule.Approver     `json:"approver"`
		HumanDisposed bool                 `json:"human_disposed"`
		VerdictClass  capsule.VerdictClass `json:"verdict_class"`
	} `json:"disposition"`
	Effect *struct {
		Status            capsule.EffectStatus      `json:"status"`
		EffectAttestation capsule.EffectAttestation `json:"effect_attestation"`
	} `json:"effect"`
	Assurance capsule.Assurance `json:"assurance"`
	Chain     *capsule.Chain    `json:"chain"`
	CapsuleID string            `json:"capsule_id"`
}

// TestBuildVerifies: every capsule Build makes passes Class 1 verification
// with ok, alone (only the store-level chain note) and as a ledger (no
// finding at all), and says what MAPPING.md says.
func TestBuildVerifies(t *testing.T) {
	for _, c := range buildCases {
		t.Run(c.name, func(t *testing.T) {
			built, err := capsule.Build(c.ev)
			if err != nil {
				t.Fatal(err)
			}
			if len(built) != len(c.want) {
				t.Fatalf("%d capsules, want %d", len(built), len(c.want))
			}
			raws := make([][]byte, len(built))
			for i, s := range built {
				raws[i] = s.JSON
				res := capsule.Verify(s.JSON)
				if !res.OK || res.IDRecomputed == nil || *res.IDRecomputed != s.ID {
					t.Fatalf("capsule %d: ok=%v id=%v want %v; findings %+v", i, res.OK, res.IDRecomputed, s.ID, res.Findings)
				}
				for _, f := range res.Findings {
					if f.Code != "chain_check_store_level" {
						t.Errorf("capsule %d: unexpected finding %+v", i, f)
					}
				}
				if id, err := capsule.ComputeID(s.JSON); err != nil || id != s.ID {
					t.Errorf("capsule %d: ComputeID = %v, %v; want %v", i, id, err, s.ID)
				}
				var w wire
				if err := json.Unmarshal(s.JSON, &w); err != nil {
					t.Fatal(err)
				}
				got := want{ActionType: w.ActionType, Decision: w.Disposition.Decision, VerdictClass: w.Disposition.VerdictClass,
					EffectMode: w.Assurance.EffectMode}
				if w.Effect != nil {
					got.EffectStatus = w.Effect.Status
					if w.Effect.EffectAttestation != capsule.AttestationRuntimeClaimed {
						t.Errorf("capsule %d: effect_attestation %q; the gate observes no effect, so runtime_claimed", i, w.Effect.EffectAttestation)
					}
				}
				if w.Chain != nil {
					got.Relation = w.Chain.Relation
					if w.Chain.ParentCapsuleID != built[i-1].ID.String() {
						t.Errorf("capsule %d: parent %s, want the previous capsule %s", i, w.Chain.ParentCapsuleID, built[i-1].ID)
					}
				}
				if d := cmp.Diff(c.want[i], got); d != "" {
					t.Errorf("capsule %d differs from the mapping (-want +got):\n%s", i, d)
				}
				if w.Disposition.Approver != capsule.ApproverPolicy || w.Disposition.HumanDisposed {
					t.Errorf("capsule %d: approver %q human_disposed %v; Clearance's dispositions are the policy's", i, w.Disposition.Approver, w.Disposition.HumanDisposed)
				}
				if w.Assurance.AttestationMode != capsule.SelfAttested || bytes.Contains(s.JSON, []byte("anchored")) {
					t.Errorf("capsule %d claims more than self-attestation", i)
				}
				if w.CapsuleID != s.ID.String() || s.Capsule.CapsuleID != s.ID.String() {
					t.Errorf("capsule %d: carried id %q, want %s", i, w.CapsuleID, s.ID)
				}
			}
			for i, res := range capsule.VerifyLedger(raws) {
				if !res.OK || len(res.Findings) != 0 {
					t.Errorf("ledger capsule %d: ok=%v findings %+v", i, res.OK, res.Findings)
				}
			}
		})
	}
}

// TestVerdictNeverClaimsAnEffect: whatever the decision and its grant, the
// verdict capsule has no effect record (no planned, dispatched or
// confirmed effect from an authorization verdict), and a grant that was
// not finalized adds no capsule.
func TestVerdictNeverClaimsAnEffect(t *testing.T) {
	for _, c := range buildCases {
		built, err := capsule.Build(c.ev)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(built[0].JSON, &m); err != nil {
			t.Fatal(err)
		}
		if _, ok := m["effect"]; ok {
			t.Errorf("%s: the verdict capsule has an effect", c.name)
		}
		finalized := c.ev.Grant != nil && c.ev.Grant.Finalization != nil
		if !finalized && len(built) != 1 {
			t.Errorf("%s: %d capsules without a finalization", c.name, len(built))
		}
	}
}

// TestBuildIsDeterministic: the same evidence gives the same bytes, and
// the verdict capsule does not change when the grant is later finalized
// (an envelope over it stays valid).
func TestBuildIsDeterministic(t *testing.T) {
	a, err := capsule.Build(buildCases[10].ev)
	if err != nil {
		t.Fatal(err)
	}
	b, err := capsule.Build(buildCases[10].ev)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if !bytes.Equal(a[i].JSON, b[i].JSON) {
			t.Fatalf("capsule %d differs between two builds", i)
		}
	}
	unfinalized, err := capsule.Build(granted(nil))
	if err != nil {
		t.Fatal(err)
	}
	if unfinalized[0].ID != a[0].ID {
		t.Error("finalization changed the verdict capsule")
	}
}

// TestBuiltCapsuleTamperEvident flips bytes of built capsules — every byte
// with mask 0x01, every third byte also with 0x20 (case) and 0x80 (UTF-8)
// — and every mutation fails verification. The capsules are a BLOCK verdict
// and the resolution capsule of a reconciled grant (chain, confirmed
// effect, extension with evidence).
func TestBuiltCapsuleTamperEvident(t *testing.T) {
	block, err := capsule.Build(buildCases[2].ev)
	if err != nil {
		t.Fatal(err)
	}
	reconciled, err := capsule.Build(buildCases[17].ev)
	if err != nil {
		t.Fatal(err)
	}
	targets := []capsule.Sealed{block[0], reconciled[2]}
	n := 0
	for _, s := range targets {
		for i := range s.JSON {
			for _, mask := range []byte{0x01, 0x20, 0x80} {
				if mask != 0x01 && i%3 != 0 {
					continue
				}
				m := bytes.Clone(s.JSON)
				m[i] ^= mask
				res := capsule.Verify(m)
				n++
				if res.OK {
					t.Fatalf("%s: byte %d ^ %#x (%q) still verifies", s.Capsule.ActionID, i, mask, m[max(0, i-20):min(len(m), i+20)])
				}
				if res.IDRecomputed != nil && *res.IDRecomputed == s.ID && !hasCode(res, "capsule_id_mismatch", "capsule_id_malformed") {
					// Same content, so the flip hit the carried id: that must be what fails.
					t.Fatalf("%s: byte %d ^ %#x kept the identity without an id finding: %+v", s.Capsule.ActionID, i, mask, res.Findings)
				}
			}
		}
	}
	t.Logf("%d mutations, all rejected", n)
}

func hasCode(r capsule.Result, codes ...string) bool {
	for _, f := range r.Findings {
		for _, c := range codes {
			if f.Code == c && f.Severity == capsule.SeverityError {
				return true
			}
		}
	}
	return false
}

func TestBuildRefusesInconsistentEvidence(t *testing.T) {
	mut := func(f func(*capsule.Evidence)) capsule.Evidence {
		e := granted(&capsule.Finalization{State: capsule.StateCommitted, FinalizedAt: t0.Add(time.Second), EffectConfirmed: true, Evidence: confirming()})
		f(&e)
		return e
	}
	cases := map[string]capsule.Evidence{
		"no operator":                mut(func(e *capsule.Evidence) { e.Operator = "" }),
		"no developer":               mut(func(e *capsule.Evidence) { e.Developer = "" }),
		"no decision id":             mut(func(e *capsule.Evidence) { e.DecisionID = "" }),
		"no dossier digest":          mut(func(e *capsule.Evidence) { e.DossierDigest = "" }),
		"bare hex dossier digest":    mut(func(e *capsule.Evidence) { e.DossierDigest = strings.Repeat("a", 64) }),
		"bad intent digest":          mut(func(e *capsule.Evidence) { e.IntentDigest = "sha256:XYZ" }),
		"unknown outcome":            mut(func(e *capsule.Evidence) { e.Outcome = "MAYBE" }),
		"unknown mode":               mut(func(e *capsule.Evidence) { e.Mode = "ENFORCE" }),
		"no decision time":           mut(func(e *capsule.Evidence) { e.DecidedAt = time.Time{} }),
		"grant for shadow":           mut(func(e *capsule.Evidence) { e.Mode = capsule.ModeShadow }),
		"grant for block":            mut(func(e *capsule.Evidence) { e.Outcome = capsule.OutcomeBlock }),
		"evaluation failure allows":  mut(func(e *capsule.Evidence) { e.EvaluationFailed = true }),
		"confirmed without digest":   mut(func(e *capsule.Evidence) { e.Grant.Finalization.Evidence.EffectDigest = "" }),
		"confirmed without evidence": mut(func(e *capsule.Evidence) { e.Grant.Finalization.Evidence = nil }),
		"failed confirms":            mut(func(e *capsule.Evidence) { e.Grant.Finalization.State = capsule.StateFailed }),
		"unknown final state":        mut(func(e *capsule.Evidence) { e.Grant.Finalization.State = "CLAIMED" }),
		"final code on committed":    mut(func(e *capsule.Evidence) { e.Grant.Finalization.FinalCode = capsule.FinalCodeLeaseExpired }),
		"no finalization time":       mut(func(e *capsule.Evidence) { e.Grant.Finalization.FinalizedAt = time.Time{} }),
		"bad payload digest":         mut(func(e *capsule.Evidence) { e.Grant.PayloadDigest = "md5:00" }),
		"reconciled committed grant": mut(func(e *capsule.Evidence) {
			e.Grant.Finalization.Reconciliation = &capsule.Reconciliation{Resolution: capsule.StateFailed, ReconciledAt: t0.Add(time.Hour)}
		}),
		"reconciled as indeterminate": mut(func(e *capsule.Evidence) {
			e.Grant.Finalization.State, e.Grant.Finalization.EffectConfirmed = capsule.StateIndeterminate, false
			e.Grant.Finalization.Reconciliation = &capsule.Reconciliation{Resolution: capsule.StateIndeterminate, ReconciledAt: t0.Add(time.Hour)}
		}),
	}
	for name, e := range cases {
		if _, err := capsule.Build(e); !errors.Is(err, capsule.ErrInvalidEvidence) {
			t.Errorf("%s: err = %v, want ErrInvalidEvidence", name, err)
		}
	}
}

func validCapsule() capsule.Capsule {
	return capsule.Capsule{
		ActionID: "a-1", ActionType: capsule.ActionDecide, Operator: "org", Developer: "agent@1", Timestamp: "2026-09-01T12:00:00Z",
		Disposition: capsule.Disposition{Decision: capsule.DecisionAccept, Approver: capsule.ApproverPolicy},
	}
}

func TestSealRefusesWhatWouldNotVerify(t *testing.T) {
	hex := strings.Repeat("1", 64)
	mut := func(f func(*capsule.Capsule)) capsule.Capsule {
		c := validCapsule()
		f(&c)
		return c
	}
	if _, err := capsule.Seal(validCapsule()); err != nil {
		t.Fatalf("valid capsule refused: %v", err)
	}
	cases := map[string]capsule.Capsule{
		"dishonest human_disposed": mut(func(c *capsule.Capsule) { c.Disposition.HumanDisposed = true }),
		"unknown approver":         mut(func(c *capsule.Capsule) { c.Disposition.Approver = "vendor_bot" }),
		"no decision":              mut(func(c *capsule.Capsule) { c.Disposition.Decision = "" }),
		"format 2":                 mut(func(c *capsule.Capsule) { c.FormatVersion = "2" }),
		"jcs-n":                    mut(func(c *capsule.Capsule) { c.CanonicalizationID = "jcs-n" }),
		"other spec":               mut(func(c *capsule.Capsule) { c.SpecVersion = "draft-mih-scitt-agent-action-capsule-05" }),
		"local timestamp":          mut(func(c *capsule.Capsule) { c.Timestamp = "2026-09-01T12:00:00+02:00" }),
		"bad action type":          mut(func(c *capsule.Capsule) { c.ActionType = "act" }),
		"anchored claim": mut(func(c *capsule.Capsule) {
			c.Assurance = capsule.Assurance{AttestationMode: capsule.Anchored, EffectMode: capsule.EffectModeNotApplicable, LedgerMode: capsule.LedgerStandalone}
		}),
		"confirmed claim without effect": mut(func(c *capsule.Capsule) {
			c.Assurance = capsule.Assurance{AttestationMode: capsule.SelfAttested, EffectMode: capsule.EffectModeConfirmed, LedgerMode: capsule.LedgerStandalone}
		}),
		"confirmed without response": mut(func(c *capsule.Capsule) {
			c.Effect = &capsule.Effect{Status: capsule.EffectConfirmed, EffectAttestation: capsule.AttestationRuntimeClaimed}
		}),
		"planned with attestation": mut(func(c *capsule.Capsule) {
			c.Effect = &capsule.Effect{Status: capsule.EffectPlanned, EffectAttestation: capsule.AttestationGateExecuted}
		}),
		"planned with request digest": mut(func(c *capsule.Capsule) {
			c.Effect = &capsule.Effect{Status: capsule.EffectPlanned, RequestDigest: hex}
		}),
		"dispatched without attestation": mut(func(c *capsule.Capsule) { c.Effect = &capsule.Effect{Status: capsule.EffectDispatched} }),
		"dispatched with response": mut(func(c *capsule.Capsule) {
			c.Effect = &capsule.Effect{Status: capsule.EffectDispatched, ResponseDigest: hex, EffectAttestation: capsule.AttestationRuntimeClaimed}
		}),
		"blocked yet dispatched": mut(func(c *capsule.Capsule) {
			c.Disposition.VerdictClass = capsule.VerdictBlocked
			c.Effect = &capsule.Effect{Status: capsule.EffectDispatched, EffectAttestation: capsule.AttestationRuntimeClaimed}
		}),
		"unknown status":   mut(func(c *capsule.Capsule) { c.Effect = &capsule.Effect{Status: "done"} }),
		"uppercase digest": mut(func(c *capsule.Capsule) { c.Disposition.ReasonDigest = strings.ToUpper(strings.Repeat("a", 64)) }),
		"bad chain parent": mut(func(c *capsule.Capsule) {
			c.Chain = &capsule.Chain{ParentCapsuleID: "x", Relation: capsule.RelationConfirms}
		}),
		"invalid UTF-8":     mut(func(c *capsule.Capsule) { c.Operator = "org\xff" }),
		"constraint result": mut(func(c *capsule.Capsule) { c.Constraints = []capsule.Constraint{{ID: "x", Result: "ok"}} }),
		"no developer":      mut(func(c *capsule.Capsule) { c.Developer = "" }),
		"chained, standalone": mut(func(c *capsule.Capsule) {
			c.Chain = &capsule.Chain{ParentCapsuleID: hex, Relation: capsule.RelationConfirms}
			c.Assurance = capsule.Assurance{AttestationMode: capsule.SelfAttested, EffectMode: capsule.EffectModeNotApplicable, LedgerMode: capsule.LedgerStandalone}
		}),
	}
	for name, c := range cases {
		if _, err := capsule.Seal(c); !errors.Is(err, capsule.ErrInvalidCapsule) {
			t.Errorf("%s: err = %v, want ErrInvalidCapsule", name, err)
		}
	}
}

// TestGolden pins the bytes of a finalized decision's capsule chain
// (testdata/golden/committed-confirmed.jsonl, one capsule a line); run with
// -update to rewrite it after an intended change of the mapping.
func TestGolden(t *testing.T) {
	built, err := capsule.Build(buildCases[10].ev)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	for _, s := range built {
		got.Write(s.JSON)
		got.WriteByte('\n')
	}
	path := filepath.Join("testdata", "golden", "committed-confirmed.jsonl")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wantBytes, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Contains(wantBytes, []byte(`"`+capsule.ExtensionKey+`":{`)) {
		t.Errorf("the extension is not under %q", capsule.ExtensionKey)
	}
	if d := cmp.Diff(string(wantBytes), got.String()); d != "" {
		t.Errorf("golden capsules differ (-want +got):\n%s", d)
	}
}

// A managed escalation: the ESCALATE verdict is hitl_dispatched; once the
// escalation ended, a capsule superseding it says how and who disposed of
// it (a human for an approval or a denial with presence, the policy for an
// expiry, a cancellation or a failure); an ALLOW evaluated with a verified
// approval was disposed by a human.
func TestBuildManagedEscalation(t *testing.T) {
	escalated := func(state string) capsule.Evidence {
		e := decision(capsule.OutcomeEscalate, capsule.ModeEnforcement)
		e.Escalation = &capsule.Escalation{EscalationID: "0190f4b2-0000-7000-8000-0000000000e1", State: state}
		if state != "PENDING_APPROVAL" {
			e.Escalation.ConcludedAt = t0.Add(time.Minute)
			e.Escalation.ResolvedDecisionID = "0190f4b2-0000-7000-8000-0000000000d9"
		}
		return e
	}
	approved := decision(capsule.OutcomeAllow, capsule.ModeEnforcement)
	approved.Approval = &capsule.Approval{Issuer: "https://approvals.example", RequestID: "req_1", ReceiptID: "rct_1"}
	type step struct {
		verdict  capsule.VerdictClass
		decision capsule.Decision
		approver capsule.Approver
		human    bool
	}
	for _, c := range []struct {
		name  string
		ev    capsule.Evidence
		steps []step
	}{
		{"pending", escalated("PENDING_APPROVAL"), []step{{capsule.VerdictHITLDispatched, capsule.DecisionNeedsInput, capsule.ApproverPolicy, false}}},
		{"approved", escalated("GRANT_READY"), []step{{capsule.VerdictHITLDispatched, capsule.DecisionNeedsInput, capsule.ApproverPolicy, false},
			{capsule.VerdictResolved, capsule.DecisionAccept, capsule.ApproverHuman, true}}},
		{"denied", escalated("DENIED"), []step{{capsule.VerdictHITLDispatched, capsule.DecisionNeedsInput, capsule.ApproverPolicy, false},
			{capsule.VerdictDenied, capsule.DecisionReject, capsule.ApproverHuman, true}}},
		{"expired", escalated("EXPIRED"), []step{{capsule.VerdictHITLDispatched, capsule.DecisionNeedsInput, capsule.ApproverPolicy, false},
			{capsule.VerdictExpired, capsule.DecisionReject, capsule.ApproverPolicy, false}}},
		{"cancelled", escalated("CANCELLED"), []step{{capsule.VerdictHITLDispatched, capsule.DecisionNeedsInput, capsule.ApproverPolicy, false},
			{capsule.VerdictResolved, capsule.DecisionReject, capsule.ApproverPolicy, false}}},
		{"failed", escalated("FAILED"), []step{{capsule.VerdictHITLDispatched, capsule.DecisionNeedsInput, capsule.ApproverPolicy, false},
			{capsule.VerdictDenied, capsule.DecisionReject, capsule.ApproverPolicy, false}}},
		{"allowed on an approval", approved, []step{{"", capsule.DecisionAccept, capsule.ApproverHuman, true}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			built, err := capsule.Build(c.ev)
			if err != nil {
				t.Fatal(err)
			}
			if len(built) != len(c.steps) {
				t.Fatalf("%d capsules, want %d", len(built), len(c.steps))
			}
			raws := make([][]byte, len(built))
			for i, s := range built {
				raws[i] = s.JSON
				var w wire
				if err := json.Unmarshal(s.JSON, &w); err != nil {
					t.Fatal(err)
				}
				got := step{w.Disposition.VerdictClass, w.Disposition.Decision, w.Disposition.Approver, w.Disposition.HumanDisposed}
				if got != c.steps[i] {
					t.Errorf("capsule %d: %+v, want %+v", i, got, c.steps[i])
				}
				if i > 0 && (w.Chain == nil || w.Chain.Relation != capsule.RelationSupersedes || w.Chain.ParentCapsuleID != built[0].ID.String()) {
					t.Errorf("capsule %d does not supersede the verdict: %+v", i, w.Chain)
				}
				if w.Effect != nil || w.Assurance.EffectMode != capsule.EffectModeNotApplicable {
					t.Errorf("capsule %d claims an effect", i)
				}
			}
			for i, res := range capsule.VerifyLedger(raws) {
				if !res.OK || len(res.Findings) != 0 {
					t.Errorf("ledger capsule %d: ok=%v findings %+v", i, res.OK, res.Findings)
				}
			}
		})
	}
}
