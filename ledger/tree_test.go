package ledger_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/ledger"
)

const origin = "clearance.test/ledger/org"

// testKey returns a fixed ledger key: seed = 32 bytes of b.
func testKey(t testing.TB, name string, b byte) *ledger.Key {
	t.Helper()
	k, err := ledger.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{b}, 32)), name)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func seal(t testing.TB, m *memLedger, k note.Signer) ledger.Checkpoint {
	t.Helper()
	c, err := ledger.Seal(context.Background(), m, k, origin, ledger.SealOptions{})
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	return c
}

// mth is RFC 9162's Merkle Tree Hash, written from the RFC, independent of tlog.
func mth(leaves [][32]byte) [32]byte {
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

// leaves returns the RFC 9162 leaf hashes of m's first n entries,
// SHA-256(0x00 || LeafData).
func leaves(t testing.TB, m *memLedger, n int) [][32]byte {
	t.Helper()
	out := make([][32]byte, n)
	for i := range n {
		data, err := m.entries[i].LeafData()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = sha256.Sum256(append([]byte{0}, data...))
	}
	return out
}

func TestLeafData(t *testing.T) {
	e := ledger.Entry{Seq: 7, OrgID: "org_1", Kind: ledger.KindDecision, SubjectID: "dos_1",
		PayloadDigest: "sha256:" + strings.Repeat("a", 64), RecordedAt: "2026-11-01T00:00:00Z",
		PrevEntryHash: "sha256:" + strings.Repeat("b", 64), EntryHash: "sha256:" + strings.Repeat("c", 64)}
	data, err := e.LeafData()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"entry_hash":"sha256:` + strings.Repeat("c", 64) + `","kind":"decision.recorded","org_id":"org_1",` +
		`"payload_digest":"sha256:` + strings.Repeat("a", 64) + `","prev_entry_hash":"sha256:` + strings.Repeat("b", 64) +
		`","recorded_at":"2026-11-01T00:00:00Z","seq":7,"subject_id":"dos_1"}`
	if string(data) != want {
		t.Fatalf("LeafData =\n%s\nwant\n%s", data, want)
	}
	leaf, err := e.LeafHash()
	if err != nil {
		t.Fatal(err)
	}
	if want := sha256.Sum256(append([]byte{0}, want...)); leaf != tlog.Hash(want) {
		t.Fatalf("LeafHash = %v, want SHA-256(0x00 || LeafData) %x", leaf, want)
	}
}

// TestSealRoots seals ledgers of many sizes and checks each checkpoint
// against the RFC's Merkle Tree Hash, its signature and the stored hashes.
func TestSealRoots(t *testing.T) {
	k := testKey(t, "clearance.test/ledger", 1)
	for _, n := range []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 100} {
		m := build(t, n)
		c := seal(t, m, k)
		if c.Size != uint64(n) || c.Origin != origin || c.Root != tlog.Hash(mth(leaves(t, m, n))) {
			t.Fatalf("size %d: checkpoint %+v, want root %x", n, c, mth(leaves(t, m, n)))
		}
		if got := int64(len(m.hashes)); got != tlog.StoredHashCount(int64(n)) {
			t.Fatalf("size %d: %d stored hashes, want %d", n, got, tlog.StoredHashCount(int64(n)))
		}
		v, err := ledger.VerifyCheckpoint(k.VerifierKey(), c.Note)
		if err != nil {
			t.Fatalf("size %d: VerifyCheckpoint: %v", n, err)
		}
		if diff := cmp.Diff(c, v); diff != "" {
			t.Fatalf("size %d: verified checkpoint differs (-sealed +verified):\n%s", n, diff)
		}
		body := fmt.Sprintf("%s\n%d\n%s\n", origin, n, c.Root)
		if !bytes.HasPrefix(c.Note, []byte(body+"\n— clearance.test/ledger ")) {
			t.Fatalf("size %d: note %q does not start with the checkpoint body %q", n, c.Note, body)
		}
	}
}

