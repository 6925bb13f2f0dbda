package decide

import (
	"context"

	"github.com/clearancehq/clearance/internal/core"
)

// verifyFederation verifies the federated decisions a request presents
// into the draft's input and dossier. Without any it does nothing: no read,
// no allocation.
func (s *Service) verifyFederation(ctx context.Context, dr *draft, envelopes []string) error {
	if len(envelopes) == 0 {
		return nil
	}
	if s.cfg.Federation == nil {
		return core.Invalid(core.CodeInvalidRequest, "federated_decisions", "this engine verifies no federated decisions")
	}
	seen, fed, err := s.cfg.Federation.Verify(ctx, dr.org, envelopes, dr.in)
	if err != nil {
		return err
	}
	dr.in.Federation, dr.federation = seen, fed
	return nil
}
