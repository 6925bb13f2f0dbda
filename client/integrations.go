package client

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Integrations: the outbound WEBHOOK integration and its delivery log,
// inbound signal connectors and their ingress, and audit exports
// (validation packs).

// ConnectWebhook connects (201) or updates (200) the org's WEBHOOK
// integration: POST /v1/orgs/{orgId}/integrations/WEBHOOK/connect.
func (c *Client) ConnectWebhook(ctx context.Context, orgID string, req WebhookConnectRequest, opts ...CallOption) (*WebhookIntegration, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/orgs/"+escape(orgID)+"/integrations/WEBHOOK/connect", req, opts)
	return call[WebhookIntegration](ctx, c, r, err)
}

// Webhook reads the org's WEBHOOK integration (never its secrets):
// GET /v1/orgs/{orgId}/integrations/WEBHOOK.
func (c *Client) Webhook(ctx context.Context, orgID string, opts ...CallOption) (*WebhookIntegration, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/orgs/"+escape(orgID)+"/integrations/WEBHOOK", nil, opts)
	return call[WebhookIntegration](ctx, c, r, err)
}

// DeleteWebhook disconnects the org's WEBHOOK integration:
// DELETE /v1/orgs/{orgId}/integrations/WEBHOOK.
func (c *Client) DeleteWebhook(ctx context.Context, orgID string, opts ...CallOption) error {
	r, err := c.newRequest(http.MethodDelete, "/v1/orgs/"+escape(orgID)+"/integrations/WEBHOOK", nil, opts)
	_, err = raw(ctx, c, r, err)
	return err
}

// WebhookDeliveries is the integration's delivery log (Query("day", …),
// Query("state", …), Query("limit", …)):
// GET /v1/orgs/{orgId}/integrations/WEBHOOK/deliveries.
func (c *Client) WebhookDeliveries(ctx context.Context, orgID string, opts ...CallOption) (*WebhookDeliveryList, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/orgs/"+escape(orgID)+"/integrations/WEBHOOK/deliveries", nil, opts)
	return call[WebhookDeliveryList](ctx, c, r, err)
}

// RedeliverWebhook queues a delivery again:
// POST /v1/orgs/{orgId}/integrations/WEBHOOK/deliveries/{deliveryId}/redeliver.
func (c *Client) RedeliverWebhook(ctx context.Context, orgID, deliveryID string, opts ...CallOption) (*WebhookDelivery, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/orgs/"+escape(orgID)+"/integrations/WEBHOOK/deliveries/"+escape(deliveryID)+"/redeliver", struct{}{}, opts)
	return call[WebhookDelivery](ctx, c, r, err)
}

// CreateSignalConnector makes an inbound signal connector; its secret is
// shown only here: POST /v1/signals/connectors.
func (c *Client) CreateSignalConnector(ctx context.Context, req SignalConnectorRequest, opts ...CallOption) (*CreatedSignalConnector, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/signals/connectors", req, opts)
	return call[CreatedSignalConnector](ctx, c, r, err)
}

// SignalConnectorList is the answer of SignalConnectors.
type SignalConnectorList struct {
	Connectors []SignalConnector `json:"connectors"`
}

// SignalConnectors lists the org's connectors, revoked ones included:
// GET /v1/signals/connectors.
func (c *Client) SignalConnectors(ctx context.Context, opts ...CallOption) (*SignalConnectorList, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/signals/connectors", nil, opts)
	return call[SignalConnectorList](ctx, c, r, err)
}

// RevokeSignalConnector revokes a connector:
// DELETE /v1/signals/connectors/{connectorId}.
func (c *Client) RevokeSignalConnector(ctx context.Context, connectorID string, opts ...CallOption) (*SignalConnector, error) {
	r, err := c.newRequest(http.MethodDelete, "/v1/signals/connectors/"+escape(connectorID), nil, opts)
	return call[SignalConnector](ctx, c, r, err)
}

