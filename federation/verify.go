package federation

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/policy"
)

// Verify checks the federated decisions presented with a decision request
// of orgID whose policy input is in, and returns what the policy sees of
// them (policy.Input.Federation) and what the dossier records. Each must be a
// compact JWS of typ grant.TypFederatedDecision whose iss is on the org's
// trust list, signed with a key whose kid is in that issuer's current key
// set, from an issuing org the entry lists, naming an audience the org
// accepts, with iat no later than the
// engine's clock plus its skew and exp after it, and a decision no older
// than the entry's max_age_seconds. The first that fails refuses the whole
// request: 400 FEDERATED_DECISION_INVALID naming federated_decisions[i]
// and the reason, or 503 FEDERATION_ISSUER_UNAVAILABLE when an issuer's
// keys cannot be read. Nothing is recorded then.
func (s *Service) Verify(ctx context.Context, orgID string, envelopes []string, in policy.Input) ([]policy.FederatedDecision, []dossier.Federated, error) {
	if len(envelopes) == 0 {
		return nil, nil, nil
	}
	if len(envelopes) > MaxFederatedDecisions {
		return nil, nil, core.Invalid(CodeFederatedDecisionInvalid, "federated_decisions", "at most %d federated decisions per request", MaxFederatedDecisions)
	}
	set, err := s.readTrust(ctx, orgID)
	if err != nil {
		return nil, nil, err
	}
	digest, err := IntentDigest(&in)
	if err != nil {
		return nil, nil, core.Invalid(CodeFederatedDecisionInvalid, "federated_decisions", "the request's intent cannot be digested: %v", err)
	}
	now := s.d.Now()
	recorded := make([]dossier.Federated, 0, len(envelopes))
	seen := make([]policy.FederatedDecision, 0, len(envelopes))
	for i, jws := range envelopes {
		field := fmt.Sprintf("federated_decisions[%d]", i)
		refuse := func(format string, args ...any) error {
			return core.Invalid(CodeFederatedDecisionInvalid, field, field+": "+format, args...)
		}
		if len(jws) == 0 || len(jws) > MaxEnvelopeBytes {
			return nil, nil, refuse("must be a compact JWS of 1 to %d bytes", MaxEnvelopeBytes)
		}
		iss, err := unverifiedIssuer(jws)
		if err != nil {
			return nil, nil, refuse("%v", err)
		}
		at := set.find(iss)
		if at < 0 {
			return nil, nil, refuse("issuer %q is not on the org's trust list", clip(iss))
		}
		entry := set.Issuers[at]
		lookup, err := s.lookup(ctx, entry)
		if err != nil {
			return nil, nil, core.New(core.ErrUnavailable, CodeFederationIssuerUnavailable, "the keys of trusted issuer %q cannot be read: %v", clip(iss), err)
		}
		f, kid, err := grant.VerifyFederatedDecision(jws, lookup, grant.VerifyOptions{
			Now: now, MaxFutureIssuedAt: s.d.MaxClockSkew, Issuer: entry.Issuer})
		if errors.Is(err, errUnavailable) {
			return nil, nil, core.New(core.ErrUnavailable, CodeFederationIssuerUnavailable, "the keys of trusted issuer %q cannot be read: %v", clip(iss), err)
		}
		if err != nil {
			return nil, nil, refuse("%s", reason(err))
		}
		if !s.accepts(entry, orgID, f.Audience) {
			return nil, nil, refuse("audience %q is not this org's (%s)", clip(f.Audience), s.Audience(orgID))
		}
		if !slices.Contains(entry.Orgs, f.OrgID) {
			if len(entry.Orgs) == 0 {
				return nil, nil, refuse("the trust list entry of %q names no issuing org (it was stored before orgs were required): put it again with orgs", clip(iss))
			}
			return nil, nil, refuse("issuing org %q is not among the orgs the trust list accepts from %q", clip(f.OrgID), clip(iss))
		}
		decided, _ := time.Parse(time.RFC3339Nano, f.DecidedAt) // validated by VerifyFederatedDecision
		age := now.Sub(decided)
		if entry.MaxAgeSeconds > 0 && age > time.Duration(entry.MaxAgeSeconds)*time.Second {
			return nil, nil, refuse("the decision was made %s ago, more than the trust list's max_age_seconds %d", age.Round(time.Second), entry.MaxAgeSeconds)
		}
		if slices.ContainsFunc(recorded, func(r dossier.Federated) bool { return r.Issuer == f.Issuer && r.EnvelopeID == f.ID }) {
			return nil, nil, refuse("envelope %s of %q is presented twice", f.ID, clip(iss))
		}
		matches := f.IntentProfile == IntentProfile && f.IntentDigest == digest
		recorded = append(recorded, dossier.Federated{Envelope: jws, Issuer: f.Issuer, Org: f.OrgID, KID: kid, EnvelopeID: f.ID,
			DecisionID: f.DecisionID, DossierID: f.DossierID, DossierDigest: f.DossierDigest, Outcome: f.Outcome, Mode: f.Mode,
			IntentDigest: f.IntentDigest, MatchesIntent: matches})
		seen = append(seen, policy.FederatedDecision{Issuer: f.Issuer, Org: f.OrgID, Outcome: policy.Outcome(f.Outcome), Mode: policy.Mode(f.Mode),
			DecisionID: f.DecisionID, IntentDigest: f.IntentDigest, MatchesIntent: matches, PolicyVersion: f.PolicyVersion,
			BundleDigest: f.BundleDigest, ReasonCodes: f.ReasonCodes, AgeSeconds: max(age.Seconds(), 0)})
	}
	return seen, recorded, nil
}

