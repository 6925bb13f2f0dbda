package webhook

import "github.com/clearancehq/clearance/internal/core"

// Codes of the WEBHOOK integration routes.
const (
	// CodeInvalidIntegration: the connect body breaks a rule of its
	// members (errors[] names each field).
	CodeInvalidIntegration = "INVALID_INTEGRATION"
	// CodeDestinationForbidden: the endpoint_url is not one Clearance may
	// call (scheme, userinfo, or a loopback, private, link-local,
	// metadata, multicast or unspecified address, or a name for one).
	CodeDestinationForbidden = "DESTINATION_FORBIDDEN"
	// CodeWebhookSecretRequired: the first connect of an org gives no
	// credentials.webhook_secret.
	CodeWebhookSecretRequired = "WEBHOOK_SECRET_REQUIRED"
	// CodeIntegrationNotFound: the org has no WEBHOOK integration.
	CodeIntegrationNotFound = "INTEGRATION_NOT_FOUND"
	// CodeDeliveryNotFound: no delivery of the org's integration has the id.
	CodeDeliveryNotFound = "DELIVERY_NOT_FOUND"
	// CodeDeliveryInProgress: a redelivery of a delivery whose attempts
	// are still under way.
	CodeDeliveryInProgress = "DELIVERY_IN_PROGRESS"
	// CodeInvalidCallback: a callback registration breaks a rule of its
	// members (errors[] names each field).
	CodeInvalidCallback = "INVALID_CALLBACK"
	// CodeCallbackExists: the URL is registered already for the org.
	CodeCallbackExists = "CALLBACK_EXISTS"
	// CodeCallbackLimitReached: the org has MaxCallbacks callbacks.
	CodeCallbackLimitReached = "CALLBACK_LIMIT_REACHED"
	// CodeCallbackNotFound: the org has no callback with the id.
	CodeCallbackNotFound = "CALLBACK_NOT_FOUND"
	// CodeSecretsNotConfigured: the engine has no secrets key, so a
	// signing secret cannot be stored (503).
	CodeSecretsNotConfigured = core.CodeSecretsNotConfigured
)
