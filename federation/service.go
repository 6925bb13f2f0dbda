package federation

import (
	"time"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/outbound"
	"github.com/clearancehq/clearance/policy"
)

// Limits and defaults of federation.
const (
	// MaxTrustedIssuers bounds an org's trust list.
	MaxTrustedIssuers = 32
	// MaxTrustedOrgs bounds the issuing orgs of one trusted issuer.
	MaxTrustedOrgs = 32
	// MaxAudiences bounds the extra audiences of one trusted issuer.
	MaxAudiences = 8
	// MaxFederatedDecisions bounds the envelopes of one request, and
	// MaxEnvelopeBytes the size of each.
	MaxFederatedDecisions = 8
	MaxEnvelopeBytes      = 8 << 10
	// MaxInlineKeys bounds the keys of a JWKS, inline or fetched.
	MaxInlineKeys = 64
	// MaxJWKSURLLen bounds a jwks_url.
	MaxJWKSURLLen = 2048
	// MaxDecisionAge is the largest max_age_seconds.
	MaxDecisionAge = 30 * 24 * time.Hour
	// DefaultEnvelopeTTL is an envelope's lifetime when none is asked for;
	// the longest is grant.MaxFederatedLifetime.
	DefaultEnvelopeTTL = 5 * time.Minute
	// KeyTTL is how long a fetched JWKS is used before it is fetched again
	// (the grant JWKS is served with max-age 60), and KeyRefetchInterval
	// the least time between two fetches caused by an unknown kid.
	KeyTTL             = 60 * time.Second
	KeyRefetchInterval = 10 * time.Second
)

// IntentProfile names how a federated decision's intent digest is
// computed: see IntentDigest.
const IntentProfile = "CLEARANCE-FEDERATED-INTENT-1"

// Config is what the federation feature needs beside the kernel.
type Config struct {
	// Client fetches trusted issuers' JWKS (TLS, no redirects, SSRF guard).
	Client *outbound.Client
	// RecordedInput rebuilds the policy input a recorded dossier body was
	// evaluated with (the decide feature's reader), for the intent digest
	// of an envelope.
	RecordedInput func(body []byte) (policy.Input, error)
}

// Service issues federated decision envelopes, keeps the orgs' trust
// lists and verifies presented envelopes. Create it with New.
type Service struct {
	d    core.Deps
	cfg  Config
	keys *keyCache
}

// New returns the federation feature over the kernel d.
func New(d core.Deps, cfg Config) *Service {
	return &Service{d: d, cfg: cfg, keys: newKeyCache(cfg.Client, d.Clock)}
}

// Audience is the audience an envelope for orgID of this deployment must
// name: "<issuer>/federation/<org id>", the issuer being this deployment's
// (Options.Issuer).
func (s *Service) Audience(orgID string) string { return s.d.Issuer + audienceInfix + orgID }

const audienceInfix = "/federation/"

// Recorded is a federated decision as a dossier records it.
type Recorded = dossier.Federated
