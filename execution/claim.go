package execution

import (
	"context"
	"errors"
	"io"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
)

// ClaimRequest is a claim-token call.
type ClaimRequest struct {
	OrgID          string
	ExecutionToken string
	IntentHash     string
	CorrelationID  string
}

// ClaimResult is a claim-token answer. ShouldExecute is true only for a
// live claim; every failure is an error and never a ClaimResult.
type ClaimResult struct {
	ShouldExecute       bool   `json:"should_execute"`
	ClaimToken          string `json:"claim_token"`
	ClaimLeaseExpiresAt string `json:"claim_lease_expires_at"`
	Valid               bool   `json:"valid"`
	ClaimAttestation    string `json:"claim_attestation"`
	GrantID             string `json:"grant_id"`
	DecisionID          string `json:"decision_id"`
}

// Claim atomically claims a grant immediately before the downstream commit:
// it verifies the grant and its complete binding, checks that the dossier
// is intact, re-evaluates the intent under the org's current policy, then
// claims the grant's nonce and concurrency scope under a lease judged by the
// store's clock. Any failure is an error: nothing authorizes but a result.
func (s *Service) Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error) {
	g, err := s.verifyToken(ctx, req.OrgID, req.ExecutionToken, req.IntentHash)
	if err != nil {
		return ClaimResult{}, err
	}
	if req.CorrelationID != "" && !core.ValidToken(req.CorrelationID) {
		return ClaimResult{}, core.Invalid(core.CodeInvalidCorrelationID, "correlation_id", "correlation_id must be 1 to %d visible ASCII characters", core.MaxKeyLength)
	}
	if err := s.checkDossier(ctx, g); err != nil {
		return ClaimResult{}, err
	}
	if g, err = s.opened(ctx, g); err != nil {
		return ClaimResult{}, err
	}
	intent, err := s.boundIntent(g)
	if err != nil {
		return ClaimResult{}, err
	}
	approval, err := s.recheckApproval(ctx, g)
	if err != nil {
		return ClaimResult{}, err
	}
	current, err := s.checkCurrentPolicyTraced(ctx, g, intent, approval)
	if err != nil {
		return ClaimResult{}, err
	}
	keys, err := s.d.Keys.Current()
	if err != nil {
		return ClaimResult{}, err
	}
	signer, err := keys.Signer()
	if err != nil {
		return ClaimResult{}, err
	}
	secret, digest, err := newClaimToken(s.d.IDs.Rand)
	if err != nil {
		return ClaimResult{}, core.Unavailable("claim token", err)
	}
	attID, err := s.d.IDs.New()
	if err != nil {
		return ClaimResult{}, core.Unavailable("id generation", err)
	}
	var claimed claim.Grant
	// ran is the engine's clock, read before the store reads its own for
	// the lease; ranMono the same moment on the monotonic clock, which no
	// step of the wall clock moves (core's clock drops the monotonic
	// reading), so a clock stepped back cannot hide an ended lease.
	var ran, ranMono time.Time
	err = s.d.Store.Update(ctx, req.OrgID, func(tx store.Tx) error {
		if err := s.cfg.StillActive(ctx, tx, current.version); err != nil {
			return err
		}
		ran, ranMono = s.d.Now(), time.Now()
		claimed, err = claim.Claim(ctx, tx, claim.ClaimRequest{GrantID: g.GrantID, IntentHash: req.IntentHash,
			ClaimTokenDigest: digest, Correlation: req.CorrelationID, Lease: s.cfg.ClaimLease})
		if err != nil {
			return err
		}
		if len(current.charges) > 0 {
			// In the claim's transaction: the org's transactions are
			// serialized, so no two claims fit into the same budget left.
			if err := s.cfg.Spend.Reserve(ctx, tx, claimed.GrantID, current.charges, claimed.ClaimedAt); err != nil {
				return err
			}
		}
		return s.appendRecord(ctx, tx, ledger.KindClaimed, claimed.GrantID, claimEvent{claimed.GrantID, digest,
			claimed.ClaimedAt.Format(core.TimeFormat), claimed.LeaseExpiresAt.Format(core.TimeFormat), req.CorrelationID})
	})
	if err != nil {
		return ClaimResult{}, lifecycleError("claim", err)
	}
	s.claimed.add(req.OrgID)
	// Signed after the commit, outside the org's lock: the lease times come
	// from the store's clock inside the transaction. Should signing fail, the
	// claim stays recorded without a token, so nothing executes. Everything
	// it states comes from the stored grant; the lease ends on a whole
	// second, so exp is exactly its end.
	_, span := s.d.Tracer.Start(ctx, core.SpanAttestationSign)
	att, err := grant.MintAttestation(signer, grant.Attestation{
		Issuer: s.d.Issuer, Audience: grant.AudAttestation, Subject: g.ActorID, OrgID: claimed.OrgID, ID: attID,
		IssuedAt: claimed.ClaimedAt.Unix(), Expiry: claimed.LeaseExpiresAt.Unix(), GrantID: claimed.GrantID,
		DecisionID: claimed.DecisionID, DossierID: claimed.DossierID, ClaimTokenDigest: digest, Action: decide.ActionClaim(intent.Action),
		Binding: grant.Binding{IntentHash: claimed.IntentHash, PayloadDigest: claimed.PayloadDigest, PayloadProfile: grant.PayloadProfile,
			ExpectedEffectDigest: claimed.ExpectedEffectDigest, Nonce: claimed.Nonce, Scope: claimed.Scope, Correlation: claimed.Correlation},
	})
	span.End(err)
	if err != nil {
		return ClaimResult{}, core.Unavailable("sign claim attestation", err)
	}
	if err := leaseLive(claimed, max(s.d.Now().Sub(ran), time.Since(ranMono))); err != nil {
		return ClaimResult{}, err
	}
	return ClaimResult{ShouldExecute: true, ClaimToken: secret, ClaimLeaseExpiresAt: claimed.LeaseExpiresAt.Format(core.TimeFormat),
		Valid: true, ClaimAttestation: att, GrantID: claimed.GrantID, DecisionID: claimed.DecisionID}, nil
}