// TestSealIncrementalEqualsOnce: sealing in many steps stores the same
// hashes and signs the same checkpoint as sealing once; each Seal reads
// stored hashes at most once (the frontier), however many entries it adds.
func TestSealIncrementalEqualsOnce(t *testing.T) {
	k := testKey(t, "k", 1)
	steps := []int{0, 1, 1, 2, 5, 8, 3, 13, 0, 21, 1, 1, 2500}
	total := 0
	for _, s := range steps {
		total += s
	}
	once := build(t, total)
	want := seal(t, once, k)

	m := &memLedger{}
	var got ledger.Checkpoint
	for _, s := range steps {
		grow(t, m, s)
		before := m.hashReads
		got = seal(t, m, k)
		if reads := m.hashReads - before; reads > 1 {
			t.Fatalf("Seal of %d entries read stored hashes %d times, want at most 1", s, reads)
		}
	}
	if !bytes.Equal(got.Note, want.Note) {
		t.Fatalf("incremental checkpoint\n%s\ndiffers from sealing once\n%s", got.Note, want.Note)
	}
	if !slicesEqual(m.hashes, once.hashes) {
		t.Fatal("incremental seals stored other hashes than one seal")
	}
}

func slicesEqual(a, b []tlog.Hash) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSealNoopAndResign(t *testing.T) {
	ctx := context.Background()
	k1, k2 := testKey(t, "k1", 1), testKey(t, "k2", 2)
	m := build(t, 5)
	c1 := seal(t, m, k1)
	again := seal(t, m, k1)
	if !bytes.Equal(again.Note, c1.Note) || len(m.hashes) != int(tlog.StoredHashCount(5)) {
		t.Fatalf("a second Seal with nothing new changed the checkpoint or the hashes")
	}
	// A new key signs the same size again, replacing the stored checkpoint.
	c2 := seal(t, m, k2)
	if c2.Size != 5 || c2.Root != c1.Root || bytes.Equal(c2.Note, c1.Note) {
		t.Fatalf("re-sign with a new key = %+v", c2)
	}
	if _, err := ledger.VerifyCheckpoint(k2.VerifierKey(), c2.Note); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.VerifyCheckpoint(k1.VerifierKey(), c2.Note); !errors.Is(err, ledger.ErrCheckpointSignature) {
		t.Fatalf("the re-signed checkpoint verified under the old key: %v", err)
	}
	if got, _ := m.CheckpointAt(ctx, "org", 5); !bytes.Equal(got.Note, c2.Note) {
		t.Fatal("the stored checkpoint of size 5 was not replaced")
	}
	// A new origin too.
	c3, err := ledger.Seal(ctx, m, k2, "other/ledger/org", ledger.SealOptions{})
	if err != nil || c3.Origin != "other/ledger/org" || c3.Root != c1.Root {
		t.Fatalf("re-sign with a new origin = %+v, %v", c3, err)
	}
}

func TestSealMaxEntries(t *testing.T) {
	k := testKey(t, "k", 1)
	m := build(t, 25)
	var sizes []uint64
	for range 4 {
		c, err := ledger.Seal(context.Background(), m, k, origin, ledger.SealOptions{MaxEntries: 10})
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, c.Size)
	}
	if diff := cmp.Diff([]uint64{10, 20, 25, 25}, sizes); diff != "" {
		t.Fatalf("sizes (-want +got):\n%s", diff)
	}
	if c, _ := m.LatestCheckpoint(context.Background(), "org"); c.Root != tlog.Hash(mth(leaves(t, m, 25))) {
		t.Fatal("bounded seals do not add up to the tree of 25")
	}
}

