package clearance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/export"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/registry"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
	"github.com/clearancehq/clearance/tenant"
)

// updateLog records the orgs whose transactions reached the backend.
type updateLog struct {
	store.Backend
	mu   sync.Mutex
	orgs map[string]int
}

func (u *updateLog) Update(ctx context.Context, orgID string, fn func(tx store.Tx) error) error {
	u.mu.Lock()
	u.orgs[orgID]++
	u.mu.Unlock()
	return u.Backend.Update(ctx, orgID, fn)
}

func (u *updateLog) count(orgID string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.orgs[orgID]
}

// TestWritesRefuseUnknownOrg: the library, not only the server, refuses an
// org that was never created: every writing entry point answers a coded
// error, and no transaction of that org reaches the store, so no ledger,
// dossier or record is started for an arbitrary org id.
func TestWritesRefuseUnknownOrg(t *testing.T) {
	ctx := context.Background()
	var log *updateLog
	lk, err := ledger.NewKey("clearance.test", seed(9))
	if err != nil {
		t.Fatal(err)
	}
	x := newExecEnvOver(t, enforceAll, clearance.Options{LedgerKey: lk, ShareSecret: make([]byte, clearance.MinShareSecretLen)},
		func(b store.Backend) store.Backend {
			log = &updateLog{Backend: b, orgs: map[string]int{}}
			return log
		})
	const unknown = "0190a5b2-0000-7000-8000-000000000001"
	jwk, _ := json.Marshal(x.agent.PublicJWK())
	req := request(t, x.org, `{"amount":5}`)
	req.OrgID = unknown
	for name, call := range map[string]func() error{
		"Evaluate": func() error { _, err := x.e.Evaluate(ctx, req); return err },
		"PublishBundle": func() error {
			_, err := x.e.Policies.PublishBundle(ctx, unknown, []byte(enforceAll))
			return err
		},
		"StageBundle": func() error { _, err := x.e.Policies.StageBundle(ctx, unknown, []byte(enforceAll)); return err },
		"RegisterKey": func() error {
			_, _, err := x.e.Admin.RegisterKey(ctx, unknown, registry.KindAgent, registry.Registration{KID: x.agent.KID(), PublicJWK: jwk})
			return err
		},
		"CreateAPIKey": func() error { _, err := x.e.Admin.CreateAPIKey(ctx, unknown, []string{"org:*"}); return err },
		"Exports.Create": func() error {
			_, _, err := x.e.Exports.Create(ctx, export.Request{OrgID: unknown, Format: "json"})
			return err
		},
		"RevokeShareLinks": func() error { _, err := x.e.ShareLinks.RevokeShareLinks(ctx, unknown); return err },
		"SealLedger":       func() error { _, err := x.e.Audit.SealLedger(ctx, unknown); return err },
		"LedgerCheckpoint": func() error { _, err := x.e.Audit.LedgerCheckpoint(ctx, unknown); return err },
	} {
		wantErrorCode(t, name, call(), clearance.ErrNotFound, clearance.CodeOrgNotFound, "")
	}
	// Entry points that first look for something of the org find nothing,
	// and say so with their own code.
	jws := x.sign(t, func() map[string]any { m := x.intentMembers("u-", 5); m["org_id"] = unknown; return m }())
	_, err = x.e.EnforceAndBind(ctx, clearance.AuthorityRequest{OrgID: unknown, SignedIntent: jws})
	wantErrorCode(t, "EnforceAndBind", err, clearance.ErrForbidden, clearance.CodeIntentSignature, "")

	if n := log.count(unknown); n != 0 {
		t.Errorf("%d transactions of the unknown org reached the store", n)
	}
	if head, err := log.LedgerHeadOf(ctx, unknown); err != nil || head.Seq != 0 {
		t.Errorf("unknown org's ledger head %+v, %v", head, err)
	}

	// A known org is checked once, then served from memory; an org created
	// after a refusal is accepted (a refusal is not remembered).
	if _, err := x.e.Evaluate(ctx, request(t, x.org, `{"amount":5}`)); err != nil {
		t.Fatal(err)
	}
	o := newOrg(t, x.e)
	if _, err := x.e.Evaluate(ctx, request(t, o, `{"amount":5}`)); err != nil {
		t.Fatalf("a new org: %v", err)
	}
}

