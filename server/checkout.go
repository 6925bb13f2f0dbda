package server

import (
	"errors"
	"net/http"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/registry"
)

// merchantKeys serves the org's UCP merchant signing keys.
var merchantKeys = keyRoutes{kind: registry.KindMerchant}

// authorizeCheckout is POST /v1/ucp/checkout/authorize: the body is the
// UCP checkout response envelope itself, validated by the engine (not
// decoded here), so that what is digested is exactly what was sent.
func (s *Server) authorizeCheckout(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	corr, err := c.correlationID()
	if err != nil {
		return err
	}
	key, err := c.idempotencyKey()
	if err != nil {
		return err
	}
	a, err := s.engine.Checkout.Authorize(c.r.Context(), clearance.CheckoutRequest{
		OrgID: org, Body: c.body, IdempotencyKey: key, CorrelationID: corr, RequestID: c.requestID, Principal: c.principal,
	})
	// A refusal is a recorded decision too: it answers (403, written by the
	// route's refusal body) with the same headers and is counted the same.
	var refused *clearance.CheckoutRefused
	switch {
	case errors.As(err, &refused):
		a = refused.Answer
	case err != nil:
		return err
	}
	if corr != "" {
		c.w.Header().Set(HeaderCorrelationID, corr)
	}
	if a.Replayed {
		c.w.Header().Set(HeaderReplayed, "true")
	} else {
		s.metrics.decisions.WithLabelValues(string(a.Authority.Outcome), string(a.Authority.Mode), string(clearance.RouteUCPCheckout)).Inc()
	}
	if refused != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, a)
}
