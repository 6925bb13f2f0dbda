package clearance

import (
	"context"

	"github.com/clearancehq/clearance/spend"
)

// Spend-control gates (see policy.SpendGate and package spend).
type (
	// SpendGateStatus is one gate of the active policy with its budget in
	// the current window.
	SpendGateStatus = spend.GateStatus
	// SpendReservation is what a claimed grant charged to spend gates, and
	// how far it settled.
	SpendReservation = spend.Reservation
)

// Codes of spend gates.
const (
	CodeSpendLimitExceeded    = spend.CodeSpendLimitExceeded
	CodeSpendCurrencyMismatch = spend.CodeSpendCurrencyMismatch
	CodeSpendGateNotFound     = spend.CodeSpendGateNotFound
)

// SpendGates returns the spend gates of orgID's active policy with their
// budgets now; actorID selects the budgets of per-actor gates ("" the
// budget shared by no actor).
func (e *Engine) SpendGates(ctx context.Context, orgID, actorID string) ([]SpendGateStatus, error) {
	res, err := e.Policies.Resolve(ctx, orgID, "")
	if err != nil {
		return nil, err
	}
	return e.Spend.Gates(ctx, orgID, res.Active, actorID, e.deps.Now())
}

// SpendGate returns one spend gate of orgID's active policy with its
// budget now.
func (e *Engine) SpendGate(ctx context.Context, orgID, gateID, actorID string) (SpendGateStatus, error) {
	res, err := e.Policies.Resolve(ctx, orgID, "")
	if err != nil {
		return SpendGateStatus{}, err
	}
	return e.Spend.Gate(ctx, orgID, res.Active, gateID, actorID, e.deps.Now())
}

// SpendReservation returns what grantID charged to spend gates (404
// SPEND_GATE_NOT_FOUND when it charged none).
func (e *Engine) SpendReservation(ctx context.Context, orgID, grantID string) (SpendReservation, error) {
	return e.Spend.ReservationOf(ctx, orgID, grantID)
}
