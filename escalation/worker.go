package escalation

import (
	"context"
	"time"

	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/jobs"
	"github.com/clearancehq/clearance/store"
)

// DefaultPoll is how often Run looks for due deadlines and retries.
const DefaultPoll = time.Second

// jobLease is how long a worker holds a deadline or a verification: one
// approval-service call and one write.
const jobLease = time.Minute

// Run works on escalations until ctx ends: every poll it expires the
// escalations whose deadline passed (deny on timeout) and retries the
// verifications the approval service could not answer. Several servers on
// one store share the work through jobs leased by the store's clock.
func (s *Service) Run(ctx context.Context, poll time.Duration) {
	if poll <= 0 {
		poll = DefaultPoll
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if _, err := s.Process(ctx); err != nil && ctx.Err() == nil {
			s.d.Logger.Warn("escalation worker failed", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.wake:
		}
	}
}

// Process does the escalation work that is due now: deadlines passed and
// verifications to retry. It returns how many jobs it finished.
func (s *Service) Process(ctx context.Context) (int, error) {
	owner, err := s.d.IDs.New()
	if err != nil {
		return 0, core.Unavailable("id generation", err)
	}
	done := 0
	for _, kind := range []string{jobVerify, jobDeadline} {
		for ctx.Err() == nil {
			j, ok, err := jobs.ClaimNext(ctx, s.d.Store, s.updater(), kind, owner, jobs.Policy{Lease: jobLease})
			if err != nil {
				return done, core.Translate("claim escalation job", err)
			}
			if !ok {
				break
			}
			if err := s.runJob(ctx, j); err != nil {
				s.d.Logger.Warn("escalation job failed", "kind", j.Kind, "org_id", j.OrgID, "escalation_id", j.ID, "error", err.Error())
				continue
			}
			done++
		}
	}
	return done, ctx.Err()
}

func (s *Service) updater() jobs.Updater {
	return func(ctx context.Context, orgID string, fn func(tx jobs.Tx) error) error {
		return s.d.Store.Update(ctx, orgID, func(tx store.Tx) error { return fn(tx) })
	}
}

// runJob does one claimed job and finishes it; a job left unfinished (the
// store failed) is taken over once its lease passes.
func (s *Service) runJob(ctx context.Context, held jobs.Job) error {
	r, err := read(ctx, s.d.Store, held.OrgID, held.ID)
	if err == nil && !r.State.Final() {
		switch held.Kind {
		case jobDeadline:
			if s.d.Now().Before(r.Deadline) { // the store's clock ran ahead of ours
				return s.finish(ctx, held, func(tx jobs.Tx) error {
					_, err := jobs.Release(ctx, tx, held, "deadline not reached by the engine's clock", r.Deadline.Sub(s.d.Now()))
					return err
				})
			}
			_, err = s.conclude(ctx, r.OrgID, r.EscalationID, StateExpired, ReasonDeadlinePassed, nil)
		case jobVerify:
			if r, err = s.verify(ctx, r); err == nil && r.State == StateVerifying {
				// Still unanswered: try again after Config.Retry.
				return s.finish(ctx, held, func(tx jobs.Tx) error {
					_, err := jobs.Release(ctx, tx, held, "the approval service could not be asked", s.cfg.Retry)
					return err
				})
			}
		}
	}
	if err != nil && !core.IsNotFound(err) {
		return err
	}
	return s.finish(ctx, held, func(tx jobs.Tx) error {
		_, err := jobs.Finish(ctx, tx, held, nil)
		return err
	})
}

func (s *Service) finish(ctx context.Context, held jobs.Job, fn func(tx jobs.Tx) error) error {
	return s.d.Store.Update(ctx, held.OrgID, func(tx store.Tx) error { return fn(tx) })
}
