package signals_test

import (
	"context"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/signals"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// A fraud feed posts an alert to its connector; the org's latest signal of
// that type is what a policy then sees, aged against the evaluation's now.
func ExampleService_Ingest() {
	ctx := context.Background()
	now := func() time.Time { return time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC) }
	backend, _ := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem(), Now: now})
	defer backend.Close()
	engine, _ := clearance.Open(backend, clearance.Options{Now: now})
	org, _ := engine.Admin.CreateOrg(ctx, "Acme")

	c, _ := engine.Signals.CreateConnector(ctx, org.Org.ID, signals.NewConnector{Name: "fraud feed"})
	delivery := signals.Delivery{ConnectorID: c.ConnectorID, Secret: c.WebhookSecret,
		Body: []byte(`{"events":[{"type":"fraud.alert","timestamp":"2026-11-01T11:59:00Z","data":{"level":"high"}}]}`)}
	r, err := engine.Signals.Ingest(ctx, delivery)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Status, r.Events)

	delivery.Secret = "whsec_guessed"
	_, err = engine.Signals.Ingest(ctx, delivery)
	fmt.Println(err)

	in, used, _ := engine.Signals.Current(ctx, org.Org.ID, now())
	alert := in["fraud.alert"].(map[string]any)
	fmt.Println(alert["data"], alert["age_seconds"], used[0].Type)
	// Output:
	// accepted 1
	// WEBHOOK_SECRET_INVALID: the connector or its webhook secret is not valid
	// map[level:high] 60 fraud.alert
}
