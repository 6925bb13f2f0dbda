package policysource

import (
	"context"
	"errors"
	"time"

	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/jobs"
	"github.com/clearancehq/clearance/store"
)

// DefaultPoll is how often Run looks for scheduled pulls that are due.
const DefaultPoll = 30 * time.Second

// retryAfter is when a scheduled pull the store interrupted is tried again.
const retryAfter = time.Minute

// lease is how long a worker holds a scheduled pull: the fetch is bounded
// by FetchTimeout, the rest is a few writes.
func (s *Service) lease() time.Duration { return s.cfg.FetchTimeout + 2*time.Minute }

// Run pulls the scheduled links until ctx ends: every poll it claims the
// due pull jobs of every org (leased by the store's clock, so several
// servers on one store never pull one link at once), pulls each and queues
// its next pull every_minutes later. A link whose schedule stopped (Put
// with every_minutes 0, Delete) only ends its job.
func (s *Service) Run(ctx context.Context, poll time.Duration) {
	if poll <= 0 {
		poll = DefaultPoll
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if _, err := s.Process(ctx); err != nil && ctx.Err() == nil {
			s.d.Logger.Warn("policy source worker failed", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Process does the scheduled pulls that are due now, one after another,
// and returns how many it ran.
func (s *Service) Process(ctx context.Context) (int, error) {
	owner, err := s.d.IDs.New()
	if err != nil {
		return 0, err
	}
	update := func(ctx context.Context, orgID string, fn func(tx jobs.Tx) error) error {
		return s.d.Store.Update(ctx, orgID, func(tx store.Tx) error { return fn(tx) })
	}
	n := 0
	for ctx.Err() == nil {
		held, ok, err := jobs.ClaimNext(ctx, s.d.Store, update, JobKind, owner, jobs.Policy{Lease: s.lease()})
		if err != nil {
			return n, core.Translate("claim a scheduled pull", err)
		}
		if !ok {
			break
		}
		if held.State != jobs.Running {
			continue
		}
		s.runJob(ctx, held)
		n++
	}
	return n, nil
}

// runJob pulls the job's org when its link still has a schedule, then
// ends the claim in the org's transaction with the link read again there:
// queued for every_minutes later while the link has a schedule, else done.
func (s *Service) runJob(ctx context.Context, held jobs.Job) {
	log := s.d.Logger.With("org_id", held.OrgID)
	why := ""
	r, err := s.read(ctx, held.OrgID)
	if err == nil && r.EveryMinutes > 0 {
		var res PullResult
		if res, err = s.pull(ctx, held.OrgID, r); err == nil {
			if res.Status == StatusFailed {
				why = res.Reason + ": " + res.Message
			}
			log.Info("scheduled policy pull", "status", res.Status, "commit", res.Commit)
		}
	}
	retry := err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, core.ErrNotFound)
	if retry {
		why = "the pull was interrupted: " + err.Error()
		log.Warn("scheduled policy pull interrupted; it is retried", "error", err.Error())
	}
	// The claim is ended even when ctx ended: a stopping worker hands its
	// pull back rather than leaving it to its lease.
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err = s.d.Store.Update(ectx, held.OrgID, func(tx store.Tx) error {
		var cur record
		err := core.ReadRecord(ectx, tx, recordKind, recordID, &cur)
		if err != nil && !core.IsNotFound(err) {
			return err
		}
		if err != nil || cur.Deleted || cur.EveryMinutes == 0 {
			_, err := jobs.Finish(ectx, tx, held, nil)
			return err
		}
		after := time.Duration(cur.EveryMinutes) * time.Minute
		if retry {
			after = min(after, retryAfter)
			if ctx.Err() != nil {
				after = 0
			}
		}
		j, err := jobs.Release(ectx, tx, held, why, after)
		if err != nil {
			return err
		}
		cur.NextPullAt = j.Due
		return core.WriteRecord(ectx, tx, recordKind, recordID, cur.CreatedAt, cur)
	})
	switch {
	case errors.Is(err, jobs.ErrNotOwner), errors.Is(err, jobs.ErrLeaseExpired):
		log.Warn("scheduled policy pull taken over by another worker")
	case err != nil:
		log.Warn("ending a scheduled policy pull failed; its lease hands it on", "error", err.Error())
	}
}
