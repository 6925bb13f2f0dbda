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
// is first recorded INDETERMINATE (CLAIM_LEASE_EXPIRED, ledgered), as
// ExpireLapsed records it. It never re-authorizes execution.
func (s *Service) Reconcile(ctx context.Context, req ReconcileRequest) (Execution, error) {
	if req.Resolution != claim.OutcomeCommitted && req.Resolution != claim.OutcomeFailed {
		return Execution{}, core.Invalid(CodeInvalidFinalization, "resolution", "resolution must be COMMITTED or FAILED")
	}
	if len(req.Note) > 2000 {
		return Execution{}, core.Invalid(core.CodeInvalidRequest, "note", "note is at most 2000 characters")
	}
	explicit, err := evidenceOf(req.Evidence)
	if err != nil {
		return Execution{}, err
	}
	g, err := s.d.Store.GrantOf(ctx, req.OrgID, req.GrantID)
	if core.IsNotFound(err) || (err == nil && g.OrgID != req.OrgID) {
		return Execution{}, core.New(core.ErrNotFound, claim.CodeGrantNotFound, "grant not found")
	}
	if err != nil {
		return Execution{}, core.Unavailable("read grant", err)
	}
	receipt := s.checkReceipt(ctx, g, req.Receipt)
	evidence, confirmed := claim.Settle(g, req.Resolution, explicit, receipt)
	var out claim.Grant
	err = s.d.Store.Update(ctx, req.OrgID, func(tx store.Tx) error {
		if _, err := s.expireInTx(ctx, tx, g.GrantID); err != nil {
			return err
		}
		out, err = claim.Reconcile(ctx, tx, claim.ReconcileRequest{GrantID: g.GrantID, Resolution: req.Resolution,
			Evidence: evidence, Receipt: receipt, EffectConfirmed: confirmed, Note: req.Note})
		if err != nil {
			return err
		}
		if s.cfg.Spend != nil {
			if err := s.cfg.Spend.Settle(ctx, tx, out.GrantID, out.State, tx.Now()); err != nil {
				return err
			}
		}
		return core.AppendRecord(ctx, tx, ledger.KindReconciled, out.GrantID, out.Reconciliation, s.d.Now())
	})
	if err != nil {
		return Execution{}, lifecycleError("reconcile", err)
	}
	return s.view(ctx, out)
}
