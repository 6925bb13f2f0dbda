package capsule_test

import (
	"testing"

	"github.com/clearancehq/clearance/capsule"
)

// committedEvidence is a decision whose grant was finalized COMMITTED with
// confirming evidence: two capsules (verdict and outcome).
func committedEvidence() capsule.Evidence { return buildCases[10].ev }

// BenchmarkBuild: project one finalized decision into its two capsules,
// IDs included.
func BenchmarkBuild(b *testing.B) {
	e := committedEvidence()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := capsule.Build(e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildVerdict: one decision without a grant (one capsule).
func BenchmarkBuildVerdict(b *testing.B) {
	e := decision(capsule.OutcomeBlock, capsule.ModeEnforcement)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := capsule.Build(e); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkComputeID(b *testing.B) {
	built, _ := capsule.Build(committedEvidence())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := capsule.ComputeID(built[1].JSON); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerify: Class 1 verification of the outcome capsule.
func BenchmarkVerify(b *testing.B) {
	built, _ := capsule.Build(committedEvidence())
	b.ReportAllocs()
	for b.Loop() {
		if !capsule.Verify(built[1].JSON).OK {
			b.Fatal("not ok")
		}
	}
}

// BenchmarkVerifyLedger: store-level verification of both capsules.
func BenchmarkVerifyLedger(b *testing.B) {
	built, _ := capsule.Build(committedEvidence())
	ledger := [][]byte{built[0].JSON, built[1].JSON}
	b.ReportAllocs()
	for b.Loop() {
		for _, r := range capsule.VerifyLedger(ledger) {
			if !r.OK {
				b.Fatal("not ok")
			}
		}
	}
}

func BenchmarkSign(b *testing.B) {
	key, id := testKey(), vectorID()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := capsule.Sign(id, key); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyEnvelope(b *testing.B) {
	id := vectorID()
	env, _ := capsule.Sign(id, testKey())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := capsule.VerifyEnvelope(env, id); err != nil {
			b.Fatal(err)
		}
	}
}
