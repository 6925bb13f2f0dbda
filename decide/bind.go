package decide

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/idempotency"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
	"github.com/google/uuid"
)

// AuthorityRequest is an enforce-and-bind call.
type AuthorityRequest struct {
	OrgID            string
	SignedIntent     string
	Mode             policy.Mode
	ApprovalEvidence json.RawMessage
	// FederatedDecisions are federated decision envelopes presented as
	// evidence; a grant issued on them names them, and its claim verifies
	// them again.
	FederatedDecisions []string
	IdempotencyKey     string
	CorrelationID      string
	RequestID          string
	Principal          core.Principal
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
	// ManagedEscalation is the status locator of the managed escalation
	// this ESCALATE opened (escalation.mode MANAGED, ENFORCEMENT).
	ManagedEscalation *EscalationRef `json:"managed_escalation,omitempty"`
}

// EnforceAndBind verifies a signed execution intent, evaluates it and, for
// ALLOW in ENFORCEMENT mode, binds a single-use grant to it. The dossier,
// ledger entries, grant record and intent binding commit atomically. The
// intent_id is the issuance boundary: the same intent again returns the
// same answer; another intent under a bound intent_id is core.ErrConflict.
//
// Approval evidence is verified directly with the org's approval service
// before anything is evaluated, and is then evidence for the evaluation. An
// ESCALATE in ENFORCEMENT of an intent with escalation.mode MANAGED opens a
// managed escalation: the approval request is opened at the approval
// service, then the escalation is recorded with the decision, whose answer
// carries its status locator and no grant.
func (s *Service) EnforceAndBind(ctx context.Context, req AuthorityRequest) (AuthorityDecision, error) {
	signer, err := s.signer()
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
	dr := draft{route: RouteEnforceAndBind, org: req.OrgID, intent: payload, asReceived: req.SignedIntent,
		intentDigest: canon.Digest(payload), principal: req.Principal, key: intent.IntentID, corr: req.CorrelationID,
		requestID: req.RequestID, parent: intent.ParentDecisionID, now: s.d.Now()}
	if dr.in, err = IntentInput(intent, req.Mode, dr.now); err != nil {
		return AuthorityDecision{}, err
	}
	if err := refuseCheckoutNames(&dr.in, intent.ConcurrencyScope); err != nil {
		return AuthorityDecision{}, err
	}
	if dr.pin, err = (policy.Intent{Context: intent.Context}).PolicyPin(); err != nil {
		return AuthorityDecision{}, core.TranslateInput(err)
	}
	if dr.parentChain, err = s.parentChain(ctx, req.OrgID, intent.ParentDecisionID, "parent_decision_id", CodeIntentMalformed); err != nil {
		return AuthorityDecision{}, err
	}
	if err := s.verifyFederation(ctx, &dr, req.FederatedDecisions); err != nil {
		return AuthorityDecision{}, err
	}
	b := binding{dr: &dr, intent: intent, signer: signer}
	if len(req.ApprovalEvidence) > 0 && !bytes.Equal(bytes.TrimSpace(req.ApprovalEvidence), []byte("null")) {
		if s.cfg.Approvals == nil {
			return AuthorityDecision{}, core.New(core.ErrConflict, CodeApprovalUnverified, "approval evidence cannot be verified: no approval service is configured")
		}
		v, err := s.cfg.Approvals.VerifyEvidence(ctx, req.OrgID, req.ApprovalEvidence, dr.intentDigest)
		if err != nil {
			return AuthorityDecision{}, err
		}
		b.approval = &v
	}
	if err := s.resolveAndEvaluateTraced(ctx, &b); err != nil {
		return AuthorityDecision{}, err
	}
	if managed := !b.authorize && intent.Escalation.Mode == EscalationManaged && b.pd.Outcome == policy.OutcomeEscalate &&
		b.d.Mode == policy.ModeEnforcement && b.pd.Err == nil; managed {
		if err := s.openEscalation(ctx, &b, req, payload); err != nil {
			return AuthorityDecision{}, err
		}
	}
	out, err := s.bind(ctx, &b, nil)
	if errors.Is(err, idempotency.ErrKeyReused) {
		return AuthorityDecision{}, core.New(core.ErrConflict, CodeIntentAlreadyBound, "intent_id %q is already bound to another intent", intent.IntentID)
	}
	if err != nil {
		return AuthorityDecision{}, err
	}
	if req.WantEnvelope {
		if out.VerificationEnvelope, err = s.envelope(ctx, b.signer, out.Decision, out.IntentHash, out.GrantID); err != nil {
			return AuthorityDecision{}, core.Unavailable("sign envelope", err)
		}
	}
	return out, nil
}

