package decide

import (
	"context"
	"time"

	"github.com/clearancehq/clearance/dossier"
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
