package client

import (
	"context"
	"net/http"
)

// The operator console's reads (extensions).

// ConsoleDecisions lists the org's decisions in a window, filtered, newest
// first (Query options: from, to, outcome, mode, workflow, limit):
// GET /v1/console/decisions.
func (c *Client) ConsoleDecisions(ctx context.Context, opts ...CallOption) (*DecisionList, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/console/decisions", nil, opts)
	return call[DecisionList](ctx, c, r, err)
}

// ConsoleActivity reads the org's decisions over time by outcome and mode,
// its executions by state and the server's latency (Query options: from,
// to, bucket): GET /v1/console/activity.
func (c *Client) ConsoleActivity(ctx context.Context, opts ...CallOption) (*ConsoleActivity, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/console/activity", nil, opts)
	return call[ConsoleActivity](ctx, c, r, err)
}
