package decide

import (
	"context"
	"time"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/policy"
)

// Signals gives evaluations the org's current inbound signals (the signals
// feature implements it).
type Signals interface {
	// Current returns the org's latest signal of each type as
	// policy.Input.Signals holds it, ages counted against now, and what a
	// dossier records of them. An error refuses the request: a decision is
	// never made as if an org had no signals because they could not be read.
	Current(ctx context.Context, orgID string, now time.Time) (map[string]any, []dossier.Signal, error)
}

// signalsFor gives dr's input the org's current signals when the resolved
// policy reads them, and returns what the dossier records of them. A
// policy that reads none costs nothing here: its decisions cannot depend
// on signals.
func (s *Service) signalsFor(ctx context.Context, dr *draft) ([]dossier.Signal, error) {
	dr.in.Signals = nil
	if s.cfg.Signals == nil || !dr.res.Policy.UsesSignals() {
		return nil, nil
	}
	in, used, err := s.cfg.Signals.Current(ctx, dr.org, dr.now)
	if err != nil {
		return nil, err
	}
	dr.in.Signals = in
	if len(used) == 0 {
		return nil, nil
	}
	return used, nil
}

// Spend gives evaluations the budgets of the spend gates that apply to an
// input (the spend feature implements it).
type Spend interface {
	// Status returns what is used of every gate of c that applies to in,
	// and what a dossier records of it; an error refuses the request.
	Status(ctx context.Context, orgID string, c *policy.Compiled, in *policy.Input, now time.Time) (map[string]policy.SpendStatus, []dossier.SpendCheck, error)
}

// spendFor gives dr's input the budgets of the resolved policy's spend
// gates that apply to it, and returns what the dossier records of them. A
// policy without gates costs nothing here.
func (s *Service) spendFor(ctx context.Context, dr *draft) ([]dossier.SpendCheck, error) {
	dr.in.Spend = nil
	if s.cfg.Spend == nil || !dr.res.Policy.HasSpendGates() {
		return nil, nil
	}
	status, checks, err := s.cfg.Spend.Status(ctx, dr.org, dr.res.Policy, &dr.in, dr.now)
	if err != nil {
		return nil, err
	}
	dr.in.Spend = status
	return checks, nil
}
