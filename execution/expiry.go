package execution

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
)

// DefaultExpiryInterval is how often RunExpiry records lapsed claims when
// it is given no interval.
const DefaultExpiryInterval = time.Second

// Indeterminate lists the org's executions awaiting reconciliation, at most
// limit (DefaultQueuePage when limit is out of 1..MaxQueuePage), in the
// order the store lists grants (claim.IssueOrder): the INDETERMINATE
// grants, and the claims whose lease passed by the engine's clock without
// a finalization, shown as they will be recorded (claim.Lapse). It writes
// nothing: ExpireLapsed and RunExpiry record the lapsed claims, and the
// listing is the same before and after.
func (s *Service) Indeterminate(ctx context.Context, orgID string, limit int) ([]Execution, error) {
	if limit <= 0 || limit > MaxQueuePage {
		limit = DefaultQueuePage
	}
	// CLAIMED first: a claim recorded INDETERMINATE between the two scans
	// is then seen twice (and shown once, as stored), never missed.
	now := s.d.Now()
	var lapsed []claim.Grant
	err := s.d.Store.GrantsInState(ctx, orgID, claim.StateClaimed, func(g claim.Grant) bool {
		if claim.LeasePassed(g, now) {
			lapsed = append(lapsed, claim.Lapse(g))
		}
		return len(lapsed) < limit
	})
	if err != nil {
		return nil, core.Unavailable("list executions", err)
	}
	var recorded []claim.Grant
	seen := map[string]bool{}
	err = s.d.Store.GrantsInState(ctx, orgID, claim.StateIndeterminate, func(g claim.Grant) bool {
		recorded = append(recorded, g)
		seen[g.GrantID] = true
		return len(recorded) < limit
	})
	if err != nil {
		return nil, core.Unavailable("list executions", err)
	}
	lapsed = slices.DeleteFunc(lapsed, func(g claim.Grant) bool { return seen[g.GrantID] })

	out := make([]Execution, 0, min(limit, len(lapsed)+len(recorded)))
	for len(out) < limit && (len(lapsed) > 0 || len(recorded) > 0) {
		var next claim.Grant
		if len(recorded) == 0 || (len(lapsed) > 0 && claim.IssueOrder(lapsed[0], recorded[0]) < 0) {
			next, lapsed = lapsed[0], lapsed[1:]
		} else {
			next, recorded = recorded[0], recorded[1:]
		}
		x, err := s.view(ctx, next)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

// ExpireLapsed records the org's claims whose lease passed without a
// finalization as INDETERMINATE (CLAIM_LEASE_EXPIRED, ledgered as a
// finalization), so that they hold their scope as recorded state until
// reconciled. It returns how many it recorded. Claims are picked by the
// engine's clock; each is recorded only when its lease passed by the
// store's clock too.
func (s *Service) ExpireLapsed(ctx context.Context, orgID string) (int, error) {
	if err := s.d.Store.RequireOrg(ctx, orgID); err != nil {
		return 0, err
	}
	changed, _, err := s.expireLapsed(ctx, orgID)
	return changed, err
}

// expireLapsed is ExpireLapsed; live reports whether the org still has
// claims that were not recorded (live ones, or ones the store's clock does
// not yet see as lapsed).
func (s *Service) expireLapsed(ctx context.Context, orgID string) (changed int, live bool, err error) {
	now := s.d.Now()
	var lapsed []string
	err = s.d.Store.GrantsInState(ctx, orgID, claim.StateClaimed, func(g claim.Grant) bool {
		if claim.LeasePassed(g, now) {
			lapsed = append(lapsed, g.GrantID)
		} else {
			live = true
		}
		return true
	})
	if err != nil {
		return 0, true, core.Unavailable("list executions", err)
	}
	for _, id := range lapsed {
		var done bool
		err := s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
			var err error
			done, err = s.expireInTx(ctx, tx, id)
			return err
		})
		if err != nil {
			return changed, true, lifecycleError("expire claim", err)
		}
		if done {
			changed++
		} else {
			live = true // still CLAIMED by the store's clock, or finalized meanwhile
		}
	}
	return changed, live, nil
}

// expireInTx records grantID INDETERMINATE (ledgered) if it is a claim
// whose lease passed without a finalization; otherwise it does nothing.
func (s *Service) expireInTx(ctx context.Context, tx store.Tx, grantID string) (bool, error) {
	g, changed, err := claim.Expire(ctx, tx, grantID)
	if err != nil || !changed {
		return false, err
	}
	if s.cfg.Spend != nil {
		if err := s.cfg.Spend.Settle(ctx, tx, g.GrantID, g.State, g.FinalizedAt); err != nil {
			return false, err
		}
	}
	return true, s.appendRecord(ctx, tx, ledger.KindFinalized, g.GrantID, finalEvent{GrantID: g.GrantID, State: g.State,
		Code: g.FinalCode, FinalizedAt: g.FinalizedAt.Format(core.TimeFormat)})
}

// RunExpiry records the lapsed claims of the orgs this service claimed in,
// every interval (DefaultExpiryInterval when interval <= 0), until ctx
// ends. An org is watched from its first claim until it has no claim left
// to record; one whose expiry fails is retried at the next tick. Claims
// made by another server are recorded by that server's worker, by
// ExpireLapsed, or when they are reconciled.
func (s *Service) RunExpiry(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultExpiryInterval
	}
	core.EveryTick(ctx, interval, func() { s.expireClaimed(ctx) })
}

// expireClaimed is one tick of RunExpiry; it returns how many claims it
// recorded.
func (s *Service) expireClaimed(ctx context.Context) int {
	total := 0
	for _, org := range s.claimed.take() {
		n, live, err := s.expireLapsed(ctx, org)
		total += n
		if err != nil || live {
			s.claimed.add(org)
		}
		if err != nil && ctx.Err() == nil {
			s.d.Logger.Warn("recording lapsed claims failed", "org_id", org, "err", err)
		}
	}
	return total
}

// orgSet is the orgs RunExpiry watches.
type orgSet struct {
	mu   sync.Mutex
	orgs map[string]struct{}
}

func (o *orgSet) add(org string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.orgs == nil {
		o.orgs = map[string]struct{}{}
	}
	o.orgs[org] = struct{}{}
}

// take returns and forgets the orgs in the set, in no particular order.
func (o *orgSet) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]string, 0, len(o.orgs))
	for org := range o.orgs {
		out = append(out, org)
	}
	clear(o.orgs)
	return out
}
