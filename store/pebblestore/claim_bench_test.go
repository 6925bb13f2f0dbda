package pebblestore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/store"
)

// lifecycle issues, claims and finalizes grant n of orgID: three durable
// Updates, as the engine runs them (enforce-and-bind, claim-token,
// finalize-token).
func lifecycle(ctx context.Context, s store.Backend, orgID string, n int64) error {
	id := fmt.Sprintf("grt_%d", n)
	g := claim.Grant{
		OrgID: orgID, GrantID: id, DecisionID: "dec_" + id, IntentHash: "sha256:intent_" + id,
		Nonce: "nonce_" + id, Scope: "scope_" + id, Intent: []byte(`{"intent_id":"` + id + `"}`),
		IssuedAt: at, ExpiresAt: at.Add(time.Hour),
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

func openDiskAt(b *testing.B) (*Store, *countingFS) {
	b.Helper()
	fs := &countingFS{FS: vfs.Default}
	s, err := Open(b.TempDir(), Options{FS: fs, Logger: quiet{}, Now: func() time.Time { return at }})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s, fs
}

// BenchmarkClaimFinalize runs issue + claim + finalize (three synced
// Updates) per op on real disk: sequentially, and from 16 goroutines over
// distinct grants of one org or of 16 orgs (group commit shares fsyncs).
func BenchmarkClaimFinalize(b *testing.B) {
	b.Run("sequential", func(b *testing.B) {
		s, fs := openDiskAt(b)
		ctx := context.Background()
		before := fs.syncs.Load()
		var n int64
		for b.Loop() {
			n++
			if err := lifecycle(ctx, s, "org_a", n); err != nil {
				b.Fatal(err)
			}
		}
		reportSyncs(b, fs, before)
	})
	for _, orgs := range []int{1, 16} {
		b.Run(fmt.Sprintf("parallel/orgs=%d", orgs), func(b *testing.B) {
			s, fs := openDiskAt(b)
			ctx := context.Background()
			var workers, seq atomic.Int64
			before := fs.syncs.Load()
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				org := fmt.Sprintf("org_%d", workers.Add(1)%int64(orgs))
				for pb.Next() {
					if err := lifecycle(ctx, s, org, seq.Add(1)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			reportSyncs(b, fs, before)
		})
	}
}
