package execution

import (
	"context"
	"encoding/json"
	"time"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/decide"
)

// Execution is a grant's lifecycle as the reconciliation routes show it. It
// is not the stored record (claim.Grant): renaming a member here is a
// change of the wire, never a storage migration. It has the record's
// members but token_digest, the digest by which the issuer recognizes its
// own grant token, which is the store's business, and personal_data: a
// grant sealed by the org's data-protection setting is shown with its actor
// and intent restored (view), "[erased]" once its data subject was erased.
type Execution struct {
	OrgID                string          `json:"org_id"`
	GrantID              string          `json:"grant_id"`
	DecisionID           string          `json:"decision_id"`
	DossierID            string          `json:"dossier_id"`
	DossierDigest        string          `json:"dossier_digest"`
	IntentID             string          `json:"intent_id"`
	IntentHash           string          `json:"intent_hash"`
	PayloadDigest        string          `json:"payload_digest"`
	ExpectedEffectDigest string          `json:"expected_effect_digest,omitempty"`
	Nonce                string          `json:"nonce"`
	Scope                string          `json:"scope"`
	Correlation          string          `json:"correlation,omitempty"`
	ActorID              string          `json:"actor_id"`
	ActionType           string          `json:"action_type"`
	PolicyVersion        string          `json:"policy_version"`
	BundleDigest         string          `json:"bundle_digest"`
	Intent               json.RawMessage `json:"intent"`
	IssuedAt             time.Time       `json:"issued_at"`
	ExpiresAt            time.Time       `json:"expires_at"`

	State claim.State `json:"state"`

	ClaimTokenDigest string    `json:"claim_token_digest,omitempty"`
	ClaimCorrelation string    `json:"claim_correlation,omitempty"`
	ClaimedAt        time.Time `json:"claimed_at,omitzero"`
	LeaseExpiresAt   time.Time `json:"lease_expires_at,omitzero"`

	FinalizedAt time.Time `json:"finalized_at,omitzero"`
	FinalCode   string    `json:"final_code,omitempty"`
	// Lapsed: the lease passed with no finalization (see claim.Grant).
	Lapsed          bool                  `json:"lapsed,omitempty"`
	Evidence        *claim.Evidence       `json:"evidence,omitempty"`
	Receipt         *claim.Receipt        `json:"receipt,omitempty"`
	EffectConfirmed bool                  `json:"effect_confirmed"`
	Reconciliation  *claim.Reconciliation `json:"reconciliation,omitempty"`
}

func executionOf(g claim.Grant) Execution {
	return Execution{OrgID: g.OrgID, GrantID: g.GrantID, DecisionID: g.DecisionID, DossierID: g.DossierID,
		DossierDigest: g.DossierDigest, IntentID: g.IntentID, IntentHash: g.IntentHash, PayloadDigest: g.PayloadDigest,
		ExpectedEffectDigest: g.ExpectedEffectDigest, Nonce: g.Nonce, Scope: g.Scope, Correlation: g.Correlation,
		ActorID: g.ActorID, ActionType: g.ActionType, PolicyVersion: g.PolicyVersion, BundleDigest: g.BundleDigest,
		Intent: g.Intent, IssuedAt: g.IssuedAt, ExpiresAt: g.ExpiresAt, State: g.State,
		ClaimTokenDigest: g.ClaimTokenDigest, ClaimCorrelation: g.ClaimCorrelation, ClaimedAt: g.ClaimedAt,
		LeaseExpiresAt: g.LeaseExpiresAt, FinalizedAt: g.FinalizedAt, FinalCode: g.FinalCode, Lapsed: g.Lapsed,
		Evidence: g.Evidence, Receipt: g.Receipt, EffectConfirmed: g.EffectConfirmed, Reconciliation: g.Reconciliation}
}

// view is g as the reconciliation routes show it (see Execution).
func (s *Service) view(ctx context.Context, g claim.Grant) (Execution, error) {
	if g.PersonalData == nil {
		return executionOf(g), nil
	}
	opened, _, err := decide.OpenGrant(ctx, s.cfg.Personal, g)
	if err != nil {
		return Execution{}, err
	}
	return executionOf(opened), nil
}
