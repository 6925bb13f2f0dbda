package escalation

import (
	"context"
	"errors"
	"time"

	"github.com/clearancehq/clearance/approval"
	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/jobs"
	"github.com/clearancehq/clearance/store"
)

// Completion is a presence-completion hint: the approval service (or the
// org) says the escalation's approval ceremony finished. It carries no
// authority; it only makes Clearance ask the approval service now.
type Completion struct {
	OrgID        string
	EscalationID string
	// RequestID, when given, must be the escalation's approval request.
	RequestID string
}

// Complete handles a completion hint: it verifies the escalation's
// approval directly with the approval service and concludes the
// escalation when the service has an answer. It is idempotent: a hint for
// an escalation at GRANT_READY is accepted as a replay; one for an
// escalation that ended otherwise is a conflict. When the service cannot be
// reached the escalation is VERIFYING and the verification is retried until
// its deadline; the hint is still accepted.
func (s *Service) Complete(ctx context.Context, c Completion) (Status, error) {
	if !core.ValidID(c.EscalationID) {
		return Status{}, core.Invalid(CodeInvalidEscalationID, "escalation_id", "escalation_id must be a canonical UUID")
	}
	if len(c.RequestID) > 200 {
		return Status{}, core.Invalid(core.CodeInvalidRequest, "request_id", "request_id is at most 200 characters")
	}
	r, err := read(ctx, s.d.Store, c.OrgID, c.EscalationID)
	if err != nil {
		return Status{}, notFound(err)
	}
	if c.RequestID != "" && c.RequestID != r.RequestID {
		return Status{}, core.New(core.ErrConflict, CodeCompletionMismatch, "the completion names another approval request than the escalation's")
	}
	if r, err = s.verify(ctx, r); err != nil {
		return Status{}, err
	}
	if r.State.Final() && r.State != StateGrantReady {
		st, err := s.status(ctx, r)
		if err != nil {
			return Status{}, err
		}
		return st, &core.Error{Kind: core.ErrConflict, Code: CodeEscalationConcluded,
			Detail: "the escalation ended without a grant: " + string(r.State)}
	}
	return s.status(ctx, r)
}

// verify asks the approval service about r's request and concludes r when
// the service has an answer; it returns r as it then stands. Only a store
// failure is an error: an unreachable service leaves r VERIFYING with a
// retry queued.
func (s *Service) verify(ctx context.Context, r record) (record, error) {
	if r.State.Final() {
		return r, nil
	}
	if !s.d.Now().Before(r.Deadline) {
		return s.conclude(ctx, r.OrgID, r.EscalationID, StateExpired, ReasonDeadlinePassed, nil)
	}
	ep, err := s.endpoint(ctx, r.OrgID)
	if err != nil {
		return s.retryLater(ctx, r, err)
	}
	v, err := approval.Verify(ctx, s.cfg.Client, ep, r.RequestID, approval.Binding{OrgID: r.OrgID, IntentHash: r.IntentHash})
	switch {
	case errors.Is(err, approval.ErrUnavailable):
		return s.retryLater(ctx, r, err)
	case errors.Is(err, approval.ErrNotApproved):
		var ae *approval.Error
		errors.As(err, &ae)
		to, reason := refusalOf(ae)
		return s.conclude(ctx, r.OrgID, r.EscalationID, to, reason, nil)
	case errors.Is(err, approval.ErrEvidenceInvalid):
		s.d.Logger.Warn("escalation: the approval failed verification", "org_id", r.OrgID, "escalation_id", r.EscalationID,
			"error", err.Error())
		return s.conclude(ctx, r.OrgID, r.EscalationID, StateFailed, ReasonEvidenceInvalid, nil)
	case err != nil:
		// The service refused our call or is misconfigured: nothing is
		// known about the approval yet.
		return s.retryLater(ctx, r, err)
	case !v.Approved():
		return r, nil // still pending
	}
	a := verified(v)
	if a.DecidedAt.After(r.Deadline) {
		return s.conclude(ctx, r.OrgID, r.EscalationID, StateExpired, ReasonDeadlinePassed, nil)
	}
	return s.grant(ctx, r, a)
}

// refusalOf is the final state of a request the service did not approve.
func refusalOf(e *approval.Error) (State, string) {
	var status approval.Status
	if e != nil {
		status = e.Status
	}
	switch status {
	case approval.StatusDenied:
		return StateDenied, ReasonApproverDenied
	case approval.StatusExpired:
		return StateExpired, ReasonRequestExpired
	case approval.StatusCancelled:
		return StateCancelled, ReasonServiceCancelled
	}
	return StateFailed, ReasonApprovalRevoked
}

