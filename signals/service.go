package signals

import (
	"time"

	"github.com/clearancehq/clearance/internal/core"
)

// Limits of connectors and deliveries.
const (
	// MaxNameLen is the longest connector name, in characters.
	MaxNameLen = 120
	// MaxEvents is the most events one delivery may carry.
	MaxEvents = 100
	// MaxDataBytes bounds an event's data, as canonical JSON.
	MaxDataBytes = 16 << 10
	// MaxTypes is how many signal types an org may have: every decision
	// whose policy reads signals sees (and records) the latest of each.
	MaxTypes = 64
	// MaxConnectors is how many connectors an org may make, revoked ones
	// included (they stay listed, for the audit): the list stays one
	// bounded read.
	MaxConnectors = 500
	// MaxWebhookIDLen bounds webhook-id.
	MaxWebhookIDLen = 256
	// SignatureTolerance is how far webhook-timestamp may be from now, in
	// either direction (Standard Webhooks' five minutes).
	SignatureTolerance = 5 * time.Minute
	// MaxEventLead is how far an event's timestamp may be ahead of now: a
	// timestamp from the future would stay the type's latest for good.
	MaxEventLead = 5 * time.Minute
)

// Connector statuses.
const (
	StatusActive  = "ACTIVE"
	StatusRevoked = "REVOKED"
)

// SecretPrefix starts every connector secret (Standard Webhooks).
const SecretPrefix = "whsec_"

// WebhookPathPrefix is where a connector's deliveries go: the prefix and
// its id.
const WebhookPathPrefix = "/v1/signals/webhooks/"

// Artifact kinds of the feature.
const (
	kindConnector    = "signal.connector"     // org: the authority
	kindConnectorOrg = "signal.connector_org" // platform org: connector id → org
	kindEvent        = "signal.event"         // org: every event, Ref = type
	kindLatest       = "signal.latest"        // org: one per type, ID = type
	kindTypes        = "signal.types"         // org: the list of types
	kindDelivery     = "signal.delivery"      // org: replay record, ID = connector/webhook-id
	kindCount        = "signal.count"         // org: connectors made, ID = idCount

	refConnector = "connector"
	refLatest    = "latest"
	idTypes      = "index"
	idCount      = "connectors"
)

// Service runs connectors and stores the signals they deliver. Create it
// with New.
type Service struct {
	d core.Deps
}

// New returns the signals feature over the kernel d.
func New(d core.Deps) *Service { return &Service{d: d} }
