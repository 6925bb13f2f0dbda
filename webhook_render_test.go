package clearance_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance"

	"github.com/clearancehq/clearance/outbox"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// An event whose body cannot be written (its dossier cannot be read) stays
// pending for the next pass, and holds up no other org's events.
func TestWebhookRenderFailureLeavesTheEventPending(t *testing.T) {
	ctx := context.Background()
	backend, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	e, err := clearance.Open(backend, clearance.Options{SecretsKey: []byte("render-test-secrets-key-32-bytes!"), AllowPrivateDestinations: true})
	if err != nil {
		t.Fatal(err)
	}
	var received atomic.Int64
	rv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rv.Close()
	connect := []byte(`{"config":{"endpoint_url":"` + rv.URL + `","provider_name":"test"},"credentials":{"webhook_secret":"whsec-render-test-0123456789"}}`)
	a, b := newOrg(t, e), newOrg(t, e)
	for _, o := range []clearance.CreatedOrg{a, b} {
		if _, err := e.Webhooks.Connect(ctx, o.Org.ID, connect); err != nil {
			t.Fatal(err)
		}
	}
	broken := outbox.Event{OrgID: a.Org.ID, ID: "evt-broken", Name: "decision.resolved",
		OccurredAt: time.Now(), Body: []byte(`{"dossier_id":"no-such-dossier"}`)}
	if err := backend.Update(ctx, a.Org.ID, func(tx store.Tx) error {
		_, err := outbox.Emit(ctx, tx, broken)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Evaluate(ctx, request(t, b, `{"amount":5}`)); err != nil {
		t.Fatal(err)
	}
	n, err := e.Webhooks.Dispatch(ctx)
	if err == nil || n != 1 || received.Load() != 1 {
		t.Fatalf("Dispatch = %d, %v; %d delivered: want org B's one event out and an error for org A's", n, err, received.Load())
	}
	pending, err := outbox.Pending(ctx, backend, 0)
	if err != nil || len(pending) != 1 || pending[0].ID != broken.ID {
		t.Fatalf("pending after the pass: %+v, %v; want org A's event alone", pending, err)
	}
}
