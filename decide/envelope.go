package decide

import (
	"context"
	"time"

	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/core"
)

// envelope signs a verification envelope of d (with the intent hash and
// grant id of an enforce-and-bind answer; "" elsewhere). It is made from the
// recorded decision alone, never stored, so a replay gets the same envelope
// (Ed25519 is deterministic) while the signing key is unchanged.
func (s *Service) envelope(ctx context.Context, signer grant.Key, d Decision, intentHash, grantID string) (env string, err error) {
	at, err := time.Parse(core.TimeFormat, d.CreatedAt)
	if err != nil {
		return "", err
	}
	_, span := s.d.Tracer.Start(ctx, core.SpanEnvelopeSign)
	defer func() { span.End(err) }()
	return grant.MintEnvelope(signer, grant.Envelope{
		Issuer: s.d.Issuer, Audience: grant.AudDecision, OrgID: d.OrgID, ID: d.EvaluationID,
		IssuedAt: at.Unix(), Expiry: at.Add(s.cfg.GrantTTL).Unix(), DecisionID: d.DecisionID, DossierID: d.DossierID,
		IntentHash: intentHash, Outcome: string(d.Outcome), ReasonCodes: d.ReasonCodes, Mode: string(d.Mode),
		PolicyVersion: d.PolicySnapshot.PolicyVersion, BundleDigest: d.PolicySnapshot.BundleDigest, GrantID: grantID,
	})
}
