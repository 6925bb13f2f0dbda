package analytics

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
	"github.com/clearancehq/clearance/tenant"
)

// BenchmarkMonthlyReport computes and signs the blast-radius report of a
// month over 10,000 consented external production orgs that made 100
// decisions each that month, their rollups caught up (what Run keeps
// them): per report, every org's head is checked and its rollup, profile
// and month cells are read once; no dossier is read.
func BenchmarkMonthlyReport(b *testing.B) {
	const orgs, perOrg = 10_000, 100
	now := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	backend, err := pebblestore.Open("", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		b.Fatal(err)
	}
	defer backend.Close()
	key, _ := grant.KeyFromSeed(make([]byte, 32))
	s := New(core.Deps{Store: core.NewStore(backend), Clock: func() time.Time { return now }, IDs: core.IDs{Rand: rand.Reader},
		Logger: slog.New(slog.DiscardHandler), Issuer: "clearance"}, Config{ReportingKey: key})
	ctx := context.Background()
	ids := make([]string, orgs)
	for i := range ids {
		ids[i], _ = s.d.IDs.New()
		o := tenant.Org{ID: ids[i], Name: fmt.Sprint("org ", i), CreatedAt: now.AddDate(0, -2, 0)}
		if err := backend.Update(ctx, o.ID, func(tx store.Tx) error { return tx.PutOrg(ctx, o) }); err != nil {
			b.Fatal(err)
		}
	}
	for lo := 0; lo < orgs; lo += 1000 {
		err := backend.Update(ctx, tenant.PlatformOrgID, func(tx store.Tx) error {
			for i, id := range ids[lo : lo+1000] {
				first := now.AddDate(0, -1, 0)
				p := profile{OrgID: id, Consent: []ConsentEntry{{OptedIn: true, ConsentReference: "c", RecordedAt: first}},
					Classification: &Classification{OrgID: id, Environment: "prod", Audience: "external", Surface: "web", Reviewed: true}}
				r := rollup{OrgID: id, Decisions: perOrg, FirstDecisionAt: &first}
				m := monthCells{OrgID: id, Month: "2026-10", Cells: map[string]int64{}}
				for d := range perOrg {
					m.Cells[cells[(lo+i+d)%len(cells)].key()]++
				}
				for _, rec := range []struct {
					kind, id, ref string
					v             any
				}{{kindProfile, id, refOrg, p}, {kindRollup, id, refOrg, r}, {kindMonth, "2026-10/" + id, "2026-10", m}} {
					if err := s.putRecord(ctx, tx, rec.kind, rec.id, rec.ref, rec.v); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		rep, _, err := s.blastRadius(ctx, "2026-10", time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), now)
		if err != nil {
			b.Fatal(err)
		}
		if !rep.Cells[0].Published || *rep.Cells[0].Organizations != orgs {
			b.Fatalf("cell %+v", rep.Cells[0])
		}
	}
}
