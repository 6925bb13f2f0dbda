package ledger_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/clearancehq/clearance/internal/canon"
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

// FuzzVerifyCheckpoint signs a fuzzed note text with the ledger key and
// also opens fuzzed raw bytes as a signed note. VerifyCheckpoint must never
// panic; a text it accepts must start with exactly the C2SP checkpoint body
// of what it returned (origin, size without leading zeros, base64 root),
// followed only by non-empty extension lines; and raw bytes it accepts must
// carry a valid signature by the key.
func FuzzVerifyCheckpoint(f *testing.F) {
	k := testKey(f, "clearance.test/ledger", 1)
	m := build(f, 5)
	c, err := ledger.Seal(context.Background(), m, k, origin, ledger.SealOptions{})
	if err != nil {
		f.Fatal(err)
	}
	body, _, _ := strings.Cut(string(c.Note), "\n\n")
	f.Add(body+"\n", c.Note)
	f.Add(body+"\next\n", []byte("x\n\n— k AAAA\n"))
	f.Add(origin+"\n05\n"+strings.Split(body, "\n")[2]+"\n", []byte{})
	f.Add(origin+"\n9223372036854775808\nAAAA\n", bytes.Replace(c.Note, []byte("\n5\n"), []byte("\n6\n"), 1))
	f.Add("\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n", []byte(body))
	f.Add("o\n1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU\n", c.Note[:len(c.Note)-3])
	f.Fuzz(func(t *testing.T, text string, raw []byte) {
		if msg, err := note.Sign(&note.Note{Text: text}, k); err == nil {
			got, err := ledger.VerifyCheckpoint(k.VerifierKey(), msg)
			if err == nil {
				want := fmt.Sprintf("%s\n%d\n%s\n", got.Origin, got.Size, base64.StdEncoding.EncodeToString(got.Root[:]))
				rest, ok := strings.CutPrefix(text, want)
				if !ok {
					t.Fatalf("accepted %q as %+v, whose body is %q", text, got, want)
				}
				for _, l := range strings.Split(rest, "\n")[:max(0, strings.Count(rest, "\n"))] {
					if l == "" {
						t.Fatalf("accepted an empty extension line in %q", text)
					}
				}
				if !bytes.Equal(got.Note, msg) {
					t.Fatal("the returned Note is not the signed note")
				}
			}
		}
		if got, err := ledger.VerifyCheckpoint(k.VerifierKey(), raw); err == nil {
			v, verr := note.NewVerifier(k.VerifierKey())
			if verr != nil {
				t.Fatal(verr)
			}
			if _, err := note.Open(raw, note.VerifierList(v)); err != nil {
				t.Fatalf("accepted %q (%+v) that note.Open refuses: %v", raw, got, err)
			}
		}
	})
}

// FuzzCanonicalEntry holds the ledger's fast canonical encoding of an
// entry to the general one (internal/canon: encoding/json, then RFC 8785)
// byte for byte: LeafData is canon.Marshal of the entry, ComputeHash the
// digest of canon.Marshal of the entry without entry_hash.
func FuzzCanonicalEntry(f *testing.F) {
	f.Add(uint64(1), "org_1", "decision.recorded", "dos_1", "sha256:ab", "2026-11-01T00:00:00Z", ledger.Genesis, "sha256:cd")
	f.Add(uint64(0), "", "", "", "", "", "", "")
	f.Add(uint64(1<<53), "\x00\x1f\x7f", "\"\\/", "<>&", "\u2028\u2029", "\b\f\n\r\t", "é€😀", "\ufffd")
	f.Add(uint64(1<<53+1), "a", "b", "c", "d", "e", "f", "g")
	f.Add(uint64(18446744073709551615), "\xff", "\xc3", "ok", "\xed\xa0\x80", "x", "y", "z")
	f.Fuzz(func(t *testing.T, seq uint64, org, kind, subject, digest, at, prev, hash string) {
		e := ledger.Entry{Seq: seq, OrgID: org, Kind: kind, SubjectID: subject, PayloadDigest: digest, RecordedAt: at, PrevEntryHash: prev, EntryHash: hash}
		want, werr := canon.Marshal(e)
		got, gerr := e.LeafData()
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("LeafData = %q, %v; canon.Marshal = %q, %v", got, gerr, want, werr)
		}
		leaf, lerr := e.LeafHash()
		if werr == nil && (lerr != nil || leaf != tlog.RecordHash(want)) {
			t.Fatalf("LeafHash = %v, %v; want RecordHash(canon.Marshal)", leaf, lerr)
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
		wantHash, werr := canon.DigestValue(hashable{seq, org, kind, subject, digest, at, prev})
		gotHash, gerr := e.ComputeHash()
		if (werr == nil) != (gerr == nil) || gotHash != wantHash {
			t.Fatalf("ComputeHash = %q, %v; canon = %q, %v", gotHash, gerr, wantHash, werr)
		}
	})
}
