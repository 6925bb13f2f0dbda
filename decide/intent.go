package decide

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"time"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/registry"
)

// ExecutionIntent is the payload of a signed execution intent (DESIGN §8).
type ExecutionIntent struct {
	IntentID             string         `json:"intent_id"`
	OrgID                string         `json:"org_id"`
	Actor                policy.Actor   `json:"actor"`
	Action               policy.Action  `json:"action"`
	WorkflowKey          string         `json:"workflow_key,omitempty"`
	DecisionType         string         `json:"decision_type,omitempty"`
	Surface              string         `json:"surface,omitempty"`
	Context              map[string]any `json:"context,omitempty"`
	Nonce                string         `json:"nonce"`
	ConcurrencyScope     string         `json:"concurrency_scope"`
	ExpectedEffectDigest string         `json:"expected_effect_digest,omitempty"`
	Escalation           Escalation     `json:"escalation"`
	IssuedAt             string         `json:"issued_at"`
	// ParentDecisionID names an earlier decision of the org whose chain
	// this one joins (see Engine.Chain); signed like every other member.
	ParentDecisionID string `json:"parent_decision_id,omitempty"`
}

// Escalation says how an ESCALATE answer is handled.
type Escalation struct {
	Mode string `json:"mode"` // NONE or MANAGED
}

// Escalation modes.
const (
	EscalationNone    = "NONE"
	EscalationManaged = "MANAGED"
)

// verifyIntent checks the JWS against the org's agent keys, requires a
// canonical payload, decodes it strictly and checks its org and id.
func (s *Service) verifyIntent(ctx context.Context, req AuthorityRequest) ([]byte, ExecutionIntent, error) {
	var intent ExecutionIntent
	if req.SignedIntent == "" {
		return nil, intent, core.Invalid(CodeIntentMalformed, "signed_intent", "signed_intent is required")
	}
	payload, _, err := grant.VerifyIntent(req.SignedIntent, func(kid string) (ed25519.PublicKey, error) {
		return registry.Lookup(ctx, s.d.Store, req.OrgID, registry.KindAgent, kid)
	})
	if err != nil {
		var te *grant.TokenError
		if errors.As(err, &te) && (errors.Is(err, grant.ErrTokenMalformed) || errors.Is(err, grant.ErrTokenClaims)) {
			return nil, intent, &core.Error{Kind: core.ErrInvalidRequest, Code: CodeIntentMalformed, Detail: "signed_intent is not a compact JWS intent", Err: err}
		}
		if errors.As(err, &te) || errors.Is(err, registry.ErrKeyNotFound) {
			return nil, intent, &core.Error{Kind: core.ErrForbidden, Code: CodeIntentSignature, Detail: "the intent is not signed by an active agent key of this organization", Err: err}
		}
		return nil, intent, core.Unavailable("verify intent", err)
	}
	if c, err := canon.Transform(payload); err != nil || !bytes.Equal(c, payload) {
		return nil, intent, core.Invalid(CodeIntentNotCanonical, "signed_intent", "the intent payload must be RFC 8785 canonical JSON")
	}
	if err := strictjson.Decode(payload, &intent, s.d.JSON); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) {
			return nil, intent, &core.Error{Kind: core.ErrInvalidRequest, Code: se.Code, Detail: "intent: " + se.Detail, Err: err}
		}
		return nil, intent, core.Invalid(CodeIntentMalformed, "signed_intent", "intent: %v", err)
	}
	if err := validateIntent(intent); err != nil {
		return nil, intent, err
	}
	if err := s.checkFresh(intent.IssuedAt); err != nil {
		return nil, intent, err
	}
	if intent.OrgID != req.OrgID {
		return nil, intent, core.New(core.ErrForbidden, core.CodeOrgMismatch, "the intent's org_id is not the credential's organization")
	}
	if req.IdempotencyKey != "" && req.IdempotencyKey != intent.IntentID {
		return nil, intent, core.Invalid(CodeIntentIDMismatch, "Idempotency-Key", "Idempotency-Key must equal the signed intent_id")
	}
	return payload, intent, nil
}

