package clearance_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/policy"
)

// wantErrorCode asserts err is an *Error of kind with code (and field, if given).
func wantErrorCode(t *testing.T, what string, err, kind error, code, field string) {
	t.Helper()
	var ce *clearance.Error
	if !errors.Is(err, kind) || !errors.As(err, &ce) || ce.Code != code {
		t.Errorf("%s: got %v; want %s", what, err, code)
		return
	}
	if field != "" && (len(ce.Fields) != 1 || ce.Fields[0].Field != field) {
		t.Errorf("%s: fields %+v; want %s", what, ce.Fields, field)
	}
}

func headSeq(t *testing.T, e *clearance.Engine, org string) uint64 {
	t.Helper()
	page, err := e.Audit.Ledger(context.Background(), org, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return page.Head.Seq
}

// blockBundle blocks the workflow blocked.wf and allows everything else.
const blockBundle = `{"bundle_id":"wf","version":"v1","mode":"ENFORCEMENT","rules":[
 {"id":"blocked","workflow_keys":["blocked.wf"],"outcome":"BLOCK","reason_codes":["WORKFLOW_BLOCKED"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`

// TestEvaluateRefusesLookAlikeWorkflowKey: "blocked.wf" followed by a
// zero-width space reads as the blocked workflow in a dossier; it used to be
// evaluated as another workflow and allowed.
func TestEvaluateRefusesLookAlikeWorkflowKey(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	o := newOrg(t, e)
	if _, err := e.Policies.PublishBundle(ctx, o.Org.ID, []byte(blockBundle)); err != nil {
		t.Fatal(err)
	}
	d, err := e.Evaluate(ctx, request(t, o, `{"workflow_key":"blocked.wf","amount":5}`))
	if err != nil || d.Outcome != policy.OutcomeBlock {
		t.Fatalf("blocked.wf: %+v, %v", d, err)
	}
	head := headSeq(t, e, o.Org.ID)
	for _, wf := range []string{`blocked.wf\u200b`, `blocked.wf\u202e`, `blocked.wf `, `\u200bblocked.wf`, `blocked.w\u0066\u00a0`} {
		body := `{"workflow_key":"` + wf + `","amount":5}`
		d, err := e.Evaluate(ctx, request(t, o, body))
		wantErrorCode(t, body, err, clearance.ErrInvalidRequest, policy.CodeInvalidIdentifier, "workflow_key")
		if d.Outcome != "" {
			t.Errorf("%s: decided %s", body, d.Outcome)
		}
	}
	// A body whose JSON escape hides a zero-width space is held to the same
	// grammar: the library decodes the body itself.
	_, err = e.Evaluate(ctx, clearance.EvaluateRequest{OrgID: o.Org.ID, Route: clearance.RouteEvaluateDecision,
		Body: []byte(`{"workflow_key":"blocked.wf\u200b"}`)})
	wantErrorCode(t, "Go-built intent", err, clearance.ErrInvalidRequest, policy.CodeInvalidIdentifier, "workflow_key")
	if got := headSeq(t, e, o.Org.ID); got != head {
		t.Errorf("refused requests moved the ledger head %d -> %d", head, got)
	}
}

// TestEvaluateRefusesInvisibleTokens: the engine, not only the server,
// holds Idempotency-Keys and correlation ids to visible ASCII.
func TestEvaluateRefusesInvisibleTokens(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	o := newOrg(t, e)
	head := headSeq(t, e, o.Org.ID)
	for _, v := range []string{"k\u200b", "\u202ek", "k ", "k\u00a0"} {
		r := request(t, o, `{"amount":5}`)
		r.IdempotencyKey = v
		_, err := e.Evaluate(ctx, r)
		wantErrorCode(t, fmt.Sprintf("Idempotency-Key %q", v), err, clearance.ErrInvalidRequest, clearance.CodeInvalidIdempotencyKey, "")
		r = request(t, o, `{"amount":5}`)
		r.CorrelationID = v
		_, err = e.Evaluate(ctx, r)
		wantErrorCode(t, fmt.Sprintf("correlation id %q", v), err, clearance.ErrInvalidRequest, clearance.CodeInvalidCorrelationID, "")
	}
	if got := headSeq(t, e, o.Org.ID); got != head {
		t.Errorf("refused requests moved the ledger head %d -> %d", head, got)
	}
}

// signIntent signs an intent of x's org issued at issuedAt, changed by mutate.
func (x *execEnv) signIntent(t *testing.T, issuedAt string, mutate func(m map[string]any)) string {
	t.Helper()
	m := x.intentMembers("fresh-", 5)
	m["issued_at"] = issuedAt
	if mutate != nil {
		mutate(m)
	}
	return x.sign(t, m)
}

// TestEnforceAndBindRefusesStaleAndFutureIntents: a signed intent is a
// request made now, not a permission to keep: one issued before
// IntentMaxAge ago, or more than MaxClockSkew ahead of the clock, gets no
// grant and changes nothing.
func TestEnforceAndBindRefusesStaleAndFutureIntents(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, enforceAll)
	now := time.Unix(0, x.now.Load()).UTC()
	head := headSeq(t, x.e, x.org.Org.ID)
	for _, c := range []struct{ issuedAt, code string }{
		{"2001-01-01T00:00:00Z", clearance.CodeIntentStale},
		{"2100-01-01T00:00:00Z", clearance.CodeIntentNotYetValid},
		{now.Add(-clearance.DefaultIntentMaxAge - time.Second).Format(time.RFC3339), clearance.CodeIntentStale},
		{now.Add(clearance.DefaultMaxClockSkew + time.Second).Format(time.RFC3339), clearance.CodeIntentNotYetValid},
		{now.Add(clearance.DefaultMaxClockSkew + time.Millisecond).Format(time.RFC3339Nano), clearance.CodeIntentNotYetValid},
	} {
		d, err := x.e.EnforceAndBind(ctx, clearance.AuthorityRequest{OrgID: x.org.Org.ID, SignedIntent: x.signIntent(t, c.issuedAt, nil)})
		wantErrorCode(t, "issued_at "+c.issuedAt, err, clearance.ErrInvalidRequest, c.code, "issued_at")
		if d.ExecutionToken != "" || d.GrantID != "" {
			t.Errorf("issued_at %s: a grant: %+v", c.issuedAt, d)
		}
	}
	if got := headSeq(t, x.e, x.org.Org.ID); got != head {
		t.Errorf("refused intents moved the ledger head %d -> %d", head, got)
	}
	// The window's edges are inside it.
	for _, at := range []time.Time{now.Add(-clearance.DefaultIntentMaxAge), now.Add(clearance.DefaultMaxClockSkew), now} {
		d, err := x.e.EnforceAndBind(ctx, clearance.AuthorityRequest{OrgID: x.org.Org.ID, SignedIntent: x.signIntent(t, at.Format(time.RFC3339Nano), nil)})
		if err != nil || d.ExecutionToken == "" {
			t.Errorf("issued_at %s: %+v, %v", at, d, err)
		}
	}
}