func TestSealRefusesBrokenChain(t *testing.T) {
	k := testKey(t, "k", 1)
	cases := []struct {
		name   string
		tamper func(m *memLedger)
	}{
		{"changed unsealed entry", func(m *memLedger) { m.entries[12].SubjectID = "forged" }},
		{"broken link", func(m *memLedger) {
			m.entries[12].PrevEntryHash = ledger.Genesis
			m.entries[12].EntryHash, _ = m.entries[12].ComputeHash()
		}},
		{"other org", func(m *memLedger) {
			m.entries[11].OrgID = "else"
			m.entries[11].EntryHash, _ = m.entries[11].ComputeHash()
		}},
		{"gap", func(m *memLedger) { m.entries = append(m.entries[:11:11], m.entries[12:]...) }},
		{"last sealed entry rewritten", func(m *memLedger) {
			m.entries[9].SubjectID = "forged"
			m.entries[9].EntryHash, _ = m.entries[9].ComputeHash()
			m.entries[10].PrevEntryHash = m.entries[9].EntryHash
			rechain(m, 10)
		}},
		{"truncated below the checkpoint", func(m *memLedger) {
			m.entries = m.entries[:8]
			m.head = ledger.Head{Seq: 8, EntryHash: m.entries[7].EntryHash}
		}},
		{"stored hash changed", func(m *memLedger) { m.hashes[len(m.hashes)-1][0] ^= 1 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := build(t, 10)
			seal(t, m, k)
			grow(t, m, 5)
			c.tamper(m)
			before, _ := m.LatestCheckpoint(context.Background(), "")
			_, err := ledger.Seal(context.Background(), m, k, origin, ledger.SealOptions{})
			if !errors.Is(err, ledger.ErrBrokenChain) {
				t.Fatalf("Seal over a broken chain = %v, want ErrBrokenChain", err)
			}
			if after, _ := m.LatestCheckpoint(context.Background(), ""); !bytes.Equal(after.Note, before.Note) {
				t.Fatal("Seal signed a checkpoint over a broken chain")
			}
		})
	}
	if _, err := ledger.Seal(context.Background(), build(t, 1), k, "two\nlines", ledger.SealOptions{}); !errors.Is(err, ledger.ErrCheckpointFormat) {
		t.Fatalf("Seal with a two-line origin = %v", err)
	}
}

// rechain rebuilds entries from index i on (seq, prev link, entry hash)
// and moves the head to the last: a rewrite the chain alone cannot see.
func rechain(m *memLedger, i int) {
	for j := i; j < len(m.entries); j++ {
		e := &m.entries[j]
		e.Seq = uint64(j + 1)
		e.PrevEntryHash = ledger.Genesis
		if j > 0 {
			e.PrevEntryHash = m.entries[j-1].EntryHash
		}
		e.EntryHash, _ = e.ComputeHash()
	}
	last := m.entries[len(m.entries)-1]
	m.head = ledger.Head{Seq: last.Seq, EntryHash: last.EntryHash}
}