// openEscalation opens the managed escalation of b's ESCALATE at the
// approval service, to be recorded with the decision. A retried intent is
// answered as recorded without asking the service again, and another
// intent under a bound intent_id is refused before any request is opened.
func (s *Service) openEscalation(ctx context.Context, b *binding, req AuthorityRequest, payload json.RawMessage) error {
	if s.cfg.Approvals == nil {
		return core.New(core.ErrUnavailable, CodeApprovalServiceNotConfigured, "escalation.mode MANAGED needs an approval service, and none is configured for this organization")
	}
	dr, intent := b.dr, b.intent
	recorded, err := s.recorded(ctx, dr)
	switch {
	case errors.Is(err, idempotency.ErrKeyReused):
		return core.New(core.ErrConflict, CodeIntentAlreadyBound, "intent_id %q is already bound to another intent", intent.IntentID)
	case err != nil:
		return core.Translate("enforce and bind", err)
	case recorded:
		return nil // record replays the answer
	}
	m, err := s.cfg.Approvals.OpenEscalation(ctx, ManagedEscalation{
		EscalationID: EscalationIDOf(dr.org, dr.intentDigest), OrgID: dr.org, IntentID: intent.IntentID,
		IntentHash: dr.intentDigest, Intent: intent, Payload: payload, SignedIntent: req.SignedIntent,
		RequestedMode: req.Mode, Principal: req.Principal, CorrelationID: req.CorrelationID,
		DecisionID: b.d.DecisionID, DossierID: b.d.DossierID, CreatedAt: dr.now,
	})
	if err != nil {
		return err
	}
	b.managed = &m
	b.d.EscalationID = m.EscalationID
	return nil
}

// escalationSpace is the UUID namespace of escalation ids.
var escalationSpace = uuid.MustParse("8f6a2b64-3c1d-4f7e-9a52-6d0e1b7c4a90")

// EscalationIDOf is the id of the managed escalation of the intent whose
// hash is intentHash in org: one intent has one escalation, so a retried
// enforce-and-bind opens the same approval request again (idempotently)
// rather than a second one.
func EscalationIDOf(orgID, intentHash string) string {
	return uuid.NewSHA1(escalationSpace, []byte(orgID+"\x00"+intentHash)).String()
}

// binding is one signed intent on its way to a recorded decision.
type binding struct {
	dr        *draft
	intent    ExecutionIntent
	approval  *VerifiedApproval
	managed   *ManagedEscalation
	d         dossier.Body
	pd        policy.Decision
	ids       []string
	authorize bool
	signer    grant.Key
}

// resolveAndEvaluateTraced is resolveAndEvaluate in a policy evaluation span.
func (s *Service) resolveAndEvaluateTraced(ctx context.Context, b *binding) error {
	ctx, span := s.d.Tracer.Start(ctx, core.SpanPolicyEvaluate)
	err := s.resolveAndEvaluate(ctx, b)
	endPolicySpan(span, &b.d, err)
	return err
}

// resolveAndEvaluate resolves the policy the draft pins (or the active
// one) and evaluates b's draft with b's approval as evidence.
func (s *Service) resolveAndEvaluate(ctx context.Context, b *binding) error {
	dr := b.dr
	var err error
	if b.approval != nil {
		dr.in.Approval = b.approval.Input()
	}
	if dr.res, err = s.cfg.Policies.Resolve(ctx, dr.org, dr.pin); err != nil {
		return err
	}
	if b.ids, err = s.newIDs(4); err != nil { // dossier, decision, evaluation, grant
		return err
	}
	used, err := s.signalsFor(ctx, dr)
	if err != nil {
		return err
	}
	spent, err := s.spendFor(ctx, dr)
	if err != nil {
		return err
	}
	b.d, b.pd = dr.evaluate(b.ids)
	b.d.Signals, b.d.Spend = used, spent
	if b.approval != nil {
		b.d.Approval = b.approval.Dossier()
	}
	b.authorize = b.pd.Outcome == policy.OutcomeAllow && b.d.Mode == policy.ModeEnforcement && b.pd.Err == nil
	return nil
}