// leaseLive refuses to answer a claim whose lease has already ended: its
// COMMIT (or the answer to it) came late, after a stall say, and an agent
// told should_execute: true would act on a dead claim. The store set the
// lease end by its clock (the database's, on PostgreSQL); the store's
// clock now is at most its reading at the claim plus elapsed, the time the
// engine's clock has run since before that reading. Only that difference
// is the engine's, so a skew between the two clocks does not move the
// judgement; it errs early by the read's round trip at most. The claim
// stays recorded: its lease lapses, and the expiry worker records it
// INDETERMINATE (CLAIM_LEASE_EXPIRED) for reconciliation, holding its
// scope until then.
func leaseLive(g claim.Grant, elapsed time.Duration) error {
	if g.ClaimedAt.Add(max(elapsed, 0)).Before(g.LeaseExpiresAt) {
		return nil
	}
	return core.New(core.ErrConflict, claim.CodeLeaseExpired,
		"the claim was recorded, but its lease (until %s) ended before it could be answered: do not execute; the grant is spent, and its claim is left to lapse",
		g.LeaseExpiresAt.Format(core.TimeFormat))
}

type claimEvent struct {
	GrantID          string `json:"grant_id"`
	ClaimTokenDigest string `json:"claim_token_digest"`
	ClaimedAt        string `json:"claimed_at"`
	LeaseExpiresAt   string `json:"lease_expires_at"`
	Correlation      string `json:"correlation_id,omitempty"`
}

// checkDossier checks that the dossier still has the digest the grant was
// bound to.
func (s *Service) checkDossier(ctx context.Context, g claim.Grant) error {
	r, err := s.d.Store.Dossier(ctx, g.OrgID, g.DossierID)
	if err != nil && !core.IsNotFound(err) {
		return core.Unavailable("read dossier", err)
	}
	if err != nil || canon.Digest(r.Body) != g.DossierDigest {
		return core.New(core.ErrConflict, CodeDossierMismatch, "the grant's dossier is missing or no longer matches its digest")
	}
	return nil
}

