package lincheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/registry"
	"github.com/clearancehq/clearance/server"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// allowAll grants every refund under 10,000 in ENFORCEMENT.
const allowAll = `{"bundle_id":"lin","version":"v1","mode":"ENFORCEMENT","rules":[
 {"id":"big","match":[{"field":"amount","op":"ge","value":10000}],"outcome":"BLOCK","reason_codes":["TOO_BIG"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`

// fixedClock is the one clock of engine and store; it never moves, so no
// grant expires and no lease ends during a history.
func fixedClock() time.Time { return time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC) }

func keyOf(t testing.TB, b byte) grant.Key {
	t.Helper()
	s := make([]byte, 32)
	s[0], s[31] = b, 0x1c
	k, err := grant.KeyFromSeed(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// engineSys drives an engine in-process. Answers: a result is ok, an
// ErrConflict is a refusal, anything else (or any error once the context
// was cancelled) is unknown.
type engineSys struct {
	e     *clearance.Engine
	org   clearance.CreatedOrg
	agent grant.Key
	seq   atomic.Int64
	// freshActor gives each history's grants an actor of their own (for
	// per-actor budgets: a history starts with an unused budget).
	freshActor bool
	histories  atomic.Int64

	mu         sync.Mutex
	unexpected []string // errors that were neither refusals nor cancellations
}

// newEngineSys opens an engine over st with a signing ring, an org, its
// agent key and allowAll.
func newEngineSys(t testing.TB, st store.Backend) *engineSys {
	t.Helper()
	return newEngineSysWith(t, st, allowAll)
}

// newEngineSysWith is newEngineSys with the org's policy bundle.
func newEngineSysWith(t testing.TB, st store.Backend, bundle string) *engineSys {
	t.Helper()
	ctx := context.Background()
	e, err := clearance.Open(st, clearance.Options{Now: fixedClock, GrantKeys: grant.NewKeyRing(keyOf(t, 1))})
	if err != nil {
		t.Fatal(err)
	}
	x := &engineSys{e: e, agent: keyOf(t, 2)}
	if x.org, err = e.Admin.CreateOrg(ctx, "Lin"); err != nil {
		t.Fatal(err)
	}
	jwk, err := json.Marshal(x.agent.PublicJWK())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Admin.RegisterKey(ctx, x.org.Org.ID, registry.KindAgent, registry.Registration{KID: x.agent.KID(), PublicJWK: jwk}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Policies.PublishBundle(ctx, x.org.Org.ID, []byte(bundle)); err != nil {
		t.Fatal(err)
	}
	return x
}

func openPebble(t testing.TB) store.Backend {
	t.Helper()
	st, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Now: fixedClock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func (x *engineSys) issue(t testing.TB, n int) []grantRef {
	t.Helper()
	out := make([]grantRef, n)
	actor := "agent-7"
	if x.freshActor {
		actor = fmt.Sprintf("lin-actor-%d", x.histories.Add(1))
	}
	for i := range out {
		k := x.seq.Add(1)
		payload, err := canon.Marshal(map[string]any{
			"intent_id": fmt.Sprintf("lin-intent-%d", k), "org_id": x.org.Org.ID,
			"actor":        map[string]any{"id": actor, "type": "agent"},
			"action":       map[string]any{"type": "refund", "amount": 100, "currency": "EUR", "target": "order-1"},
			"workflow_key": "refunds", "decision_type": "REFUND", "nonce": fmt.Sprintf("lin-nonce-%d", k),
			"concurrency_scope": fmt.Sprintf("lin-scope-%d", k), "escalation": map[string]any{"mode": "NONE"},
			"issued_at": "2026-11-01T12:00:00Z",
		})
		if err != nil {
			t.Fatal(err)
		}
		jws, err := grant.SignIntent(x.agent, payload)
		if err != nil {
			t.Fatal(err)
		}
		d, err := x.e.EnforceAndBind(context.Background(), clearance.AuthorityRequest{OrgID: x.org.Org.ID, SignedIntent: jws})
		if err != nil {
			t.Fatal(err)
		}
		if d.ExecutionToken == "" || d.GrantID == "" {
			t.Fatalf("expected a grant: %+v", d)
		}
		out[i] = grantRef{ID: d.GrantID, ExecToken: d.ExecutionToken, IntentHash: d.IntentHash}
	}
	return out
}

func (x *engineSys) classify(ctx context.Context, err error) result {
	switch {
	case err == nil:
		return result{Answer: answerOK}
	case ctx.Err() != nil:
		return result{Answer: answerUnknown}
	case errors.Is(err, clearance.ErrConflict):
		return result{Answer: answerRefused}
	}
	x.note(err.Error())
	return result{Answer: answerUnknown}
}

func (x *engineSys) note(s string) {
	x.mu.Lock()
	x.unexpected = append(x.unexpected, s)
	x.mu.Unlock()
}

func (x *engineSys) claim(ctx context.Context, g grantRef) result {
	r, err := x.e.Claim(ctx, clearance.ClaimRequest{OrgID: x.org.Org.ID, ExecutionToken: g.ExecToken, IntentHash: g.IntentHash})
	res := x.classify(ctx, err)
	if res.Answer == answerOK {
		if !r.ShouldExecute || r.ClaimToken == "" || r.GrantID != g.ID {
			x.note(fmt.Sprintf("claim answered without a live claim: %+v", r))
			return result{Answer: answerUnknown}
		}
		res.Token = r.ClaimToken
	}
	return res
}

func (x *engineSys) finalize(ctx context.Context, g grantRef, token string, outcome claim.Outcome) result {
	r, err := x.e.Finalize(ctx, clearance.FinalizeRequest{OrgID: x.org.Org.ID, ExecutionToken: g.ExecToken, ClaimToken: token, Outcome: outcome})
	res := x.classify(ctx, err)
	if res.Answer == answerOK && r.Outcome != claim.State(outcome) {
		x.note(fmt.Sprintf("finalize(%s) recorded %s", outcome, r.Outcome))
	}
	return res
}

// requireNoSurprises fails the test on errors that were neither refusals
// nor cancellations: they were modelled as unknown, but should not happen.
func (x *engineSys) requireNoSurprises(t testing.TB) {
	t.Helper()
	x.mu.Lock()
	defer x.mu.Unlock()
	for i, s := range x.unexpected {
		if i == 5 {
			t.Errorf("… and %d more", len(x.unexpected)-5)
			break
		}
		t.Errorf("unexpected answer: %s", s)
	}
}

// httpSys drives the same engine through the HTTP API (httptest). Answers:
// 200 is ok, 409 a refusal; a transport error, a timeout, a cancelled
// request or any other status is unknown.
type httpSys struct {
	*engineSys
	srv    *httptest.Server
	client *http.Client
}

func newHTTPSys(t testing.TB, st store.Backend) *httpSys {
	t.Helper()
	x := &httpSys{engineSys: newEngineSys(t, st)}
	x.srv = httptest.NewServer(server.New(x.e, server.Options{RateLimit: -1}))
	tr := x.srv.Client().Transport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	x.client = &http.Client{Transport: tr, Timeout: 10 * time.Second}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		x.srv.Close()
	})
	return x
}

func (x *httpSys) post(ctx context.Context, path string, body any, into any) result {
	raw, err := json.Marshal(body)
	if err != nil {
		panic(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, x.srv.URL+path, bytes.NewReader(raw))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+x.org.Key.Secret)
	res, err := x.client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			x.note(err.Error())
		}
		return result{Answer: answerUnknown}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			x.note(err.Error())
		}
		return result{Answer: answerUnknown}
	case res.StatusCode == http.StatusOK:
		if err := json.Unmarshal(b, into); err != nil {
			x.note(fmt.Sprintf("%s: 200 with %s", path, b))
			return result{Answer: answerUnknown}
		}
		return result{Answer: answerOK}
	case res.StatusCode == http.StatusConflict:
		return result{Answer: answerRefused}
	}
	if ctx.Err() == nil {
		x.note(fmt.Sprintf("%s: %d %s", path, res.StatusCode, b))
	}
	return result{Answer: answerUnknown}
}

