package connector

import (
	"context"

	"github.com/clearancehq/clearance/webhook"
)

// AddWebhook registers a callback URL for the credential's org: it joins
// the destinations of decision.resolved (webhook.Service.AddCallback), with
// a signing secret answered once.
func (s *Service) AddWebhook(ctx context.Context, orgID string, body []byte) (webhook.NewCallback, error) {
	return s.cfg.Webhooks.AddCallback(ctx, orgID, body)
}

// RemoveWebhook removes one of the org's callback URLs.
func (s *Service) RemoveWebhook(ctx context.Context, orgID, subscriptionID string) error {
	return s.cfg.Webhooks.RemoveCallback(ctx, orgID, subscriptionID)
}

// Webhooks lists the org's callback URLs.
func (s *Service) Webhooks(ctx context.Context, orgID string) ([]webhook.Callback, error) {
	return s.cfg.Webhooks.Callbacks(ctx, orgID)
}
