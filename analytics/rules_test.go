package analytics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance/analytics"
	"github.com/clearancehq/clearance/grant"
)

var october = time.Date(2026, 10, 10, 12, 0, 0, 0, time.UTC)

// cellsOf freezes month and returns its cells by mode/outcome: "n/d" for a
// published cell (orgs/decisions), "-" for a suppressed one.
func (x *env) cellsOf(month string) map[string]string {
	x.t.Helper()
	body, _, err := x.e.Analytics.FreezeBlastRadius(context.Background(), month)
	if err != nil {
		x.t.Fatalf("freeze %s: %v", month, err)
	}
	var fr analytics.FrozenReport
	if err := json.Unmarshal(body, &fr); err != nil {
		x.t.Fatal(err)
	}
	rep, err := analytics.VerifyReport(fr.Artifact, x.key.Public())
	if err != nil {
		x.t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range rep.Cells {
		if c.Published {
			out[c.Mode+"/"+c.Outcome] = fmt.Sprintf("%d/%d", *c.Organizations, *c.Decisions)
		} else {
			out[c.Mode+"/"+c.Outcome] = "-"
		}
	}
	return out
}

// TestSuppressionAtFourAndFive: a cell of 4 orgs is suppressed, of 5
// published, with exact counts.
func TestSuppressionAtFourAndFive(t *testing.T) {
	x := newEnv(t, october)
	var orgs []string
	for i := range 5 {
		orgs = append(orgs, x.org(fmt.Sprint("o", i), "prod", "external", yes(), false))
	}
	for i, o := range orgs {
		x.decide(o, 5) // SHADOW/ALLOW: 5 orgs
		if i < 4 {
			x.decide(o, 50000) // SHADOW/BLOCK: 4 orgs
			x.decide(o, 50000)
		}
	}
	x.set(time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC))
	got := x.cellsOf("2026-10")
	if got["SHADOW/ALLOW"] != "5/5" || got["SHADOW/BLOCK"] != "-" || got["SHADOW/ESCALATE"] != "-" {
		t.Fatalf("cells %v", got)
	}
}

// TestConsentRevocationAffectsLaterReportsOnly: a frozen month keeps the
// org; the next month, frozen after the revocation, drops it.
func TestConsentRevocationAffectsLaterReportsOnly(t *testing.T) {
	x := newEnv(t, october)
	var orgs []string
	for i := range 5 {
		orgs = append(orgs, x.org(fmt.Sprint("o", i), "prod", "external", yes(), false))
	}
	for _, o := range orgs {
		x.decide(o, 5)
	}
	x.set(time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC))
	for _, o := range orgs {
		x.decide(o, 5)
	}
	october := x.cellsOf("2026-10")
	c, err := x.e.Analytics.SetConsent(context.Background(), orgs[0], []byte(`{"opted_in":false,"consent_reference":"ticket-9"}`))
	if err != nil || c.OptedIn || len(c.History) != 2 || !c.History[0].OptedIn {
		t.Fatalf("revocation: %+v %v", c, err)
	}
	x.set(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	if again := x.cellsOf("2026-10"); fmt.Sprint(again) != fmt.Sprint(october) || october["SHADOW/ALLOW"] != "5/5" {
		t.Fatalf("frozen October changed: %v then %v", october, again)
	}
	// Four consented orgs are left: too few for any cell, so November is
	// not published at all.
	if _, _, err := x.e.Analytics.FreezeBlastRadius(context.Background(), "2026-11"); code(err) != analytics.CodeInsufficientCohort {
		t.Fatalf("November with a revoked org: %v", err)
	}
}

// TestEmptyCohortIsNotFrozen: 409, nothing stored, so the month can still
// be frozen once an org consents.
func TestEmptyCohortIsNotFrozen(t *testing.T) {
	x := newEnv(t, october)
	var orgs []string
	for i := range 5 {
		orgs = append(orgs, x.org(fmt.Sprint("o", i), "prod", "external", nil, false))
		x.decide(orgs[i], 5)
	}
	x.set(time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC))
	ctx := context.Background()
	if _, _, err := x.e.Analytics.FreezeBlastRadius(ctx, "2026-10"); code(err) != analytics.CodeInsufficientCohort {
		t.Fatalf("empty cohort: %v", err)
	}
	for i, o := range orgs {
		if _, err := x.e.Analytics.SetConsent(ctx, o, []byte(`{"opted_in":true,"consent_reference":"c"}`)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := x.e.Analytics.FreezeBlastRadius(ctx, "2026-10"); i < 4 && code(err) != analytics.CodeInsufficientCohort {
			t.Fatalf("a cohort of %d: %v", i+1, err)
		}
	}
	if _, created, err := x.e.Analytics.FreezeBlastRadius(ctx, "2026-10"); err != nil || created {
		t.Fatalf("after the fifth consent: created %v, %v (want the report the fifth freeze made)", created, err)
	}
}