func validateIntent(in ExecutionIntent) error {
	req := []struct{ field, v string }{
		{"intent_id", in.IntentID}, {"org_id", in.OrgID}, {"actor.id", in.Actor.ID}, {"action.type", in.Action.Type},
		{"nonce", in.Nonce}, {"concurrency_scope", in.ConcurrencyScope}, {"issued_at", in.IssuedAt},
	}
	for _, r := range req {
		if r.v == "" {
			return core.Invalid(CodeIntentMalformed, r.field, "intent.%s is required", r.field)
		}
	}
	for _, r := range []struct{ field, v string }{{"intent_id", in.IntentID}, {"nonce", in.Nonce}, {"concurrency_scope", in.ConcurrencyScope}} {
		if !core.ValidToken(r.v) {
			return core.Invalid(CodeIntentMalformed, r.field, "intent.%s must be 1 to %d visible ASCII characters", r.field, core.MaxKeyLength)
		}
	}
	if _, err := time.Parse(time.RFC3339, in.IssuedAt); err != nil {
		return core.Invalid(CodeIntentMalformed, "issued_at", "intent.issued_at must be an RFC 3339 timestamp")
	}
	if in.ExpectedEffectDigest != "" {
		if _, err := canon.ParseDigest(in.ExpectedEffectDigest); err != nil {
			return core.Invalid(CodeIntentMalformed, "expected_effect_digest", "expected_effect_digest must be sha256:<64 lowercase hex>")
		}
	}
	switch in.Escalation.Mode {
	case EscalationNone, EscalationManaged:
	default:
		return core.Invalid(CodeIntentMalformed, "escalation.mode", "escalation.mode must be NONE or MANAGED")
	}
	return nil
}

// checkFresh refuses an intent issued more than IntentMaxAge ago or more
// than MaxClockSkew ahead of the engine's clock: a signed intent asks for
// authority now, and an old one (or one dated ahead to stay usable) must
// not be bound long after its signer meant it.
func (s *Service) checkFresh(issuedAt string) error {
	at, err := time.Parse(time.RFC3339, issuedAt)
	if err != nil {
		return core.Invalid(CodeIntentMalformed, "issued_at", "intent.issued_at must be an RFC 3339 timestamp")
	}
	now := s.d.Now()
	switch {
	case at.After(now.Add(s.d.MaxClockSkew)):
		return core.Invalid(CodeIntentNotYetValid, "issued_at", "intent.issued_at is more than %s ahead of the server's clock", s.d.MaxClockSkew)
	case now.Sub(at) > s.cfg.IntentMaxAge:
		return core.Invalid(CodeIntentStale, "issued_at", "intent.issued_at is more than %s old; sign a fresh intent", s.cfg.IntentMaxAge)
	}
	return nil
}

// IntentInput maps an execution intent to the one policy input shape.
func IntentInput(in ExecutionIntent, mode policy.Mode, now time.Time) (policy.Input, error) {
	action := in.Action
	actor := in.Actor
	pi := policy.Intent{
		DecisionType: in.DecisionType, WorkflowKey: in.WorkflowKey, Surface: in.Surface, Context: in.Context,
		Mode: mode, Actor: &actor, Action: &action,
	}
	out, err := pi.Input(now)
	if err != nil {
		return out, core.TranslateInput(err)
	}
	return out, nil
}

// ActionClaim is the act claim of an intent's action.
func ActionClaim(a policy.Action) grant.Action {
	act := grant.Action{Type: a.Type, Currency: a.Currency, Target: a.Target}
	if a.Amount.Set {
		v := a.Amount.Value
		act.Amount = &v
	}
	return act
}

// GrantClaims are the claims of the grant token of g, whose intent is in.
// Claim, verify-token and finalize rebuild them from the stored grant to
// compare a presented token with it, member by member.
func GrantClaims(issuer string, g claim.Grant, in ExecutionIntent, mode policy.Mode) grant.Claims {
	return grant.Claims{
		Issuer: issuer, Audience: grant.AudGrant, Subject: g.ActorID, OrgID: g.OrgID, ID: g.GrantID,
		IssuedAt: g.IssuedAt.Unix(), NotBefore: g.IssuedAt.Unix(), Expiry: g.ExpiresAt.Unix(), Action: ActionClaim(in.Action),
		IntentHash: g.IntentHash, PayloadDigest: g.PayloadDigest, PayloadProfile: grant.PayloadProfile,
		ExpectedEffectDigest: g.ExpectedEffectDigest, Nonce: g.Nonce, Scope: g.Scope, Correlation: g.Correlation,
		DecisionID: g.DecisionID, DossierID: g.DossierID, Mode: string(mode),
	}
}

// GrantRecord is what the ledger records of an issued grant.
type GrantRecord struct {
	GrantID       string `json:"grant_id"`
	DecisionID    string `json:"decision_id"`
	DossierID     string `json:"dossier_id"`
	IntentHash    string `json:"intent_hash"`
	PayloadDigest string `json:"payload_digest"`
	Nonce         string `json:"nonce"`
	Scope         string `json:"scope"`
	ExpiresAt     string `json:"expires_at"`
}

// GrantRecordOf is g as the ledger records its issue.
func GrantRecordOf(g claim.Grant) GrantRecord {
	return GrantRecord{g.GrantID, g.DecisionID, g.DossierID, g.IntentHash, g.PayloadDigest, g.Nonce, g.Scope, g.ExpiresAt.Format(core.TimeFormat)}
}
