package signals_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/signals"
	"github.com/clearancehq/clearance/store/pebblestore"
)

func newEngine(t *testing.T) (*clearance.Engine, string, time.Time) {
	t.Helper()
	at := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	backend, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem(), Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { backend.Close() })
	engine, err := clearance.Open(backend, clearance.Options{Now: func() time.Time { return at },
		SecretsKey: []byte("signals-unit-test-secrets-key-32b!!")})
	if err != nil {
		t.Fatal(err)
	}
	org, err := engine.Admin.CreateOrg(context.Background(), "Acme")
	if err != nil {
		t.Fatal(err)
	}
	return engine, org.Org.ID, at
}

func event(typ string, at time.Time, level int) []byte {
	return fmt.Appendf(nil, `{"events":[{"type":%q,"timestamp":%q,"data":{"level":%d}}]}`, typ, at.Format(time.RFC3339), level)
}

// Concurrent deliveries of one type in any order: every one is stored and
// the latest is the newest by event timestamp.
func TestSignalConcurrentDeliveriesKeepTheNewest(t *testing.T) {
	engine, org, now := newEngine(t)
	ctx := context.Background()
	c, err := engine.Signals.CreateConnector(ctx, org, signals.NewConnector{Name: "feed"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := engine.Signals.Ingest(ctx, signals.Delivery{ConnectorID: c.ConnectorID, Secret: c.WebhookSecret,
				Body: event("risk", now.Add(-time.Duration(n-i)*time.Minute), i)})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	in, used, err := engine.Signals.Current(ctx, org, now)
	if err != nil {
		t.Fatal(err)
	}
	data := in["risk"].(map[string]any)["data"].(map[string]any)
	if data["level"] != float64(n-1) || len(used) != 1 {
		t.Fatalf("latest %v (%d used), want level %d", data, len(used), n-1)
	}
}

// Replays of one webhook-id racing each other: exactly one is accepted.
func TestSignalConcurrentReplaysAcceptOnce(t *testing.T) {
	engine, org, now := newEngine(t)
	ctx := context.Background()
	c, err := engine.Signals.CreateConnector(ctx, org, signals.NewConnector{Name: "feed"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 16
	var wg sync.WaitGroup
	statuses := make(chan string, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := engine.Signals.Ingest(ctx, signals.Delivery{ConnectorID: c.ConnectorID, Secret: c.WebhookSecret,
				WebhookID: "msg_1", Body: event("risk", now, 1)})
			if err != nil {
				t.Error(err)
				return
			}
			statuses <- r.Status
		}()
	}
	wg.Wait()
	close(statuses)
	accepted := 0
	for s := range statuses {
		if s == signals.ReceiptAccepted {
			accepted++
		}
	}
	if accepted != 1 {
		t.Fatalf("%d deliveries of one webhook-id accepted, want 1", accepted)
	}
}

// The org's signal types are bounded, and a delivery that would pass the
// bound stores nothing.
func TestSignalTypesBounded(t *testing.T) {
	engine, org, now := newEngine(t)
	ctx := context.Background()
	c, err := engine.Signals.CreateConnector(ctx, org, signals.NewConnector{Name: "feed"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range signals.MaxTypes {
		if _, err := engine.Signals.Ingest(ctx, signals.Delivery{ConnectorID: c.ConnectorID, Secret: c.WebhookSecret,
			Body: event(fmt.Sprintf("t%d", i), now, i)}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = engine.Signals.Ingest(ctx, signals.Delivery{ConnectorID: c.ConnectorID, Secret: c.WebhookSecret,
		Body: event("one.more", now, 1)})
	if e, ok := err.(*clearance.Error); !ok || e.Code != signals.CodeTypesExhausted {
		t.Fatalf("one type too many: %v", err)
	}
	// A known type is still accepted.
	if _, err := engine.Signals.Ingest(ctx, signals.Delivery{ConnectorID: c.ConnectorID, Secret: c.WebhookSecret,
		Body: event("t0", now, 7)}); err != nil {
		t.Fatal(err)
	}
	in, _, _ := engine.Signals.Current(ctx, org, now)
	if len(in) != signals.MaxTypes || in["one.more"] != nil {
		t.Fatalf("%d types stored", len(in))
	}
}

// An org makes at most MaxConnectors connectors, revoked ones included;
// another org is not held to the first one's count.
func TestSignalConnectorsBounded(t *testing.T) {
	engine, org, _ := newEngine(t)
	ctx := context.Background()
	var first signals.CreatedConnector
	for i := range signals.MaxConnectors {
		c, err := engine.Signals.CreateConnector(ctx, org, signals.NewConnector{Name: fmt.Sprintf("feed %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = c
		}
	}
	if _, err := engine.Signals.RevokeConnector(ctx, org, first.ConnectorID); err != nil {
		t.Fatal(err)
	}
	_, err := engine.Signals.CreateConnector(ctx, org, signals.NewConnector{Name: "one more"})
	if e, ok := err.(*clearance.Error); !ok || e.Code != signals.CodeConnectorLimit || !errors.Is(err, clearance.ErrConflict) {
		t.Fatalf("one connector too many: %v", err)
	}
	list, err := engine.Signals.ListConnectors(ctx, org)
	if err != nil || len(list) != signals.MaxConnectors {
		t.Fatalf("%d connectors listed, %v; want %d", len(list), err, signals.MaxConnectors)
	}
	other, err := engine.Admin.CreateOrg(ctx, "Other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Signals.CreateConnector(ctx, other.Org.ID, signals.NewConnector{Name: "feed"}); err != nil {
		t.Fatalf("another org: %v", err)
	}
}
