package analytics

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/store"
)

// hookBackend runs hook once, right before a report lists its month cells:
// between the freeze's reads, where another server's write may land.
type hookBackend struct {
	store.Backend
	once sync.Once
	hook func()
}

func (h *hookBackend) ArtifactsByRef(ctx context.Context, org, kind, ref string, limit int) ([]artifact.Record, error) {
	if kind == kindMonth && h.hook != nil {
		h.once.Do(h.hook)
	}
	return h.Backend.ArtifactsByRef(ctx, org, kind, ref, limit)
}

// fiveConsented: five consented prod/external orgs, each with 2
// SHADOW/ALLOW and 2 ENFORCEMENT/BLOCK decisions in October 2026, none
// rolled up, and the clock in November.
func fiveConsented(t *testing.T) (*Service, []string, *hookBackend) {
	s, ids := kernel(t, 5, 4)
	ctx := context.Background()
	for _, id := range ids {
		if _, err := s.Classify(ctx, id, []byte(`{"environment":"prod","audience":"external","surface":"web"}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SetConsent(ctx, id, []byte(`{"opted_in":true,"consent_reference":"c"}`)); err != nil {
			t.Fatal(err)
		}
	}
	hb := &hookBackend{Backend: s.d.Store.Backend}
	s.d.Store.Backend = hb
	s.d.Clock = func() time.Time { return time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC) }
	s.cfg.ReportingKey, _ = grant.KeyFromSeed(make([]byte, 32))
	return s, ids, hb
}

func publishedCells(t *testing.T, body []byte) map[string]string {
	t.Helper()
	var fr FrozenReport
	if err := json.Unmarshal(body, &fr); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range fr.Report.Cells {
		if c.Published {
			out[c.Mode+"/"+c.Outcome] = fmt.Sprintf("%d/%d", *c.Organizations, *c.Decisions)
		}
	}
	return out
}

// TestFreezeCountsRollupsStoredMeanwhileOnce: the worker rolls every org
// up between the report's rollup read and its month-cell read; those
// decisions are counted once.
func TestFreezeCountsRollupsStoredMeanwhileOnce(t *testing.T) {
	s, ids, hb := fiveConsented(t)
	ctx := context.Background()
	hb.hook = func() {
		for _, id := range ids {
			if err := s.CatchUp(ctx, id); err != nil {
				t.Error(err)
			}
		}
	}
	body, created, err := s.FreezeBlastRadius(ctx, "2026-10")
	if err != nil || !created {
		t.Fatal(created, err)
	}
	want := map[string]string{"SHADOW/ALLOW": "5/10", "ENFORCEMENT/BLOCK": "5/10"}
	if got := publishedCells(t, body); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("cells %v, want %v", got, want)
	}
}

// TestFreezeSeesConsentWithdrawnMeanwhile: a withdrawal acknowledged
// before the freeze commits is honoured: the freeze computes again, and
// with four orgs left nothing is published.
func TestFreezeSeesConsentWithdrawnMeanwhile(t *testing.T) {
	s, ids, hb := fiveConsented(t)
	ctx := context.Background()
	hb.hook = func() {
		if _, err := s.SetConsent(ctx, ids[0], []byte(`{"opted_in":false,"consent_reference":"withdrawn"}`)); err != nil {
			t.Error(err)
		}
	}
	if _, _, err := s.FreezeBlastRadius(ctx, "2026-10"); !isCode(err, CodeInsufficientCohort) {
		t.Fatalf("freeze over a withdrawn consent: %v", err)
	}
}

// TestFreezeGivesUpWhenProfilesKeepChanging: 409 COHORT_CHANGED, nothing
// frozen.
func TestFreezeGivesUpWhenProfilesKeepChanging(t *testing.T) {
	s, ids, _ := fiveConsented(t)
	ctx := context.Background()
	churn := &churnBackend{Backend: s.d.Store.Backend, change: func() {
		if _, err := s.Classify(ctx, ids[1], []byte(`{"environment":"prod","audience":"external","surface":"web"}`)); err != nil {
			t.Error(err)
		}
	}}
	s.d.Store.Backend = churn
	if _, _, err := s.FreezeBlastRadius(ctx, "2026-10"); !isCode(err, CodeCohortChanged) {
		t.Fatalf("freeze under churn: %v", err)
	}
	churn.change = nil
	if _, created, err := s.FreezeBlastRadius(ctx, "2026-10"); err != nil || !created {
		t.Fatalf("freeze once it stopped: %v %v", created, err)
	}
}

// churnBackend changes a profile before every listing of month cells.
type churnBackend struct {
	store.Backend
	change func()
}

func (c *churnBackend) ArtifactsByRef(ctx context.Context, org, kind, ref string, limit int) ([]artifact.Record, error) {
	if kind == kindMonth && c.change != nil {
		c.change()
	}
	return c.Backend.ArtifactsByRef(ctx, org, kind, ref, limit)
}

// TestTamperedDossierFailsClosed: a dossier that is not the one its ledger
// entry records makes counting fail (503), and the rollup does not move.
func TestTamperedDossierFailsClosed(t *testing.T) {
	s, ids := kernel(t, 1, 3)
	ctx := context.Background()
	entries, err := s.d.Store.LedgerEntries(ctx, ids[0], 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	s.d.Store.Backend = &tamperBackend{Backend: s.d.Store.Backend, id: entries[0].SubjectID}
	if err := s.CatchUp(ctx, ids[0]); !isCode(err, "STORE_UNAVAILABLE") {
		t.Fatalf("catch-up over a tampered dossier: %v", err)
	}
	var r rollup
	if err := s.readRollup(ctx, ids[0], &r); err != nil || r.LedgerSeq != 0 {
		t.Fatalf("the rollup moved past a tampered dossier: %+v %v", r, err)
	}
}

func isCode(err error, code string) bool { return err != nil && codeOf(err) == code }

func codeOf(err error) string {
	if e, ok := err.(*core.Error); ok {
		return e.Code
	}
	return ""
}

// tamperBackend answers the dossier id with an outcome and body that are
// not the ones recorded.
type tamperBackend struct {
	store.Backend
	id string
}

func (b *tamperBackend) Dossier(ctx context.Context, org, id string) (dossier.Stored, error) {
	d, err := b.Backend.Dossier(ctx, org, id)
	if err == nil && id == b.id {
		d.Outcome = "ESCALATE"
		d.Body = []byte(strings.Replace(string(d.Body), `"outcome":"ALLOW"`, `"outcome":"ESCALATE"`, 1))
	}
	return d, err
}
