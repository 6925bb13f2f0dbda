package client_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/client"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/server"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// An agent refunds 120 EUR only under a claimed grant, and a refund of
// 5,000 EUR, which the policy blocks, never runs.
func ExampleAgent_Run() {
	ctx := context.Background()
	url, apiKey, orgID, stop := agentExampleServer()
	defer stop()

	c, err := client.New(url, apiKey)
	check(err)
	key, err := grant.NewKey(rand.Reader)
	check(err)
	agent := &client.Agent{Client: c, Key: key, OrgID: orgID}
	_, err = agent.Register(ctx)
	check(err)

	refund := func(amount float64) client.ExecutionIntent {
		return client.ExecutionIntent{
			Actor:            client.Actor{Id: client.Ptr("agent-7"), Type: client.Ptr("agent")},
			Action:           client.Action{Type: client.Ptr("refund"), Amount: &amount, Currency: client.Ptr("EUR"), Target: client.Ptr("order-1")},
			DecisionType:     client.Ptr("REFUND"),
			ConcurrencyScope: "order-1",
		}
	}
	cyc, err := agent.Run(ctx, refund(120), func(ctx context.Context, claim *client.ClaimResponse) (*client.EffectEvidence, error) {
		fmt.Println("refunding under grant", claim.GrantId != "")
		return nil, nil // the refund went through
	})
	check(err)
	fmt.Println(cyc.Decision.Outcome, cyc.Outcome)

	cyc, err = agent.Run(ctx, refund(5000), func(context.Context, *client.ClaimResponse) (*client.EffectEvidence, error) {
		panic("never called without a grant")
	})
	fmt.Println(cyc.Decision.Outcome, cyc.Ran, errors.Is(err, client.ErrNotGranted))
	// Output:
	// refunding under grant true
	// ALLOW COMMITTED
	// BLOCK false true
}

// agentExampleServer serves an engine with grant signing on a temporary store,
// with an org whose policy allows refunds below 1,000 in ENFORCEMENT.
func agentExampleServer() (url, apiKey, orgID string, stop func()) {
	dir, err := os.MkdirTemp("", "clearance-client-example-")
	check(err)
	backend, err := pebblestore.Open(dir, pebblestore.Options{})
	check(err)
	signing, err := grant.NewKey(rand.Reader)
	check(err)
	engine, err := clearance.Open(backend, clearance.Options{GrantKeys: grant.NewKeyRing(signing)})
	check(err)
	org, err := engine.Admin.CreateOrg(context.Background(), "Acme")
	check(err)
	_, err = engine.Policies.PublishBundle(context.Background(), org.Org.ID, []byte(`{"bundle_id":"refunds","version":"v1","mode":"ENFORCEMENT",
	 "rules":[{"id":"large","match":[{"field":"amount","op":"ge","value":1000}],"outcome":"BLOCK","reason_codes":["TOO_LARGE"]}],
	 "default":{"outcome":"ALLOW","reason_codes":["WITHIN_LIMIT"]}}`))
	check(err)
	srv := httptest.NewServer(server.New(engine, server.Options{}))
	return srv.URL, org.Key.Secret, org.Org.ID, func() {
		srv.Close()
		backend.Close()
		os.RemoveAll(dir)
	}
}

func check(err error) {
	if err != nil {
		panic(err)
	}
}