// TestProofs checks inclusion proofs of every seq in several checkpoints and
// consistency proofs between every pair of them, and that wrong inputs fail.
func TestProofs(t *testing.T) {
	ctx := context.Background()
	k := testKey(t, "k", 1)
	m := &memLedger{}
	var cps []ledger.Checkpoint
	for _, size := range []int{0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31} {
		grow(t, m, size-len(m.entries))
		c, err := ledger.VerifyCheckpoint(k.VerifierKey(), seal(t, m, k).Note)
		if err != nil {
			t.Fatal(err)
		}
		cps = append(cps, c)
	}
	for _, c := range cps {
		for seq := uint64(1); seq <= c.Size; seq++ {
			p, err := ledger.InclusionProof(ctx, m, "org", seq, c.Size)
			if err != nil {
				t.Fatalf("InclusionProof(%d, %d): %v", seq, c.Size, err)
			}
			leaf, _ := m.entries[seq-1].LeafHash()
			if err := ledger.VerifyInclusion(c, leaf, seq, p); err != nil {
				t.Fatalf("VerifyInclusion(%d in %d): %v", seq, c.Size, err)
			}
			other, _ := m.entries[(seq)%uint64(len(m.entries))].LeafHash()
			if err := ledger.VerifyInclusion(c, other, seq, p); !errors.Is(err, ledger.ErrProofInvalid) {
				t.Fatalf("another entry's leaf verified as seq %d in %d: %v", seq, c.Size, err)
			}
			if seq < c.Size {
				if err := ledger.VerifyInclusion(c, leaf, seq+1, p); !errors.Is(err, ledger.ErrProofInvalid) {
					t.Fatalf("seq %d's proof verified for seq %d: %v", seq, seq+1, err)
				}
			}
		}
		if err := ledger.VerifyInclusion(c, tlog.Hash{}, c.Size+1, nil); !errors.Is(err, ledger.ErrProofInvalid) {
			t.Fatalf("VerifyInclusion beyond the size = %v", err)
		}
	}
	for i, older := range cps {
		for _, newer := range cps[i:] {
			p, err := ledger.ConsistencyProof(ctx, m, "org", older.Size, newer.Size)
			if err != nil {
				t.Fatalf("ConsistencyProof(%d, %d): %v", older.Size, newer.Size, err)
			}
			if err := ledger.VerifyConsistency(older, newer, p); err != nil {
				t.Fatalf("VerifyConsistency(%d, %d): %v", older.Size, newer.Size, err)
			}
			if older.Size == newer.Size {
				continue
			}
			forged := older
			forged.Root[0] ^= 1
			if err := ledger.VerifyConsistency(forged, newer, p); !errors.Is(err, ledger.ErrProofInvalid) {
				t.Fatalf("a forged old root of size %d was consistent with %d: %v", older.Size, newer.Size, err)
			}
			if err := ledger.VerifyConsistency(newer, older, p); !errors.Is(err, ledger.ErrProofInvalid) {
				t.Fatalf("size %d consistent with the older %d: %v", newer.Size, older.Size, err)
			}
		}
	}
	other := cps[3]
	other.Origin = "clearance.test/ledger/else"
	if err := ledger.VerifyConsistency(other, cps[5], nil); !errors.Is(err, ledger.ErrOriginMismatch) {
		t.Fatalf("checkpoints of two logs: %v", err)
	}
	if _, err := ledger.InclusionProof(ctx, m, "org", 1, 32); !errors.Is(err, ledger.ErrNotSealed) {
		t.Fatalf("InclusionProof beyond the sealed size = %v", err)
	}
	if _, err := ledger.InclusionProof(ctx, m, "org", 0, 5); !errors.Is(err, ledger.ErrOutOfRange) {
		t.Fatalf("InclusionProof of seq 0 = %v", err)
	}
	if _, err := ledger.ConsistencyProof(ctx, m, "org", 9, 8); !errors.Is(err, ledger.ErrOutOfRange) {
		t.Fatalf("ConsistencyProof(9, 8) = %v", err)
	}
	if _, err := ledger.ConsistencyProof(ctx, m, "org", 8, 40); !errors.Is(err, ledger.ErrNotSealed) {
		t.Fatalf("ConsistencyProof beyond the sealed size = %v", err)
	}
}

func TestAnchor(t *testing.T) {
	ctx := context.Background()
	k := testKey(t, "k", 1)
	m := build(t, 11)
	seal(t, m, k)
	grow(t, m, 2)
	for seq := uint64(1); seq <= 11; seq++ {
		a, err := ledger.NewAnchor(ctx, m, "org", seq)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		var decoded ledger.Anchor
		if err := json.Unmarshal(raw, &decoded); err != nil {
			t.Fatal(err)
		}
		c, err := ledger.VerifyAnchor(k.VerifierKey(), origin, m.entries[seq-1], decoded)
		if err != nil || c.Size != 11 {
			t.Fatalf("VerifyAnchor(seq %d, from %s) = %+v, %v", seq, raw, c, err)
		}
		forged := m.entries[seq-1]
		forged.SubjectID = "forged"
		if _, err := ledger.VerifyAnchor(k.VerifierKey(), origin, forged, a); !errors.Is(err, ledger.ErrProofInvalid) {
			t.Fatalf("a changed entry passed its anchor: %v", err)
		}
		if _, err := ledger.VerifyAnchor(k.VerifierKey(), "clearance.test/ledger/else", m.entries[seq-1], a); !errors.Is(err, ledger.ErrOriginMismatch) {
			t.Fatalf("another org's origin passed: %v", err)
		}
		if _, err := ledger.VerifyAnchor(testKey(t, "k", 2).VerifierKey(), origin, m.entries[seq-1], a); !errors.Is(err, ledger.ErrCheckpointSignature) {
			t.Fatalf("another key passed: %v", err)
		}
	}
	if _, err := ledger.NewAnchor(ctx, m, "org", 12); !errors.Is(err, ledger.ErrNotSealed) {
		t.Fatalf("NewAnchor of an unsealed entry = %v", err)
	}
}