// TestOrgCreatedElsewhereIsAccepted: an org that another Engine on the same
// store (another server on the same database) creates after this one
// refused it is accepted: refusals are not remembered.
func TestOrgCreatedElsewhereIsAccepted(t *testing.T) {
	ctx := context.Background()
	shared := openStore(t)
	e, err := clearance.Open(shared, clearance.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const id = "0190a5b2-0000-7000-8000-000000000002"
	req := clearance.EvaluateRequest{OrgID: id, Route: clearance.RouteEvaluateDecision, Body: []byte(`{}`)}
	_, err = e.Evaluate(ctx, req)
	wantErrorCode(t, "before the org exists", err, clearance.ErrNotFound, clearance.CodeOrgNotFound, "")
	// The org record as another server's CreateOrg writes it.
	err = shared.Update(ctx, id, func(tx store.Tx) error {
		return tx.PutOrg(ctx, tenant.Org{ID: id, Name: "Elsewhere", CreatedAt: time.Now()})
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Evaluate(ctx, req); err != nil {
		t.Fatalf("after the org was created elsewhere: %v", err)
	}
}

func openStore(t *testing.T) store.Backend {
	t.Helper()
	b, err := pebblestore.Open(t.TempDir(), pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestBoundaryRefusesControlCharacters: a correlation id with control
// characters is refused by Evaluate and EnforceAndBind before anything is
// written, as is a signed intent whose payload does not decode.
func TestBoundaryRefusesControlCharacters(t *testing.T) {
	ctx := context.Background()
	x := newExecEnv(t, enforceAll)
	org := x.org.Org.ID
	head := headSeq(t, x.e, org)
	for _, v := range []string{"c\x00", "c\n", "\x1bc", "c\x7f", "c\u0085"} {
		r := request(t, x.org, `{"amount":5}`)
		r.CorrelationID = v
		d, err := x.e.Evaluate(ctx, r)
		wantErrorCode(t, fmt.Sprintf("Evaluate correlation id %q", v), err, clearance.ErrInvalidRequest, clearance.CodeInvalidCorrelationID, "correlation_id")
		if d.DossierID != "" {
			t.Errorf("Evaluate %q: a dossier %s", v, d.DossierID)
		}
		jws, _ := x.intent(t, 5, "", "")
		a, err := x.e.EnforceAndBind(ctx, clearance.AuthorityRequest{OrgID: org, SignedIntent: jws, CorrelationID: v})
		wantErrorCode(t, fmt.Sprintf("EnforceAndBind correlation id %q", v), err, clearance.ErrInvalidRequest, clearance.CodeInvalidCorrelationID, "correlation_id")
		if a.DossierID != "" || a.GrantID != "" {
			t.Errorf("EnforceAndBind %q: %+v", v, a)
		}
	}
	// Signed, canonical, but not an intent: members of the wrong type.
	for name, mutate := range map[string]func(m map[string]any){
		"actor is a string": func(m map[string]any) { m["actor"] = "agent-7" },
		"amount is text":    func(m map[string]any) { m["action"].(map[string]any)["amount"] = "5" },
		"unknown member":    func(m map[string]any) { m["surprise"] = true },
	} {
		jws := x.signIntent(t, time.Unix(0, x.now.Load()).UTC().Format(time.RFC3339), mutate)
		a, err := x.e.EnforceAndBind(ctx, clearance.AuthorityRequest{OrgID: org, SignedIntent: jws})
		if !isInvalid(err) {
			t.Errorf("%s: got %v; want a coded invalid-request error", name, err)
		}
		if a.DossierID != "" || a.GrantID != "" {
			t.Errorf("%s: %+v", name, a)
		}
	}
	if got := headSeq(t, x.e, org); got != head {
		t.Errorf("refused requests moved the ledger head %d -> %d", head, got)
	}
	rep, err := x.e.Audit.VerifyLedger(ctx, org)
	if err != nil || !rep.Valid {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

func isInvalid(err error) bool {
	ce, ok := err.(*clearance.Error)
	return ok && ce.Kind == clearance.ErrInvalidRequest && ce.Code != ""
}

// TestEvaluateDecodesWhatItRecords: the library takes the body and decodes
// it itself. A body that does not decode, a correlation id with a control
// character and a body naming another org are coded errors, and nothing is
// written; an accepted body is recorded exactly as evaluated.
func TestEvaluateDecodesWhatItRecords(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	o := newOrg(t, e)
	other := newOrg(t, e)
	head := headSeq(t, e, o.Org.ID)
	for _, c := range []struct {
		name, body, corr, code string
		kind                   error
	}{
		{"malformed JSON", `{"amount":5`, "", "MALFORMED_JSON", clearance.ErrInvalidRequest},
		{"duplicate member", `{"amount":5,"amount":50000}`, "", "DUPLICATE_MEMBER", clearance.ErrInvalidRequest},
		{"unknown member", `{"ammount":5}`, "", "UNKNOWN_MEMBER", clearance.ErrInvalidRequest},
		{"amount as a string", `{"amount":"5"}`, "", "INVALID_AMOUNT", clearance.ErrInvalidRequest},
		{"control character in the correlation id", `{"amount":5}`, "corr\x00id", clearance.CodeInvalidCorrelationID, clearance.ErrInvalidRequest},
		{"newline in the correlation id", `{"amount":5}`, "corr\nid", clearance.CodeInvalidCorrelationID, clearance.ErrInvalidRequest},
		{"another org named in the body", `{"org_id":"` + other.Org.ID + `","amount":5}`, "", clearance.CodeOrgMismatch, clearance.ErrForbidden},
	} {
		req := request(t, o, c.body)
		req.CorrelationID = c.corr
		d, err := e.Evaluate(ctx, req)
		wantErrorCode(t, c.name, err, c.kind, c.code, "")
		if d.DecisionID != "" {
			t.Errorf("%s: decided %+v", c.name, d)
		}
	}
	if got := headSeq(t, e, o.Org.ID); got != head {
		t.Fatalf("refused requests moved the ledger head %d -> %d", head, got)
	}

	// What is recorded is what was evaluated: the body's amount.
	d, err := e.Evaluate(ctx, request(t, o, `{"decision_type":"PAYMENT","workflow_key":"ap","amount":50000}`))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := e.Evidence.Dossier(ctx, o.Org.ID, d.DossierID)
	if err != nil {
		t.Fatal(err)
	}
	var body clearance.Dossier
	if err := json.Unmarshal(rec.Body, &body); err != nil {
		t.Fatal(err)
	}
	if string(body.Intent) != `{"amount":50000,"decision_type":"PAYMENT","workflow_key":"ap"}` || d.Outcome != body.Outcome {
		t.Fatalf("recorded intent %s with outcome %s; answered %s", body.Intent, body.Outcome, d.Outcome)
	}
}
