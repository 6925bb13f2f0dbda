package clearance

import (
	"github.com/clearancehq/clearance/checkout"
	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/federation"
	"github.com/clearancehq/clearance/policy"
)

// Decision federation (see package federation): envelopes this deployment
// issues for its recorded decisions, and the per-org trust lists of the
// deployments whose envelopes its policies may see.
type (
	// FederationEnvelopeRequest asks for a federated decision envelope.
	FederationEnvelopeRequest = federation.EnvelopeRequest
	// FederationEnvelope is an issued envelope and what it says.
	FederationEnvelope = federation.Envelope
	// TrustedIssuer is one entry of an org's trust list.
	TrustedIssuer = federation.TrustedIssuer
	// TrustList is an org's trust list with the audience its envelopes name.
	TrustList = federation.TrustList
	// DossierFederated is a federated decision a decision was evaluated with.
	DossierFederated = federation.Recorded
)

// Codes of federation.
const (
	CodeFederatedDecisionInvalid    = federation.CodeFederatedDecisionInvalid
	CodeFederationIssuerUnavailable = federation.CodeFederationIssuerUnavailable
	CodeInvalidTrustedIssuer        = federation.CodeInvalidTrustedIssuer
	CodeTrustedIssuerNotFound       = federation.CodeTrustedIssuerNotFound
	CodeTrustedIssuerLimitReached   = federation.CodeTrustedIssuerLimitReached
)

// federationRecordedInput rebuilds the policy input of a recorded dossier
// body, for the intent digest of an envelope (signals are not part of it).
func federationRecordedInput(body []byte) (policy.Input, error) {
	r, err := decide.DecodeRecorded(body)
	if err != nil {
		return policy.Input{}, err
	}
	return decide.RecordedInput(&r, false, decide.RecordSources{Checkout: checkout.RecordedInput})
}
