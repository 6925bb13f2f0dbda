package decide

import (
	"context"

	"go.opentelemetry.io/otel/attribute"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/core"
)

// evaluateTraced reads the signals and budgets the draft's policy uses and
// evaluates it, in a policy evaluation span.
func (s *Service) evaluateTraced(ctx context.Context, dr *draft, ids []string) (dossier.Body, error) {
	ctx, span := s.d.Tracer.Start(ctx, core.SpanPolicyEvaluate)
	d, err := s.evaluateWithInputs(ctx, dr, ids)
	endPolicySpan(span, &d, err)
	return d, err
}

func (s *Service) evaluateWithInputs(ctx context.Context, dr *draft, ids []string) (dossier.Body, error) {
	used, err := s.signalsFor(ctx, dr)
	if err != nil {
		return dossier.Body{}, err
	}
	spent, err := s.spendFor(ctx, dr)
	if err != nil {
		return dossier.Body{}, err
	}
	d, _ := dr.evaluate(ids)
	d.Signals, d.Spend = used, spent
	return d, nil
}

// endPolicySpan ends a policy evaluation span with what it decided: the
// outcome, the mode and the policy version (never the intent).
func endPolicySpan(span core.Span, d *dossier.Body, err error) {
	if err == nil && span.Recording() {
		span.SetAttributes(attribute.String("clearance.decision.outcome", string(d.Outcome)),
			attribute.String("clearance.decision.mode", string(d.Mode)),
			attribute.String("clearance.policy.version", d.PolicySnapshot.PolicyVersion))
	}
	span.End(err)
}