// bind signs the grant of an authorizing decision and records the
// decision with what it binds: the grant, the receipt's single use, the
// managed escalation it opened; conclude, when set, runs last in the same
// transaction with the answer.
func (s *Service) bind(ctx context.Context, b *binding, conclude func(ctx context.Context, tx store.Tx, a AuthorityDecision, seal dossier.Sealer) error) (AuthorityDecision, error) {
	dr, intent, d := b.dr, b.intent, &b.d
	payloadDigest, err := canon.DigestValue(intent.Action)
	if err != nil {
		return AuthorityDecision{}, core.Invalid(CodeIntentMalformed, "action", "action cannot be canonicalized")
	}
	// Sign before taking the org's lock: the tokens depend only on values
	// fixed above, and signatures are the slowest part of the request.
	var (
		g     claim.Grant
		token string
	)
	if b.authorize {
		d.GrantID = b.ids[3]
		c := dr.res.Policy
		g = claim.Grant{
			OrgID: dr.org, GrantID: b.ids[3], DecisionID: d.DecisionID, DossierID: d.DossierID,
			IntentID: intent.IntentID, IntentHash: dr.intentDigest, PayloadDigest: payloadDigest,
			ExpectedEffectDigest: intent.ExpectedEffectDigest, Nonce: intent.Nonce, Scope: intent.ConcurrencyScope,
			Correlation: dr.corr, ActorID: intent.Actor.ID, ActionType: intent.Action.Type,
			PolicyVersion: c.Snapshot().PolicyVersion, BundleDigest: c.Digest(), Intent: dr.boundIntent(),
			IssuedAt: dr.now, ExpiresAt: dr.now.Add(s.cfg.GrantTTL),
		}
		if b.approval != nil {
			g.Approval = b.approval.Grant()
		}
		for _, f := range dr.federation {
			g.Federation = append(g.Federation, f.Envelope)
		}
		_, span := s.d.Tracer.Start(ctx, core.SpanGrantSign)
		token, err = grant.Mint(b.signer, GrantClaims(s.d.Issuer, g, intent, d.Mode))
		span.End(err)
		if err != nil {
			return AuthorityDecision{}, core.Unavailable("sign grant", err)
		}
		g.TokenDigest = canon.Digest([]byte(token))
	}
	var out boundAnswer
	replayed, err := record(ctx, s, dr, d, &out, func(tx store.Tx, digest string, seal dossier.Sealer) (boundAnswer, error) {
		var err error // not the outer one: the transaction may run again
		a := AuthorityDecision{Decision: decisionOf(d, digest), IntentID: intent.IntentID, IntentHash: dr.intentDigest,
			EscalationMode: intent.Escalation.Mode}
		if b.managed != nil {
			m := *b.managed
			if seal != nil {
				if m, err = sealManaged(seal, m); err != nil {
					return boundAnswer{}, err
				}
			}
			ref, err := s.cfg.Approvals.RecordEscalation(ctx, tx, m)
			if err != nil {
				return boundAnswer{}, err
			}
			a.ManagedEscalation = &ref
		}
		var sealedToken *dossier.Sealed
		if b.authorize {
			if err := s.checkIssueClock(tx, g.IssuedAt); err != nil {
				return boundAnswer{}, err
			}
			if err := s.cfg.StillActive(ctx, tx, g.PolicyVersion); err != nil {
				return boundAnswer{}, err
			}
			if b.approval != nil {
				if err := s.cfg.Approvals.UseReceipt(ctx, tx, *b.approval, dr.intentDigest); err != nil {
					return boundAnswer{}, err
				}
			}
			issued := g // g is the outer request's: the transaction may run again
			issued.DossierDigest = digest
			if seal != nil {
				if issued, err = sealGrant(seal, issued); err != nil {
					return boundAnswer{}, err
				}
				st, err := seal.Seal([]byte(token), answerContext(dr.org, dr.route, dr.key))
				if err != nil {
					return boundAnswer{}, err
				}
				sealedToken = &st
			}
			if err := claim.Issue(ctx, tx, issued); err != nil {
				return boundAnswer{}, err
			}
			if err := core.AppendRecord(ctx, tx, ledger.KindGrantIssued, issued.GrantID, GrantRecordOf(issued), dr.now); err != nil {
				return boundAnswer{}, err
			}
			a.ExecutionToken, a.GrantID, a.ExpiresAt = token, issued.GrantID, issued.ExpiresAt.Format(core.TimeFormat)
		}
		if conclude != nil {
			if err := conclude(ctx, tx, a, seal); err != nil {
				return boundAnswer{}, err
			}
		}
		if sealedToken != nil {
			// Remembered without the plain token; answered with it below.
			a.ExecutionToken = ""
		}
		return boundAnswer{AuthorityDecision: a, SealedToken: sealedToken}, nil
	})
	if errors.Is(err, idempotency.ErrKeyReused) {
		return AuthorityDecision{}, err
	}
	if err != nil {
		return AuthorityDecision{}, core.Translate("enforce and bind", err)
	}
	if replayed {
		if err := s.openAnswer(ctx, dr, &out); err != nil {
			return AuthorityDecision{}, err
		}
	} else if out.SealedToken != nil {
		out.ExecutionToken = token
	}
	a := out.AuthorityDecision
	a.Replayed = replayed
	return a, nil
}

