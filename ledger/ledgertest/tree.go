package ledgertest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
)

// treeTests are the cases of the Merkle tree, checkpoints and proofs.
var treeTests = []struct {
	name string
	fn   func(t *testing.T, h Harness)
}{
	{"SealEmpty", testSealEmpty},
	{"SealOne", testSealOne},
	{"SealMany", testSealMany},
	{"SealIncrementalEqualsOnce", testSealIncremental},
	{"SealNothingNew", testSealNothingNew},
	{"SealMaxEntries", testSealMaxEntries},
	{"SealRolledBack", testSealRolledBack},
	{"UnsealedLedger", testUnsealed},
	{"CheckpointsBySize", testCheckpointsBySize},
	{"TreeWritesRefused", testTreeWritesRefused},
	{"InclusionProofs", testInclusionProofs},
	{"ConsistencyProofs", testConsistencyProofs},
	{"Anchors", testAnchors},
	{"ConcurrentSealsAndAppends", testConcurrentSeals},
	{"TamperChangedAfterSeal", testTamperChangedAfterSeal},
	{"TamperRewrittenAfterSeal", testTamperRewritten},
	{"TamperTruncatedHeadRewritten", testTamperTruncatedHead},
	{"TamperSwappedAfterSeal", testTamperSwappedAfterSeal},
	{"TamperReorderedRechained", testTamperReordered},
	{"TamperCheckpointOtherKey", testTamperCheckpointOtherKey},
	{"TamperCheckpointOtherOrg", testTamperCheckpointOtherOrg},
	{"AuditorCheckpointPinsHistory", testAuditorCheckpoint},
}

// keyName is the note key name of the suite's ledger keys.
const keyName = "ledgertest"

// key returns a fixed ledger key: seed = 32 bytes of b.
func key(t testing.TB, b byte) *ledger.Key {
	t.Helper()
	k, err := ledger.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{b}, 32)), keyName)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func originOf(orgID string) string { return ledger.Origin("ledgertest.example", orgID) }

// sealIn seals orgID's ledger in its own Update.
func sealIn(t testing.TB, b store.Backend, orgID string, k note.Signer, opts ledger.SealOptions) ledger.Checkpoint {
	t.Helper()
	var c ledger.Checkpoint
	err := b.Update(context.Background(), orgID, func(tx store.Tx) error {
		var err error
		c, err = ledger.Seal(context.Background(), tx, k, originOf(orgID), opts)
		return err
	})
	if err != nil {
		t.Fatalf("Update(Seal %s): %v", orgID, err)
	}
	return c
}

func sealAll(t testing.TB, b store.Backend, orgID string, k note.Signer) ledger.Checkpoint {
	t.Helper()
	return sealIn(t, b, orgID, k, ledger.SealOptions{})
}

// appendMore appends entries n+1..n+count to orgID, one Update each.
func appendMore(t *testing.T, b store.Backend, orgID string, n, count int) []ledger.Entry {
	t.Helper()
	var out []ledger.Entry
	for i := n + 1; i <= n+count; i++ {
		out = append(out, appendOne(t, b, orgID, i))
	}
	return out
}