// SendSignals delivers signal events to a connector with its secret (no
// API key): POST /v1/signals/webhooks/{connectorId}. The delivery is also
// signed the Standard Webhooks way (webhook-id, webhook-timestamp,
// webhook-signature), which connectors made with require_signature need;
// the webhook-id is Header("webhook-id", …) or a random one, and the
// server stores a webhook-id once (Status "duplicate" after that).
func (c *Client) SendSignals(ctx context.Context, connectorID, secret string, delivery SignalDelivery, opts ...CallOption) (*SignalReceipt, error) {
	body, err := json.Marshal(delivery)
	if err != nil {
		return nil, fmt.Errorf("client: encode signals: %w", err)
	}
	r, err := c.newRequest(http.MethodPost, "/v1/signals/webhooks/"+escape(connectorID), body, opts)
	if err != nil {
		return nil, err
	}
	r.header.Set("x-webhook-secret", secret)
	id := r.header.Get("webhook-id")
	if id == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		id = "msg_" + hex.EncodeToString(b[:])
		r.header.Set("webhook-id", id)
	}
	if key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_")); err == nil {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id + "." + ts + "."))
		mac.Write(body)
		r.header.Set("webhook-timestamp", ts)
		r.header.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	return call[SignalReceipt](ctx, c, r, nil)
}

// CreateAuditExport starts building a validation pack (202; 200 with the
// same Idempotency-Key and body again): POST /v1/orgs/{orgId}/audit-exports.
// It carries an Idempotency-Key, so it is safe to retry.
func (c *Client) CreateAuditExport(ctx context.Context, orgID string, req AuditExportRequest, opts ...CallOption) (*AuditExport, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/orgs/"+escape(orgID)+"/audit-exports", req, opts)
	if err == nil {
		r.withKey()
	}
	return call[AuditExport](ctx, c, r, err)
}

// AuditExports lists the org's exports, newest first (Query("limit", …)):
// GET /v1/orgs/{orgId}/audit-exports.
func (c *Client) AuditExports(ctx context.Context, orgID string, opts ...CallOption) (*AuditExportList, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/orgs/"+escape(orgID)+"/audit-exports", nil, opts)
	return call[AuditExportList](ctx, c, r, err)
}

// AuditExport reads an export's record and status:
// GET /v1/orgs/{orgId}/audit-exports/{exportId}.
func (c *Client) AuditExport(ctx context.Context, orgID, exportID string, opts ...CallOption) (*AuditExport, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/orgs/"+escape(orgID)+"/audit-exports/"+escape(exportID), nil, opts)
	return call[AuditExport](ctx, c, r, err)
}

// AuditExportDownload is a validation pack being downloaded. Close Body.
type AuditExportDownload struct {
	// Body is the pack's exact bytes (JSON or zip, see ContentType), which
	// BundleSHA256 and Signature cover.
	Body        io.ReadCloser
	ContentType string
	// Filename is the one Content-Disposition suggests.
	Filename string
	// BundleSHA256 and ManifestSHA256 are the record's digests
	// ("sha256:…"); Signature its HMAC-SHA256 (empty without an export
	// secret).
	BundleSHA256, ManifestSHA256, Signature string
}

// DownloadAuditExport opens a finished export's pack:
// GET /v1/orgs/{orgId}/audit-exports/{exportId}/download.
func (c *Client) DownloadAuditExport(ctx context.Context, orgID, exportID string, opts ...CallOption) (*AuditExportDownload, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/orgs/"+escape(orgID)+"/audit-exports/"+escape(exportID)+"/download", nil, opts)
	if err != nil {
		return nil, err
	}
	r.header.Set("Accept", "application/json, application/zip, application/problem+json")
	resp, err := c.open(ctx, r)
	if err != nil {
		return nil, err
	}
	d := &AuditExportDownload{Body: resp.Body, ContentType: resp.Header.Get("Content-Type"),
		BundleSHA256:   resp.Header.Get("X-Clearance-Bundle-Sha256"),
		ManifestSHA256: resp.Header.Get("X-Clearance-Manifest-Sha256"),
		Signature:      resp.Header.Get("X-Clearance-Bundle-Signature")}
	if _, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil {
		d.Filename = params["filename"]
	}
	return d, nil
}
