package capsule_test

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/clearancehq/clearance/capsule"
)

// v4Capsule is the draft's format-4 vector pos-v4-jcs-chain-committed.
const v4Capsule = `{
  "action_id": "v4-chain", "action_type": "decide",
  "assurance": {"attestation_mode": "self_attested", "effect_mode": "not_applicable", "ledger_mode": "chained"},
  "canonicalization_id": "jcs",
  "capsule_id": "862024869f00481bb4f59d9528a45c2d4885f64c5222a9324a38ac2c2cd119f2",
  "chain": {"parent_capsule_id": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "relation": "confirms"},
  "constraints": [], "developer": "agent@v1",
  "disposition": {"approver": "policy", "decision": "accept", "human_disposed": false, "verdict_class": "executed"},
  "format_version": "4", "operator": "ACME-CO",
  "spec_version": "draft-mih-scitt-agent-action-capsule-04", "timestamp": "2026-08-24T00:00:00Z"
}`

func ExampleComputeID() {
	id, err := capsule.ComputeID([]byte(v4Capsule))
	fmt.Println(id, err)

	// The chain block participates in a format-4 identity.
	tampered := strings.Replace(v4Capsule, `"confirms"`, `"supersedes"`, 1)
	id, _ = capsule.ComputeID([]byte(tampered))
	fmt.Println(id)
	// Output:
	// 862024869f00481bb4f59d9528a45c2d4885f64c5222a9324a38ac2c2cd119f2 <nil>
	// 11388ff50848e0811b01a7732b9f0b4da12d441ab51f451556bbe30443f2168a
}

func ExampleVerify() {
	res := capsule.Verify([]byte(v4Capsule))
	fmt.Println(res.OK, res.IDRecomputed, res.Derived.EffectMode, res.Derived.LedgerMode)
	for _, f := range res.Findings {
		fmt.Println(f.Check, f.Severity, f.Code)
	}

	tampered := strings.Replace(v4Capsule, `"ACME-CO"`, `"OTHER-CO"`, 1)
	res = capsule.Verify([]byte(tampered))
	fmt.Println(res.OK, res.Errors()[0].Code)
	// Output:
	// true 862024869f00481bb4f59d9528a45c2d4885f64c5222a9324a38ac2c2cd119f2 not_applicable chained
	// 6 info chain_check_store_level
	// false capsule_id_mismatch
}

func ExampleVerifyLedger() {
	parent, _ := capsule.Seal(capsule.Capsule{
		ActionID: "a-1", ActionType: capsule.ActionDecide, Operator: "org", Developer: "agent@1",
		Timestamp:   "2026-09-01T12:00:00Z",
		Disposition: capsule.Disposition{Decision: capsule.DecisionNeedsInput, Approver: capsule.ApproverPolicy, VerdictClass: capsule.VerdictEscalated},
	})
	child, _ := capsule.Seal(capsule.Capsule{
		ActionID: "a-2", ActionType: capsule.ActionDecide, Operator: "org", Developer: "agent@1",
		Timestamp:   "2026-09-01T12:05:00Z",
		Disposition: capsule.Disposition{Decision: capsule.DecisionReject, Approver: capsule.ApproverHuman, HumanDisposed: true, VerdictClass: capsule.VerdictResolved},
		Chain:       &capsule.Chain{ParentCapsuleID: parent.ID.String(), Relation: capsule.RelationSupersedes},
	})
	for _, r := range capsule.VerifyLedger([][]byte{parent.JSON, child.JSON}) {
		fmt.Println(r.OK, len(r.Findings), r.Derived.LedgerMode)
	}
	// Without the parent in the store, the chain is broken.
	r := capsule.VerifyLedger([][]byte{child.JSON})[0]
	fmt.Println(r.OK, r.Findings[0].Check, r.Findings[0].Code)
	// Output:
	// true 0 standalone
	// true 0 chained
	// false 6 chain_parent_missing
}

