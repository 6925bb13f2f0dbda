package decide

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/idempotency"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
)

// AuthorityRequest is an enforce-and-bind call.
type AuthorityRequest struct {
	OrgID            string
	SignedIntent     string
	Mode             policy.Mode
	ApprovalEvidence json.RawMessage
	IdempotencyKey   string
	CorrelationID    string
	RequestID        string
	Principal        core.Principal
	// WantEnvelope asks for a signed verification envelope of the decision
	// (the server sets it for agent-safe-pipeline/0.2.0 and later).
	WantEnvelope bool
}

// AuthorityDecision is the enforce-and-bind answer. ExecutionToken is set
// only for ALLOW evaluated in ENFORCEMENT mode.
type AuthorityDecision struct {
	Decision
	IntentID       string `json:"intent_id"`
	IntentHash     string `json:"intent_hash"`
	ExecutionToken string `json:"execution_token,omitempty"`
	GrantID        string `json:"grant_id,omitempty"`
	ExpiresAt      string `json:"expires_at,omitempty"`
	EscalationMode string `json:"escalation_mode"`
}

// EnforceAndBind verifies a signed execution intent, evaluates it and, for
// ALLOW in ENFORCEMENT mode, binds a single-use grant to it. The dossier,
// ledger entries, grant record and intent binding commit atomically. The
// intent_id is the issuance boundary: the same intent again returns the
// same answer; another intent under a bound intent_id is core.ErrConflict.
func (s *Service) EnforceAndBind(ctx context.Context, req AuthorityRequest) (AuthorityDecision, error) {
	keys, err := s.d.Keys.Current()
	if err != nil {
		return AuthorityDecision{}, err
	}
	signer, err := keys.Signer()
	if err != nil {
		return AuthorityDecision{}, err
	}
	if req.CorrelationID != "" && !core.ValidToken(req.CorrelationID) {
		return AuthorityDecision{}, core.Invalid(core.CodeInvalidCorrelationID, "correlation_id", "the correlation id must be 1 to %d visible ASCII characters", core.MaxKeyLength)
	}
	payload, intent, err := s.verifyIntent(ctx, req)
	if err != nil {
		return AuthorityDecision{}, err
	}
	if len(req.ApprovalEvidence) > 0 && !bytes.Equal(bytes.TrimSpace(req.ApprovalEvidence), []byte("null")) {
		// Approval evidence is verified with the approval service in the
		// managed ceremony; until that exists nothing can verify it.
		return AuthorityDecision{}, core.New(core.ErrConflict, CodeApprovalUnverified, "approval evidence could not be verified")
	}
	dr := draft{route: RouteEnforceAndBind, org: req.OrgID, intent: payload, asReceived: req.SignedIntent,
		intentDigest: canon.Digest(payload), principal: req.Principal, key: intent.IntentID, corr: req.CorrelationID,
		requestID: req.RequestID, parent: intent.ParentDecisionID, now: s.d.Now()}
	if dr.in, err = IntentInput(intent, req.Mode, dr.now); err != nil {
		return AuthorityDecision{}, err
	}
	if dr.pin, err = (policy.Intent{Context: intent.Context}).PolicyPin(); err != nil {
		return AuthorityDecision{}, core.TranslateInput(err)
	}
	if dr.parentChain, err = s.parentChain(ctx, req.OrgID, intent.ParentDecisionID, "parent_decision_id", CodeIntentMalformed); err != nil {
		return AuthorityDecision{}, err
	}
	if dr.res, err = s.cfg.Policies.Resolve(ctx, req.OrgID, dr.pin); err != nil {
		return AuthorityDecision{}, err
	}
	payloadDigest, err := canon.DigestValue(intent.Action)
	if err != nil {
		return AuthorityDecision{}, core.Invalid(CodeIntentMalformed, "action", "action cannot be canonicalized")
	}
	ids, err := s.newIDs(4) // dossier, decision, evaluation, grant
	if err != nil {
		return AuthorityDecision{}, err
	}
	d, pd := dr.evaluate(ids)
	authorize := pd.Outcome == policy.OutcomeAllow && d.Mode == policy.ModeEnforcement && pd.Err == nil

	// Sign before taking the org's lock: the tokens depend only on values
	// fixed above, and signatures are the slowest part of the request.
	var (
		g     claim.Grant
		token string
	)
	if authorize {
		d.GrantID = ids[3]
		c := dr.res.Policy
		g = claim.Grant{
			OrgID: req.OrgID, GrantID: ids[3], DecisionID: d.DecisionID, DossierID: d.DossierID,
			IntentID: intent.IntentID, IntentHash: dr.intentDigest, PayloadDigest: payloadDigest,
			ExpectedEffectDigest: intent.ExpectedEffectDigest, Nonce: intent.Nonce, Scope: intent.ConcurrencyScope,
			Correlation: req.CorrelationID, ActorID: intent.Actor.ID, ActionType: intent.Action.Type,
			PolicyVersion: c.Snapshot().PolicyVersion, BundleDigest: c.Digest(), Intent: payload,
			IssuedAt: dr.now, ExpiresAt: dr.now.Add(s.cfg.GrantTTL),
		}
		if token, err = grant.Mint(signer, GrantClaims(s.d.Issuer, g, intent, d.Mode)); err != nil {
			return AuthorityDecision{}, core.Unavailable("sign grant", err)
		}
		g.TokenDigest = canon.Digest([]byte(token))
	}
	var out AuthorityDecision
	replayed, err := record(ctx, s, &dr, &d, &out, func(tx store.Tx, digest string) (AuthorityDecision, error) {
		a := AuthorityDecision{Decision: decisionOf(&d, digest), IntentID: intent.IntentID, IntentHash: dr.intentDigest,
			EscalationMode: intent.Escalation.Mode}
		if !authorize {
			return a, nil
		}
		if err := s.cfg.StillActive(ctx, tx, g.PolicyVersion); err != nil {
			return a, err
		}
		g.DossierDigest = digest
		if err := claim.Issue(ctx, tx, g); err != nil {
			return a, err
		}
		if err := core.AppendRecord(ctx, tx, ledger.KindGrantIssued, g.GrantID, GrantRecordOf(g), dr.now); err != nil {
			return a, err
		}
		a.ExecutionToken, a.GrantID, a.ExpiresAt = token, g.GrantID, g.ExpiresAt.Format(core.TimeFormat)
		return a, nil
	})
	if errors.Is(err, idempotency.ErrKeyReused) {
		return AuthorityDecision{}, core.New(core.ErrConflict, CodeIntentAlreadyBound, "intent_id %q is already bound to another intent", intent.IntentID)
	}
	if err != nil {
		return AuthorityDecision{}, core.Translate("enforce and bind", err)
	}
	out.Replayed = replayed
	if req.WantEnvelope {
		if out.VerificationEnvelope, err = s.envelope(signer, out.Decision, out.IntentHash, out.GrantID); err != nil {
			return AuthorityDecision{}, core.Unavailable("sign envelope", err)
		}
	}
	return out, nil
}
