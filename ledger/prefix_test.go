package ledger_test

import (
	"context"
	"strings"
	"testing"

	"github.com/clearancehq/clearance/ledger"
)

func TestVerifyPrefix(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		n      uint64
		tamper func(m *memLedger)
		seq    uint64 // first broken seq; 0: valid
		reason string
	}{
		{"intact", 5, func(*memLedger) {}, 0, ""},
		{"empty prefix", 0, func(*memLedger) {}, 0, ""},
		{"whole ledger", 8, func(*memLedger) {}, 0, ""},
		{"changed after the prefix", 5, func(m *memLedger) { m.entries[6].SubjectID = "forged" }, 0, ""},
		{"head moved", 5, func(m *memLedger) { m.head = ledger.Head{Seq: 99, EntryHash: "x"} }, 0, ""},
		{"changed entry n", 5, func(m *memLedger) { m.entries[4].SubjectID = "forged" }, 5, ledger.ReasonHashMismatch},
		{"rehashed change before n", 5, func(m *memLedger) {
			m.entries[2].SubjectID = "forged"
			m.entries[2].EntryHash, _ = m.entries[2].ComputeHash()
		}, 4, ledger.ReasonPrevMismatch},
		{"deleted before n", 5, func(m *memLedger) { m.entries = append(m.entries[:2:2], m.entries[3:]...) }, 3, ledger.ReasonSeqGap},
		{"other org", 5, func(m *memLedger) { m.entries[0].OrgID = "else" }, 1, ledger.ReasonOrgMismatch},
		{"beyond the chain", 11, func(*memLedger) {}, 9, ledger.ReasonSeqGap},
		{"truncated before n", 5, func(m *memLedger) { m.entries = m.entries[:3] }, 4, ledger.ReasonSeqGap},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := build(t, 8)
			c.tamper(m)
			rep, err := ledger.VerifyPrefix(ctx, m, "org", c.n)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Valid != (c.reason == "") || rep.FirstBrokenSeq != c.seq || rep.Reason != c.reason {
				t.Fatalf("report %+v, want first broken %d reason %q", rep, c.seq, c.reason)
			}
			if rep.Valid && (rep.HeadSeq != c.n || rep.EntriesChecked != c.n) {
				t.Fatalf("report %+v, want entry %d as its end", rep, c.n)
			}
			if rep.Valid && c.n > 0 && rep.HeadHash != m.entries[c.n-1].EntryHash {
				t.Fatalf("report %+v, want the hash of entry %d", rep, c.n)
			}
		})
	}
}

func TestVerifyPrefixPagesThroughLongLedgers(t *testing.T) {
	m := build(t, 2500)
	rep, err := ledger.VerifyPrefix(context.Background(), m, "org", 2345)
	if err != nil || !rep.Valid || rep.EntriesChecked != 2345 || rep.HeadSeq != 2345 {
		t.Fatalf("%+v %v", rep, err)
	}
}

func TestVerifyFromReadsOnlyAfterTheTrustedEntry(t *testing.T) {
	ctx := context.Background()
	m := build(t, 8)
	trusted := m.entries[4] // seq 5
	// A change at or before the trusted entry is not read: the caller
	// vouches for it (a signed checkpoint includes it).
	m.entries[1].SubjectID = "forged"
	rep, err := ledger.VerifyFrom(ctx, m, "org", trusted, 8)
	if err != nil || !rep.Valid || rep.EntriesChecked != 3 || rep.HeadSeq != 8 {
		t.Fatalf("%+v %v", rep, err)
	}
	if rep, _ := ledger.VerifyFrom(ctx, m, "org", trusted, 5); !rep.Valid || rep.EntriesChecked != 0 {
		t.Fatalf("the trusted entry itself: %+v", rep)
	}
	// An entry after it that does not link to it is broken.
	other := trusted
	other.EntryHash = "sha256:" + strings.Repeat("0", 64)
	if rep, _ := ledger.VerifyFrom(ctx, m, "org", other, 8); rep.Valid || rep.FirstBrokenSeq != 6 || rep.Reason != ledger.ReasonPrevMismatch {
		t.Fatalf("a wrong trusted hash: %+v", rep)
	}
	m.entries[6].SubjectID = "forged"
	if rep, _ := ledger.VerifyFrom(ctx, m, "org", trusted, 8); rep.Valid || rep.FirstBrokenSeq != 7 || rep.Reason != ledger.ReasonHashMismatch {
		t.Fatalf("a changed entry after it: %+v", rep)
	}
	if rep, _ := ledger.VerifyFrom(ctx, m, "org", trusted, 4); rep.Valid || rep.Reason != ledger.ReasonSeqGap {
		t.Fatalf("n before the trusted entry: %+v", rep)
	}
}
