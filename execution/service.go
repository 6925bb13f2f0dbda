package execution

import (
	"context"
	"time"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
)

// Config is what the execution feature needs beside the kernel.
type Config struct {
	// Policies resolves the org's active policy, under which a claim
	// re-evaluates the bound intent.
	Policies decide.Policies
	// StillActive refuses, inside the claim's transaction, a policy version
	// that is no longer the active one.
	StillActive func(ctx context.Context, tx store.Tx, version string) error
	// ClaimLease is a claim's lease (whole seconds, at least claim.MinLease).
	ClaimLease time.Duration
	// Approvals resolves again, at claim time, the approval a grant was
	// issued on; nil: no approval service (such grants are not claimable).
	Approvals Approvals
	// Signals reads the org's current inbound signals, with which a claim
	// re-evaluates a policy that reads them; nil: policies see none.
	Signals decide.Signals
	// Checkouts rebuilds the policy input of a UCP checkout's grant at
	// claim time (the checkout feature implements it); nil: such grants are
	// not claimable.
	Checkouts Checkouts
	// Federation verifies again, at claim time, the federated decisions a
	// grant was issued on; nil: such grants are not claimable.
	Federation decide.Federation
	// Spend keeps the budgets of spend gates: a claim reserves its amount
	// in the claim's transaction and every recorded outcome settles it;
	// nil: gates are not enforced at claim (policies see unused budgets).
	Spend Spend
	// Personal opens the actor and bound intent of grants whose decision
	// the org's data-protection setting sealed (package privacy); nil:
	// such grants do not open (503) and are never claimed.
	Personal decide.PersonalOpener
}

// Spend is what claims need of spend-control budgets (the spend feature
// implements it).
type Spend interface {
	decide.Spend
	// Reserve charges a claim's amount to the gates in charges, in the
	// claim's transaction, at the store's time; an amount that does not
	// fit refuses the claim (409).
	Reserve(ctx context.Context, tx store.Tx, grantID string, charges []policy.GateCharge, at time.Time) error
	// Settle moves the grant's reservation on to state, in the transaction
	// that records it.
	Settle(ctx context.Context, tx store.Tx, grantID string, state claim.State, at time.Time) error
}

// Checkouts re-verifies a UCP checkout a grant was issued for.
type Checkouts interface {
	// ClaimInput is the policy input of b, a checkout's bound intent, as
	// its checkout verifies now (terms against the org's merchant keys as
	// they are now). A core unavailable error is a 503; any other error
	// refuses the claim (409 STALE_AUTHORIZATION).
	ClaimInput(ctx context.Context, orgID string, b decide.BoundIntent, now time.Time) (policy.Input, error)
}

// Approvals re-resolves approvals for claims (the escalation feature
// implements it).
type Approvals interface {
	// Recheck asks the approval service again about a: the approval as
	// evidence while it still stands; a core conflict (409) once it is
	// revoked or otherwise no longer an approval of this intent; core
	// unavailable (503) when the service cannot be reached.
	Recheck(ctx context.Context, orgID string, a claim.Approval, intentHash string) (*policy.Approval, error)
}

// Service verifies, claims, finalizes and reconciles grants, and records
// what an executor dispatched under a claim. Create it with New.
type Service struct {
	d   core.Deps
	cfg Config
	// claimed: the orgs with claims RunExpiry may have to record.
	claimed orgSet
}

// New returns the execution feature over the kernel d.
func New(d core.Deps, cfg Config) *Service { return &Service{d: d, cfg: cfg} }

// Limits of the reconciliation queue and of evidence listings.
const (
	DefaultQueuePage = 100
	MaxQueuePage     = 1000
	// MaxEvidenceItems bounds the dispatches one listing returns.
	MaxEvidenceItems = 1000
)

// KindDispatch is the artifact kind of a recorded dispatch (Ref the grant
// id).
const KindDispatch = "dispatch"

// scopeDispatch is the idempotency scope of dispatches.
const scopeDispatch = "execution.dispatch"

// appendRecord ledgers a change whose stored form is v, at the engine's now.
func (s *Service) appendRecord(ctx context.Context, tx store.Tx, kind, subject string, v any) error {
	return core.AppendRecord(ctx, tx, kind, subject, v, s.d.Now())
}
