package signals

import "github.com/clearancehq/clearance/internal/core"

// Codes of the signal routes. Every refusal is a *core.Error of one Kind;
// the package declares no sentinels.
const (
	// CodeConnectorNotFound: the org has no connector with the id (404),
	// also when another org has one.
	CodeConnectorNotFound = "SIGNAL_CONNECTOR_NOT_FOUND"
	// CodeInvalidConnectorID: the id is not a canonical UUID (400).
	CodeInvalidConnectorID = "INVALID_SIGNAL_CONNECTOR_ID"
	// CodeInvalidConnectorName: name is not 1 to MaxNameLen characters of
	// text without control characters (400).
	CodeInvalidConnectorName = "INVALID_SIGNAL_CONNECTOR_NAME"
	// CodeConnectorLimit: the org has made MaxConnectors connectors
	// already, revoked ones included (409).
	CodeConnectorLimit = "SIGNAL_CONNECTOR_LIMIT_REACHED"
	// CodeSecretsNotConfigured: a connector that requires signatures needs
	// its secret sealed at rest, and the engine has no secrets key (503).
	CodeSecretsNotConfigured = core.CodeSecretsNotConfigured

	// CodeWebhookSecretInvalid: the ONE answer (401) to an unknown
	// connector, a revoked one, a missing or repeated x-webhook-secret and
	// a wrong secret, so that connectors cannot be told apart from outside.
	CodeWebhookSecretInvalid = "WEBHOOK_SECRET_INVALID"
	// CodeSignatureInvalid: the connector requires Standard Webhooks
	// signatures and webhook-id, webhook-timestamp or webhook-signature is
	// missing, malformed or does not verify (401).
	CodeSignatureInvalid = "WEBHOOK_SIGNATURE_INVALID"
	// CodeTimestampOutOfTolerance: webhook-timestamp is more than
	// SignatureTolerance away from now, in either direction (401).
	CodeTimestampOutOfTolerance = "WEBHOOK_TIMESTAMP_OUT_OF_TOLERANCE"
	// CodeInvalidWebhookID: an unsigned delivery's webhook-id is not 1 to
	// MaxWebhookIDLen visible ASCII characters, or was sent twice (400).
	CodeInvalidWebhookID = "INVALID_WEBHOOK_ID"

	// CodeInvalidBatch: events is absent, empty or longer than MaxEvents (400).
	CodeInvalidBatch = "INVALID_SIGNAL_BATCH"
	// CodeInvalidType: an event's type does not follow the signal type
	// grammar (policy.SignalTypeRule) (400).
	CodeInvalidType = "INVALID_SIGNAL_TYPE"
	// CodeInvalidTimestamp: an event's timestamp is not RFC 3339 with a
	// time zone, or is more than MaxEventLead ahead of now (400).
	CodeInvalidTimestamp = "INVALID_SIGNAL_TIMESTAMP"
	// CodeInvalidData: an event's data is not a JSON object of at most
	// MaxDataBytes canonical bytes (400).
	CodeInvalidData = "INVALID_SIGNAL_DATA"
	// CodeTypesExhausted: the delivery would give the org more than
	// MaxTypes signal types (409); nothing of it is stored.
	CodeTypesExhausted = "SIGNAL_TYPES_EXHAUSTED"
)