// grant evaluates r's intent again with the verified approval and moves r
// to GRANT_READY (ALLOW in ENFORCEMENT) or FAILED, in the unit that records
// the fresh decision. Racing verifications record one decision and one
// grant: the others find it recorded and read r as it then stands.
func (s *Service) grant(ctx context.Context, r record, a decide.VerifiedApproval) (record, error) {
	m, err := r.escalation()
	if err != nil {
		return r, err
	}
	m, erased, err := s.decide.OpenManaged(ctx, m)
	switch {
	case erased:
		// The intent is gone with its data subject: nothing to evaluate.
		return s.conclude(ctx, r.OrgID, r.EscalationID, StateFailed, ReasonSubjectErased, nil)
	case err != nil:
		return s.retryLater(ctx, r, err)
	}
	var out record
	d, err := s.decide.BindApproved(ctx, decide.ApprovedIntent{Escalation: m, Approval: a,
		Conclude: func(ctx context.Context, tx store.Tx, d decide.AuthorityDecision, seal dossier.Sealer) error {
			out = record{} // the store may run this more than once
			cur, err := readIn(ctx, tx, r.EscalationID)
			if err != nil {
				return err
			}
			if cur.State.Final() {
				return errFinal
			}
			cur.Approval = &approvalRef{Issuer: a.Issuer, RequestID: a.RequestID, ReceiptID: a.ReceiptID, Approver: a.Approver,
				Presence: a.Presence, DecidedAt: a.DecidedAt}
			cur.ResolvedDecisionID, cur.ResolvedDossierID, cur.ResolvedOutcome = d.DecisionID, d.DossierID, string(d.Outcome)
			cur.State, cur.Reason = StateFailed, ReasonNotAllowedOnReentry
			if d.ExecutionToken != "" {
				exp, err := time.Parse(core.TimeFormat, d.ExpiresAt)
				if err != nil {
					return err
				}
				cur.State, cur.Reason = StateGrantReady, ""
				cur.GrantID, cur.ExecutionToken, cur.GrantExpiresAt = d.GrantID, d.ExecutionToken, exp
				if seal != nil {
					// The token names the actor and the action: kept sealed
					// with the decision's personal data.
					st, err := seal.Seal([]byte(d.ExecutionToken), decide.EscalationTokenContext(cur.OrgID, cur.EscalationID))
					if err != nil {
						return err
					}
					cur.ExecutionToken, cur.SealedToken = "", &st
				}
			}
			out = cur
			return put(ctx, tx, &out, s.d.Now())
		}})
	var ce *core.Error
	switch {
	case err == nil && !d.Replayed && out.EscalationID != "":
		// Concluded by the run that committed: out is what it stored.
		return out, nil
	case err == nil, errors.Is(err, errFinal):
		// Recorded by a racing verification (a replay), or ended meanwhile.
		return s.reread(ctx, r)
	case errors.As(err, &ce) && ce.Code == CodeApprovalReceiptReused:
		return s.conclude(ctx, r.OrgID, r.EscalationID, StateFailed, ReasonReceiptReused, nil)
	}
	// The fresh evaluation could not be recorded now (the store, a policy
	// activated meanwhile): the approval stands, so try again later.
	return s.retryLater(ctx, r, err)
}

// conclude moves the org's escalation id to a final state unless it is
// final already, and returns it as it then stands.
func (s *Service) conclude(ctx context.Context, orgID, id string, to State, reason string, _ *approvalRef) (record, error) {
	var r record
	err := s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		var err error
		if r, err = readIn(ctx, tx, id); err != nil || r.State.Final() {
			return err
		}
		r.State, r.Reason = to, reason
		return put(ctx, tx, &r, s.d.Now())
	})
	if err != nil {
		return record{}, core.Translate("conclude escalation", err)
	}
	return r, nil
}

// retryLater records that r's approval could not be verified yet
// (VERIFYING) and queues a verification after Config.Retry.
func (s *Service) retryLater(ctx context.Context, r record, cause error) (record, error) {
	s.d.Logger.Warn("escalation: the approval service could not be asked; retrying", "org_id", r.OrgID,
		"escalation_id", r.EscalationID, "error", cause.Error())
	err := s.d.Store.Update(ctx, r.OrgID, func(tx store.Tx) error {
		cur, err := readIn(ctx, tx, r.EscalationID)
		if err != nil || cur.State.Final() {
			r = cur
			return err
		}
		if cur.State != StateVerifying {
			cur.State, cur.Reason = StateVerifying, ""
			if err := put(ctx, tx, &cur, s.d.Now()); err != nil {
				return err
			}
		}
		r = cur
		due := s.d.Now().Add(s.cfg.Retry)
		j, created, err := jobs.EnqueueAt(ctx, tx, jobVerify, r.EscalationID, nil, due)
		if err != nil || created || j.State == jobs.Queued || j.State == jobs.Running {
			return err
		}
		// A finished verification job of this escalation: queue it anew.
		j.State, j.Due, j.Failure, j.Result, j.Attempts = jobs.Queued, due.UTC().Truncate(time.Microsecond), "", nil, 0
		return tx.PutJob(ctx, j)
	})
	if err != nil {
		return record{}, core.Translate("record verification retry", err)
	}
	return r, nil
}

// reread reads r again as committed.
func (s *Service) reread(ctx context.Context, r record) (record, error) {
	cur, err := read(ctx, s.d.Store, r.OrgID, r.EscalationID)
	if err != nil {
		return record{}, core.Translate("read escalation", err)
	}
	return cur, nil
}
