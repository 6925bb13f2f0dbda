package audit_test

import (
	"context"
	"strings"
	"testing"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/audit"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
)

func TestLedgerPages(t *testing.T) {
	f := newFixture(t, nil)
	f.decide(t, 5) // 6 entries with the org's
	p, err := f.s.Ledger(f.ctx, f.org, 0, 4)
	if err != nil || len(p.Entries) != 4 || p.NextAfterSeq != 4 || p.Head.Seq != 6 || p.OrgID != f.org {
		t.Fatalf("first page: %d entries, next %d, head %d, %v", len(p.Entries), p.NextAfterSeq, p.Head.Seq, err)
	}
	p, err = f.s.Ledger(f.ctx, f.org, p.NextAfterSeq, 4)
	if err != nil || len(p.Entries) != 2 || p.Entries[0].Seq != 5 || p.NextAfterSeq != 0 {
		t.Fatalf("last page: %d entries, next %d, %v", len(p.Entries), p.NextAfterSeq, err)
	}
	p, err = f.s.Ledger(f.ctx, f.org, 6, 0)
	if err != nil || p.Entries == nil || len(p.Entries) != 0 {
		t.Fatalf("past the head: %v entries, %v", p.Entries, err)
	}
	_, err = f.s.Ledger(f.ctx, f.org, 0, audit.MaxLedgerPage+1)
	wantCode(t, err, core.ErrInvalidRequest, core.CodeInvalidRequest)
}

// TestVerifyLedgerChecksRecords: an entry whose record is gone or changed
// breaks the ledger at that entry, with the record's kind named.
func TestVerifyLedgerChecksRecords(t *testing.T) {
	cases := []struct {
		name, kind, artifactKind, body, want string
		stored                               bool
	}{
		{"dossier gone", ledger.KindDecision, "", `{"d":1}`, "dossier ", false},
		{"override kept", ledger.KindOverride, "override", `{"o":1}`, "", true},
		{"dispatch gone", ledger.KindDispatched, "", `{"x":1}`, "dispatch ", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, fixedKey())
			f.decide(t, 1)
			subject := "01941234-5678-7abc-8def-00000000a001"
			err := f.d.Store.Update(f.ctx, f.org, func(tx store.Tx) error {
				if c.stored {
					if err := tx.PutArtifact(f.ctx, artifact.Record{OrgID: f.org, Kind: c.artifactKind, ID: subject, CreatedAt: t0, Body: []byte(c.body)}); err != nil {
						return err
					}
				}
				_, err := ledger.Append(f.ctx, tx, f.org, ledger.Record{Kind: c.kind, SubjectID: subject, PayloadDigest: canon.Digest([]byte(c.body))}, t0)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			f.decide(t, 1)
			rep, err := f.s.VerifyLedger(f.ctx, f.org)
			if err != nil {
				t.Fatal(err)
			}
			if c.want == "" {
				if !rep.Valid {
					t.Fatalf("a kept record broke the ledger: %+v", rep)
				}
				return
			}
			if rep.Valid || rep.FirstBrokenSeq != 3 || rep.Reason != audit.ReasonRecordDigestMismatch ||
				!strings.HasPrefix(rep.Detail, c.want+subject+" is missing") {
				t.Fatalf("report %+v", rep)
			}
		})
	}
}

// TestVerifyLedgerAgainstAKeptCheckpoint: a checkpoint the auditor kept is
// checked; one another key signed is reported, not trusted.
func TestVerifyLedgerAgainstAKeptCheckpoint(t *testing.T) {
	f := newFixture(t, fixedKey())
	f.decide(t, 2)
	cp, err := f.s.SealLedger(f.ctx, f.org)
	if err != nil {
		t.Fatal(err)
	}
	f.decide(t, 1)
	rep, err := f.s.VerifyLedgerAgainst(f.ctx, f.org, cp.Note)
	if err != nil || !rep.Valid || rep.CheckpointsChecked != 2 || rep.EntriesChecked != 4 {
		t.Fatalf("report %+v, %v", rep, err)
	}

	other := newFixture(t, otherKey(t))
	forged, err := other.s.SealLedger(context.Background(), other.org)
	if err != nil {
		t.Fatal(err)
	}
	rep, err = f.s.VerifyLedgerAgainst(f.ctx, f.org, forged.Note)
	if err != nil || rep.Valid || rep.Reason != ledger.ReasonCheckpointSignature {
		t.Fatalf("a checkpoint of another key: %+v, %v", rep, err)
	}
}

func otherKey(t *testing.T) *ledger.Key {
	t.Helper()
	k, err := ledger.NewKey("clearance.example/ledger", []byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	return k
}