func TestVerifyCheckpointRejects(t *testing.T) {
	k := testKey(t, "k", 1)
	m := build(t, 3)
	good := seal(t, m, k).Note
	sign := func(body string) []byte {
		msg, err := note.Sign(&note.Note{Text: body}, k)
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	root := base64Root(t, good)
	identity := make([]byte, 32)
	identity[0] = 1
	weak, err := note.NewEd25519VerifierKey("k", identity)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		key  string
		note []byte
		want error
	}{
		{"other key", testKey(t, "k", 2).VerifierKey(), good, ledger.ErrCheckpointSignature},
		{"other key name", testKey(t, "j", 1).VerifierKey(), good, ledger.ErrCheckpointSignature},
		{"body changed", k.VerifierKey(), bytes.Replace(good, []byte("\n3\n"), []byte("\n2\n"), 1), ledger.ErrCheckpointSignature},
		{"garbage", k.VerifierKey(), []byte("not a note"), ledger.ErrCheckpointFormat},
		{"not a checkpoint", k.VerifierKey(), sign("hello\n"), ledger.ErrCheckpointFormat},
		{"leading zero", k.VerifierKey(), sign(origin + "\n03\n" + root + "\n"), ledger.ErrCheckpointFormat},
		{"signed size", k.VerifierKey(), sign(origin + "\n+3\n" + root + "\n"), ledger.ErrCheckpointFormat},
		{"short root", k.VerifierKey(), sign(origin + "\n3\nAAAA\n"), ledger.ErrCheckpointFormat},
		{"empty extension", k.VerifierKey(), sign(origin + "\n3\n" + root + "\n\n"), ledger.ErrCheckpointFormat},
		{"weak key", weak, good, ledger.ErrInvalidKey},
		{"malformed key", "k+00000000+AAAA", good, ledger.ErrInvalidKey},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := ledger.VerifyCheckpoint(c.key, c.note); !errors.Is(err, c.want) {
				t.Fatalf("VerifyCheckpoint = %v, want %v", err, c.want)
			}
		})
	}
	// Extension lines are signed and accepted, not interpreted.
	if c, err := ledger.VerifyCheckpoint(k.VerifierKey(), sign(origin+"\n3\n"+root+"\nextension\n")); err != nil || c.Size != 3 {
		t.Fatalf("checkpoint with an extension line = %+v, %v", c, err)
	}
}

func base64Root(t *testing.T, signed []byte) string {
	t.Helper()
	lines := strings.Split(string(signed), "\n")
	if len(lines) < 3 {
		t.Fatalf("note %q", signed)
	}
	return lines[2]
}

