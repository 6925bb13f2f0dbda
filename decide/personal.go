package decide

import (
	"context"
	"encoding/json"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/core"
)

// PersonalOpener opens what a decision's dossier.Sealer sealed (package
// privacy implements it): the plaintext while the data subject's key
// exists, erased once it was destroyed.
type PersonalOpener interface {
	OpenSealed(ctx context.Context, orgID string, sealed dossier.Sealed, context string) (plain []byte, erased bool, err error)
}

// What a sealed decision's records are sealed for (the additional data):
// each names its record, so that a ciphertext moved to another opens
// nowhere.
func grantContext(orgID, grantID string) string { return "grant/" + orgID + "/" + grantID }

func answerContext(orgID string, route Route, key string) string {
	return "answer/" + orgID + "/" + string(route) + "/" + key
}

// EscalationContext is what a managed escalation's intent is sealed for.
func EscalationContext(orgID, escalationID string) string {
	return "escalation/" + orgID + "/" + escalationID
}

// EscalationTokenContext is what the grant token an escalation concluded
// with is sealed for, in the escalation's record.
func EscalationTokenContext(orgID, escalationID string) string {
	return "escalation-token/" + orgID + "/" + escalationID
}

// grantPersonal is what a sealed grant's PersonalData holds.
type grantPersonal struct {
	ActorID string          `json:"actor_id"`
	Intent  json.RawMessage `json:"intent"`
}

// sealedValue is the JSON string dossier.SealedMarker, in place of a
// sealed JSON member.
var sealedValue = json.RawMessage(`"` + dossier.SealedMarker + `"`)

// sealGrant returns g as a sealed decision stores it: its actor and bound
// intent sealed under the data subject's key, the markers in their place.
func sealGrant(seal dossier.Sealer, g claim.Grant) (claim.Grant, error) {
	plain, err := json.Marshal(grantPersonal{ActorID: g.ActorID, Intent: g.Intent})
	if err != nil {
		return g, err
	}
	sealed, err := seal.Seal(plain, grantContext(g.OrgID, g.GrantID))
	if err != nil {
		return g, err
	}
	cs := claim.Sealed(sealed)
	g.PersonalData, g.ActorID, g.Intent = &cs, dossier.SealedMarker, sealedValue
	return g, nil
}

// OpenGrant returns g with the actor and bound intent its PersonalData
// seals; erased (and g with dossier.ErasedMarker in their place) once its
// data subject's key was destroyed. A grant that was not sealed is
// returned as it is, without a read. A grant sealed when no opener is
// configured does not open (503 PERSONAL_DATA_UNREADABLE).
func OpenGrant(ctx context.Context, p PersonalOpener, g claim.Grant) (claim.Grant, bool, error) {
	if g.PersonalData == nil {
		return g, false, nil
	}
	if p == nil {
		return g, false, core.New(core.ErrUnavailable, core.CodePersonalDataUnreadable, "the grant's personal data is sealed and no data-protection feature is configured")
	}
	plain, erased, err := p.OpenSealed(ctx, g.OrgID, dossier.Sealed(*g.PersonalData), grantContext(g.OrgID, g.GrantID))
	if err != nil {
		return g, false, err
	}
	if erased {
		g.ActorID, g.Intent = dossier.ErasedMarker, json.RawMessage(`"`+dossier.ErasedMarker+`"`)
		return g, true, nil
	}
	var v grantPersonal
	if err := json.Unmarshal(plain, &v); err != nil {
		return g, false, core.New(core.ErrUnavailable, core.CodePersonalDataUnreadable, "the grant's personal data does not decode")
	}
	g.ActorID, g.Intent = v.ActorID, v.Intent
	return g, false, nil
}

// managedPersonal is what a sealed managed escalation keeps of its intent.
type managedPersonal struct {
	Payload      json.RawMessage `json:"payload"`
	SignedIntent string          `json:"signed_intent"`
}

