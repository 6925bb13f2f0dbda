package export

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/jobs"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
)

// signal wakes Run; its zero value is ready.
type signal struct {
	once sync.Once
	ch   chan struct{}
}

func (s *signal) c() chan struct{} {
	s.once.Do(func() { s.ch = make(chan struct{}, 1) })
	return s.ch
}

func (s *signal) wake() {
	select {
	case s.c() <- struct{}{}:
	default:
	}
}

// WorkerOptions tune the export worker. The zero value is a good
// default.
type WorkerOptions struct {
	// Poll is how often Run looks for work queued by other
	// processes or left by a dead worker; 0 means DefaultPoll.
	Poll time.Duration
	// Lease is how long a RUNNING build is this worker's without a sign of
	// life (every chunk stored, and a heartbeat every Lease/3, renew it);
	// after that another worker takes the build over. 0 means
	// DefaultLease. It is judged by the store's clock (jobs).
	Lease time.Duration
	// ChunkBytes is the size of the pieces a pack is stored in; 0 means
	// DefaultChunk.
	ChunkBytes int
	// Hook, when set, is called at the stages of every build (tests use it
	// to stop a build at a chosen point).
	Hook func(Stage)
}

// Stage is a point of a build, reported to WorkerOptions.Hook:
// "claimed" (the record is RUNNING), "chunk" (chunk Chunk is stored) and
// "built" (every chunk is stored, the record not yet SUCCEEDED).
type Stage struct {
	OrgID, ExportID string
	Attempt         int
	Stage           string
	Chunk           int
}

func (o *WorkerOptions) ensureDefaults() {
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = DefaultChunk
	}
}

// Run builds queued validation packs until ctx ends: at start (so
// PENDING packs and those whose worker died are resumed after a restart),
// whenever Create queues one, and every Poll. It builds one pack at a
// time. When ctx ends during a build, the pack goes back to PENDING and
// Run returns once it has.
func (s *Service) Run(ctx context.Context, opts WorkerOptions) {
	opts.ensureDefaults()
	t := time.NewTicker(opts.Poll)
	defer t.Stop()
	for {
		if _, err := s.Process(ctx, opts); err != nil && ctx.Err() == nil {
			s.d.Logger.Warn("export worker: listing queued packs failed", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.signal.c():
		}
	}
}

// Process builds, one after another, every validation pack that is
// ready now: PENDING ones, and RUNNING ones whose lease has passed by the
// store's clock (their worker died). It returns how many it finished
// (SUCCEEDED or FAILED).
func (s *Service) Process(ctx context.Context, opts WorkerOptions) (int, error) {
	opts.ensureDefaults()
	worker, err := s.d.IDs.New()
	if err != nil {
		return 0, core.Unavailable("id generation", err)
	}
	ready, err := s.d.Store.DueJobs(ctx, kindExport, 0)
	if err != nil {
		return 0, core.Unavailable("list exports", err)
	}
	done := 0
	for _, r := range ready {
		if ctx.Err() != nil {
			break
		}
		job, held, ok, err := s.claimBuild(ctx, r.OrgID, r.ID, worker, opts.Lease)
		if err != nil {
			if ctx.Err() == nil {
				s.d.Logger.Warn("export worker: claiming a pack failed", "org_id", r.OrgID, "export_id", r.ID, "error", err.Error())
			}
			continue
		}
		if !ok {
			continue
		}
		if job.Status != Running { // given up on
			done++
			continue
		}
		if s.runBuild(ctx, job, held, opts) {
			done++
		}
	}
	return done, nil
}

// leasePolicy is how a build is leased.
func leasePolicy(lease time.Duration) jobs.Policy {
	return jobs.Policy{Lease: lease, MaxAttempts: MaxAttempts}
}

// claimBuild claims the pack's job for worker (jobs.Claim: due, by the
// store's clock) and makes its record RUNNING with the job's attempts. A
// pack that reached MaxAttempts is FAILED instead (returned with that
// status). It returns the claimed job, the fence of the build's writes.
func (s *Service) claimBuild(ctx context.Context, orgID, exportID, worker string, lease time.Duration) (stored, jobs.Job, bool, error) {
	var job stored
	var held jobs.Job
	var final bool // the record was final already: nothing to build
	now := s.d.Now()
	err := s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		h, err := jobs.Claim(ctx, tx, kindExport, exportID, worker, leasePolicy(lease))
		if err != nil {
			return err
		}
		held = h
		r, err := tx.ArtifactInTx(ctx, kindExport, exportID)
		if err != nil {
			return err
		}
		if job, err = decodeStored(r); err != nil {
			return err
		}
		final = false
		switch job.Status {
		case Succeeded, Failed: // already final: only the job was left
			final = true
			if h.State == jobs.Running {
				_, err = jobs.Finish(ctx, tx, h, nil)
			}
			return err
		case Running:
			if job.LastError == "" {
				job.LastError = "the build was interrupted (its worker stopped without finishing)"
			}
		}
		if h.State == jobs.Failed {
			return s.finish(ctx, tx, &job, now, fmt.Sprintf("gave up after %d attempts; the last: %s", h.Attempts, job.LastError))
		}
		job.Status, job.Attempts, job.StartedAt = Running, h.Attempts, now
		return putJob(ctx, tx, job)
	})
	if errors.Is(err, jobs.ErrNotDue) {
		return job, held, false, nil
	}
	if err != nil {
		return job, held, false, err
	}
	return job, held, !final, nil
}

