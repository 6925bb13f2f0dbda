package ledger_test

import (
	"context"
	"testing"

	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/ledger"
)

// BenchmarkSeal seals 1,000 new entries per op on an in-memory ledger: the
// hash work of Seal (chain check, leaf hashes, tree hashes, one signature)
// without storage. The store backends run the same through ledgertest.
func BenchmarkSeal(b *testing.B) {
	k := testKey(b, "k", 1)
	m := build(b, 1000)
	seal(b, m, k)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		grow(b, m, 1000)
		b.StartTimer()
		if c := seal(b, m, k); c.Size != uint64(len(m.entries)) {
			b.Fatalf("sealed %d of %d", c.Size, len(m.entries))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/entry")
}

// BenchmarkInclusionProof proves entries of a tree of 100,000 in memory.
func BenchmarkInclusionProof(b *testing.B) {
	ctx := context.Background()
	k := testKey(b, "k", 1)
	m := build(b, 100_000)
	c := seal(b, m, k)
	b.ReportAllocs()
	seq := uint64(1)
	for b.Loop() {
		if _, err := ledger.InclusionProof(ctx, m, "org", seq, c.Size); err != nil {
			b.Fatal(err)
		}
		seq = seq*7919%c.Size + 1
	}
}

// BenchmarkComputeHash compares the entry hash of Append (the fast RFC 8785
// path) with the general encoder it replaces (canon: encoding/json, then
// canonicalization), which it matches byte for byte (FuzzCanonicalEntry).
func BenchmarkComputeHash(b *testing.B) {
	e := build(b, 2).entries[1]
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := e.ComputeHash(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("canon", func(b *testing.B) {
		type hashable struct {
			Seq           uint64 `json:"seq"`
			OrgID         string `json:"org_id"`
			Kind          string `json:"kind"`
			SubjectID     string `json:"subject_id"`
			PayloadDigest string `json:"payload_digest"`
			RecordedAt    string `json:"recorded_at"`
			PrevEntryHash string `json:"prev_entry_hash"`
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := canon.DigestValue(hashable{e.Seq, e.OrgID, e.Kind, e.SubjectID, e.PayloadDigest, e.RecordedAt, e.PrevEntryHash}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
