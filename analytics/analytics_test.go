package analytics_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/analytics"
	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// env is an engine over Pebble with a clock the test moves.
type env struct {
	t       *testing.T
	backend store.Backend
	e       *clearance.Engine
	key     grant.Key
	now     atomic.Int64
}

const enforcing = `{"bundle_id":"b","version":"v1","mode":"ENFORCEMENT","rules":[
 {"id":"big","match":[{"field":"amount","op":"ge","value":10000}],"outcome":"BLOCK","reason_codes":["BIG"]},
 {"id":"mid","match":[{"field":"amount","op":"ge","value":1000}],"outcome":"ESCALATE","reason_codes":["MID"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`

func newEnv(t *testing.T, start time.Time) *env {
	t.Helper()
	x := &env{t: t}
	x.now.Store(start.UnixNano())
	clock := func() time.Time { return time.Unix(0, x.now.Load()).UTC() }
	b, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	x.backend = b
	x.key, _ = grant.KeyFromSeed(make([]byte, 32))
	x.open(x.key)
	return x
}

func (x *env) open(key grant.Key) *clearance.Engine {
	clock := func() time.Time { return time.Unix(0, x.now.Load()).UTC() }
	e, err := clearance.Open(x.backend, clearance.Options{Now: clock, ReportingKey: key})
	if err != nil {
		x.t.Fatal(err)
	}
	x.e = e
	return e
}

func (x *env) set(t time.Time) { x.now.Store(t.UnixNano()) }

// org creates an org, classifies it (when env is not ""), records its
// consent (when consent is not nil) and publishes an ENFORCEMENT policy
// when enforce.
func (x *env) org(name, environment, audience string, consent *bool, enforce bool) string {
	x.t.Helper()
	ctx := context.Background()
	o, err := x.e.Admin.CreateOrg(ctx, name)
	if err != nil {
		x.t.Fatal(err)
	}
	id := o.Org.ID
	if environment != "" {
		body := fmt.Sprintf(`{"environment":%q,"audience":%q,"surface":"web_app","source_utm":{"source":"news","campaign":"launch"}}`, environment, audience)
		if _, err := x.e.Analytics.Classify(ctx, id, []byte(body)); err != nil {
			x.t.Fatal(err)
		}
	}
	if consent != nil {
		if _, err := x.e.Analytics.SetConsent(ctx, id, []byte(fmt.Sprintf(`{"opted_in":%v,"consent_reference":"contract-%s"}`, *consent, name))); err != nil {
			x.t.Fatal(err)
		}
	}
	if enforce {
		if _, err := x.e.Policies.PublishBundle(ctx, id, []byte(enforcing)); err != nil {
			x.t.Fatal(err)
		}
	}
	return id
}

func (x *env) decide(org string, amount int) {
	x.t.Helper()
	_, err := x.e.Decide.Evaluate(context.Background(), decide.EvaluateRequest{OrgID: org, Route: decide.RouteEvaluateDecision,
		Body: []byte(fmt.Sprintf(`{"decision_type":"PAYMENT","workflow_key":"ap","amount":%d}`, amount))})
	if err != nil {
		x.t.Fatal(err)
	}
}

func yes() *bool { v := true; return &v }
func no() *bool  { v := false; return &v }

func code(err error) string {
	var ce *clearance.Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return fmt.Sprint(err)
}

func TestBlastRadiusEndToEnd(t *testing.T) {
	x := newEnv(t, time.Date(2026, 10, 3, 9, 0, 0, 0, time.UTC))
	var eligible []string
	for i := range 6 {
		eligible = append(eligible, x.org(fmt.Sprint("e", i), "prod", "external", yes(), i%2 == 0))
	}
	revoked := x.org("revoked", "prod", "external", no(), false)
	internal := x.org("internal", "prod", "internal", yes(), false)
	unclassified := x.org("unclassified", "", "", yes(), false)
	for _, o := range eligible {
		x.decide(o, 5)     // ALLOW
		x.decide(o, 50000) // BLOCK
	}
	x.decide(eligible[0], 2000) // one org only: ESCALATE suppressed
	for _, o := range []string{revoked, internal, unclassified} {
		x.decide(o, 5)
	}
	ctx := context.Background()
	if _, _, err := x.e.Analytics.FreezeBlastRadius(ctx, "2026-10"); code(err) != analytics.CodeMonthNotComplete {
		t.Fatalf("freeze of the current month: %v", err)
	}
	x.set(time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC))
	body, created, err := x.e.Analytics.FreezeBlastRadius(ctx, "2026-10")
	if err != nil || !created {
		t.Fatalf("freeze: %v created %v", err, created)
	}
	var fr analytics.FrozenReport
	if err := json.Unmarshal(body, &fr); err != nil {
		t.Fatal(err)
	}
	// Verified with go-jose, not our verifier.
	sig, err := jose.ParseSigned(fr.Artifact, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		t.Fatal(err)
	}
	payload, err := sig.Verify(ed25519.PublicKey(x.key.Public()))
	if err != nil {
		t.Fatal(err)
	}
	if typ := sig.Signatures[0].Protected.ExtraHeaders["typ"]; typ != grant.TypGrowthReport {
		t.Fatalf("typ %v", typ)
	}
	var rep analytics.Report
	if err := json.Unmarshal(payload, &rep); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range rep.Cells {
		v := "suppressed"
		if c.Published {
			v = fmt.Sprintf("%d orgs %d decisions", *c.Organizations, *c.Decisions)
		} else if c.Organizations != nil || c.Decisions != nil {
			t.Fatalf("suppressed cell carries numbers: %+v", c)
		}
		got[c.Mode+"/"+c.Outcome] = v
	}
	want := map[string]string{
		"ENFORCEMENT/ALLOW": "suppressed", "ENFORCEMENT/BLOCK": "suppressed", "ENFORCEMENT/ESCALATE": "suppressed", "ENFORCEMENT/REVIEW_REQUIRED": "suppressed",
		"SHADOW/ALLOW": "suppressed", "SHADOW/BLOCK": "suppressed", "SHADOW/ESCALATE": "suppressed", "SHADOW/REVIEW_REQUIRED": "suppressed",
	}
	// 3 orgs enforce, 3 shadow: every cell has fewer than 5 orgs.
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("cells %v\nwant %v", got, want)
	}
	again, created, err := x.e.Analytics.FreezeBlastRadius(ctx, "2026-10")
	if err != nil || created || string(again) != string(body) {
		t.Fatalf("second freeze: created %v err %v same %v", created, err, string(again) == string(body))
	}
	sc, err := x.e.Analytics.Scorecard(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Population.Unclassified != 1 || sc.Population.Reviewed != 7 || sc.Population.OtherClassified != 1 {
		t.Fatalf("population %+v", sc.Population)
	}
	t.Logf("%+v", sc.Cohorts)
}
