package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/clearancehq/clearance/ledger"
)

// fuzzChain is an in-memory ledger Reader whose entries are served exactly as
// stored (any order, any seq), so Verify sees whatever the fuzzer built.
type fuzzChain struct {
	entries []ledger.Entry
	head    ledger.Head
}

func (c *fuzzChain) LedgerEntries(_ context.Context, _ string, after uint64, limit int) ([]ledger.Entry, error) {
	var out []ledger.Entry
	for _, e := range c.entries {
		if e.Seq > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

func (c *fuzzChain) LedgerHeadOf(context.Context, string) (ledger.Head, error) { return c.head, nil }

// FuzzVerify builds a chain of n entries with ledger.Next from fuzzed
// records (org, kind, subject, digest, time), then applies one fuzzed
// tampering: edit a field of one entry, drop, duplicate or swap entries, or
// move the head. Verify must never panic or fail to read; an untampered
// chain must verify; and any chain Verify accepts must recompute: seqs
// 1..n, each entry's hash recomputed, each prev_entry_hash the previous
// entry's hash (Genesis first), every entry the org's, ending at the head.
func FuzzVerify(f *testing.F) {
	f.Add("org-1", uint8(3), "decision.recorded", "dec-1", "sha256:"+hex64('a'), int64(1_700_000_000), uint8(0), uint8(0), "")
	f.Add("org-1", uint8(5), ledger.KindGrantIssued, "grant-1", "sha256:"+hex64('b'), int64(0), uint8(1), uint8(2), "x")
	f.Add("org-1", uint8(4), ledger.KindClaimed, "grant-2", "", int64(-1), uint8(2), uint8(1), "")
	f.Add("org-2", uint8(2), ledger.KindFinalized, "g", "d", int64(253402300800), uint8(3), uint8(0), "")
	f.Add("org-1", uint8(6), ledger.KindOrgCreated, "org-1", "", int64(42), uint8(4), uint8(3), "org-2")
	f.Add("", uint8(1), "", "", "", int64(0), uint8(5), uint8(4), "sha256:"+hex64('0'))
	f.Add("o", uint8(7), "k", "s", "\u2028\"\\", int64(1), uint8(6), uint8(5), "\xff")
	f.Add("o", uint8(0), "k", "s", "", int64(1), uint8(7), uint8(6), "7")
	f.Add("o", uint8(3), "k", "s", "", int64(1), uint8(8), uint8(7), "")
	f.Fuzz(func(t *testing.T, org string, n uint8, kind, subject, digest string, at int64, op, which uint8, val string) {
		ctx := context.Background()
		c := &fuzzChain{}
		count := int(n % 40)
		when := time.Unix(at, 0)
		for i := range count {
			e, err := ledger.Next(c.head, org, ledger.Record{Kind: kind, SubjectID: subject, PayloadDigest: digest}, when.Add(time.Duration(i)*time.Millisecond))
			if err != nil {
				t.Skip() // not UTF-8 etc.: Append would not have written it
			}
			c.entries = append(c.entries, e)
			c.head = ledger.Head{Seq: e.Seq, EntryHash: e.EntryHash}
		}
		rep, err := ledger.Verify(ctx, c, org)
		if err != nil || !rep.Valid || rep.EntriesChecked != uint64(count) {
			t.Fatalf("untampered chain of %d: %+v %v", count, rep, err)
		}

		tamper(c, op, which, val)
		rep, err = ledger.Verify(ctx, c, org)
		if err != nil {
			t.Fatalf("in-memory read failed: %v", err)
		}
		if !rep.Valid {
			if rep.Reason == "" {
				t.Fatalf("invalid report without a reason: %+v", rep)
			}
			return
		}
		recompute(t, c, org, rep)
	})
}

func hex64(c byte) string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return string(b)
}

// tamper applies one change, chosen by op, to the entry chosen by which.
func tamper(c *fuzzChain, op, which uint8, val string) {
	if len(c.entries) == 0 {
		if op%2 == 1 {
			c.head = ledger.Head{Seq: uint64(which), EntryHash: val}
		}
		return
	}
	i := int(which) % len(c.entries)
	e := &c.entries[i]
	switch op % 12 {
	case 0: // no change
	case 1:
		e.Kind = val
	case 2:
		e.SubjectID = val
	case 3:
		e.PayloadDigest = val
	case 4:
		e.OrgID = val
	case 5:
		e.PrevEntryHash = val
	case 6:
		e.EntryHash = val
	case 7:
		e.RecordedAt = val
	case 8:
		e.Seq += uint64(which%3) + 1
	case 9: // delete entry i
		c.entries = append(c.entries[:i], c.entries[i+1:]...)
	case 10: // duplicate entry i at the end
		c.entries = append(c.entries, *e)
	case 11: // move the head back or replace its hash
		if which%2 == 0 && c.head.Seq > 0 {
			prev := c.entries[len(c.entries)-1]
			c.head = ledger.Head{Seq: prev.Seq - 1, EntryHash: prev.PrevEntryHash}
		} else {
			c.head.EntryHash = val
		}
	}
}

// recompute checks an accepted chain independently of Verify.
func recompute(t *testing.T, c *fuzzChain, org string, rep ledger.Report) {
	t.Helper()
	prevHash, seq := ledger.Genesis, uint64(0)
	for _, e := range c.entries {
		seq++
		if e.Seq != seq || e.OrgID != org || e.PrevEntryHash != prevHash {
			t.Fatalf("accepted a broken link at entry %d: %+v (report %+v)", seq, e, rep)
		}
		h, err := e.ComputeHash()
		if err != nil || h != e.EntryHash {
			t.Fatalf("accepted entry %d whose hash does not recompute: %s vs %s (%v)", seq, h, e.EntryHash, err)
		}
		prevHash = e.EntryHash
	}
	if rep.EntriesChecked != seq || c.head.Seq != seq || (seq > 0 && c.head.EntryHash != prevHash) {
		t.Fatalf("accepted a chain that does not end at the head: %d entries, head %+v, report %+v", seq, c.head, rep)
	}
}