// sealManaged returns m as a sealed decision's escalation records it: its
// canonical and signed intent sealed under the data subject's key.
func sealManaged(seal dossier.Sealer, m ManagedEscalation) (ManagedEscalation, error) {
	plain, err := json.Marshal(managedPersonal{Payload: m.Payload, SignedIntent: m.SignedIntent})
	if err != nil {
		return m, err
	}
	sealed, err := seal.Seal(plain, EscalationContext(m.OrgID, m.EscalationID))
	if err != nil {
		return m, err
	}
	m.PersonalData, m.Payload, m.SignedIntent, m.Intent = &sealed, sealedValue, dossier.SealedMarker, ExecutionIntent{}
	return m, nil
}

// OpenManaged returns the managed escalation m as recorded with its intent
// restored (Payload, SignedIntent and Intent); erased once its data
// subject's key was destroyed: the escalation can then never conclude into
// a grant. An escalation that was not sealed is returned as it is.
func (s *Service) OpenManaged(ctx context.Context, m ManagedEscalation) (ManagedEscalation, bool, error) {
	if m.PersonalData == nil {
		return m, false, nil
	}
	if s.cfg.Personal == nil {
		return m, false, core.New(core.ErrUnavailable, core.CodePersonalDataUnreadable, "the escalation's intent is sealed and no data-protection feature is configured")
	}
	plain, erased, err := s.cfg.Personal.OpenSealed(ctx, m.OrgID, *m.PersonalData, EscalationContext(m.OrgID, m.EscalationID))
	if err != nil || erased {
		return m, erased, err
	}
	var v managedPersonal
	if err := json.Unmarshal(plain, &v); err != nil {
		return m, false, core.New(core.ErrUnavailable, core.CodePersonalDataUnreadable, "the escalation's personal data does not decode")
	}
	if err := json.Unmarshal(v.Payload, &m.Intent); err != nil {
		return m, false, core.New(core.ErrUnavailable, core.CodePersonalDataUnreadable, "the escalation's intent does not decode")
	}
	m.Payload, m.SignedIntent, m.PersonalData = v.Payload, v.SignedIntent, nil
	return m, false, nil
}

// OpenSealed opens, for the org's records that keep a sealed decision's
// personal data outside decide (an escalation's grant token), what the
// decision's Sealer sealed for context.
func (s *Service) OpenSealed(ctx context.Context, orgID string, sealed dossier.Sealed, context string) ([]byte, bool, error) {
	if s.cfg.Personal == nil {
		return nil, false, core.New(core.ErrUnavailable, core.CodePersonalDataUnreadable, "a record's personal data is sealed and no data-protection feature is configured")
	}
	return s.cfg.Personal.OpenSealed(ctx, orgID, sealed, context)
}

// boundAnswer is an enforce-and-bind answer as its idempotency record
// keeps it. For a sealed decision the grant token, whose payload names the
// actor and the action, is kept only as SealedToken, under the data
// subject's key; the request that made it is answered the plain token.
type boundAnswer struct {
	AuthorityDecision
	SealedToken *dossier.Sealed `json:"sealed_execution_token,omitempty"`
}

// openAnswer restores the grant token of a replayed answer; a token whose
// data subject was erased is not answered again: the replay is refused
// (409 STALE_AUTHORIZATION), as the grant could not be claimed anyway.
func (s *Service) openAnswer(ctx context.Context, dr *draft, a *boundAnswer) error {
	if a.SealedToken == nil {
		return nil
	}
	plain, erased, err := s.OpenSealed(ctx, dr.org, *a.SealedToken, answerContext(dr.org, dr.route, dr.key))
	if err != nil {
		return err
	}
	if erased {
		return core.New(core.ErrConflict, core.CodeStaleAuthorization,
			"the decision's data subject was erased: its grant token is gone and the grant cannot be claimed")
	}
	a.ExecutionToken, a.SealedToken = string(plain), nil
	return nil
}