// TestVerifyWith tampers with a sealed ledger in ways the chain alone may
// or may not see, and checks what Verify and VerifyWith report.
func TestVerifyWith(t *testing.T) {
	ctx := context.Background()
	k := testKey(t, "k", 1)
	opts := ledger.VerifyOptions{VerifierKey: k.VerifierKey(), Origin: origin}
	cases := []struct {
		name       string
		tamper     func(t *testing.T, m *memLedger, auditor *[]byte)
		chainValid bool // plain Verify passes
		seq        uint64
		reason     string
	}{
		{"intact", func(*testing.T, *memLedger, *[]byte) {}, true, 0, ""},
		{"appended after sealing", func(t *testing.T, m *memLedger, _ *[]byte) { grow(t, m, 3) }, true, 0, ""},
		{"changed entry", func(_ *testing.T, m *memLedger, _ *[]byte) { m.entries[4].SubjectID = "forged" }, false, 5, ledger.ReasonHashMismatch},
		{"rewritten and rechained", func(_ *testing.T, m *memLedger, _ *[]byte) {
			m.entries[4].SubjectID = "forged"
			rechain(m, 4)
		}, true, 5, ledger.ReasonCheckpointMismatch},
		{"reordered and rechained", func(_ *testing.T, m *memLedger, _ *[]byte) {
			m.entries[3], m.entries[4] = m.entries[4], m.entries[3]
			rechain(m, 3)
		}, true, 4, ledger.ReasonCheckpointMismatch},
		{"tail cut and head moved", func(_ *testing.T, m *memLedger, _ *[]byte) {
			m.entries = m.entries[:6]
			m.head = ledger.Head{Seq: 6, EntryHash: m.entries[5].EntryHash}
		}, true, 7, ledger.ReasonTruncated},
		{"tail cut, head moved, rechained longer", func(t *testing.T, m *memLedger, _ *[]byte) {
			m.entries = m.entries[:6]
			m.head = ledger.Head{Seq: 6, EntryHash: m.entries[5].EntryHash}
			for i := range 4 { // new entries 7..10 replace the removed 7..8
				r := ledger.Record{Kind: ledger.KindDecision, SubjectID: fmt.Sprintf("new_%d", i), PayloadDigest: ledger.Genesis}
				if _, err := ledger.Append(context.Background(), m, "org", r, t0); err != nil {
					t.Fatal(err)
				}
			}
		}, true, 7, ledger.ReasonCheckpointMismatch},
		{"checkpoint by another key", func(t *testing.T, m *memLedger, _ *[]byte) {
			m.checkpoints[8] = forge(t, m.checkpoints[8], testKey(t, "k", 2), origin)
		}, true, 0, ledger.ReasonCheckpointSignature},
		{"checkpoint of another org", func(t *testing.T, m *memLedger, _ *[]byte) {
			m.checkpoints[8] = forge(t, m.checkpoints[8], k, "clearance.test/ledger/else")
		}, true, 0, ledger.ReasonCheckpointOrigin},
		{"stored size changed", func(_ *testing.T, m *memLedger, _ *[]byte) {
			c := m.checkpoints[8]
			c.Size = 6
			delete(m.checkpoints, 8)
			m.checkpoints[6] = c
		}, true, 0, ledger.ReasonCheckpointMismatch},
		{"newest checkpoint deleted, auditor keeps it", func(_ *testing.T, m *memLedger, auditor *[]byte) {
			*auditor = m.checkpoints[8].Note
			delete(m.checkpoints, 8) // size 5 is latest now
			m.entries = m.entries[:6]
			m.head = ledger.Head{Seq: 6, EntryHash: m.entries[5].EntryHash}
		}, true, 7, ledger.ReasonTruncated},
		{"auditor checkpoint by another key", func(t *testing.T, m *memLedger, auditor *[]byte) {
			*auditor = forge(t, m.checkpoints[8], testKey(t, "k", 2), origin).Note
		}, true, 0, ledger.ReasonCheckpointSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := build(t, 5)
			seal(t, m, k)
			grow(t, m, 3)
			seal(t, m, k)
			var auditor []byte
			c.tamper(t, m, &auditor)
			plain, err := ledger.Verify(ctx, m, "org")
			if err != nil || plain.Valid != c.chainValid {
				t.Fatalf("Verify = %+v, %v; want valid %v", plain, err, c.chainValid)
			}
			o := opts
			o.Checkpoint = auditor
			rep, err := ledger.VerifyWith(ctx, m, "org", o)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Valid != (c.reason == "") || rep.FirstBrokenSeq != c.seq || rep.Reason != c.reason {
				t.Fatalf("VerifyWith = %+v, want first broken %d reason %q", rep, c.seq, c.reason)
			}
			if rep.Valid && (rep.CheckpointsChecked != 1 || rep.CheckpointSize != 8) {
				t.Fatalf("VerifyWith = %+v, want one checkpoint of size 8 checked", rep)
			}
		})
	}
}

