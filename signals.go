package clearance

import "github.com/clearancehq/clearance/signals"

// Inbound signals (see package signals).
type (
	// NewSignalConnector is the request to make a signal connector.
	NewSignalConnector = signals.NewConnector
	// SignalConnector is a connector as its org sees it (never its secret).
	SignalConnector = signals.Connector
	// CreatedSignalConnector is a new connector with its secret, shown once.
	CreatedSignalConnector = signals.CreatedConnector
	// SignalDelivery is one POST to a connector's ingress, as received.
	SignalDelivery = signals.Delivery
	// SignalReceipt answers a delivery.
	SignalReceipt = signals.Receipt
)
