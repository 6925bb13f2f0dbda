package evidence

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"time"

	"github.com/clearancehq/clearance/capsule"
	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/policy"
)

// CapsuleProfile names the capsule draft every export is pinned to.
const CapsuleProfile = capsule.SpecVersion

// Capsules is the Agent Action Capsule projection of one dossier.
type Capsules struct {
	// Chain is the decision's capsules in ledger order: the verdict, then
	// the outcome of its grant's finalization and a reconciliation, when
	// they exist. The last one is the decision's current state.
	Chain []capsule.Sealed
	// Class1 holds the Class 1 results of Chain, checked as one store.
	Class1 []capsule.Result
}

// Latest is the newest capsule of the chain.
func (c Capsules) Latest() capsule.Sealed { return c.Chain[len(c.Chain)-1] }

// LatestVerified reports whether the Class 1 checks ran on the newest
// capsule and passed.
func (c Capsules) LatestVerified() bool {
	return len(c.Class1) == len(c.Chain) && c.Class1[len(c.Class1)-1].OK
}

// Capsules projects the org's dossier into Agent Action Capsules
// (draft-mih-scitt-agent-action-capsule-04) and runs the Class 1 checks on
// them. The dossier stays the canonical record; effects come only from a
// recorded finalization, never from the verdict.
func (s *Service) Capsules(ctx context.Context, orgID, dossierID string) (Capsules, error) {
	d, digest, err := core.ReadDossier(ctx, s.d.Store, orgID, dossierID)
	if err != nil {
		return Capsules{}, err
	}
	ev, err := s.capsuleEvidence(ctx, d, digest)
	if err != nil {
		return Capsules{}, err
	}
	chain, err := capsule.Build(ev)
	if err != nil {
		return Capsules{}, core.Unavailable("build capsule", err)
	}
	raw := make([][]byte, len(chain))
	for i, c := range chain {
		raw[i] = c.JSON
	}
	return Capsules{Chain: chain, Class1: capsule.VerifyLedger(raw)}, nil
}

// capsuleEvidence gathers what capsule.Build projects from a dossier and
// the grant it names.
func (s *Service) capsuleEvidence(ctx context.Context, d dossier.Body, digest string) (capsule.Evidence, error) {
	decided, err := time.Parse(core.TimeFormat, d.CreatedAt)
	if err != nil {
		return capsule.Evidence{}, core.Unavailable("read dossier", err)
	}
	developer := d.Actor.ID
	if developer == "" {
		developer = d.Actor.CredentialID
	}
	if developer == "" { // an embedded caller that named no principal
		developer = d.OrgID
	}
	ev := capsule.Evidence{
		Operator: d.OrgID, Developer: developer, DecisionID: d.DecisionID, DossierID: d.DossierID, DossierDigest: digest,
		Outcome: capsule.Outcome(d.Outcome), Mode: capsule.Mode(d.Mode), ReasonCodes: d.ReasonCodes,
		EvaluationFailed: d.EvaluationError != "", IntentDigest: d.IntentDigest, DecidedAt: decided,
		Policy: capsule.PolicyRef{BundleID: d.PolicySnapshot.BundleID, PolicyVersion: d.PolicySnapshot.PolicyVersion,
			BundleDigest: d.PolicySnapshot.BundleDigest, Evaluator: d.PolicySnapshot.Evaluator},
	}
	if a := d.Approval; a != nil {
		ev.Approval = &capsule.Approval{Issuer: a.Issuer, RequestID: a.RequestID, ReceiptID: a.ReceiptID}
	}
	if d.EscalationID != "" && d.Outcome == policy.OutcomeEscalate && s.cfg.Escalation != nil {
		esc, err := s.cfg.Escalation(ctx, d.OrgID, d.EscalationID)
		if err != nil {
			return capsule.Evidence{}, core.Unavailable("read escalation", err)
		}
		ev.Escalation = &esc
	}
	if d.GrantID == "" {
		return ev, nil
	}
	g, err := s.d.Store.GrantOf(ctx, d.OrgID, d.GrantID)
	if err != nil {
		return capsule.Evidence{}, core.Unavailable("read grant", err)
	}
	ev.Grant = &capsule.Grant{GrantID: g.GrantID, IssuedAt: g.IssuedAt, ExpiresAt: g.ExpiresAt, PayloadDigest: g.PayloadDigest,
		Finalization: finalizationOf(g)}
	return ev, nil
}

// finalizationOf is a grant's finalization as capsule.Build reads it; nil
// while the grant is ISSUED or CLAIMED.
func finalizationOf(g claim.Grant) *capsule.Finalization {
	if g.FinalizedAt.IsZero() {
		return nil
	}
	f := &capsule.Finalization{State: capsule.State(g.State), FinalCode: g.FinalCode, FinalizedAt: g.FinalizedAt,
		EffectConfirmed: g.EffectConfirmed, Evidence: effectOf(g.Evidence)}
	if r := g.Reconciliation; r != nil {
		// The grant's state is the resolution; the finalization was
		// INDETERMINATE (only those are reconciled).
		f.State = capsule.StateIndeterminate
		f.EffectConfirmed = false
		f.Reconciliation = &capsule.Reconciliation{Resolution: capsule.State(r.Resolution), EffectConfirmed: r.EffectConfirmed,
			Evidence: effectOf(r.Evidence), ReconciledAt: r.ReconciledAt}
	}
	return f
}

func effectOf(e *claim.Evidence) *capsule.EffectEvidence {
	if e == nil {
		return nil
	}
	return &capsule.EffectEvidence{Kind: e.Kind, Status: e.Status, EffectDigest: e.EffectDigest, Source: e.Source}
}

// ProducerEnvelope is one COSE_Sign1 producer envelope over a capsule ID.
type ProducerEnvelope struct {
	CapsuleID string `json:"capsule_id"`
	// COSESign1 is the tagged COSE_Sign1 (base64 in JSON); its payload is
	// the raw 32-byte capsule ID and its kid the raw Ed25519 public key.
	COSESign1 []byte `json:"cose_sign1"`
	// PublicKey is the signer's raw Ed25519 key, hex. A valid signature
	// authenticates only this key; whether to trust it is the caller's policy.
	PublicKey string `json:"public_key"`
	Producer  string `json:"producer"`
}

// ProducerEnvelopes signs the dossier's newest capsule with the service's
// producer key. The envelope is separate from any registration statement
// or transparency receipt.
func (s *Service) ProducerEnvelopes(ctx context.Context, orgID, dossierID string) (capsule.ID, []ProducerEnvelope, error) {
	c, err := s.Capsules(ctx, orgID, dossierID)
	if err != nil {
		return capsule.ID{}, nil, err
	}
	k, err := s.producerKey()
	if err != nil {
		return capsule.ID{}, nil, err
	}
	id := c.Latest().ID
	env, err := capsule.Sign(id, ed25519.NewKeyFromSeed(k.Seed()))
	if err != nil {
		return capsule.ID{}, nil, core.Unavailable("sign producer envelope", err)
	}
	return id, []ProducerEnvelope{{CapsuleID: id.String(), COSESign1: env, PublicKey: hex.EncodeToString(k.Public()),
		Producer: s.d.Issuer}}, nil
}

func (s *Service) producerKey() (grant.Key, error) {
	if !s.cfg.ProducerKey.IsZero() {
		return s.cfg.ProducerKey, nil
	}
	keys, err := s.d.Keys.Current()
	if err != nil {
		return grant.Key{}, err
	}
	return keys.Signer()
}