func (x *httpSys) claim(ctx context.Context, g grantRef) result {
	var body struct {
		ShouldExecute bool   `json:"should_execute"`
		ClaimToken    string `json:"claim_token"`
		GrantID       string `json:"grant_id"`
	}
	res := x.post(ctx, "/v1/execution/claim-token", map[string]any{"execution_token": g.ExecToken, "intent_hash": g.IntentHash}, &body)
	if res.Answer == answerOK {
		if !body.ShouldExecute || body.ClaimToken == "" || body.GrantID != g.ID {
			x.note(fmt.Sprintf("claim answered 200 without a live claim: %+v", body))
			return result{Answer: answerUnknown}
		}
		res.Token = body.ClaimToken
	}
	return res
}

func (x *httpSys) finalize(ctx context.Context, g grantRef, token string, outcome claim.Outcome) result {
	var body struct {
		Outcome claim.State `json:"outcome"`
	}
	res := x.post(ctx, "/v1/execution/finalize-token",
		map[string]any{"execution_token": g.ExecToken, "claim_token": token, "outcome": outcome}, &body)
	if res.Answer == answerOK && body.Outcome != claim.State(outcome) {
		x.note(fmt.Sprintf("finalize(%s) answered 200 with outcome %s", outcome, body.Outcome))
	}
	return res
}