// TestIntentWindowIsConfigurable: Options widen or narrow the window.
func TestIntentWindowIsConfigurable(t *testing.T) {
	ctx := context.Background()
	x := newExecEnvWith(t, enforceAll, clearance.Options{IntentMaxAge: time.Hour, MaxClockSkew: time.Second})
	now := time.Unix(0, x.now.Load()).UTC()
	b := x.e
	old := x.signIntent(t, now.Add(-30*time.Minute).Format(time.RFC3339), nil)
	if d, err := b.EnforceAndBind(ctx, clearance.AuthorityRequest{OrgID: x.org.Org.ID, SignedIntent: old}); err != nil || d.ExecutionToken == "" {
		t.Errorf("30 minutes old with a 1 h window: %+v, %v", d, err)
	}
	ahead := x.signIntent(t, now.Add(2*time.Second).Format(time.RFC3339), nil)
	_, err := b.EnforceAndBind(ctx, clearance.AuthorityRequest{OrgID: x.org.Org.ID, SignedIntent: ahead})
	wantErrorCode(t, "2 s ahead with 1 s of skew", err, clearance.ErrInvalidRequest, clearance.CodeIntentNotYetValid, "issued_at")
}

// TestIntentPayloadLimits: a signed intent's payload is held to the JSON
// limits too (members per object, NUL in strings), whatever its signature.
func TestIntentPayloadLimits(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, enforceAll)
	now := time.Unix(0, x.now.Load()).UTC().Format(time.RFC3339)
	head := headSeq(t, x.e, x.org.Org.ID)
	big := map[string]any{}
	for i := range strictjson.DefaultMaxMembers + 1 {
		big[fmt.Sprintf("k%d", i)] = i
	}
	for name, c := range map[string]struct {
		mutate func(m map[string]any)
		code   string
	}{
		"context members": {func(m map[string]any) { m["context"] = big }, strictjson.CodeTooManyMembers},
		"NUL in a context value": {func(m map[string]any) { m["context"] = map[string]any{"note": "a\x00b"} },
			strictjson.CodeNUL},
	} {
		_, err := x.e.EnforceAndBind(ctx, clearance.AuthorityRequest{OrgID: x.org.Org.ID, SignedIntent: x.signIntent(t, now, c.mutate)})
		wantErrorCode(t, name, err, clearance.ErrInvalidRequest, c.code, "")
	}
	if got := headSeq(t, x.e, x.org.Org.ID); got != head {
		t.Errorf("refused intents moved the ledger head %d -> %d", head, got)
	}
}
