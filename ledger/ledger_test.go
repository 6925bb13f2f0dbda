package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/ledger"
)

// memLedger is an in-memory Tx, SealTx and TreeReader for one org, with
// the contract of the backends (hashes only appended, checkpoints never
// shrink).
type memLedger struct {
	org         string // "" means "org"
	entries     []ledger.Entry
	head        ledger.Head
	hashes      []tlog.Hash
	checkpoints map[uint64]ledger.Checkpoint
	hashReads   int // LedgerHashes/LedgerHashesInTx calls
	// corruptSeq and corruptHead make reads of that entry (any read whose
	// answer would hold it) and of the head fail as a backend does for
	// bytes that no longer decode.
	corruptSeq  uint64
	corruptHead bool
}

func (m *memLedger) OrgID() string {
	if m.org == "" {
		return "org"
	}
	return m.org
}

func (m *memLedger) LedgerEntriesInTx(ctx context.Context, after uint64, limit int) ([]ledger.Entry, error) {
	return m.LedgerEntries(ctx, m.OrgID(), after, limit)
}

func (m *memLedger) LedgerHashesInTx(ctx context.Context, idx []int64) ([]tlog.Hash, error) {
	return m.LedgerHashes(ctx, m.OrgID(), idx)
}

func (m *memLedger) LedgerHashes(_ context.Context, _ string, idx []int64) ([]tlog.Hash, error) {
	m.hashReads++
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		if x < 0 || x >= int64(len(m.hashes)) {
			return nil, fmt.Errorf("mem: no tree hash %d", x)
		}
		out[i] = m.hashes[x]
	}
	return out, nil
}

func (m *memLedger) PutLedgerHashes(_ context.Context, start int64, hs []tlog.Hash) error {
	if start != int64(len(m.hashes)) {
		return fmt.Errorf("mem: hashes at %d do not follow %d", start, len(m.hashes))
	}
	m.hashes = append(m.hashes, hs...)
	return nil
}

func (m *memLedger) LatestCheckpointInTx(ctx context.Context) (ledger.Checkpoint, error) {
	return m.LatestCheckpoint(ctx, m.OrgID())
}

func (m *memLedger) LatestCheckpoint(context.Context, string) (ledger.Checkpoint, error) {
	var latest ledger.Checkpoint
	for _, c := range m.checkpoints {
		if latest.IsZero() || c.Size > latest.Size {
			latest = c
		}
	}
	return latest, nil
}

func (m *memLedger) CheckpointAt(_ context.Context, _ string, size uint64) (ledger.Checkpoint, error) {
	c, ok := m.checkpoints[size]
	if !ok {
		return c, ledger.ErrCheckpointNotFound
	}
	return c, nil
}

func (m *memLedger) PutCheckpoint(ctx context.Context, c ledger.Checkpoint) error {
	if latest, _ := m.LatestCheckpoint(ctx, ""); c.Size < latest.Size {
		return fmt.Errorf("mem: checkpoint %d older than %d", c.Size, latest.Size)
	}
	if m.checkpoints == nil {
		m.checkpoints = make(map[uint64]ledger.Checkpoint)
	}
	m.checkpoints[c.Size] = c
	return nil
}

func (m *memLedger) LedgerHead(context.Context) (ledger.Head, error) { return m.head, nil }

func (m *memLedger) PutLedgerEntry(_ context.Context, e ledger.Entry) error {
	m.entries = append(m.entries, e)
	m.head = ledger.Head{Seq: e.Seq, EntryHash: e.EntryHash}
	return nil
}

func (m *memLedger) LedgerEntries(_ context.Context, _ string, after uint64, limit int) ([]ledger.Entry, error) {
	var out []ledger.Entry
	from := 0 // skip the entries before after when they are in place (long benchmarks)
	if after > 0 && after <= uint64(len(m.entries)) && m.entries[after-1].Seq == after {
		from = int(after)
	}
	for _, e := range m.entries[from:] {
		if e.Seq > after && len(out) < limit {
			if e.Seq == m.corruptSeq {
				return nil, fmt.Errorf("mem: entry %d: %w", e.Seq, ledger.ErrCorrupt)
			}
			out = append(out, e)
		}
	}
	return out, nil
}

func (m *memLedger) LedgerHeadOf(context.Context, string) (ledger.Head, error) {
	if m.corruptHead {
		return ledger.Head{}, fmt.Errorf("mem: head: %w", ledger.ErrCorrupt)
	}
	return m.head, nil
}

var t0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func build(t testing.TB, n int) *memLedger {
	t.Helper()
	m := &memLedger{}
	grow(t, m, n)
	return m
}