func ExampleSeal() {
	s, err := capsule.Seal(capsule.Capsule{
		ActionID: "po-7", ActionType: capsule.ActionDecide, Operator: "ACME-CO", Developer: "agent@v1",
		Timestamp:   "2026-09-01T12:00:00Z",
		Disposition: capsule.Disposition{Decision: capsule.DecisionReject, Approver: capsule.ApproverPolicy, VerdictClass: capsule.VerdictBlocked},
	})
	fmt.Println(err, s.ID)
	fmt.Println(string(s.JSON))

	// A producer cannot claim a human disposed what a policy did.
	_, err = capsule.Seal(capsule.Capsule{
		ActionID: "po-8", ActionType: capsule.ActionDecide, Operator: "ACME-CO", Developer: "agent@v1",
		Timestamp:   "2026-09-01T12:00:00Z",
		Disposition: capsule.Disposition{Decision: capsule.DecisionAccept, Approver: capsule.ApproverPolicy, HumanDisposed: true},
	})
	fmt.Println(errors.Is(err, capsule.ErrInvalidCapsule))
	// Output:
	// <nil> 76bc321b15650484342f99a8fa4f0c9d6f0149f421a7e6bdfb3571394c1aa4a6
	// {"action_id":"po-7","action_type":"decide","assurance":{"attestation_mode":"self_attested","effect_mode":"not_applicable","ledger_mode":"standalone"},"canonicalization_id":"jcs","capsule_id":"76bc321b15650484342f99a8fa4f0c9d6f0149f421a7e6bdfb3571394c1aa4a6","developer":"agent@v1","disposition":{"approver":"policy","decision":"reject","human_disposed":false,"verdict_class":"blocked"},"format_version":"4","operator":"ACME-CO","spec_version":"draft-mih-scitt-agent-action-capsule-04","timestamp":"2026-09-01T12:00:00Z"}
	// true
}

func ExampleBuild() {
	at := time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)
	hex := func(c string) string { return "sha256:" + strings.Repeat(c, 64) }
	built, err := capsule.Build(capsule.Evidence{
		Operator: "org-1", Developer: "agent-7",
		DecisionID: "dec-1", DossierID: "dos-1", DossierDigest: hex("a"),
		Outcome: capsule.OutcomeAllow, Mode: capsule.ModeEnforcement, ReasonCodes: []string{"PROTOCOL_OUTCOME_ALLOW"},
		Policy:       capsule.PolicyRef{BundleID: "starter", PolicyVersion: "1", BundleDigest: hex("b")},
		IntentDigest: hex("c"), DecidedAt: at,
		Grant: &capsule.Grant{
			GrantID: "grant-1", IssuedAt: at, ExpiresAt: at.Add(2 * time.Minute), PayloadDigest: hex("d"),
			Finalization: &capsule.Finalization{
				State: capsule.StateCommitted, FinalizedAt: at.Add(3 * time.Second), EffectConfirmed: true,
				Evidence: &capsule.EffectEvidence{Kind: "CONFIRMED", Status: "CONFIRMED", EffectDigest: hex("e"), Source: "effect_evidence"},
			},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ledger := make([][]byte, len(built))
	for i, s := range built {
		c := s.Capsule
		effect := "no effect"
		if c.Effect != nil {
			effect = string(c.Effect.Status) + "/" + string(c.Effect.EffectAttestation)
		}
		fmt.Printf("%s %q %s %s\n", c.ActionID, c.Disposition.VerdictClass, effect, c.Assurance.EffectMode)
		ledger[i] = s.JSON
	}
	for _, r := range capsule.VerifyLedger(ledger) {
		fmt.Println(r.OK, len(r.Findings))
	}
	// Output:
	// dec-1 "" no effect not_applicable
	// dec-1/finalization "executed" confirmed/runtime_claimed confirmed
	// true 0
	// true 0
}

func ExampleSign() {
	seed := make([]byte, ed25519.SeedSize) // the draft's public TEST seed 0x00..0x1f
	for i := range seed {
		seed[i] = byte(i)
	}
	key := ed25519.NewKeyFromSeed(seed)
	id, _ := capsule.ParseID("862024869f00481bb4f59d9528a45c2d4885f64c5222a9324a38ac2c2cd119f2")

	env, err := capsule.Sign(id, key)
	fmt.Println(len(env), err)
	pub, err := capsule.VerifyEnvelope(env, id)
	fmt.Printf("%x %v\n", pub, err)
	// Output:
	// 181 <nil>
	// 03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8 <nil>
}

func ExampleVerifyEnvelope() {
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	id, _ := capsule.ParseID("862024869f00481bb4f59d9528a45c2d4885f64c5222a9324a38ac2c2cd119f2")
	env, _ := capsule.Sign(id, key)

	other := id
	other[31] ^= 1
	_, err := capsule.VerifyEnvelope(env, other)
	var ee *capsule.EnvelopeError
	fmt.Println(errors.As(err, &ee), ee.Code(), errors.Is(err, capsule.ErrEnvelopePayload))

	env[len(env)-1] ^= 1
	_, err = capsule.VerifyEnvelope(env, id)
	fmt.Println(errors.Is(err, capsule.ErrEnvelopeSignature))
	// Output:
	// true envelope_payload_mismatch true
	// true
}