// lookup is the key lookup of a trusted issuer's envelopes: its inline
// JWKS, or its JWKS URL through the cache.
func (s *Service) lookup(ctx context.Context, e TrustedIssuer) (func(kid string) (ed25519.PublicKey, error), error) {
	if e.JWKSURL == "" {
		keys, err := parseJWKS(e.JWKS)
		if err != nil {
			return nil, err
		}
		return func(kid string) (ed25519.PublicKey, error) {
			if k, ok := keys[kid]; ok {
				return k, nil
			}
			return nil, fmt.Errorf("kid %q is not in the issuer's inline key set: %w", kid, grant.ErrUnknownKey)
		}, nil
	}
	return func(kid string) (ed25519.PublicKey, error) { return s.keys.key(ctx, e.JWKSURL, kid) }, nil
}

// accepts reports whether aud is an audience orgID accepts from e.
func (s *Service) accepts(e TrustedIssuer, orgID, aud string) bool {
	return aud == s.Audience(orgID) || slices.Contains(e.Audiences, aud)
}

// unverifiedIssuer reads iss from a JWS's payload before its signature is
// checked: only to find whose keys check it (the verification then
// requires that very iss).
func unverifiedIssuer(jws string) (string, error) {
	parts := strings.Split(jws, ".")
	if len(parts) != 3 {
		return "", errors.New("is not a compact JWS")
	}
	payload, err := base64.RawURLEncoding.Strict().DecodeString(parts[1])
	if err != nil {
		return "", errors.New("is not a compact JWS: the payload is not base64url")
	}
	var c struct {
		Issuer string `json:"iss"`
	}
	if err := json.Unmarshal(payload, &c); err != nil || c.Issuer == "" {
		return "", errors.New("has no iss")
	}
	return c.Issuer, nil
}

// reason says why a verification failed, in words a caller can act on.
func reason(err error) string {
	switch {
	case errors.Is(err, grant.ErrUnknownKey):
		return "it is signed with a key that is not in the issuer's current key set (unknown, rotated out or revoked): " + err.Error()
	case errors.Is(err, grant.ErrTokenSignature):
		return "the signature does not verify"
	case errors.Is(err, grant.ErrTokenType):
		return "it is not a federated decision envelope (typ " + grant.TypFederatedDecision + "): " + err.Error()
	case errors.Is(err, grant.ErrTokenExpired):
		return "it has expired: " + err.Error()
	case errors.Is(err, grant.ErrTokenNotYetValid):
		return "it is issued in the future: " + err.Error()
	}
	return err.Error()
}

// clip shortens a presented string for an error message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
