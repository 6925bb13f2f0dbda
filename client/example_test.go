package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/client"
	"github.com/clearancehq/clearance/server"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// exampleServer serves a Clearance server in this process, as
// `clearance serve` would, and returns its URL and platform key.
func exampleServer() (url, platformKey string, stop func()) {
	dir, _ := os.MkdirTemp("", "clearance-client-example-")
	backend, err := pebblestore.Open(dir, pebblestore.Options{})
	if err != nil {
		panic(err)
	}
	engine, _ := clearance.Open(backend, clearance.Options{})
	platformKey, _ = engine.Admin.NewPlatformSecret()
	if err := engine.Admin.EnsurePlatformKey(context.Background(), platformKey); err != nil {
		panic(err)
	}
	srv := httptest.NewServer(server.New(engine, server.Options{}))
	return srv.URL, platformKey, func() { srv.Close(); backend.Close(); os.RemoveAll(dir) }
}

// An org is made with the platform key; its own key then asks for
// decisions. Without a published policy the starter policy decides, in
// SHADOW: it records, it does not authorize.
func ExampleNew() {
	url, platformKey, stop := exampleServer()
	defer stop()
	ctx := context.Background()

	admin, err := client.New(url, platformKey)
	if err != nil {
		fmt.Println(err)
		return
	}
	org, err := admin.CreateOrg(ctx, client.CreateOrgRequest{Name: "Acme"})
	if err != nil {
		fmt.Println(err)
		return
	}

	c, _ := client.New(url, org.ApiKey)
	workflow, decisionType, amount := "refunds", "REFUND", client.Amount(50)
	d, err := c.EvaluateDecision(ctx, client.DecisionRequest{WorkflowKey: &workflow, DecisionType: &decisionType, Amount: &amount},
		client.WithIdempotencyKey("refund-order-1"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(d.Outcome, d.Mode)
	// Output: ALLOW SHADOW
}

// Every answer outside 2xx is a *client.Error with the problem's stable
// code; IsCode reads the code through wrapping.
func ExampleError() {
	url, platformKey, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	admin, _ := client.New(url, platformKey)
	org, err := admin.CreateOrg(ctx, client.CreateOrgRequest{Name: "Acme"})
	if err != nil {
		fmt.Println(err)
		return
	}
	c, _ := client.New(url, org.ApiKey)

	_, err = c.Dossier(ctx, "01900000-0000-7000-8000-000000000000")
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status, e.Code)
	}
	fmt.Println(client.IsCode(fmt.Errorf("refund 7: %w", err), "DOSSIER_NOT_FOUND"))

	_, err = c.PublishBundle(ctx, client.PolicyBundle{BundleId: "refunds", Version: "v1", Mode: "ENFORCEMENT"})
	if errors.As(err, &e) {
		fmt.Println(e.Status, e.Code)
		for _, f := range e.Errors {
			fmt.Println(" ", f.Field)
		}
	}
	// Output:
	// 404 DOSSIER_NOT_FOUND
	// true
	// 422 POLICY_INVALID
	//   default.outcome
}