// grow appends n more entries to m.
func grow(t testing.TB, m *memLedger, n int) {
	t.Helper()
	start := len(m.entries)
	for i := start; i < start+n; i++ {
		r := ledger.Record{Kind: ledger.KindDecision, SubjectID: fmt.Sprintf("d%d", i), PayloadDigest: canon.Digest([]byte{byte(i)})}
		if _, err := ledger.Append(context.Background(), m, m.OrgID(), r, t0.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAppendLinksEntries(t *testing.T) {
	m := build(t, 3)
	if m.entries[0].Seq != 1 || m.entries[0].PrevEntryHash != ledger.Genesis {
		t.Fatalf("first entry %+v", m.entries[0])
	}
	for i := 1; i < 3; i++ {
		if m.entries[i].PrevEntryHash != m.entries[i-1].EntryHash || m.entries[i].Seq != uint64(i+1) {
			t.Fatalf("entry %d not linked: %+v", i, m.entries[i])
		}
	}
	if _, err := ledger.Append(context.Background(), m, "org", ledger.Record{}, t0); err == nil {
		t.Fatal("a record without kind and subject was appended")
	}
}

func TestVerifyFindsFirstBrokenSeq(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		tamper func(m *memLedger)
		seq    uint64
		reason string
	}{
		{"intact", func(*memLedger) {}, 0, ""},
		{"changed field", func(m *memLedger) { m.entries[4].SubjectID = "forged" }, 5, ledger.ReasonHashMismatch},
		{"rehashed change", func(m *memLedger) {
			m.entries[4].SubjectID = "forged"
			m.entries[4].EntryHash, _ = m.entries[4].ComputeHash()
		}, 6, ledger.ReasonPrevMismatch},
		{"deleted", func(m *memLedger) { m.entries = append(m.entries[:4:4], m.entries[5:]...) }, 5, ledger.ReasonSeqGap},
		{"reordered", func(m *memLedger) { m.entries[3], m.entries[4] = m.entries[4], m.entries[3] }, 4, ledger.ReasonSeqGap},
		{"truncated", func(m *memLedger) { m.entries = m.entries[:7] }, 8, ledger.ReasonHeadMismatch},
		{"other org", func(m *memLedger) { m.entries[2].OrgID = "else" }, 3, ledger.ReasonOrgMismatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := build(t, 8)
			c.tamper(m)
			rep, err := ledger.Verify(ctx, m, "org")
			if err != nil {
				t.Fatal(err)
			}
			if rep.Valid != (c.reason == "") || rep.FirstBrokenSeq != c.seq || rep.Reason != c.reason {
				t.Fatalf("report %+v, want first broken %d reason %q", rep, c.seq, c.reason)
			}
		})
	}
}

// TestVerifyReportsUnreadableRecords: a stored entry or head whose bytes no
// longer decode is tampering to report (valid false, naming the seq), not
// an unavailable store; it is found inside a page of many entries.
func TestVerifyReportsUnreadableRecords(t *testing.T) {
	ctx := context.Background()
	m := build(t, 2500)
	m.corruptSeq = 1700
	rep, err := ledger.Verify(ctx, m, "org")
	if err != nil || rep.Valid || rep.FirstBrokenSeq != 1700 || rep.Reason != ledger.ReasonUnreadable || rep.Detail == "" {
		t.Fatalf("corrupt entry: %+v %v", rep, err)
	}
	m = build(t, 20)
	m.corruptHead = true
	rep, err = ledger.Verify(ctx, m, "org")
	if err != nil || rep.Valid || rep.FirstBrokenSeq != 21 || rep.Reason != ledger.ReasonUnreadable {
		t.Fatalf("corrupt head: %+v %v", rep, err)
	}
}

func TestVerifyPagesThroughLongLedgers(t *testing.T) {
	m := build(t, 2500)
	rep, err := ledger.Verify(context.Background(), m, "org")
	if err != nil || !rep.Valid || rep.EntriesChecked != 2500 {
		t.Fatalf("%+v %v", rep, err)
	}
}

func ExampleVerify() {
	ctx := context.Background()
	m := &memLedger{}
	for _, subject := range []string{"dossier-1", "dossier-2"} {
		r := ledger.Record{Kind: ledger.KindDecision, SubjectID: subject, PayloadDigest: canon.Digest([]byte(subject))}
		if _, err := ledger.Append(ctx, m, "org-1", r, t0); err != nil {
			fmt.Println(err)
			return
		}
	}
	rep, _ := ledger.Verify(ctx, m, "org-1")
	fmt.Println(rep.Valid, rep.EntriesChecked)

	m.entries[0].SubjectID = "dossier-9" // rewrite history
	rep, _ = ledger.Verify(ctx, m, "org-1")
	fmt.Println(rep.Valid, rep.FirstBrokenSeq, rep.Reason)
	// Output:
	// true 2
	// false 1 ENTRY_HASH_MISMATCH
}
