package analytics

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
	"github.com/clearancehq/clearance/tenant"
)

// kernel is a Service over an in-memory Pebble with orgs that each hold
// decisions dossiers (recorded as decide records them).
func kernel(t testing.TB, orgs, decisions int) (*Service, []string) {
	t.Helper()
	backend, err := pebblestore.Open("", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { backend.Close() })
	now := time.Date(2026, 10, 5, 0, 0, 0, 0, time.UTC)
	s := New(core.Deps{Store: core.NewStore(backend), Clock: func() time.Time { return now }, IDs: core.IDs{Rand: rand.Reader},
		Logger: slog.New(slog.DiscardHandler), Issuer: "clearance"}, Config{})
	ctx := context.Background()
	ids := make([]string, orgs)
	for i := range ids {
		ids[i], _ = s.d.IDs.New()
		o := tenant.Org{ID: ids[i], Name: fmt.Sprint("org ", i), CreatedAt: now}
		err := s.d.Store.UpdateNew(ctx, o.ID, func(tx store.Tx) error {
			if err := tx.PutOrg(ctx, o); err != nil {
				return err
			}
			for d := range decisions {
				id, _ := s.d.IDs.New()
				b := dossier.Body{DossierID: id, DecisionID: id, EvaluationID: id, OrgID: o.ID, Route: "evaluate-decision",
					Outcome: "ALLOW", Mode: "SHADOW", CreatedAt: now.Add(time.Duration(d) * time.Second).Format(core.TimeFormat)}
				if d%2 == 1 {
					b.Mode, b.Outcome = "ENFORCEMENT", "BLOCK"
				}
				b.SetCanonicalIntent([]byte(`{"amount":1}`))
				if _, err := dossier.Record(ctx, tx, &b, dossier.Index{}, now.Add(time.Duration(d)*time.Second)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return s, ids
}

// TestRollChangedCountsReviewedOrgsOnly: a pass of Run rolls up the
// changed orgs that are reviewed, and skips (without losing) the others.
func TestRollChangedCountsReviewedOrgsOnly(t *testing.T) {
	s, ids := kernel(t, 2, 6)
	ctx := context.Background()
	if _, err := s.Classify(ctx, ids[0], []byte(`{"environment":"prod","audience":"external","surface":"web"}`)); err != nil {
		t.Fatal(err)
	}
	s.rollChanged(ctx)
	var r rollup
	if err := s.readRollup(ctx, ids[0], &r); err != nil || r.Decisions != 6 || r.EnforcementDecisions != 3 || r.LedgerSeq == 0 {
		t.Fatalf("reviewed org's rollup %+v %v", r, err)
	}
	var other rollup
	if err := s.readRollup(ctx, ids[1], &other); err != nil || other.LedgerSeq != 0 {
		t.Fatalf("an unclassified org was rolled up: %+v %v", other, err)
	}
	months, err := listRecords[monthCells](ctx, s, kindMonth, "2026-10")
	if err != nil || len(months) != 1 || months["2026-10/"+ids[0]].Cells["ENFORCEMENT/BLOCK"] != 3 {
		t.Fatalf("month cells %+v %v", months, err)
	}
	if changed := s.d.Store.TakeChanged(); len(changed) != 0 {
		t.Fatalf("orgs left changed after a pass: %v", changed)
	}
}

// BenchmarkCatchUp is the rollup's cost per decision: a fresh rollup of
// an org's 1,000 decisions each iteration.
func BenchmarkCatchUp(b *testing.B) {
	const decisions = 1000
	s, ids := kernel(b, 1, decisions)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		if err := s.platformUpdate(ctx, func(tx store.Tx) error {
			if err := s.putRecord(ctx, tx, kindRollup, ids[0], refOrg, rollup{OrgID: ids[0]}); err != nil {
				return err
			}
			return s.putRecord(ctx, tx, kindMonth, "2026-10/"+ids[0], "2026-10", monthCells{OrgID: ids[0], Month: "2026-10"})
		}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := s.CatchUp(ctx, ids[0]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*decisions), "ns/decision")
}

// TestReadsCountWithoutWriting: the scorecard and a refused report count
// the decisions no rollup holds yet but write nothing; a freeze writes
// what it counted with its artifact.
func TestReadsCountWithoutWriting(t *testing.T) {
	s, ids := kernel(t, 5, 4)
	ctx := context.Background()
	for _, id := range ids {
		if _, err := s.Classify(ctx, id, []byte(`{"environment":"prod","audience":"external","surface":"web"}`)); err != nil {
			t.Fatal(err)
		}
	}
	sc, err := s.Scorecard(ctx)
	if err != nil || sc.Cohorts[0].Decisions != 20 {
		t.Fatalf("scorecard %+v %v", sc.Cohorts, err)
	}
	var r rollup
	if err := s.readRollup(ctx, ids[0], &r); err != nil || r.LedgerSeq != 0 {
		t.Fatalf("the scorecard wrote a rollup: %+v %v", r, err)
	}
	s.d.Clock = func() time.Time { return time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC) }
	s.cfg.ReportingKey, _ = grant.KeyFromSeed(make([]byte, 32))
	if _, _, err := s.FreezeBlastRadius(ctx, "2026-10"); err == nil {
		t.Fatal("froze a month no consented org decided in")
	}
	if err := s.readRollup(ctx, ids[0], &r); err != nil || r.LedgerSeq != 0 {
		t.Fatalf("a refused report wrote a rollup: %+v %v", r, err)
	}
	for _, id := range ids {
		if _, err := s.SetConsent(ctx, id, []byte(`{"opted_in":true,"consent_reference":"c"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if _, created, err := s.FreezeBlastRadius(ctx, "2026-10"); err != nil || !created {
		t.Fatalf("freeze: %v %v", created, err)
	}
	if err := s.readRollup(ctx, ids[0], &r); err != nil || r.Decisions != 4 || r.LedgerSeq == 0 {
		t.Fatalf("the freeze did not keep what it counted: %+v %v", r, err)
	}
	// What the freeze kept is not counted again.
	if sc, err := s.Scorecard(ctx); err != nil || sc.Cohorts[0].Decisions != 20 {
		t.Fatalf("scorecard after the freeze %+v %v", sc.Cohorts, err)
	}
}
