package connector

import (
	"context"

	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/webhook"
)

// AddWebhook registers a callback URL for the caller's org: it joins the
// destinations of decision.resolved (webhook.Service.AddCallback), with a
// signing secret answered once, and lives as long as the caller's
// credential (revoking the platform's credential stops its callbacks).
func (s *Service) AddWebhook(ctx context.Context, p core.Principal, body []byte) (webhook.NewCallback, error) {
	return s.cfg.Webhooks.AddCallback(ctx, p.OrgID, p.KeyHash(), body)
}

// RemoveWebhook removes one of the org's callback URLs.
func (s *Service) RemoveWebhook(ctx context.Context, orgID, subscriptionID string) error {
	return s.cfg.Webhooks.RemoveCallback(ctx, orgID, subscriptionID)
}

// WebhookDeliveries returns the delivery log of one of the org's callbacks
// for a day of events (f.Destination is set from the subscription id).
func (s *Service) WebhookDeliveries(ctx context.Context, orgID, subscriptionID string, f webhook.DeliveryFilter) ([]webhook.Delivery, error) {
	if err := s.cfg.Webhooks.HasCallback(ctx, orgID, subscriptionID); err != nil {
		return nil, err
	}
	f.Destination = webhook.CallbackPrefix + subscriptionID
	return s.cfg.Webhooks.Deliveries(ctx, orgID, f)
}

// Webhooks lists the org's callback URLs.
func (s *Service) Webhooks(ctx context.Context, orgID string) ([]webhook.Callback, error) {
	return s.cfg.Webhooks.Callbacks(ctx, orgID)
}