// TestNoReportingKey: a new report is 503; one frozen before is served.
func TestNoReportingKey(t *testing.T) {
	x := newEnv(t, october)
	for i := range 5 {
		x.decide(x.org(fmt.Sprint("o", i), "prod", "external", yes(), false), 5)
	}
	x.set(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	ctx := context.Background()
	frozen, _, err := x.e.Analytics.FreezeBlastRadius(ctx, "2026-10")
	if err != nil {
		t.Fatal(err)
	}
	x.open(grant.Key{})
	if _, _, err := x.e.Analytics.FreezeBlastRadius(ctx, "2026-11"); code(err) != analytics.CodeReportingKeyNotConfigured {
		t.Fatalf("new report without a key: %v", err)
	}
	if body, created, err := x.e.Analytics.FreezeBlastRadius(ctx, "2026-10"); err != nil || created || string(body) != string(frozen) {
		t.Fatalf("frozen report without a key: %v %v", created, err)
	}
	// The key that signed October is still published, so October verifies.
	set, err := x.e.Analytics.ReportingJWKS(ctx)
	if err != nil || len(set.Keys) != 1 || set.Keys[0].KeyID != x.key.KID() {
		t.Fatalf("JWKS after the key was removed: %+v %v", set, err)
	}
}

// TestMonthRules: the path's month must be a completed 20xx month.
func TestMonthRules(t *testing.T) {
	x := newEnv(t, time.Date(2026, 11, 30, 23, 59, 59, 0, time.UTC))
	for month, want := range map[string]string{
		"2026-11": analytics.CodeMonthNotComplete, "2026-12": analytics.CodeMonthNotComplete, "2099-01": analytics.CodeMonthNotComplete,
		"1999-12": analytics.CodeInvalidMonth, "2026-13": analytics.CodeInvalidMonth, "2026-00": analytics.CodeInvalidMonth,
		"2026-1": analytics.CodeInvalidMonth, "26-01": analytics.CodeInvalidMonth, "2026-01-01": analytics.CodeInvalidMonth,
		"": analytics.CodeInvalidMonth, "２０２６-01": analytics.CodeInvalidMonth, "2026-10\n": analytics.CodeInvalidMonth,
		"2026-10": analytics.CodeInsufficientCohort,
	} {
		if _, _, err := x.e.Analytics.FreezeBlastRadius(context.Background(), month); code(err) != want {
			t.Errorf("month %q: %v, want %s", month, err, want)
		}
	}
	// Complete once decisions stamped in it have committed: a minute on.
	x.set(time.Date(2026, 12, 1, 0, 0, 59, 0, time.UTC))
	for month, want := range map[string]string{"2026-11": analytics.CodeMonthNotComplete} {
		if _, _, err := x.e.Analytics.FreezeBlastRadius(context.Background(), month); code(err) != want {
			t.Errorf("month %q: %v, want %s", month, err, want)
		}
	}
}

// TestClassificationFreezesFirstTouch: surface and source_utm of the first
// classification stay; environment and audience follow the latest.
func TestClassificationFreezesFirstTouch(t *testing.T) {
	x := newEnv(t, october)
	o := x.org("o", "", "", nil, false)
	ctx := context.Background()
	first, err := x.e.Analytics.Classify(ctx, o, []byte(`{"environment":"dev","audience":"sandbox","surface":"cli","source_utm":{"source":"hn"}}`))
	if err != nil || first.Reviewed {
		t.Fatalf("first: %+v %v", first, err)
	}
	x.set(october.Add(time.Hour))
	later, err := x.e.Analytics.Classify(ctx, o, []byte(`{"environment":"prod","audience":"external","surface":"web","source_utm":{"source":"ads","medium":"cpc"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if later.Surface != "cli" || later.FirstTouch.Surface != "cli" || later.FirstTouch.SourceUTM == nil ||
		*later.FirstTouch.SourceUTM != (analytics.UTM{Source: "hn"}) || !later.FirstTouch.ClassifiedAt.Equal(october) {
		t.Fatalf("first touch moved: %+v", later)
	}
	if later.Environment != "prod" || later.Audience != "external" || !later.Reviewed || !later.UpdatedAt.Equal(october.Add(time.Hour)) {
		t.Fatalf("environment and audience not updated: %+v", later)
	}
}

// TestBadBodies: refused with a stable code, nothing recorded.
func TestBadBodies(t *testing.T) {
	x := newEnv(t, october)
	o := x.org("o", "", "", nil, false)
	ctx := context.Background()
	long := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = 'a'
		}
		return string(b)
	}
	for body, want := range map[string]string{
		`{"opted_in":true}`:                                         "MISSING_FIELD",
		`{"consent_reference":"x"}`:                                 "MISSING_FIELD",
		`{"opted_in":null,"consent_reference":"x"}`:                 "MISSING_FIELD",
		`{"opted_in":true,"consent_reference":""}`:                  analytics.CodeInvalidConsent,
		`{"opted_in":true,"consent_reference":"` + long(501) + `"}`: analytics.CodeInvalidConsent,
		`{"opted_in":true,"consent_reference":"a\u0007b"}`:          analytics.CodeInvalidConsent,
		`{"opted_in":true,"consent_reference":"a\u202eb"}`:          analytics.CodeInvalidConsent,
		`{"opted_in":true,"consent_reference":"a\u2028b"}`:          analytics.CodeInvalidConsent,
		`{"opted_in":true,"consent_reference":"x","extra":1}`:       "UNKNOWN_MEMBER",
		`{"opted_in":"yes","consent_reference":"x"}`:                "WRONG_TYPE",
	} {
		if _, err := x.e.Analytics.SetConsent(ctx, o, []byte(body)); code(err) != want {
			t.Errorf("consent %s: %v, want %s", body, err, want)
		}
	}
	if _, err := x.e.Analytics.SetConsent(ctx, o, []byte(`{"opted_in":true,"consent_reference":"`+long(500)+`"}`)); err != nil {
		t.Errorf("500 characters: %v", err)
	}
	for body, want := range map[string]string{
		`{"environment":"prod","audience":"external"}`:                                                             "MISSING_FIELD",
		`{"environment":"production","audience":"external","surface":"web"}`:                                       analytics.CodeInvalidClassification,
		`{"environment":"prod","audience":"public","surface":"web"}`:                                               analytics.CodeInvalidClassification,
		`{"environment":"prod","audience":"external","surface":"Web"}`:                                             analytics.CodeInvalidClassification,
		`{"environment":"prod","audience":"external","surface":"1web"}`:                                            analytics.CodeInvalidClassification,
		`{"environment":"prod","audience":"external","surface":"` + long(81) + `"}`:                                analytics.CodeInvalidClassification,
		`{"environment":"prod","audience":"external","surface":"web","source_utm":{"source":"` + long(121) + `"}}`: analytics.CodeInvalidClassification,
		`{"environment":"prod","audience":"external","surface":"web","source_utm":{"term":"x"}}`:                   "UNKNOWN_MEMBER",
		`{"environment":"prod","audience":"external","surface":"web","extra":true}`:                                "UNKNOWN_MEMBER",
	} {
		if _, err := x.e.Analytics.Classify(ctx, o, []byte(body)); code(err) != want {
			t.Errorf("classify %s: %v, want %s", body, err, want)
		}
	}
	sc, err := x.e.Analytics.Scorecard(ctx)
	if err != nil || sc.Population.Unclassified != 1 {
		t.Fatalf("a refused classification was recorded: %+v %v", sc.Population, err)
	}
	for _, org := range []string{"not-a-uuid", "01900000-0000-7000-8000-000000000000"} {
		if _, err := x.e.Analytics.SetConsent(ctx, org, []byte(`{"opted_in":true,"consent_reference":"x"}`)); code(err) != "ORG_NOT_FOUND" {
			t.Errorf("consent of %s: %v", org, err)
		}
		if _, err := x.e.Analytics.Classify(ctx, org, []byte(`{"environment":"prod","audience":"external","surface":"web"}`)); code(err) != "ORG_NOT_FOUND" {
			t.Errorf("classify %s: %v", org, err)
		}
	}
}

// TestBaselines: immutable, a name once.
func TestBaselines(t *testing.T) {
	x := newEnv(t, october)
	o := x.org("o", "prod", "external", nil, false)
	ctx := context.Background()
	b, err := x.e.Analytics.FreezeBaseline(ctx, "launch-2026_q4")
	if err != nil || b.Scorecard.Cohorts[0].Decisions != 0 {
		t.Fatalf("baseline: %+v %v", b, err)
	}
	x.decide(o, 5)
	if _, err := x.e.Analytics.FreezeBaseline(ctx, "launch-2026_q4"); code(err) != analytics.CodeBaselineExists {
		t.Fatalf("same name again: %v", err)
	}
	after, err := x.e.Analytics.FreezeBaseline(ctx, "after")
	if err != nil || after.Scorecard.Cohorts[0].Decisions != 1 {
		t.Fatalf("second baseline: %+v %v", after, err)
	}
	for _, name := range []string{"", "with space", "ünï", "a/b", string(make([]byte, 81))} {
		if _, err := x.e.Analytics.FreezeBaseline(ctx, name); code(err) != analytics.CodeInvalidBaselineName {
			t.Errorf("name %q: %v", name, err)
		}
	}
}

// TestScorecardCohorts: reviewed orgs only, unclassified apart, empty
// cohorts with null rates, durations measured from org creation.
func TestScorecardCohorts(t *testing.T) {
	x := newEnv(t, time.Date(2026, 8, 15, 0, 0, 0, 0, time.UTC))
	a := x.org("a", "prod", "external", nil, true)
	x.set(time.Date(2026, 8, 15, 1, 0, 0, 0, time.UTC))
	x.decide(a, 5) // an hour after creation, in ENFORCEMENT
	x.set(time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC))
	b := x.org("b", "prod", "external", nil, false)
	staging := x.org("s", "staging", "external", nil, false)
	x.org("u", "", "", nil, false)
	x.set(time.Date(2026, 10, 1, 0, 2, 0, 0, time.UTC))
	x.decide(b, 5)
	x.decide(staging, 5)
	sc, err := x.e.Analytics.Scorecard(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sc.Population != (analytics.Population{Organizations: 4, Reviewed: 2, OtherClassified: 1, Unclassified: 1}) {
		t.Fatalf("population %+v", sc.Population)
	}
	if len(sc.Cohorts) != 3 || sc.Cohorts[1].Cohort != "2026-09" || sc.Cohorts[1].ActivationRate != nil || sc.Cohorts[1].TimeToFirstDecision.Median != nil {
		t.Fatalf("cohorts %+v", sc.Cohorts)
	}
	aug, oct := sc.Cohorts[0], sc.Cohorts[2]
	if aug.Organizations != 1 || aug.Enforcing != 1 || *aug.EnforcementRate != 1 || *aug.TimeToFirstEnforcement.Median != 3600 {
		t.Fatalf("August %+v", aug)
	}
	if oct.Organizations != 1 || oct.Decisions != 1 || oct.Enforcing != 0 || *oct.EnforcementRate != 0 || *oct.TimeToFirstDecision.Median != 120 {
		t.Fatalf("October %+v", oct)
	}
	if sc.Unclassified.Organizations != 1 || len(sc.Unclassified.Cohorts) != 1 || sc.Unclassified.Cohorts[0].Cohort != "2026-10" {
		t.Fatalf("unclassified %+v", sc.Unclassified)
	}
}

// TestRollupsCountEachDecisionOnce: two engines on one store decide and
// catch up at once; every decision is counted exactly once.
func TestRollupsCountEachDecisionOnce(t *testing.T) {
	x := newEnv(t, october)
	orgs := []string{x.org("a", "prod", "external", yes(), false), x.org("b", "prod", "external", yes(), false)}
	engines := []*analytics.Service{x.e.Analytics, x.open(x.key).Analytics}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for range 10 {
				x.decide(orgs[i%2], 5)
				if err := engines[i%2].CatchUp(context.Background(), orgs[i%2]); err != nil {
					t.Error(err)
				}
			}
		})
		wg.Go(func() {
			if _, err := engines[(i+1)%2].Scorecard(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	sc, err := engines[0].Scorecard(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := sc.Cohorts[len(sc.Cohorts)-1].Decisions; got != 40 {
		t.Fatalf("counted %d decisions, made 40", got)
	}
}

// TestVerifyReportRefusesOtherTokens: a grant-kind token signed by the
// same key is not a report.
func TestVerifyReportRefusesOtherTokens(t *testing.T) {
	k, _ := grant.KeyFromSeed(make([]byte, 32))
	intent, err := grant.SignIntent(k, []byte(`{"aud":"clearance-growth-reports"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := analytics.VerifyReport(intent, k.Public()); err == nil {
		t.Fatal("an intent verified as a report")
	}
	if _, err := grant.SignGrowthReport(k, []byte(`{"aud":"clearance"}`)); err == nil {
		t.Fatal("signed a report for another audience")
	}
}