func putJob(ctx context.Context, tx store.Tx, j stored) error {
	rec, err := j.record()
	if err != nil {
		return err
	}
	return tx.PutArtifact(ctx, rec)
}

// finish records the end of a build: FAILED with why (failure not
// ""), or SUCCEEDED, and its ledger entry export.completed.
func (s *Service) finish(ctx context.Context, tx store.Tx, j *stored, now time.Time, failure string) error {
	j.CompletedAt = now
	if failure != "" {
		j.Status, j.LastError = Failed, failure
	} else {
		j.Status, j.LastError = Succeeded, ""
	}
	if err := putJob(ctx, tx, *j); err != nil {
		return err
	}
	return core.AppendRecord(ctx, tx, ledger.KindExportCompleted, j.ExportID, j.view(), now)
}

// errLostLease: the build is no longer this attempt's (its lease passed,
// another worker took it over).
var errLostLease = errors.New("export: the build's lease was taken over")

// lostLease maps the jobs refusals of a stale owner to errLostLease.
func lostLease(err error) error {
	if errors.Is(err, jobs.ErrNotOwner) || errors.Is(err, jobs.ErrLeaseExpired) {
		return errLostLease
	}
	return err
}

// updateOwned ends the build's claim (end: jobs.Finish, Fail or Release of
// held, refused once the build is no longer held's) and runs fn on the
// record in the same transaction, storing the record fn leaves.
func (s *Service) updateOwned(ctx context.Context, held jobs.Job, end func(tx store.Tx) error, fn func(tx store.Tx, j *stored) error) error {
	return lostLease(s.d.Store.Update(ctx, held.OrgID, func(tx store.Tx) error {
		if err := end(tx); err != nil {
			return err
		}
		r, err := tx.ArtifactInTx(ctx, kindExport, held.ID)
		if err != nil {
			return err
		}
		j, err := decodeStored(r)
		if err != nil {
			return err
		}
		if err := fn(tx, &j); err != nil {
			return err
		}
		return putJob(ctx, tx, j)
	}))
}

// whileHeld renews held's lease and runs fn (when not nil) in the same
// transaction, only while the build is still held's.
func (s *Service) whileHeld(ctx context.Context, held jobs.Job, lease time.Duration, fn func(tx store.Tx) error) error {
	return lostLease(s.d.Store.Update(ctx, held.OrgID, func(tx store.Tx) error {
		if _, err := jobs.Heartbeat(ctx, tx, held, lease); err != nil {
			return err
		}
		if fn == nil {
			return nil
		}
		return fn(tx)
	}))
}

