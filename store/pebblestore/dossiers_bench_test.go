package pebblestore

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
)

const (
	benchDossiers    = 10_000
	benchBodyBytes   = 1500 // about a real decision's dossier
	benchDossiersPer = 250  // per Update while setting up
)

// BenchmarkDossiers iterates 10,000 dossiers of ~1.5 KB bodies in one org,
// as a replay of a window does, from the memtable and from sstables after
// a flush (where older windows live).
func BenchmarkDossiers(b *testing.B) {
	for _, flushed := range []bool{false, true} {
		b.Run(fmt.Sprintf("flushed=%t", flushed), func(b *testing.B) {
			s, _ := openDisk(b)
			ctx := context.Background()
			const org = "org_bench"
			from := recordBenchDossiers(b, s, org)
			if flushed {
				if err := s.db.Flush(); err != nil {
					b.Fatal(err)
				}
			}
			to := from.Add(time.Hour)
			b.ReportAllocs()
			for b.Loop() {
				n, size := 0, 0
				err := s.Dossiers(ctx, org, from, to, func(r dossier.Stored) bool {
					n++
					size += len(r.Body)
					return true
				})
				if err != nil {
					b.Fatal(err)
				}
				if n != benchDossiers || size < benchDossiers*benchBodyBytes {
					b.Fatalf("iterated %d dossiers, %d body bytes", n, size)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchDossiers), "ns/dossier")
		})
	}
}

// recordBenchDossiers records benchDossiers dossiers in org, a millisecond
// apart, each with its ledger entry, and returns the first one's time.
func recordBenchDossiers(b *testing.B, s *Store, org string) time.Time {
	b.Helper()
	ctx := context.Background()
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	filler := bytes.Repeat([]byte("x"), benchBodyBytes)
	for first := 0; first < benchDossiers; first += benchDossiersPer {
		err := s.Update(ctx, org, func(tx store.Tx) error {
			for n := first; n < first+benchDossiersPer; n++ {
				id := fmt.Sprintf("dos_%05d", n)
				body := fmt.Appendf(nil, `{"dossier_id":%q,"filler":%q}`, id, filler)
				createdAt := start.Add(time.Duration(n) * time.Millisecond)
				err := tx.PutDossier(ctx, dossier.Stored{
					OrgID: org, DossierID: id, DecisionID: "dec_" + id[4:], EvaluationID: "eval_" + id[4:],
					CreatedAt: createdAt, Outcome: "ALLOW", Mode: "ENFORCE",
					WorkflowKey: "payments.refund", DecisionType: "refund", Body: body,
				})
				if err != nil {
					return err
				}
				if _, err := ledger.Append(ctx, tx, org, ledger.Record{
					Kind: ledger.KindDecision, SubjectID: id, PayloadDigest: canon.Digest(body),
				}, createdAt); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return start
}