// ApprovedIntent asks for the fresh evaluation of a managed escalation's
// original exact intent with the approval it was waiting for.
type ApprovedIntent struct {
	Escalation ManagedEscalation
	Approval   VerifiedApproval
	// Conclude runs in the transaction that records the fresh decision,
	// with its answer (a grant only for ALLOW in ENFORCEMENT): the
	// escalation's own transition. Its error aborts the whole unit. seal
	// is the decision's Sealer when its dossier was sealed (else nil): the
	// escalation keeps the grant token sealed with it.
	Conclude func(ctx context.Context, tx store.Tx, a AuthorityDecision, seal dossier.Sealer) error
}

// BindApproved evaluates a managed escalation's original exact intent
// again, under the org's policy as it is now, with the verified approval
// as evidence, and records that decision (route managed-escalation, chained
// to the ESCALATE decision) like EnforceAndBind: only ALLOW in ENFORCEMENT
// binds a grant, which names the approval. It is idempotent by escalation:
// once recorded, the recorded answer is returned (Replayed) and Conclude
// does not run again, so one escalation issues at most one grant.
func (s *Service) BindApproved(ctx context.Context, r ApprovedIntent) (AuthorityDecision, error) {
	m := r.Escalation
	if m.PersonalData != nil {
		// Sealed intents are opened by the caller (OpenManaged) first.
		return AuthorityDecision{}, core.New(core.ErrConflict, core.CodeStaleAuthorization, "the escalation's intent is sealed")
	}
	signer, err := s.signer()
	if err != nil {
		return AuthorityDecision{}, err
	}
	dr := draft{route: RouteManagedEscalation, org: m.OrgID, intent: m.Payload, asReceived: m.SignedIntent,
		intentDigest: m.IntentHash, principal: m.Principal, key: m.EscalationID, corr: m.CorrelationID,
		parent: m.DecisionID, now: s.d.Now()}
	if canon.Digest(m.Payload) != m.IntentHash {
		return AuthorityDecision{}, core.New(core.ErrConflict, core.CodeStaleAuthorization, "the escalation's intent does not match its hash")
	}
	if dr.in, err = IntentInput(m.Intent, m.RequestedMode, dr.now); err != nil {
		return AuthorityDecision{}, err
	}
	if dr.pin, err = (policy.Intent{Context: m.Intent.Context}).PolicyPin(); err != nil {
		return AuthorityDecision{}, core.TranslateInput(err)
	}
	if dr.parentChain, err = s.parentChain(ctx, m.OrgID, m.DecisionID, "parent_decision_id", CodeIntentMalformed); err != nil {
		return AuthorityDecision{}, err
	}
	approval := r.Approval
	approval.EscalationID = m.EscalationID
	b := binding{dr: &dr, intent: m.Intent, approval: &approval, signer: signer}
	if err := s.resolveAndEvaluateTraced(ctx, &b); err != nil {
		return AuthorityDecision{}, err
	}
	b.d.EscalationID = m.EscalationID
	return s.bind(ctx, &b, r.Conclude)
}

// signer is the active grant key, read once per request so that a request
// signs with one ring even while it is replaced.
func (s *Service) signer() (grant.Key, error) {
	keys, err := s.d.Keys.Current()
	if err != nil {
		return grant.Key{}, err
	}
	return keys.Signer()
}

// recorded reports whether the draft's request was answered already (its
// idempotency record exists), without writing anything.
func (s *Service) recorded(ctx context.Context, dr *draft) (bool, error) {
	var found bool
	err := s.d.Store.Update(ctx, dr.org, func(tx store.Tx) error {
		var prior json.RawMessage
		var err error
		found, err = idempotency.Replay(ctx, tx, string(dr.route), dr.key, dr.intentDigest, &prior)
		return err
	})
	return found, err
}

// checkIssueClock refuses to issue a grant while the engine's clock, which
// wrote the grant's iat and exp, is more than MaxClockSkew off the store's,
// which judges its expiry at claim: an engine clock that jumped ahead would
// lengthen the grant's life by the jump, one that jumped back would hand
// out a grant already expired. The answer is 503 CLOCK_SKEW and nothing is
// recorded; by the store's clock a grant issued lives GrantTTL, give or
// take MaxClockSkew.
func (s *Service) checkIssueClock(tx store.Tx, issuedAt time.Time) error {
	now := tx.Now()
	if now.IsZero() {
		return errors.New("decide: the store's clock cannot be read")
	}
	if off := issuedAt.Sub(now); off > s.d.MaxClockSkew || off < -s.d.MaxClockSkew {
		return core.New(core.ErrUnavailable, CodeClockSkew, "the server's clock is %s off the store's (at most %s is tolerated): "+
			"no grant is issued until they agree", off.Round(time.Millisecond), s.d.MaxClockSkew)
	}
	return nil
}
