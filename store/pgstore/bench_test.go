package pgstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/ledger/ledgertest"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pgstore"
)

// The benchmarks mirror store/pebblestore's (same names, same work per op)
// so the two backends can be compared in one run. Each opens a store on a
// fresh schema with the database clock (Options.Now nil), as in production.

// benchConns is the pool size of the benchmarks' stores: enough for the
// 16-goroutine-per-CPU parallel runs not to queue on the pool.
const benchConns = 16

// BenchmarkUpdateSync records one dossier and its ledger entry per Update,
// sequentially: one durable COMMIT per Update.
func BenchmarkUpdateSync(b *testing.B) {
	s, _ := open(b, pgstore.Options{MaxConns: benchConns})
	ctx := context.Background()
	n := 0
	for b.Loop() {
		if err := decide(ctx, s, "org_a", n); err != nil {
			b.Fatal(err)
		}
		n++
	}
}

// BenchmarkUpdateSyncParallel runs the same Update from many goroutines,
// each on its own org or all on one org (serialized by the org's row lock).
func BenchmarkUpdateSyncParallel(b *testing.B) {
	for _, orgs := range []int{16, 1} {
		b.Run(fmt.Sprintf("orgs=%d", orgs), func(b *testing.B) {
			s, _ := open(b, pgstore.Options{MaxConns: benchConns})
			ctx := context.Background()
			var workers, seq atomic.Int64
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				org := fmt.Sprintf("org_%d", workers.Add(1)%int64(orgs))
				for pb.Next() {
					if err := decide(ctx, s, org, int(seq.Add(1))); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// lifecycle issues, claims and finalizes grant n of orgID: three durable
// Updates, as the engine runs them (enforce-and-bind, claim-token,
// finalize-token). Claim and Finalize read the database clock.
func lifecycle(ctx context.Context, s store.Backend, orgID string, n int64, issued time.Time) error {
	id := fmt.Sprintf("grt_%d", n)
	g := claim.Grant{
		OrgID: orgID, GrantID: id, DecisionID: "dec_" + id, IntentHash: "sha256:intent_" + id,
		Nonce: "nonce_" + id, Scope: "scope_" + id, Intent: []byte(`{"intent_id":"` + id + `"}`),
		IssuedAt: issued, ExpiresAt: issued.Add(24 * time.Hour),
	}
	err := s.Update(ctx, orgID, func(tx store.Tx) error { return claim.Issue(ctx, tx, g) })
	if err != nil {
		return err
	}
	err = s.Update(ctx, orgID, func(tx store.Tx) error {
		_, err := claim.Claim(ctx, tx, claim.ClaimRequest{GrantID: id, IntentHash: g.IntentHash, ClaimTokenDigest: "sha256:tok_" + id, Lease: time.Hour})
		return err
	})
	if err != nil {
		return err
	}
	return s.Update(ctx, orgID, func(tx store.Tx) error {
		f, err := claim.Finalize(ctx, tx, claim.FinalizeRequest{GrantID: id, ClaimTokenDigest: "sha256:tok_" + id, Outcome: claim.OutcomeCommitted})
		if err == nil && f.Refusal != nil {
			err = f.Refusal
		}
		return err
	})
}

// BenchmarkClaimFinalize runs issue + claim + finalize (three durable
// Updates) per op: sequentially, and from 16 goroutines per CPU over
// distinct grants of one org or of 16 orgs.
func BenchmarkClaimFinalize(b *testing.B) {
	b.Run("sequential", func(b *testing.B) {
		s, _ := open(b, pgstore.Options{MaxConns: benchConns})
		ctx := context.Background()
		issued := dbNow(b)
		var n int64
		for b.Loop() {
			n++
			if err := lifecycle(ctx, s, "org_a", n, issued); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, orgs := range []int{1, 16} {
		b.Run(fmt.Sprintf("parallel/orgs=%d", orgs), func(b *testing.B) {
			s, _ := open(b, pgstore.Options{MaxConns: benchConns})
			ctx := context.Background()
			issued := dbNow(b)
			var workers, seq atomic.Int64
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				org := fmt.Sprintf("org_%d", workers.Add(1)%int64(orgs))
				for pb.Next() {
					if err := lifecycle(ctx, s, org, seq.Add(1), issued); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkLedgerTree runs ledgertest's benchmarks (Seal of 1,000 new
// entries, an inclusion proof at size 100,000).
func BenchmarkLedgerTree(b *testing.B) {
	ledgertest.Benchmark(b, func(b *testing.B) store.Backend {
		s, _ := open(b, pgstore.Options{MaxConns: benchConns})
		return s
	})
}