// recheckApproval resolves again, with the approval service, the approval
// g was issued on; nil for a grant issued without one.
func (s *Service) recheckApproval(ctx context.Context, g claim.Grant) (*policy.Approval, error) {
	if g.Approval == nil {
		return nil, nil
	}
	if s.cfg.Approvals == nil {
		return nil, core.New(core.ErrConflict, core.CodeStaleAuthorization, "the grant was issued on an approval that cannot be resolved again: no approval service is configured")
	}
	return s.cfg.Approvals.Recheck(ctx, g.OrgID, *g.Approval, g.IntentHash)
}

// currentPolicy is what a claim's re-evaluation found: the version active
// now, and what the action charges to its spend gates.
type currentPolicy struct {
	version string
	charges []policy.GateCharge
}

// checkCurrentPolicy re-evaluates g's bound intent, with the approval it
// was issued on (if any) as evidence, under the org's version active now,
// whatever the intent pins, with the org's signals as they are now when
// that version reads them and the budgets of its spend gates as they are
// now, and returns that version and the charges to reserve; any answer but
// ALLOW in ENFORCEMENT is a stale authorization (a budget already spent
// refuses here with its own code), and signals or budgets that cannot be
// read refuse the claim (503) rather than being taken as none.
func (s *Service) checkCurrentPolicy(ctx context.Context, g claim.Grant, intent decide.BoundIntent, approval *policy.Approval) (currentPolicy, error) {
	now := s.d.Now()
	in, err := s.boundInput(ctx, g.OrgID, intent, now)
	if err != nil {
		return currentPolicy{}, err
	}
	in.Approval = approval
	if len(g.Federation) > 0 {
		if in.Federation, err = s.recheckFederation(ctx, g, in); err != nil {
			return currentPolicy{}, err
		}
	}
	res, err := s.cfg.Policies.Resolve(ctx, g.OrgID, "")
	if err != nil {
		var ee *core.Error
		if errors.As(err, &ee) && errors.Is(err, core.ErrUnavailable) {
			return currentPolicy{}, err
		}
		return currentPolicy{}, &core.Error{Kind: core.ErrConflict, Code: core.CodeStaleAuthorization, Detail: "the current policy cannot be resolved", Err: err}
	}
	c := res.Policy
	if c.UsesSignals() && s.cfg.Signals != nil {
		if in.Signals, _, err = s.cfg.Signals.Current(ctx, g.OrgID, now); err != nil {
			return currentPolicy{}, err
		}
	}
	var charges []policy.GateCharge
	if c.HasSpendGates() {
		if s.cfg.Spend == nil {
			return currentPolicy{}, core.New(core.ErrUnavailable, core.CodeStaleAuthorization, "the policy has spend gates and no spend service is configured")
		}
		charges = c.Charges(&in)
		if in.Spend, _, err = s.cfg.Spend.Status(ctx, g.OrgID, c, &in, now); err != nil {
			return currentPolicy{}, err
		}
	}
	pd := c.Evaluate(&in)
	if pd.Err != nil || pd.Outcome != policy.OutcomeAllow || res.Mode("") != policy.ModeEnforcement {
		if len(pd.ReasonCodes) > 1 && pd.Err == nil && res.Mode("") == policy.ModeEnforcement {
			switch pd.ReasonCodes[1] {
			case policy.ReasonSpendLimitExceeded, policy.ReasonSpendCurrencyMismatch:
				return currentPolicy{}, core.New(core.ErrConflict, pd.ReasonCodes[1],
					"under the current policy (%s) the action does not fit its spend gate: %s", c.Snapshot().PolicyVersion, pd.Outcome)
			}
		}
		return currentPolicy{}, core.New(core.ErrConflict, core.CodeStaleAuthorization,
			"under the current policy (%s) the action is %s in %s mode", c.Snapshot().PolicyVersion, pd.Outcome, res.Mode(""))
	}
	return currentPolicy{version: c.Snapshot().PolicyVersion, charges: charges}, nil
}