// mth is RFC 9162's Merkle Tree Hash over leaf hashes, independent of tlog.
func mth(leaves []tlog.Hash) tlog.Hash {
	switch len(leaves) {
	case 0:
		return sha256.Sum256(nil)
	case 1:
		return leaves[0]
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	l, r := mth(leaves[:k]), mth(leaves[k:])
	return sha256.Sum256(append(append([]byte{1}, l[:]...), r[:]...))
}

// leafHashes returns SHA-256(0x00 || LeafData) of each entry.
func leafHashes(t *testing.T, entries []ledger.Entry) []tlog.Hash {
	t.Helper()
	out := make([]tlog.Hash, len(entries))
	for i, e := range entries {
		data, err := e.LeafData()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = sha256.Sum256(append([]byte{0}, data...))
	}
	return out
}

// wantCheckpoint checks that c is signed by k for orgID's first len(entries)
// entries, and that the backend returns it byte for byte.
func wantCheckpoint(t *testing.T, b store.Backend, orgID string, k *ledger.Key, c ledger.Checkpoint, entries []ledger.Entry) {
	t.Helper()
	v, err := ledger.VerifyCheckpoint(k.VerifierKey(), c.Note)
	if err != nil {
		t.Fatalf("VerifyCheckpoint: %v", err)
	}
	want := mth(leafHashes(t, entries))
	if v.Origin != originOf(orgID) || v.Size != uint64(len(entries)) || v.Root != want || v.Root != c.Root || v.Size != c.Size {
		t.Fatalf("checkpoint %+v (note says %+v), want size %d root %v of %s", c, v, len(entries), want, originOf(orgID))
	}
	latest, err := b.LatestCheckpoint(t.Context(), orgID)
	if err != nil {
		t.Fatalf("LatestCheckpoint: %v", err)
	}
	at, err := b.CheckpointAt(t.Context(), orgID, c.Size)
	if err != nil {
		t.Fatalf("CheckpointAt(%d): %v", c.Size, err)
	}
	for _, got := range []ledger.Checkpoint{latest, at} {
		if got.Origin != c.Origin || got.Size != c.Size || got.Root != c.Root || !bytes.Equal(got.Note, c.Note) {
			t.Fatalf("stored checkpoint %+v\n%q\nwant %+v\n%q", got, got.Note, c, c.Note)
		}
	}
}

// allHashes reads every stored hash of a tree of size n, checking that
// nothing beyond is stored.
func allHashes(t *testing.T, b store.Backend, orgID string, n int64) []tlog.Hash {
	t.Helper()
	count := tlog.StoredHashCount(n)
	idx := make([]int64, count)
	for i := range idx {
		idx[i] = int64(i)
	}
	hs, err := b.LedgerHashes(t.Context(), orgID, idx)
	if err != nil || int64(len(hs)) != count {
		t.Fatalf("LedgerHashes(0..%d) = %d hashes, %v", count-1, len(hs), err)
	}
	if _, err := b.LedgerHashes(t.Context(), orgID, []int64{count}); err == nil {
		t.Fatalf("LedgerHashes(%d) of a tree of %d entries found a hash", count, n)
	}
	return hs
}

func verifyWith(t *testing.T, b store.Backend, orgID string, k *ledger.Key, auditor []byte) ledger.Report {
	t.Helper()
	rep, err := ledger.VerifyWith(t.Context(), b, orgID, ledger.VerifyOptions{VerifierKey: k.VerifierKey(), Origin: originOf(orgID), Checkpoint: auditor})
	if err != nil {
		t.Fatalf("VerifyWith(%s): %v", orgID, err)
	}
	return rep
}

func wantBrokenWith(t *testing.T, b store.Backend, orgID string, k *ledger.Key, auditor []byte, seq uint64, reasons ...string) {
	t.Helper()
	rep := verifyWith(t, b, orgID, k, auditor)
	if rep.Valid || rep.FirstBrokenSeq != seq {
		t.Fatalf("VerifyWith(%s) = %+v, want broken at seq %d (%v)", orgID, rep, seq, reasons)
	}
	for _, r := range reasons {
		if rep.Reason == r {
			return
		}
	}
	t.Fatalf("VerifyWith(%s) reason = %s (%s), want one of %v", orgID, rep.Reason, rep.Detail, reasons)
}

func testSealEmpty(t *testing.T, h Harness) {
	b := h.Open(t)
	k := key(t, 1)
	c := sealAll(t, b, orgA, k)
	if c.Size != 0 || c.Root != sha256.Sum256(nil) {
		t.Fatalf("Seal(empty) = %+v, want size 0 and the empty tree's root", c)
	}
	wantCheckpoint(t, b, orgA, k, c, nil)
	if rep := verifyWith(t, b, orgA, k, nil); !rep.Valid || rep.CheckpointsChecked != 1 || rep.CheckpointSize != 0 {
		t.Fatalf("VerifyWith(empty, sealed) = %+v", rep)
	}
	if got, err := b.LatestCheckpoint(t.Context(), orgB); err != nil || !got.IsZero() {
		t.Fatalf("LatestCheckpoint(other org) = %+v, %v; want zero", got, err)
	}
}

func testSealOne(t *testing.T, h Harness) {
	b := h.Open(t)
	k := key(t, 1)
	entries := appendN(t, b, orgA, 1)
	c := sealAll(t, b, orgA, k)
	wantCheckpoint(t, b, orgA, k, c, entries)
	leaf, err := entries[0].LeafHash()
	if err != nil {
		t.Fatal(err)
	}
	if c.Root != leaf {
		t.Fatalf("root of one entry = %v, want its leaf hash %v", c.Root, leaf)
	}
	if hs := allHashes(t, b, orgA, 1); hs[0] != leaf {
		t.Fatalf("stored hash 0 = %v, want %v", hs[0], leaf)
	}
}

func testSealMany(t *testing.T, h Harness) {
	b := h.Open(t)
	k := key(t, 1)
	entries := appendN(t, b, orgA, 37)
	appendN(t, b, orgB, 3)
	c := sealAll(t, b, orgA, k)
	wantCheckpoint(t, b, orgA, k, c, entries)
	hs := allHashes(t, b, orgA, 37)
	for i, leaf := range leafHashes(t, entries) {
		if hs[tlog.StoredHashIndex(0, int64(i))] != leaf {
			t.Fatalf("stored leaf %d differs from entry %d's leaf hash", i, i+1)
		}
	}
	if got, err := b.LatestCheckpoint(t.Context(), orgB); err != nil || !got.IsZero() {
		t.Fatalf("sealing %s sealed %s: %+v, %v", orgA, orgB, got, err)
	}
	if _, err := b.LedgerHashes(t.Context(), orgB, []int64{0}); err == nil {
		t.Fatalf("sealing %s stored hashes of %s", orgA, orgB)
	}
	wantValid(t, b, orgA, 37)
	if rep := verifyWith(t, b, orgA, k, nil); !rep.Valid || rep.CheckpointSize != 37 {
		t.Fatalf("VerifyWith = %+v", rep)
	}
}

// testSealIncremental: sealing as the ledger grows stores the same hashes
// and signs the same checkpoint as sealing once at the end.
func testSealIncremental(t *testing.T, h Harness) {
	k := key(t, 1)
	steps := []int{0, 1, 1, 2, 3, 5, 8, 13, 0, 1, 30}
	total := 0
	for _, s := range steps {
		total += s
	}
	inc, once := h.Open(t), h.Open(t)
	var c ledger.Checkpoint
	n := 0
	for _, s := range steps {
		appendMore(t, inc, orgA, n, s)
		n += s
		c = sealAll(t, inc, orgA, k)
		if c.Size != uint64(n) {
			t.Fatalf("Seal after %d entries = size %d", n, c.Size)
		}
	}
	entries := appendN(t, once, orgA, total)
	want := sealAll(t, once, orgA, k)
	if !bytes.Equal(c.Note, want.Note) {
		t.Fatalf("incremental checkpoint\n%s\ndiffers from sealing once\n%s", c.Note, want.Note)
	}
	wantCheckpoint(t, inc, orgA, k, c, entries)
	a, w := allHashes(t, inc, orgA, int64(total)), allHashes(t, once, orgA, int64(total))
	for i := range a {
		if a[i] != w[i] {
			t.Fatalf("stored hash %d: incremental %v, once %v", i, a[i], w[i])
		}
	}
}

func testSealNothingNew(t *testing.T, h Harness) {
	b := h.Open(t)
	k1, k2 := key(t, 1), key(t, 2)
	entries := appendN(t, b, orgA, 4)
	c := sealAll(t, b, orgA, k1)
	if again := sealAll(t, b, orgA, k1); !bytes.Equal(again.Note, c.Note) {
		t.Fatal("a Seal with nothing new signed another checkpoint")
	}
	// A new ledger key signs the same tree again.
	c2 := sealAll(t, b, orgA, k2)
	if bytes.Equal(c2.Note, c.Note) || c2.Root != c.Root {
		t.Fatalf("Seal with a new key = %+v", c2)
	}
	wantCheckpoint(t, b, orgA, k2, c2, entries)
	if rep := verifyWith(t, b, orgA, k2, nil); !rep.Valid {
		t.Fatalf("VerifyWith(new key) = %+v", rep)
	}
	if rep := verifyWith(t, b, orgA, k1, nil); rep.Valid || rep.Reason != ledger.ReasonCheckpointSignature {
		t.Fatalf("VerifyWith(old key) = %+v, want %s", rep, ledger.ReasonCheckpointSignature)
	}
}

func testSealMaxEntries(t *testing.T, h Harness) {
	b := h.Open(t)
	k := key(t, 1)
	entries := appendN(t, b, orgA, 25)
	var sizes []uint64
	for range 4 {
		sizes = append(sizes, sealIn(t, b, orgA, k, ledger.SealOptions{MaxEntries: 10}).Size)
	}
	if fmt.Sprint(sizes) != "[10 20 25 25]" {
		t.Fatalf("sizes %v, want [10 20 25 25]", sizes)
	}
	for _, size := range []uint64{10, 20} {
		c, err := b.CheckpointAt(t.Context(), orgA, size)
		if err != nil {
			t.Fatalf("CheckpointAt(%d): %v", size, err)
		}
		if c.Root != mth(leafHashes(t, entries[:size])) {
			t.Fatalf("checkpoint %d has the wrong root", size)
		}
	}
	latest, err := b.LatestCheckpoint(t.Context(), orgA)
	if err != nil {
		t.Fatal(err)
	}
	wantCheckpoint(t, b, orgA, k, latest, entries)
}

func testSealRolledBack(t *testing.T, h Harness) {
	b := h.Open(t)
	k := key(t, 1)
	entries := appendN(t, b, orgA, 6)
	err := b.Update(t.Context(), orgA, func(tx store.Tx) error {
		if _, err := ledger.Seal(t.Context(), tx, k, originOf(orgA), ledger.SealOptions{}); err != nil {
			return err
		}
		if c, err := tx.LatestCheckpointInTx(t.Context()); err != nil || c.Size != 6 {
			return fmt.Errorf("LatestCheckpointInTx after Seal = %+v, %v", c, err)
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Update = %v, want the fn's error", err)
	}
	if c, err := b.LatestCheckpoint(t.Context(), orgA); err != nil || !c.IsZero() {
		t.Fatalf("checkpoint after a failed Update: %+v, %v", c, err)
	}
	if _, err := b.LedgerHashes(t.Context(), orgA, []int64{0}); err == nil {
		t.Fatal("tree hashes after a failed Update")
	}
	wantCheckpoint(t, b, orgA, k, sealAll(t, b, orgA, k), entries)
}

// testUnsealed: a ledger written before checkpoints existed has sealed
// size 0; proofs wait for a Seal, which covers it all.
func testUnsealed(t *testing.T, h Harness) {
	b := h.Open(t)
	k := key(t, 1)
	entries := appendN(t, b, orgA, 9)
	if c, err := b.LatestCheckpoint(t.Context(), orgA); err != nil || !c.IsZero() {
		t.Fatalf("LatestCheckpoint(never sealed) = %+v, %v", c, err)
	}
	if rep := verifyWith(t, b, orgA, k, nil); !rep.Valid || rep.CheckpointsChecked != 0 {
		t.Fatalf("VerifyWith(never sealed) = %+v", rep)
	}
	if _, err := ledger.InclusionProof(t.Context(), b, orgA, 1, 9); !errors.Is(err, ledger.ErrNotSealed) {
		t.Fatalf("InclusionProof before Seal = %v, want ErrNotSealed", err)
	}
	wantCheckpoint(t, b, orgA, k, sealAll(t, b, orgA, k), entries)
}

func testCheckpointsBySize(t *testing.T, h Harness) {
	b := h.Open(t)
	k := key(t, 1)
	byOrg := map[string][]ledger.Checkpoint{}
	for _, org := range []string{orgA, orgB} {
		n := 0
		for _, grow := range []int{2, 3, 4} {
			if org == orgB {
				grow++
			}
			appendMore(t, b, org, n, grow)
			n += grow
			byOrg[org] = append(byOrg[org], sealAll(t, b, org, k))
		}
	}
	for org, cps := range byOrg {
		for _, c := range cps {
			got, err := b.CheckpointAt(t.Context(), org, c.Size)
			if err != nil || !bytes.Equal(got.Note, c.Note) || got.Root != c.Root {
				t.Fatalf("CheckpointAt(%s, %d) = %+v, %v; want %+v", org, c.Size, got, err, c)
			}
		}
		latest, err := b.LatestCheckpoint(t.Context(), org)
		if err != nil || !bytes.Equal(latest.Note, cps[len(cps)-1].Note) {
			t.Fatalf("LatestCheckpoint(%s) = %+v, %v", org, latest, err)
		}
	}
	_, err := b.CheckpointAt(t.Context(), orgA, 3) // orgA has 2, 5, 9
	if !errors.Is(err, ledger.ErrCheckpointNotFound) || !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("CheckpointAt(no such size) = %v, want ErrCheckpointNotFound and store.ErrNotFound", err)
	}
	if _, err := b.CheckpointAt(t.Context(), "org_ledger_none", 0); !errors.Is(err, ledger.ErrCheckpointNotFound) {
		t.Fatalf("CheckpointAt(unknown org) = %v", err)
	}
}

// testTreeWritesRefused: the backend keeps the tree append-only.
func testTreeWritesRefused(t *testing.T, h Harness) {
	b := h.Open(t)
	k := key(t, 1)
	appendN(t, b, orgA, 5)
	c := sealAll(t, b, orgA, k)
	cases := []struct {
		name string
		fn   func(ctx context.Context, tx store.Tx) error
	}{
		{"HashesWithAGap", func(ctx context.Context, tx store.Tx) error {
			return tx.PutLedgerHashes(ctx, tlog.StoredHashCount(5)+1, []tlog.Hash{{1}})
		}},
		{"HashesOverwritten", func(ctx context.Context, tx store.Tx) error {
			return tx.PutLedgerHashes(ctx, 0, []tlog.Hash{{1}})
		}},
		{"OlderCheckpoint", func(ctx context.Context, tx store.Tx) error {
			return tx.PutCheckpoint(ctx, ledger.Checkpoint{Origin: c.Origin, Size: 4, Root: c.Root, Note: c.Note})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := b.Update(t.Context(), orgA, func(tx store.Tx) error { return tc.fn(t.Context(), tx) })
			if err == nil {
				t.Fatal("the backend accepted it")
			}
			if _, err := b.CheckpointAt(t.Context(), orgA, 4); err == nil {
				t.Fatal("an older checkpoint was stored")
			}
			allHashes(t, b, orgA, 5)
			if rep := verifyWith(t, b, orgA, k, nil); !rep.Valid {
				t.Fatalf("VerifyWith = %+v", rep)
			}
		})
	}
}

// sealedAt grows orgA to each size, sealing at each, and returns the
// verified checkpoints and the entries.
func sealedAt(t *testing.T, b store.Backend, k *ledger.Key, sizes ...int) ([]ledger.Checkpoint, []ledger.Entry) {
	t.Helper()
	var cps []ledger.Checkpoint
	var entries []ledger.Entry
	for _, size := range sizes {
		entries = append(entries, appendMore(t, b, orgA, len(entries), size-len(entries))...)
		c, err := ledger.VerifyCheckpoint(k.VerifierKey(), sealAll(t, b, orgA, k).Note)
		if err != nil {
			t.Fatal(err)
		}
		cps = append(cps, c)
	}
	return cps, entries
}

func testInclusionProofs(t *testing.T, h Harness) {
	b := h.Open(t)
	k := key(t, 1)
	cps, entries := sealedAt(t, b, k, 1, 2, 3, 5, 8, 13, 21)
	leaves := leafHashes(t, entries)
	for _, c := range cps {
		for seq := uint64(1); seq <= c.Size; seq++ {
			p, err := ledger.InclusionProof(t.Context(), b, orgA, seq, c.Size)
			if err != nil {
				t.Fatalf("InclusionProof(%d, %d): %v", seq, c.Size, err)
			}
			if err := ledger.VerifyInclusion(c, leaves[seq-1], seq, p); err != nil {
				t.Fatalf("VerifyInclusion(%d in %d): %v", seq, c.Size, err)
			}
			if err := ledger.VerifyInclusion(c, leaves[seq%uint64(len(leaves))], seq, p); !errors.Is(err, ledger.ErrProofInvalid) {
				t.Fatalf("another leaf verified as seq %d in %d: %v", seq, c.Size, err)
			}
		}
	}
	appendMore(t, b, orgA, 21, 1)
	if _, err := ledger.InclusionProof(t.Context(), b, orgA, 22, 22); !errors.Is(err, ledger.ErrNotSealed) {
		t.Fatalf("InclusionProof of an unsealed entry = %v, want ErrNotSealed", err)
	}
}

func testConsistencyProofs(t *testing.T, h Harness) {
	b := h.Open(t)
	k := key(t, 1)
	cps, _ := sealedAt(t, b, k, 0, 1, 2, 3, 4, 6, 8, 11, 16, 17)
	for i, older := range cps {
		for _, newer := range cps[i:] {
			p, err := ledger.ConsistencyProof(t.Context(), b, orgA, older.Size, newer.Size)
			if err != nil {
				t.Fatalf("ConsistencyProof(%d, %d): %v", older.Size, newer.Size, err)
			}
			if err := ledger.VerifyConsistency(older, newer, p); err != nil {
				t.Fatalf("VerifyConsistency(%d, %d): %v", older.Size, newer.Size, err)
			}
			if older.Size == newer.Size || older.Size == 0 {
				continue
			}
			forged := older
			forged.Root[3] ^= 0x40
			if err := ledger.VerifyConsistency(forged, newer, p); !errors.Is(err, ledger.ErrProofInvalid) {
				t.Fatalf("a forged root of size %d was consistent with size %d: %v", older.Size, newer.Size, err)
			}
		}
	}
}

func testAnchors(t *testing.T, h Harness) {
	b := h.Open(t)
	k := key(t, 1)
	entries := appendN(t, b, orgA, 7)
	sealAll(t, b, orgA, k)
	for _, e := range entries {
		a, err := ledger.NewAnchor(t.Context(), b, orgA, e.Seq)
		if err != nil {
			t.Fatalf("NewAnchor(%d): %v", e.Seq, err)
		}
		if c, err := ledger.VerifyAnchor(k.VerifierKey(), originOf(orgA), e, a); err != nil || c.Size != 7 {
			t.Fatalf("VerifyAnchor(%d) = %+v, %v", e.Seq, c, err)
		}
		if _, err := ledger.VerifyAnchor(k.VerifierKey(), originOf(orgB), e, a); !errors.Is(err, ledger.ErrOriginMismatch) {
			t.Fatalf("VerifyAnchor as %s = %v", orgB, err)
		}
	}
}

// testConcurrentSeals runs sealers in a loop while appenders append to the
// same org: every checkpoint a sealer got is consistent with the final one,
// and the ledger verifies against it.
func testConcurrentSeals(t *testing.T, h Harness) {
	const appenders, each, sealers = 4, 30, 2
	b := h.Open(t)
	k := key(t, 1)
	var wg, sw sync.WaitGroup
	done := make(chan struct{})
	got := make([][]ledger.Checkpoint, sealers)
	for s := range sealers {
		sw.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				var c ledger.Checkpoint
				err := b.Update(context.Background(), orgA, func(tx store.Tx) error {
					var err error
					c, err = ledger.Seal(context.Background(), tx, k, originOf(orgA), ledger.SealOptions{})
					return err
				})
				if err != nil {
					t.Errorf("sealer %d: %v", s, err)
					return
				}
				got[s] = append(got[s], c)
			}
		})
	}
	for w := range appenders {
		wg.Go(func() {
			for i := range each {
				n := w*each + i
				err := b.Update(context.Background(), orgA, func(tx store.Tx) error {
					_, err := ledger.Append(context.Background(), tx, orgA, record(n), base.Add(time.Duration(n)*time.Millisecond))
					return err
				})
				if err != nil {
					t.Errorf("appender %d: %v", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	sw.Wait()
	if t.Failed() {
		return
	}
	final := sealAll(t, b, orgA, k)
	wantCheckpoint(t, b, orgA, k, final, all(t, b, orgA))
	if rep := verifyWith(t, b, orgA, k, nil); !rep.Valid || rep.CheckpointSize != appenders*each {
		t.Fatalf("VerifyWith = %+v", rep)
	}
	finalCP, err := ledger.VerifyCheckpoint(k.VerifierKey(), final.Note)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for s, cps := range got {
		var last uint64
		for _, c := range cps {
			v, err := ledger.VerifyCheckpoint(k.VerifierKey(), c.Note)
			if err != nil {
				t.Fatalf("sealer %d: %v", s, err)
			}
			if v.Size < last {
				t.Fatalf("sealer %d saw size %d after %d", s, v.Size, last)
			}
			last = v.Size
			p, err := ledger.ConsistencyProof(t.Context(), b, orgA, v.Size, finalCP.Size)
			if err != nil {
				t.Fatal(err)
			}
			if err := ledger.VerifyConsistency(v, finalCP, p); err != nil {
				t.Fatalf("sealer %d's checkpoint of size %d is not consistent with the final one: %v", s, v.Size, err)
			}
			seen++
		}
	}
	if seen == 0 {
		t.Fatal("the sealers sealed nothing")
	}
}

// needHooks skips a tamper case the harness cannot do.
func needHooks(t *testing.T, h Harness, head, checkpoint bool) {
	t.Helper()
	if h.OverwriteEntry == nil || h.DeleteEntry == nil || (head && h.SetHead == nil) || (checkpoint && h.DeleteCheckpoint == nil) {
		t.Skip("the harness has no raw access for this case")
	}
}

// sealedSetup appends 8 entries to orgA, seals at 5 and 8, and appends 3 to
// orgB.
func sealedSetup(t *testing.T, h Harness) (store.Backend, *ledger.Key, []ledger.Entry) {
	t.Helper()
	b := h.Open(t)
	k := key(t, 1)
	entries := appendN(t, b, orgA, 5)
	sealAll(t, b, orgA, k)
	entries = append(entries, appendMore(t, b, orgA, 5, 3)...)
	sealAll(t, b, orgA, k)
	appendN(t, b, orgB, 3)
	if rep := verifyWith(t, b, orgA, k, nil); !rep.Valid || rep.CheckpointSize != 8 {
		t.Fatalf("VerifyWith before tampering = %+v", rep)
	}
	return b, k, entries
}

// rechain rewrites entries[from:] as a consistent chain (seq, prev link,
// entry hash) into orgA and moves the head to its end.
func rechain(t *testing.T, h Harness, b store.Backend, entries []ledger.Entry, from int) {
	t.Helper()
	for i := from; i < len(entries); i++ {
		e := entries[i]
		e.Seq = uint64(i + 1)
		e.PrevEntryHash = ledger.Genesis
		if i > 0 {
			e.PrevEntryHash = entries[i-1].EntryHash
		}
		var err error
		if e.EntryHash, err = e.ComputeHash(); err != nil {
			t.Fatal(err)
		}
		entries[i] = e
		h.OverwriteEntry(t, b, orgA, e.Seq, e)
	}
	last := entries[len(entries)-1]
	h.SetHead(t, b, orgA, ledger.Head{Seq: last.Seq, EntryHash: last.EntryHash})
}

func testTamperChangedAfterSeal(t *testing.T, h Harness) {
	needHooks(t, h, false, false)
	b, k, entries := sealedSetup(t, h)
	e := entries[4]
	e.SubjectID = "dec_forged"
	h.OverwriteEntry(t, b, orgA, 5, e)
	wantBroken(t, b, orgA, 5, ledger.ReasonHashMismatch)
	wantBrokenWith(t, b, orgA, k, nil, 5, ledger.ReasonHashMismatch)
}

// testTamperRewritten: entry 5 changed and every later entry and the head
// rewritten to match: the chain is valid, the checkpoint is not.
func testTamperRewritten(t *testing.T, h Harness) {
	needHooks(t, h, true, false)
	b, k, entries := sealedSetup(t, h)
	entries[4].SubjectID = "dec_forged"
	rechain(t, h, b, entries, 4)
	wantValid(t, b, orgA, 8)
	wantBrokenWith(t, b, orgA, k, nil, 5, ledger.ReasonCheckpointMismatch)
	if err := b.Update(t.Context(), orgA, func(tx store.Tx) error {
		_, err := ledger.Append(t.Context(), tx, orgA, record(9), base)
		if err != nil {
			return err
		}
		_, err = ledger.Seal(t.Context(), tx, k, originOf(orgA), ledger.SealOptions{})
		return err
	}); !errors.Is(err, ledger.ErrBrokenChain) {
		t.Fatalf("Seal over a rewritten sealed entry = %v, want ErrBrokenChain", err)
	}
}

// testTamperTruncatedHead: the tail deleted and the head moved back: the
// chain is valid, the checkpoint says the ledger was longer.
func testTamperTruncatedHead(t *testing.T, h Harness) {
	needHooks(t, h, true, false)
	b, k, entries := sealedSetup(t, h)
	h.DeleteEntry(t, b, orgA, 8)
	h.DeleteEntry(t, b, orgA, 7)
	h.SetHead(t, b, orgA, ledger.Head{Seq: 6, EntryHash: entries[5].EntryHash})
	wantValid(t, b, orgA, 6)
	wantBrokenWith(t, b, orgA, k, nil, 7, ledger.ReasonTruncated)
	err := b.Update(t.Context(), orgA, func(tx store.Tx) error {
		_, err := ledger.Seal(t.Context(), tx, k, originOf(orgA), ledger.SealOptions{})
		return err
	})
	if !errors.Is(err, ledger.ErrBrokenChain) {
		t.Fatalf("Seal of a truncated ledger = %v, want ErrBrokenChain", err)
	}
}

func testTamperSwappedAfterSeal(t *testing.T, h Harness) {
	needHooks(t, h, false, false)
	b, k, entries := sealedSetup(t, h)
	h.OverwriteEntry(t, b, orgA, 4, entries[4])
	h.OverwriteEntry(t, b, orgA, 5, entries[3])
	wantBrokenWith(t, b, orgA, k, nil, 4, ledger.ReasonSeqGap, ledger.ReasonHashMismatch)
}

// testTamperReordered: entries 4 and 5 swapped and the chain rebuilt
// around them (seqs, links, hashes, head): only the checkpoint knows.
func testTamperReordered(t *testing.T, h Harness) {
	needHooks(t, h, true, false)
	b, k, entries := sealedSetup(t, h)
	entries[3], entries[4] = entries[4], entries[3]
	rechain(t, h, b, entries, 3)
	wantValid(t, b, orgA, 8)
	wantBrokenWith(t, b, orgA, k, nil, 4, ledger.ReasonCheckpointMismatch)
}

// forge signs c's tree as origin with signer.
func forge(t *testing.T, c ledger.Checkpoint, signer note.Signer, origin string) ledger.Checkpoint {
	t.Helper()
	msg, err := note.Sign(&note.Note{Text: fmt.Sprintf("%s\n%d\n%v\n", origin, c.Size, c.Root)}, signer)
	if err != nil {
		t.Fatal(err)
	}
	return ledger.Checkpoint{Origin: origin, Size: c.Size, Root: c.Root, Note: msg}
}

// testTamperCheckpointOtherKey: a checkpoint signed by another key,
// stored through the backend's own API or handed in by an auditor.
func testTamperCheckpointOtherKey(t *testing.T, h Harness) {
	b := h.Open(t)
	k, other := key(t, 1), key(t, 2)
	appendN(t, b, orgA, 8)
	good := sealAll(t, b, orgA, k)
	forged := forge(t, good, other, originOf(orgA))
	wantBrokenWith(t, b, orgA, k, forged.Note, 0, ledger.ReasonCheckpointSignature)
	if err := b.Update(t.Context(), orgA, func(tx store.Tx) error { return tx.PutCheckpoint(t.Context(), forged) }); err != nil {
		t.Fatalf("PutCheckpoint: %v", err)
	}
	wantBrokenWith(t, b, orgA, k, nil, 0, ledger.ReasonCheckpointSignature)
	wantBrokenWith(t, b, orgA, k, good.Note, 0, ledger.ReasonCheckpointSignature)
}

// testTamperCheckpointOtherOrg: another org's checkpoint, signed by the
// same ledger key, passed off as this org's.
func testTamperCheckpointOtherOrg(t *testing.T, h Harness) {
	b := h.Open(t)
	k := key(t, 1)
	appendN(t, b, orgA, 4)
	sealAll(t, b, orgA, k)
	appendN(t, b, orgB, 6)
	theirs := sealAll(t, b, orgB, k)
	wantBrokenWith(t, b, orgA, k, theirs.Note, 0, ledger.ReasonCheckpointOrigin)
	if err := b.Update(t.Context(), orgA, func(tx store.Tx) error { return tx.PutCheckpoint(t.Context(), theirs) }); err != nil {
		t.Fatalf("PutCheckpoint: %v", err)
	}
	wantBrokenWith(t, b, orgA, k, nil, 0, ledger.ReasonCheckpointOrigin)
}

// testAuditorCheckpoint: whoever can write the store can also delete the
// newest checkpoints, rolling the stored check back; a checkpoint kept
// outside the store still catches the truncation.
func testAuditorCheckpoint(t *testing.T, h Harness) {
	needHooks(t, h, true, true)
	b, k, entries := sealedSetup(t, h)
	kept, err := b.LatestCheckpoint(t.Context(), orgA)
	if err != nil || kept.Size != 8 {
		t.Fatalf("LatestCheckpoint = %+v, %v", kept, err)
	}
	h.DeleteEntry(t, b, orgA, 8)
	h.DeleteEntry(t, b, orgA, 7)
	h.SetHead(t, b, orgA, ledger.Head{Seq: 6, EntryHash: entries[5].EntryHash})
	h.DeleteCheckpoint(t, b, orgA, 8)
	if rep := verifyWith(t, b, orgA, k, nil); !rep.Valid || rep.CheckpointSize != 5 {
		t.Fatalf("VerifyWith(stored checkpoints only) = %+v: want valid against the one of size 5", rep)
	}
	wantBrokenWith(t, b, orgA, k, kept.Note, 7, ledger.ReasonTruncated)
}

// Benchmark runs the ledger tree benchmarks on backends from open:
//
//   - Seal1000: one Update sealing 1,000 new entries (appended, untimed,
//     before each op);
//   - InclusionProof100k: an inclusion proof in a sealed tree of 100,000
//     entries (the checkpoint read and one read of the proof's hashes).
func Benchmark(b *testing.B, open func(b *testing.B) store.Backend) {
	b.Run("Seal1000", func(b *testing.B) {
		s := open(b)
		k := key(b, 1)
		n := bulkAppend(b, s, orgA, 0, 1000)
		sealAll(b, s, orgA, k)
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			n = bulkAppend(b, s, orgA, n, 1000)
			b.StartTimer()
			if c := sealAll(b, s, orgA, k); c.Size != uint64(n) {
				b.Fatalf("sealed %d of %d", c.Size, n)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/entry")
	})
	b.Run("InclusionProof100k", func(b *testing.B) {
		const size = 100_000
		s := open(b)
		k := key(b, 1)
		bulkAppend(b, s, orgA, 0, size)
		sealAll(b, s, orgA, k)
		ctx := context.Background()
		seq := uint64(1)
		b.ResetTimer()
		for range b.N {
			if _, err := ledger.InclusionProof(ctx, s, orgA, seq, size); err != nil {
				b.Fatal(err)
			}
			seq = seq*7919%size + 1
		}
	})
}

// bulkAppend appends entries n+1..n+count, up to 1,000 per Update, and
// returns the new size.
func bulkAppend(b testing.TB, s store.Backend, orgID string, n, count int) int {
	b.Helper()
	ctx := context.Background()
	for count > 0 {
		batch := min(count, 1000)
		err := s.Update(ctx, orgID, func(tx store.Tx) error {
			head, err := tx.LedgerHead(ctx)
			if err != nil {
				return err
			}
			for i := range batch {
				e, err := ledger.Next(head, orgID, record(n+i+1), base)
				if err != nil {
					return err
				}
				if err := tx.PutLedgerEntry(ctx, e); err != nil {
					return err
				}
				head = ledger.Head{Seq: e.Seq, EntryHash: e.EntryHash}
			}
			return nil
		})
		if err != nil {
			b.Fatalf("append: %v", err)
		}
		n += batch
		count -= batch
	}
	return n
}
