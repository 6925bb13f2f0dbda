package federation

import (
	"context"
	"time"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/strictjson"
)

// EnvelopeRequest asks for a federated decision envelope of one of the
// org's recorded decisions, for one audience.
type EnvelopeRequest struct {
	DossierID string `json:"dossier_id"`
	// Audience is the receiving org's audience (its trust list answers
	// it): "<receiving issuer>/federation/<receiving org id>".
	Audience string `json:"audience"`
	// TTLSeconds is the envelope's lifetime: 1 to 3600, 300 when absent.
	TTLSeconds *int64 `json:"ttl_seconds,omitempty"`
}

// Envelope is an issued federated decision envelope and what it says.
type Envelope struct {
	Envelope string `json:"envelope"` // the compact JWS
	// The claims a receiver will read, repeated for convenience.
	EnvelopeID    string `json:"envelope_id"`
	Issuer        string `json:"issuer"`
	Audience      string `json:"audience"`
	KID           string `json:"kid"`
	DecisionID    string `json:"decision_id"`
	DossierID     string `json:"dossier_id"`
	DossierDigest string `json:"dossier_digest"`
	Outcome       string `json:"outcome"`
	Mode          string `json:"mode"`
	IntentDigest  string `json:"intent_digest"`
	IntentProfile string `json:"intent_digest_profile"`
	IssuedAt      string `json:"issued_at"`
	ExpiresAt     string `json:"expires_at"`
}

// IssueEnvelope signs a federated decision envelope of orgID's recorded
// decision req.DossierID for req.Audience with the active grant key. It is
// made from the stored dossier alone and stored nowhere (the dossier is
// the evidence; the envelope a signed statement of it). Unknown dossiers
// are 404 DOSSIER_NOT_FOUND; without grant signing 503.
func (s *Service) IssueEnvelope(ctx context.Context, orgID string, raw []byte) (Envelope, error) {
	var req EnvelopeRequest
	if err := strictjson.Decode(raw, &req, s.d.JSON); err != nil {
		return Envelope{}, core.TranslateInput(err)
	}
	ttl := DefaultEnvelopeTTL
	switch {
	case req.DossierID == "":
		return Envelope{}, core.Invalid(core.CodeMissingField, "dossier_id", "dossier_id is required")
	case req.Audience == "":
		return Envelope{}, core.Invalid(core.CodeMissingField, "audience", "audience is required")
	case !core.ValidToken(req.Audience):
		return Envelope{}, core.Invalid(CodeInvalidEnvelopeRequest, "audience", "audience must be 1 to %d visible ASCII characters", core.MaxKeyLength)
	case req.TTLSeconds != nil:
		if v := *req.TTLSeconds; v < 1 || v > int64(grant.MaxFederatedLifetime/time.Second) {
			return Envelope{}, core.Invalid(CodeInvalidEnvelopeRequest, "ttl_seconds", "ttl_seconds must be 1 to %d",
				int64(grant.MaxFederatedLifetime/time.Second))
		}
		ttl = time.Duration(*req.TTLSeconds) * time.Second
	}
	if err := s.d.Store.RequireOrg(ctx, orgID); err != nil {
		return Envelope{}, err
	}
	keys, err := s.d.Keys.Current()
	if err != nil {
		return Envelope{}, err
	}
	signer, err := keys.Signer()
	if err != nil {
		return Envelope{}, err
	}
	if !core.ValidID(req.DossierID) {
		return Envelope{}, core.New(core.ErrNotFound, core.CodeDossierNotFound, "dossier not found")
	}
	rec, err := s.d.Store.Dossier(ctx, orgID, req.DossierID)
	if core.IsNotFound(err) {
		return Envelope{}, core.New(core.ErrNotFound, core.CodeDossierNotFound, "dossier not found")
	}
	if err != nil {
		return Envelope{}, core.Unavailable("read dossier", err)
	}
	b, err := dossier.Decode(rec.Body)
	if err != nil {
		return Envelope{}, core.Unavailable("read dossier", err)
	}
	in, err := s.cfg.RecordedInput(rec.Body)
	if err != nil {
		return Envelope{}, core.New(core.ErrConflict, CodeDecisionNotFederable, "the decision's recorded intent cannot be read back: %v", err)
	}
	intentDigest, err := IntentDigest(&in)
	if err != nil {
		return Envelope{}, core.New(core.ErrConflict, CodeDecisionNotFederable, "the decision's intent cannot be digested: %v", err)
	}
	jti, err := s.d.IDs.New()
	if err != nil {
		return Envelope{}, core.Unavailable("id generation", err)
	}
	now := s.d.Now().Truncate(time.Second)
	claims := grant.FederatedDecision{
		Issuer: s.d.Issuer, Audience: req.Audience, OrgID: orgID, ID: jti,
		IssuedAt: now.Unix(), Expiry: now.Add(ttl).Unix(),
		DecisionID: b.DecisionID, DossierID: b.DossierID, DossierDigest: canon.Digest(rec.Body), LedgerSeq: b.LedgerSeq,
		DecidedAt: b.CreatedAt, Outcome: string(b.Outcome), Mode: string(b.Mode), ReasonCodes: b.ReasonCodes,
		PolicyVersion: b.PolicySnapshot.PolicyVersion, BundleDigest: b.PolicySnapshot.BundleDigest,
		IntentDigest: intentDigest, IntentProfile: IntentProfile,
	}
	jws, err := grant.MintFederatedDecision(signer, claims)
	if err != nil {
		return Envelope{}, core.Unavailable("sign federated decision", err)
	}
	return Envelope{Envelope: jws, EnvelopeID: jti, Issuer: claims.Issuer, Audience: claims.Audience, KID: signer.KID(),
		DecisionID: claims.DecisionID, DossierID: claims.DossierID, DossierDigest: claims.DossierDigest,
		Outcome: claims.Outcome, Mode: claims.Mode, IntentDigest: intentDigest, IntentProfile: IntentProfile,
		IssuedAt: core.Format(now), ExpiresAt: core.Format(now.Add(ttl))}, nil
}