// checkCurrentPolicyTraced is checkCurrentPolicy in a policy evaluation
// span.
func (s *Service) checkCurrentPolicyTraced(ctx context.Context, g claim.Grant, intent decide.BoundIntent, approval *policy.Approval) (currentPolicy, error) {
	ctx, span := s.d.Tracer.Start(ctx, core.SpanPolicyEvaluate)
	current, err := s.checkCurrentPolicy(ctx, g, intent, approval)
	if err == nil && span.Recording() {
		span.SetAttributes(attribute.String("clearance.policy.version", current.version))
	}
	span.End(err)
	return current, err
}

// boundInput is the policy input of a grant's bound intent now: a UCP
// checkout's is rebuilt by the checkout feature, which verifies its terms
// again.
func (s *Service) boundInput(ctx context.Context, orgID string, b decide.BoundIntent, now time.Time) (policy.Input, error) {
	stale := func(err error) error {
		return &core.Error{Kind: core.ErrConflict, Code: core.CodeStaleAuthorization, Detail: "the bound intent cannot be re-evaluated", Err: err}
	}
	if len(b.UCPCheckout) == 0 {
		in, err := decide.IntentInput(b.ExecutionIntent, "", now)
		if err != nil {
			return in, stale(err)
		}
		return in, nil
	}
	if s.cfg.Checkouts == nil {
		return policy.Input{}, stale(errors.New("no checkout service is configured"))
	}
	in, err := s.cfg.Checkouts.ClaimInput(ctx, orgID, b, now)
	if errors.Is(err, core.ErrUnavailable) {
		return in, err
	}
	if err != nil {
		return in, stale(err)
	}
	return in, nil
}

// claimTokenPrefix marks claim tokens, like API keys are marked.
const claimTokenPrefix = "clr_claim_"

func newClaimToken(rand io.Reader) (secret, digest string, err error) {
	s, _, err := tenant.NewSecret(rand, claimTokenPrefix)
	if err != nil {
		return "", "", err
	}
	return s, canon.Digest([]byte(s)), nil
}

// lifecycleError maps claim-package errors to engine errors: a lifecycle
// refusal is a 409, a store failure a 503.
// lifecycleError is the kernel's answer, a store not-found being the
// grant's.
func lifecycleError(op string, err error) error {
	if core.IsNotFound(err) {
		return core.New(core.ErrConflict, CodeGrantInvalid, "the execution grant is not known")
	}
	return core.Translate(op, err)
}

// recheckFederation verifies again the federated decisions g was issued on,
// against the org's trust list and the issuers' keys as they are now, into
// in: an issuer taken off the list, its issuing org taken off the entry, a
// key revoked or an envelope expired since is a stale authorization. An issuer whose keys cannot be read is a
// 503.
func (s *Service) recheckFederation(ctx context.Context, g claim.Grant, in policy.Input) ([]policy.FederatedDecision, error) {
	if s.cfg.Federation == nil {
		return nil, core.New(core.ErrConflict, core.CodeStaleAuthorization, "the grant was issued on federated decisions that cannot be verified again")
	}
	seen, _, err := s.cfg.Federation.Verify(ctx, g.OrgID, g.Federation, in)
	if err != nil {
		if errors.Is(err, core.ErrUnavailable) {
			return nil, err
		}
		// The cause's kind (a 400 of the presented envelope) is not this
		// refusal's: only its words are kept.
		return nil, core.New(core.ErrConflict, core.CodeStaleAuthorization, "the federated decisions the grant was issued on no longer verify: %s", detailOf(err))
	}
	return seen, nil
}

// detailOf is the detail of a core error, else its text.
func detailOf(err error) string {
	var ce *core.Error
	if errors.As(err, &ce) {
		return ce.Detail
	}
	return err.Error()
}
