package server

import (
	"net/http"
	"strconv"

	"github.com/clearancehq/clearance/webhook"
)

// connectWebhook creates or updates the org's WEBHOOK integration: 201 when
// it created it, 200 when it updated it.
func (s *Server) connectWebhook(c *call) error {
	org, err := c.orgFor(c.r.PathValue("orgId"))
	if err != nil {
		return err
	}
	in, err := s.engine.Webhooks.Connect(c.r.Context(), org, c.body)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if in.Created {
		status = http.StatusCreated
	}
	return c.writeJSON(status, in)
}

// getWebhook answers the org's WEBHOOK integration (never its secrets).
func (s *Server) getWebhook(c *call) error {
	org, err := c.orgFor(c.r.PathValue("orgId"))
	if err != nil {
		return err
	}
	in, err := s.engine.Webhooks.Get(c.r.Context(), org)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, in)
}

// deleteWebhook removes the org's WEBHOOK integration.
func (s *Server) deleteWebhook(c *call) error {
	org, err := c.orgFor(c.r.PathValue("orgId"))
	if err != nil {
		return err
	}
	if err := s.engine.Webhooks.Delete(c.r.Context(), org); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	c.status = http.StatusNoContent
	return nil
}

// webhookDeliveries answers the delivery log of one day of events.
func (s *Server) webhookDeliveries(c *call) error {
	org, err := c.orgFor(c.r.PathValue("orgId"))
	if err != nil {
		return err
	}
	f, err := deliveryFilter(c)
	if err != nil {
		return err
	}
	list, err := s.engine.Webhooks.Deliveries(c.r.Context(), org, f)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, map[string]any{"deliveries": list})
}

// deliveryFilter reads a delivery log's query: day, state, limit.
func deliveryFilter(c *call) (webhook.DeliveryFilter, error) {
	var f webhook.DeliveryFilter
	var err error
	if f.Day, err = c.query("day"); err != nil {
		return f, err
	}
	if f.State, err = c.query("state"); err != nil {
		return f, err
	}
	limit, err := c.query("limit")
	if err != nil {
		return f, err
	}
	if limit != "" {
		if f.Limit, err = strconv.Atoi(limit); err != nil || f.Limit < 1 {
			return f, tokenError(webhook.CodeInvalidDeliveryFilter, "limit", "limit must be an integer from 1 to "+strconv.Itoa(webhook.MaxDeliveries))
		}
	}
	return f, nil
}

// redeliverWebhook queues a delivered or dead-lettered delivery again. Its
// body is an empty JSON object, reserved for options.
func (s *Server) redeliverWebhook(c *call) error {
	var none struct{}
	if err := c.decode(&none); err != nil {
		return err
	}
	org, err := c.orgFor(c.r.PathValue("orgId"))
	if err != nil {
		return err
	}
	d, err := s.engine.Webhooks.Redeliver(c.r.Context(), org, c.r.PathValue("deliveryId"))
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusAccepted, d)
}