// permanentError is a build failure that retrying cannot fix.
type permanentError struct{ msg string }

func (p *permanentError) Error() string { return p.msg }

// runBuild builds a claimed pack and records how it ended; it reports
// whether the pack is finished (SUCCEEDED or FAILED).
func (s *Service) runBuild(ctx context.Context, job stored, held jobs.Job, opts WorkerOptions) bool {
	log := s.d.Logger.With("org_id", job.OrgID, "export_id", job.ExportID, "attempt", job.Attempts)
	hook := func(stage string, chunk int) {
		if opts.Hook != nil {
			opts.Hook(Stage{OrgID: job.OrgID, ExportID: job.ExportID, Attempt: job.Attempts, Stage: stage, Chunk: chunk})
		}
	}
	hook("claimed", 0)
	res, err := s.build(ctx, job, held, opts, hook)
	// The outcome is recorded even when ctx ended: a stopping worker hands
	// its build back rather than leaving it to its lease.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var pe *permanentError
	switch {
	case err == nil:
		finish := func(tx store.Tx) error { _, err := jobs.Finish(rctx, tx, held, nil); return err }
		err = s.updateOwned(rctx, held, finish, func(tx store.Tx, j *stored) error {
			j.ManifestSHA256, j.BundleSHA256, j.BundleSignature = res.manifestSHA, res.bundleSHA, res.signature
			j.SizeBytes, j.Chunks, j.ContentType, j.Counts, j.LedgerSize = res.size, res.chunks, j.Format.MediaType(), &res.counts, res.ledgerSize
			return s.finish(rctx, tx, j, s.d.Now(), "")
		})
		if err == nil {
			log.Info("validation pack built", "bytes", res.size, "decisions", res.counts.Decisions)
			return true
		}
	case errors.Is(err, errLostLease):
		log.Warn("validation pack build taken over by another worker")
		return false
	case ctx.Err() != nil:
		const why = "the build was interrupted by a shutdown; it starts again"
		err = s.updateOwned(rctx, held, release(rctx, held, why), func(tx store.Tx, j *stored) error {
			j.Status, j.LastError = Pending, why
			return nil
		})
		if err == nil {
			log.Info("validation pack build handed back: shutting down")
		}
		return false
	case errors.As(err, &pe) || job.Attempts >= MaxAttempts:
		msg := buildFailure(err)
		log.Warn("validation pack failed", "error", err.Error())
		fail := func(tx store.Tx) error { _, err := jobs.Fail(rctx, tx, held, msg); return err }
		err = s.updateOwned(rctx, held, fail, func(tx store.Tx, j *stored) error { return s.finish(rctx, tx, j, s.d.Now(), msg) })
		if err == nil {
			return true
		}
	default:
		msg := buildFailure(err)
		log.Warn("validation pack build failed; it will be retried", "error", err.Error())
		err = s.updateOwned(rctx, held, release(rctx, held, msg), func(tx store.Tx, j *stored) error {
			j.Status, j.LastError = Pending, msg
			return nil
		})
		if err == nil {
			return false
		}
	}
	if !errors.Is(err, errLostLease) {
		log.Warn("recording the validation pack's state failed; its lease will hand it to a worker again", "error", err.Error())
	}
	return false
}

// release hands held back to the queue, due at once, with why.
func release(ctx context.Context, held jobs.Job, why string) func(tx store.Tx) error {
	return func(tx store.Tx) error {
		_, err := jobs.Release(ctx, tx, held, why, 0)
		return err
	}
}

// buildFailure is the last_error an org sees: what went wrong, without the
// store's internals.
func buildFailure(err error) string {
	var pe *permanentError
	var ee *core.Error
	switch {
	case errors.As(err, &pe):
		return pe.msg
	case errors.As(err, &ee):
		return ee.Code + ": " + ee.Detail
	}
	return "the build failed reading the store; it is retried"
}
