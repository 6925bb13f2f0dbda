package execution

import (
	"context"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
)

// ReconcileRequest settles an INDETERMINATE finalization with late evidence.
type ReconcileRequest struct {
	OrgID      string
	GrantID    string
	Resolution claim.Outcome
	Evidence   *EffectEvidence
	Receipt    *EffectReceipt
	Note       string
}

// Reconcile records how an INDETERMINATE execution turned out, and releases
// its concurrency scope. A claim whose lease passed without a finalization
// is first recorded INDETERMINATE (CLAIM_LEASE_EXPIRED), as the listing
// does. It never re-authorizes execution.
func (s *Service) Reconcile(ctx context.Context, req ReconcileRequest) (claim.Grant, error) {
	if req.Resolution != claim.OutcomeCommitted && req.Resolution != claim.OutcomeFailed {
		return claim.Grant{}, core.Invalid(CodeInvalidFinalization, "resolution", "resolution must be COMMITTED or FAILED")
	}
	if len(req.Note) > 2000 {
		return claim.Grant{}, core.Invalid(core.CodeInvalidRequest, "note", "note is at most 2000 characters")
	}
	explicit, err := evidenceOf(req.Evidence)
	if err != nil {
		return claim.Grant{}, err
	}
	g, err := s.d.Store.GrantOf(ctx, req.OrgID, req.GrantID)
	if core.IsNotFound(err) || (err == nil && g.OrgID != req.OrgID) {
		return claim.Grant{}, core.New(core.ErrNotFound, claim.CodeGrantNotFound, "grant not found")
	}
	if err != nil {
		return claim.Grant{}, core.Unavailable("read grant", err)
	}
	receipt := s.checkReceipt(ctx, g, req.Receipt)
	evidence, confirmed := claim.Settle(g, req.Resolution, explicit, receipt)
	var out claim.Grant
	err = s.d.Store.Update(ctx, req.OrgID, func(tx store.Tx) error {
		if err := s.expireInTx(ctx, tx, g.GrantID); err != nil {
			return err
		}
		out, err = claim.Reconcile(ctx, tx, claim.ReconcileRequest{GrantID: g.GrantID, Resolution: req.Resolution,
			Evidence: evidence, Receipt: receipt, EffectConfirmed: confirmed, Note: req.Note})
		if err != nil {
			return err
		}
		return core.AppendRecord(ctx, tx, ledger.KindReconciled, out.GrantID, out.Reconciliation, s.d.Now())
	})
	if err != nil {
		return claim.Grant{}, lifecycleError("reconcile", err)
	}
	return out, nil
}

// Indeterminate lists the org's INDETERMINATE executions, oldest first.
// Claims whose lease passed without a finalization are first recorded as
// INDETERMINATE (CLAIM_LEASE_EXPIRED), so that they can be reconciled.
func (s *Service) Indeterminate(ctx context.Context, orgID string, limit int) ([]claim.Grant, error) {
	if limit <= 0 || limit > MaxQueuePage {
		limit = DefaultQueuePage
	}
	if err := s.expireLapsed(ctx, orgID); err != nil {
		return nil, err
	}
	out := []claim.Grant{}
	err := s.d.Store.GrantsInState(ctx, orgID, claim.StateIndeterminate, func(g claim.Grant) bool {
		out = append(out, g)
		return len(out) < limit
	})
	if err != nil {
		return nil, core.Unavailable("list executions", err)
	}
	return out, nil
}

// expireLapsed records the org's lapsed claims as INDETERMINATE; the
// lifecycle re-checks each lease against the store's clock.
func (s *Service) expireLapsed(ctx context.Context, orgID string) error {
	now := s.d.Now()
	var lapsed []string
	err := s.d.Store.GrantsInState(ctx, orgID, claim.StateClaimed, func(g claim.Grant) bool {
		if !now.Before(g.LeaseExpiresAt) {
			lapsed = append(lapsed, g.GrantID)
		}
		return true
	})
	if err != nil {
		return core.Unavailable("list executions", err)
	}
	for _, id := range lapsed {
		if err := s.d.Store.Update(ctx, orgID, func(tx store.Tx) error { return s.expireInTx(ctx, tx, id) }); err != nil {
			return lifecycleError("expire claim", err)
		}
	}
	return nil
}

// expireInTx records grantID INDETERMINATE (ledgered) if it is a claim
// whose lease passed without a finalization; otherwise it does nothing.
func (s *Service) expireInTx(ctx context.Context, tx store.Tx, grantID string) error {
	g, changed, err := claim.Expire(ctx, tx, grantID)
	if err != nil || !changed {
		return err
	}
	return s.appendRecord(ctx, tx, ledger.KindFinalized, g.GrantID, finalEvent{GrantID: g.GrantID, State: g.State,
		Code: g.FinalCode, FinalizedAt: g.FinalizedAt.Format(core.TimeFormat)})
}
