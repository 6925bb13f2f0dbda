package clearance_test

import (
	"context"
	"testing"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// evidenceEngine is an engine with grant and ledger keys over a ledger of
// n decisions; it returns the dossier id of the last one.
func evidenceEngine(b *testing.B, n int) (*clearance.Engine, string, string) {
	b.Helper()
	st, err := pebblestore.Open(b.TempDir(), pebblestore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	gk, _ := grant.KeyFromSeed(seed(1))
	lk, err := ledger.NewKey("clearance-ledger", seed(9))
	if err != nil {
		b.Fatal(err)
	}
	e, err := clearance.Open(st, clearance.Options{GrantKeys: grant.NewKeyRing(gk), LedgerKey: lk})
	if err != nil {
		b.Fatal(err)
	}
	o := newOrg(b, e)
	var last clearance.Decision
	for range n {
		if last, err = e.Evaluate(context.Background(), request(b, o, `{"amount":5}`)); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := e.Audit.SealLedger(context.Background(), o.Org.ID); err != nil {
		b.Fatal(err)
	}
	return e, o.Org.ID, last.DossierID
}

// BenchmarkProofPacket measures a proof packet of a decision in a ledger of
// 1,000 entries: dossier, anchor in the (already sealed) tree, proof bundle
// signature and the packet's own verification.
func BenchmarkProofPacket(b *testing.B) {
	e, org, dossier := evidenceEngine(b, 1000)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Evidence.ProofPacket(ctx, org, dossier); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCapsules measures a dossier's capsule projection with its Class 1
// checks, and its producer envelope.
func BenchmarkCapsules(b *testing.B) {
	e, org, dossier := evidenceEngine(b, 10)
	ctx := context.Background()
	b.ReportAllocs()
	b.Run("capsule", func(b *testing.B) {
		for b.Loop() {
			if _, err := e.Evidence.Capsules(ctx, org, dossier); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("envelope", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := e.Evidence.ProducerEnvelopes(ctx, org, dossier); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestEmbeddedCallerCapsule: a decision made in process without a principal
// still projects into a capsule that passes the Class 1 checks, with the
// org as its developer.
func TestEmbeddedCallerCapsule(t *testing.T) {
	st, err := pebblestore.Open(t.TempDir(), pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := clearance.Open(st, clearance.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := newOrg(t, e)
	d, err := e.Evaluate(context.Background(), request(t, o, `{"amount":5}`))
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.Evidence.Capsules(context.Background(), o.Org.ID, d.DossierID)
	if err != nil || !c.LatestVerified() || c.Latest().Capsule.Developer != o.Org.ID {
		t.Fatalf("capsule of an embedded decision: %v, %+v", err, c.Class1)
	}
	if _, _, err := e.Evidence.ProducerEnvelopes(context.Background(), o.Org.ID, d.DossierID); err == nil {
		t.Fatal("an engine without keys signed a producer envelope")
	}
}
