package execution_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/registry"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// exampleNow is the one clock of the examples (engine and store alike), so
// that leases and token lifetimes come out the same on every run.
func exampleNow() time.Time { return time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC) }

// refunds is an org whose agent may refund up to 1,000 (ENFORCEMENT), with
// the agent's intent key registered.
type refunds struct {
	engine *clearance.Engine
	orgID  string
	agent  grant.Key
	close  func()
}

// newRefunds opens an engine over an in-memory Pebble store with grant keys
// from a fixed seed and sets up the refunds org.
func newRefunds(ctx context.Context) (*refunds, error) {
	backend, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem(), Now: exampleNow})
	if err != nil {
		return nil, err
	}
	r := &refunds{close: func() { _ = backend.Close() }}
	if err := r.setUp(ctx, backend); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *refunds) setUp(ctx context.Context, backend *pebblestore.Store) error {
	signing, err := grant.KeyFromSeed(bytes.Repeat([]byte{1}, 32))
	if err != nil {
		return err
	}
	if r.engine, err = clearance.Open(backend, clearance.Options{Now: exampleNow, GrantKeys: grant.NewKeyRing(signing)}); err != nil {
		return err
	}
	org, err := r.engine.Admin.CreateOrg(ctx, "Acme")
	if err != nil {
		return err
	}
	r.orgID = org.Org.ID
	if r.agent, err = grant.KeyFromSeed(bytes.Repeat([]byte{2}, 32)); err != nil {
		return err
	}
	jwk, err := json.Marshal(r.agent.PublicJWK())
	if err != nil {
		return err
	}
	if _, _, err = r.engine.Admin.RegisterKey(ctx, r.orgID, registry.KindAgent, registry.Registration{KID: r.agent.KID(), PublicJWK: jwk}); err != nil {
		return err
	}
	_, err = r.engine.Policies.PublishBundle(ctx, r.orgID, []byte(`{"bundle_id":"refunds","version":"v1","mode":"ENFORCEMENT",
	 "rules":[{"id":"large","match":[{"field":"amount","op":"ge","value":1000}],"outcome":"BLOCK","reason_codes":["TOO_LARGE"]}],
	 "default":{"outcome":"ALLOW","reason_codes":["WITHIN_LIMIT"]}}`))
	return err
}

// bind has the agent sign an intent to refund amount EUR on order and
// binds a grant to it. The payload is RFC 8785 canonical JSON as
// encoding/json writes maps of ASCII strings and integers.
func (r *refunds) bind(ctx context.Context, order string, amount int) (clearance.AuthorityDecision, error) {
	payload, err := json.Marshal(map[string]any{
		"intent_id": "refund-" + order, "org_id": r.orgID,
		"actor":        map[string]any{"id": "agent-7", "type": "agent"},
		"action":       map[string]any{"type": "refund", "amount": amount, "currency": "EUR", "target": order},
		"workflow_key": "refunds", "decision_type": "REFUND",
		"nonce": "nonce-" + order, "concurrency_scope": order,
		"expected_effect_digest": effectOf(order),
		"escalation":             map[string]any{"mode": "NONE"},
		"issued_at":              exampleNow().Format(time.RFC3339),
	})
	if err != nil {
		return clearance.AuthorityDecision{}, err
	}
	signed, err := grant.SignIntent(r.agent, payload)
	if err != nil {
		return clearance.AuthorityDecision{}, err
	}
	return r.engine.EnforceAndBind(ctx, clearance.AuthorityRequest{OrgID: r.orgID, SignedIntent: signed})
}

// effectOf is the digest of the refund the payment provider reports for
// order, in the sha256:<hex> form Clearance uses.
func effectOf(order string) string {
	sum := sha256.Sum256([]byte("psp refund " + order))
	return "sha256:" + hex.EncodeToString(sum[:])
}