// forge signs c's tree (or whatever it says) as origin with key.
func forge(t *testing.T, c ledger.Checkpoint, key note.Signer, origin string) ledger.Checkpoint {
	t.Helper()
	body := fmt.Sprintf("%s\n%d\n%v\n", origin, c.Size, c.Root)
	msg, err := note.Sign(&note.Note{Text: body}, key)
	if err != nil {
		t.Fatal(err)
	}
	return ledger.Checkpoint{Origin: c.Origin, Size: c.Size, Root: c.Root, Note: msg}
}

func TestVerifyWithOptions(t *testing.T) {
	ctx := context.Background()
	k := testKey(t, "k", 1)
	m := build(t, 3)
	rep, err := ledger.VerifyWith(ctx, m, "org", ledger.VerifyOptions{VerifierKey: k.VerifierKey(), Origin: origin})
	if err != nil || !rep.Valid || rep.CheckpointsChecked != 0 {
		t.Fatalf("never sealed: %+v %v", rep, err)
	}
	for _, o := range []ledger.VerifyOptions{
		{Checkpoint: []byte("x")},
		{VerifierKey: k.VerifierKey()},
		{VerifierKey: "nonsense", Origin: origin},
	} {
		if _, err := ledger.VerifyWith(ctx, m, "org", o); err == nil {
			t.Errorf("VerifyWith(%+v) succeeded", o)
		}
	}
}

func TestKey(t *testing.T) {
	k := testKey(t, "clearance.test/ledger", 7)
	if again := testKey(t, "clearance.test/ledger", 7); again.VerifierKey() != k.VerifierKey() {
		t.Fatal("the same seed gave another key")
	}
	parsed, err := ledger.ParseKey(k.PrivateKey())
	if err != nil || parsed.VerifierKey() != k.VerifierKey() || !bytes.Equal(parsed.Seed(), k.Seed()) {
		t.Fatalf("ParseKey(PrivateKey) = %v, %v", parsed, err)
	}
	if s, err := note.NewSigner(k.PrivateKey()); err != nil || s.KeyHash() != k.KeyHash() || s.Name() != k.Name() {
		t.Fatalf("note.NewSigner(PrivateKey) = %v", err)
	}
	skey, vkey, err := note.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{9}, 32)), "sumdb-style")
	if err != nil {
		t.Fatal(err)
	}
	if k2, err := ledger.ParseKey(skey); err != nil || k2.VerifierKey() != vkey {
		t.Fatalf("ParseKey(note.GenerateKey) = %v, %v", k2, err)
	}
	printed := fmt.Sprintf("%v %+v %#v %s %q", k, k, k, k, k)
	for _, secret := range []string{k.PrivateKey(), hex.EncodeToString(k.Seed()), strings.Split(k.PrivateKey(), "+")[4]} {
		if strings.Contains(printed, secret) {
			t.Fatalf("formatting the key printed its secret: %s", printed)
		}
	}
	if !strings.Contains(printed, k.VerifierKey()) {
		t.Fatalf("formatting the key does not name it: %s", printed)
	}
	for _, name := range []string{"", "a b", "a+b", "a\tb", "\xff"} {
		if _, err := ledger.NewKey(name, make([]byte, 32)); !errors.Is(err, ledger.ErrInvalidKey) {
			t.Errorf("NewKey(%q) = %v", name, err)
		}
	}
	if _, err := ledger.NewKey("k", make([]byte, 31)); !errors.Is(err, ledger.ErrInvalidKey) {
		t.Errorf("NewKey(31-byte seed) = %v", err)
	}
	for _, bad := range []string{"", "PRIVATE+KEY+k+00000000+AAAA", k.VerifierKey(), strings.Replace(k.PrivateKey(), "PRIVATE", "PUBLIC", 1)} {
		if _, err := ledger.ParseKey(bad); !errors.Is(err, ledger.ErrInvalidKey) {
			t.Errorf("ParseKey(%q) = %v", bad, err)
		}
	}
}

