package client_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance/client"
	"github.com/clearancehq/clearance/export"
	"github.com/clearancehq/clearance/webhook"
)

// receiver is an HTTP endpoint that keeps what it is sent and answers 200.
type receiver struct {
	*httptest.Server
	mu  sync.Mutex
	got []received
}

type received struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T) *receiver {
	rv := &receiver{}
	rv.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rv.mu.Lock()
		rv.got = append(rv.got, received{header: r.Header.Clone(), body: body})
		rv.mu.Unlock()
	}))
	t.Cleanup(rv.Close)
	return rv
}

func (rv *receiver) requests() []received {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return append([]received(nil), rv.got...)
}

// deliver runs the webhook worker's dispatch and one delivery pass, as the
// server's background worker would.
func (s *testServer) deliver(t *testing.T) {
	t.Helper()
	if _, err := s.engine.Webhooks.Dispatch(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.engine.Webhooks.Deliver(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// The WEBHOOK integration: connected, delivering signed decisions, its log,
// a redelivery, disconnected.
func TestWebhookIntegration(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	o := s.newOrg("Hooks")
	ctx := t.Context()
	rv := newReceiver(t)
	const secret = "whsec-client-test-0123456789"

	req := client.WebhookConnectRequest{Config: client.WebhookDestination{EndpointUrl: rv.URL, ProviderName: ptr("test receiver")}}
	req.Credentials = &struct {
		WebhookSecret *string `json:"webhook_secret,omitempty"`
	}{WebhookSecret: ptr(secret)}
	in, err := o.c.ConnectWebhook(ctx, o.ID, req)
	if err != nil || !in.Created || in.Config.EndpointUrl != rv.URL || in.Status != "active" {
		t.Fatalf("connect %+v: %v", in, err)
	}
	read, err := o.c.Webhook(ctx, o.ID)
	if err != nil || read.Config.EndpointUrl != rv.URL || read.IntegrationId != in.IntegrationId {
		t.Fatalf("read integration %+v: %v", read, err)
	}

	d := o.decide(t, 10)
	s.deliver(t)
	got := rv.requests()
	if len(got) != 1 || !strings.Contains(string(got[0].body), d.DecisionId.String()) ||
		webhook.Verify(got[0].header.Get("X-Clearance-Signature"), got[0].body, []byte(secret), time.Now(), 0) != nil {
		t.Fatalf("want one signed delivery of decision %s, got %d", d.DecisionId, len(got))
	}
	log, err := o.c.WebhookDeliveries(ctx, o.ID, client.Query("state", "delivered"))
	if err != nil || len(log.Deliveries) != 1 || log.Deliveries[0].State != "delivered" || log.Deliveries[0].Destination == "" ||
		len(log.Deliveries[0].Attempts) != 1 || *log.Deliveries[0].Attempts[0].StatusCode != http.StatusOK {
		t.Fatalf("delivery log %+v: %v", log, err)
	}
	again, err := o.c.RedeliverWebhook(ctx, o.ID, log.Deliveries[0].DeliveryId.String())
	if err != nil || again.DeliveryId != log.Deliveries[0].DeliveryId || again.Redeliveries != 1 || again.State != "pending" {
		t.Fatalf("redeliver %+v: %v", again, err)
	}
	s.deliver(t)
	if got := rv.requests(); len(got) != 2 || string(got[1].body) != string(got[0].body) {
		t.Fatalf("the redelivery: %d requests", len(got))
	}

	if err := o.c.DeleteWebhook(ctx, o.ID); err != nil {
		t.Fatal(err)
	}
	_, err = o.c.Webhook(ctx, o.ID)
	wantCode(t, err, http.StatusNotFound, "INTEGRATION_NOT_FOUND")
}

// Signal connectors: made, fed (signed), listed, revoked.
func TestSignalConnectors(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	o := s.newOrg("Signals")
	ctx := t.Context()
	public := s.client("")

	conn, err := o.c.CreateSignalConnector(ctx, client.SignalConnectorRequest{Name: "crm", RequireSignature: ptr(true)})
	if err != nil || conn.Name != "crm" || !conn.RequireSignature || !strings.HasPrefix(conn.WebhookSecret, "whsec_") || conn.Status != "ACTIVE" {
		t.Fatalf("create connector %+v: %v", conn, err)
	}
	id := conn.ConnectorId.String()
	list, err := o.c.SignalConnectors(ctx)
	if err != nil || len(list.Connectors) != 1 || list.Connectors[0].ConnectorId != conn.ConnectorId {
		t.Fatalf("connectors %+v: %v", list, err)
	}

	var delivery client.SignalDelivery
	mustJSON(t, `{"events":[{"type":"crm.account_flagged","timestamp":"`+s.now().Format(time.RFC3339)+`","data":{"account":"acme","risk":"high"}}]}`, &delivery)
	rec, err := public.SendSignals(ctx, id, conn.WebhookSecret, delivery, client.Header("webhook-id", "msg-1"))
	if err != nil || rec.Status != "accepted" || rec.Events != 1 {
		t.Fatalf("send signals %+v: %v", rec, err)
	}
	dup, err := public.SendSignals(ctx, id, conn.WebhookSecret, delivery, client.Header("webhook-id", "msg-1"))
	if err != nil || dup.Status != "duplicate" || dup.Events != 0 || dup.DeliveryId != rec.DeliveryId {
		t.Fatalf("the same webhook-id again %+v: %v", dup, err)
	}
	_, err = public.SendSignals(ctx, id, "whsec_"+strings.Repeat("A", 44), delivery)
	wantCode(t, err, http.StatusUnauthorized, "WEBHOOK_SECRET_INVALID")

	revoked, err := o.c.RevokeSignalConnector(ctx, id)
	if err != nil || revoked.Status != "REVOKED" || revoked.RevokedAt == nil {
		t.Fatalf("revoke %+v: %v", revoked, err)
	}
	_, err = public.SendSignals(ctx, id, conn.WebhookSecret, delivery)
	wantCode(t, err, http.StatusUnauthorized, "WEBHOOK_SECRET_INVALID")
}

// An audit export: queued once per Idempotency-Key, built, downloaded.
func TestAuditExport(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	o := s.newOrg("Exports")
	ctx := t.Context()
	for _, amount := range []float64{10, 2000} {
		o.decide(t, amount)
	}

	req := client.AuditExportRequest{Format: "json", IncludeEvents: ptr(true)}
	x, err := o.c.CreateAuditExport(ctx, o.ID, req, client.WithIdempotencyKey("export-1"))
	if err != nil || x.Status != "PENDING" || x.OrgId != o.ID || x.Format != "json" {
		t.Fatalf("create export %+v: %v", x, err)
	}
	var got client.Response
	again, err := o.c.CreateAuditExport(ctx, o.ID, req, client.WithIdempotencyKey("export-1"), client.Received(&got))
	if err != nil || again.ExportId != x.ExportId || got.Status != http.StatusOK {
		t.Fatalf("the same key again (%d) %+v: %v", got.Status, again, err)
	}
	if n, err := s.engine.Exports.Process(ctx, export.WorkerOptions{}); err != nil || n != 1 {
		t.Fatalf("build the pack: %d built: %v", n, err)
	}
	done, err := o.c.AuditExport(ctx, o.ID, x.ExportId)
	if err != nil || done.Status != "SUCCEEDED" || done.BundleSha256 == nil || done.Counts == nil || *done.Counts.Decisions != 2 {
		t.Fatalf("the built export %+v: %v", done, err)
	}
	list, err := o.c.AuditExports(ctx, o.ID, client.Query("limit", "10"))
	if err != nil || len(list.Exports) != 1 || list.Exports[0].ExportId != x.ExportId {
		t.Fatalf("exports %+v: %v", list, err)
	}
	dl, err := o.c.DownloadAuditExport(ctx, o.ID, x.ExportId)
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Body.Close()
	body, err := io.ReadAll(dl.Body)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	if "sha256:"+hex.EncodeToString(sum[:]) != *done.BundleSha256 || dl.BundleSHA256 != *done.BundleSha256 ||
		dl.ManifestSHA256 != *done.ManifestSha256 || dl.Signature != *done.BundleSignatureHmacSha256 ||
		!strings.HasPrefix(dl.ContentType, "application/json") || !strings.Contains(dl.Filename, x.ExportId) {
		t.Fatalf("download %+v does not match the record %+v", dl, done)
	}
	_, err = o.c.DownloadAuditExport(ctx, o.ID, "no-such-export")
	wantCode(t, err, http.StatusNotFound, "EXPORT_NOT_FOUND")
}
