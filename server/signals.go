package server

import (
	"net"
	"net/http"

	"github.com/clearancehq/clearance"
)

// Headers of the signal ingress: the connector's secret, and the Standard
// Webhooks signature headers.
const (
	HeaderWebhookSecret    = "X-Webhook-Secret"
	HeaderWebhookID        = "Webhook-Id"
	HeaderWebhookTimestamp = "Webhook-Timestamp"
	HeaderWebhookSignature = "Webhook-Signature"
)

// createSignalConnector makes a connector; its secret is in this answer only.
func (s *Server) createSignalConnector(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	var req clearance.NewSignalConnector
	if err := c.decode(&req); err != nil {
		return err
	}
	out, err := s.engine.Signals.CreateConnector(c.r.Context(), org, req)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusCreated, out)
}

// listSignalConnectors lists the org's connectors, revoked ones included.
func (s *Server) listSignalConnectors(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	list, err := s.engine.Signals.ListConnectors(c.r.Context(), org)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, map[string]any{"connectors": list})
}

// revokeSignalConnector revokes a connector; another org's is a 404.
func (s *Server) revokeSignalConnector(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	out, err := s.engine.Signals.RevokeConnector(c.r.Context(), org, c.r.PathValue("connectorId"))
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, out)
}

// throttleSignals rate limits the public ingress per client address and
// per connector id, before the body is read.
func (s *Server) throttleSignals(c *call) error {
	addr, _, err := net.SplitHostPort(c.r.RemoteAddr)
	if err != nil {
		addr = c.r.RemoteAddr
	}
	if err := s.allow(c.w, "signals-addr:"+addr); err != nil {
		return err
	}
	return s.allow(c.w, "signals-connector:"+c.r.PathValue("connectorId"))
}

// ingestSignals takes a delivery: 202 when stored, 200 for a replayed
// webhook-id (nothing stored).
func (s *Server) ingestSignals(c *call) error {
	out, err := s.engine.Signals.Ingest(c.r.Context(), clearance.SignalDelivery{
		ConnectorID: c.r.PathValue("connectorId"), Secret: single(c.r.Header, HeaderWebhookSecret),
		WebhookID: single(c.r.Header, HeaderWebhookID), WebhookTimestamp: single(c.r.Header, HeaderWebhookTimestamp),
		WebhookSignature: single(c.r.Header, HeaderWebhookSignature), Body: c.body,
	})
	if err != nil {
		return err
	}
	status := http.StatusAccepted
	if out.Status == "duplicate" {
		status = http.StatusOK
	}
	return c.writeJSON(status, out)
}

// single is a header sent exactly once; "" when absent or repeated, which
// the engine refuses like a missing one.
func single(h http.Header, name string) string {
	if vs := h.Values(name); len(vs) == 1 {
		return vs[0]
	}
	return ""
}