// TestWeakVerifierKeys: the ledger refuses exactly the public keys grant
// calls weak (every encoding of the eight low-order points).
func TestWeakVerifierKeys(t *testing.T) {
	encodings := []string{
		"0100000000000000000000000000000000000000000000000000000000000000",
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"0000000000000000000000000000000000000000000000000000000000000000",
		"0000000000000000000000000000000000000000000000000000000000000080",
		"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
		"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
		"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
		"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
		"0100000000000000000000000000000000000000000000000000000000000080",
		"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
	}
	for i := range 64 {
		k := testKey(t, "k", byte(i))
		encodings = append(encodings, hex.EncodeToString(ed25519.NewKeyFromSeed(k.Seed()).Public().(ed25519.PublicKey)))
	}
	good := seal(t, build(t, 1), testKey(t, "k", 1)).Note
	for _, h := range encodings {
		pub, _ := hex.DecodeString(h)
		vkey, err := note.NewEd25519VerifierKey("k", pub)
		if err != nil {
			t.Fatal(err)
		}
		_, err = ledger.VerifyCheckpoint(vkey, good)
		weak := errors.Is(grant.ValidatePublicKey(pub), grant.ErrWeakKey)
		if refused := errors.Is(err, ledger.ErrInvalidKey); refused != weak {
			t.Errorf("key %s: ledger refused %v (%v), grant calls it weak %v", h, refused, err, weak)
		}
	}
}

// TestCanonicalEntryMatchesCanon holds the fast RFC 8785 encoding of
// entries to internal/canon for every character below U+0800, a spread of
// the rest, invalid UTF-8 and large seqs (FuzzCanonicalEntry explores more).
func TestCanonicalEntryMatchesCanon(t *testing.T) {
	var samples []string
	for r := rune(0); r < 0x800; r++ {
		samples = append(samples, "a"+string(r)+"z")
	}
	for r := rune(0x800); r <= 0x10FFFF; r += 251 {
		samples = append(samples, string(r))
	}
	samples = append(samples, "\u2028\u2029", "\ufeff", "\xff", "a\xc3", "\xed\xa0\x80", "\"\\\x00\x7f<>&")
	for i, s := range samples {
		seq := []uint64{0, 1, 1<<53 - 1, 1 << 53, 1<<53 + 1, 1<<64 - 1}[i%6]
		e := ledger.Entry{Seq: seq, OrgID: s, Kind: "k" + s, SubjectID: s, PayloadDigest: s, RecordedAt: s, PrevEntryHash: s, EntryHash: s + s}
		want, err := canon.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := e.LeafData(); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("LeafData(%q, seq %d) = %q, %v; want %q", s, seq, got, err, want)
		}
		type hashable struct {
			Seq           uint64 `json:"seq"`
			OrgID         string `json:"org_id"`
			Kind          string `json:"kind"`
			SubjectID     string `json:"subject_id"`
			PayloadDigest string `json:"payload_digest"`
			RecordedAt    string `json:"recorded_at"`
			PrevEntryHash string `json:"prev_entry_hash"`
		}
		wantHash, err := canon.DigestValue(hashable{e.Seq, e.OrgID, e.Kind, e.SubjectID, e.PayloadDigest, e.RecordedAt, e.PrevEntryHash})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := e.ComputeHash(); err != nil || got != wantHash {
			t.Fatalf("ComputeHash(%q, seq %d) = %s, %v; want %s", s, seq, got, err, wantHash)
		}
	}
}
