package policies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/jobs"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
)

// Replays are records of the org (kind kindReplay, id the replay id, ref
// refReplay); a replay too large to answer at once is a jobs.Job of kind
// kindReplay that Run works through.
const (
	kindReplay = "policy.replay"
	refReplay  = "replay"
	// ReplayJobKind is the jobs kind of a queued replay.
	ReplayJobKind = kindReplay
	// InlineReplayLimit is the default of Config.ReplayInlineLimit.
	InlineReplayLimit = 10_000
	// MaxReplayExamples bounds the examples a replay lists.
	MaxReplayExamples = 100
	// DefaultReplayExamples is the examples listed when none is asked.
	DefaultReplayExamples = 10
	// ReplayLease is how long a replay job is a worker's between progress
	// reports; another worker takes it over after that.
	ReplayLease = 2 * time.Minute
	// DefaultReplayPoll is how often the replay worker looks for replays
	// queued by other servers or left by a dead worker.
	DefaultReplayPoll = 5 * time.Second
	// ReplayMaxAttempts fails a replay whose workers keep dying.
	ReplayMaxAttempts = 5
)

// Replay states.
const (
	ReplayQueued  = "queued"
	ReplayRunning = "running"
	ReplayDone    = "done"
	ReplayFailed  = "failed"
)

// Replay is a replay of a candidate policy over the org's recorded
// decisions of a window, with its progress and, once done, its result.
type Replay struct {
	ReplayID  string    `json:"replay_id"`
	OrgID     string    `json:"org_id"`
	Status    string    `json:"status"`
	Candidate Candidate `json:"candidate"`
	// PolicyVersion and BundleDigest identify the content replayed (a
	// draft's as it was when the replay started).
	PolicyVersion string    `json:"policy_version"`
	BundleDigest  string    `json:"bundle_digest"`
	From          time.Time `json:"from"`
	To            time.Time `json:"to"`
	Examples      int       `json:"examples"`
	// Progress: Processed dossiers of Total (the window's count when the
	// replay was queued; decisions recorded later in the window add to it).
	Processed  int           `json:"processed"`
	Total      int           `json:"total"`
	Result     *ReplayResult `json:"result,omitempty"`
	Failure    string        `json:"failure,omitempty"`
	CreatedAt  time.Time     `json:"created_at"`
	UpdatedAt  time.Time     `json:"updated_at"`
	FinishedAt *time.Time    `json:"finished_at,omitempty"`
}

// replayRecord is a replay as stored: the view, and the candidate's
// canonical bundle so that the job replays what was asked even if the
// draft changes meanwhile.
type replayRecord struct {
	Replay
	Bundle json.RawMessage `json:"bundle"`
}

// replayBody is the request of StartReplay.
type replayBody struct {
	Draft    string `json:"draft,omitempty"`
	Version  string `json:"version,omitempty"`
	From     string `json:"from"`
	To       string `json:"to,omitempty"`
	Examples *int   `json:"examples,omitempty"`
}

// StartReplay replays a candidate (a draft or a version; neither named is
// the active policy) over the org's recorded decisions created in
// [from, to) — `to` defaults to now — and compares each replayed outcome
// with the recorded one. A window of at most InlineReplayLimit decisions
// is answered done at once (queued false); a larger one is queued as a job
// that Run works through (queued true), its progress readable with Replay.
// raw is the request body {draft|version, from, to, examples}.
func (s *Service) StartReplay(ctx context.Context, orgID string, raw []byte) (Replay, bool, error) {
	var b replayBody
	if err := strictjson.Decode(raw, &b, s.d.JSON); err != nil {
		return Replay{}, false, core.TranslateInput(err)
	}
	now := s.d.Now().UTC()
	from, to, err := replayWindow(b, now)
	if err != nil {
		return Replay{}, false, err
	}
	examples := DefaultReplayExamples
	if b.Examples != nil {
		if *b.Examples < 0 || *b.Examples > MaxReplayExamples {
			return Replay{}, false, core.Invalid(core.CodeInvalidRequest, "examples", "examples must be 0..%d", MaxReplayExamples)
		}
		examples = *b.Examples
	}
	cand := Candidate{Draft: b.Draft, Version: b.Version}
	c, err := s.Compile(ctx, orgID, cand)
	if err != nil {
		return Replay{}, false, err
	}
	if err := s.d.Store.RequireOrg(ctx, orgID); err != nil {
		return Replay{}, false, err
	}
	id, err := s.d.IDs.New()
	if err != nil {
		return Replay{}, false, core.Unavailable("id generation", err)
	}
	rec := replayRecord{Replay: Replay{ReplayID: id, OrgID: orgID, Status: ReplayQueued, Candidate: cand,
		PolicyVersion: c.Snapshot().PolicyVersion, BundleDigest: c.Digest(), From: from, To: to, Examples: examples,
		CreatedAt: now, UpdatedAt: now}, Bundle: c.Canonical()}
	// Answered at once unless the window holds more than the inline limit:
	// the replay stops there and is queued, the window counted for its
	// progress.
	res, err := s.replayWindow(ctx, orgID, c, from, to, examples, s.cfg.ReplayInlineLimit, nil)
	queued := errors.Is(err, errReplayTooLarge)
	switch {
	case queued:
		err = s.d.Store.DossierSummaries(ctx, orgID, from, to, func(dossier.Summary) bool {
			rec.Total++
			return true
		})
		if err != nil {
			return Replay{}, false, core.Unavailable("count dossiers", err)
		}
	case err != nil:
		return Replay{}, false, err
	default:
		done := s.d.Now().UTC()
		rec.Status, rec.Result, rec.Processed, rec.Total, rec.UpdatedAt, rec.FinishedAt = ReplayDone, res, res.Total, res.Total, done, &done
	}
	err = s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		if queued {
			if err := countActiveReplays(ctx, tx, +1, now); err != nil {
				return err
			}
			if _, _, err := jobs.Enqueue(ctx, tx, kindReplay, id, nil); err != nil {
				return err
			}
		}
		return putReplay(ctx, tx, rec)
	})
	if err != nil {
		return Replay{}, false, core.Translate("record replay", err)
	}
	if queued {
		s.wake()
	}
	return rec.Replay, queued, nil
}

// replayWindow reads and checks a replay's window.
func replayWindow(b replayBody, now time.Time) (from, to time.Time, err error) {
	if b.From == "" {
		return from, to, core.Invalid(core.CodeMissingField, "from", "from (RFC 3339) is required")
	}
	if from, err = time.Parse(time.RFC3339Nano, b.From); err != nil {
		return from, to, core.Invalid(core.CodeInvalidRequest, "from", "from must be an RFC 3339 time")
	}
	to = now
	if b.To != "" {
		if to, err = time.Parse(time.RFC3339Nano, b.To); err != nil {
			return from, to, core.Invalid(core.CodeInvalidRequest, "to", "to must be an RFC 3339 time")
		}
	}
	from, to = from.UTC(), to.UTC()
	if !from.Before(to) {
		return from, to, core.Invalid(core.CodeInvalidRequest, "to", "the window is empty: from must be before to")
	}
	return from, to, nil
}

func putReplay(ctx context.Context, tx store.Tx, rec replayRecord) error {
	body, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return tx.PutArtifact(ctx, artifact.Record{OrgID: tx.OrgID(), Kind: kindReplay, ID: rec.ReplayID, Ref: refReplay,
		CreatedAt: rec.CreatedAt, Body: body})
}

// Replay reads a replay with its progress and, once done, its result.
func (s *Service) Replay(ctx context.Context, orgID, replayID string) (Replay, error) {
	var rec replayRecord
	if !core.ValidID(replayID) {
		return Replay{}, replayNotFound(replayID)
	}
	err := core.ReadCommitted(ctx, s.d.Store, orgID, kindReplay, replayID, &rec)
	if core.IsNotFound(err) {
		return Replay{}, replayNotFound(replayID)
	}
	if err != nil {
		return Replay{}, core.Unavailable("read replay", err)
	}
	return rec.Replay, nil
}

func replayNotFound(id string) error {
	return core.New(core.ErrNotFound, CodeReplayNotFound, "replay %q not found", id)
}

// wake tells Run that a replay was queued.
func (s *Service) wake() {
	select {
	case s.queued <- struct{}{}:
	default:
	}
}

// RunReplays works through queued replays until ctx ends: at start (a
// replay whose worker died is taken over once its lease passes, by the
// store's clock, and started again from the beginning of its window),
// whenever StartReplay queues one, and every poll.
func (s *Service) RunReplays(ctx context.Context, poll time.Duration) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if _, err := s.ProcessReplays(ctx); err != nil && ctx.Err() == nil {
			s.d.Logger.Warn("replay worker failed", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.queued:
		}
	}
}

// ProcessReplays runs every replay that is due now, one after another, and
// returns how many it finished.
func (s *Service) ProcessReplays(ctx context.Context) (int, error) {
	worker, err := s.d.IDs.New()
	if err != nil {
		return 0, core.Unavailable("id generation", err)
	}
	due, err := s.d.Store.DueJobs(ctx, kindReplay, 0)
	if err != nil {
		return 0, core.Unavailable("list replays", err)
	}
	n := 0
	for _, j := range due {
		if ctx.Err() != nil {
			break
		}
		ok, err := s.runReplay(ctx, j.OrgID, j.ID, worker)
		if err != nil && ctx.Err() == nil {
			s.d.Logger.Warn("replay failed", "org_id", j.OrgID, "replay_id", j.ID, "error", err.Error())
		}
		if ok {
			n++
		}
	}
	return n, nil
}

var replayPolicy = jobs.Policy{Lease: ReplayLease, MaxAttempts: ReplayMaxAttempts}

// runReplay claims one replay job and runs it to its end; it reports
// whether the replay finished (done or failed).
func (s *Service) runReplay(ctx context.Context, orgID, id, worker string) (bool, error) {
	var held jobs.Job
	var rec replayRecord
	err := s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		h, err := jobs.Claim(ctx, tx, kindReplay, id, worker, replayPolicy)
		if err != nil {
			return err
		}
		held = h
		if err := core.ReadRecord(ctx, tx, kindReplay, id, &rec); err != nil {
			return err
		}
		if h.State == jobs.Failed {
			return s.endReplay(ctx, tx, &rec, nil, fmt.Sprintf("gave up after %d attempts", h.Attempts))
		}
		rec.Status, rec.Processed, rec.UpdatedAt = ReplayRunning, 0, s.d.Now().UTC()
		return putReplay(ctx, tx, rec)
	})
	if errors.Is(err, jobs.ErrNotDue) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if held.State == jobs.Failed {
		return true, nil
	}
	c, err := policy.Load(rec.Bundle)
	var res *ReplayResult
	if err == nil {
		res, err = s.replayWindow(ctx, orgID, c, rec.From, rec.To, rec.Examples, 0, func(processed int) error {
			return s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
				h, err := jobs.Heartbeat(ctx, tx, held, ReplayLease)
				if err != nil {
					return err
				}
				held = h
				var cur replayRecord
				if err := core.ReadRecord(ctx, tx, kindReplay, id, &cur); err != nil {
					return err
				}
				cur.Processed, cur.UpdatedAt = processed, s.d.Now().UTC()
				cur.Total = max(cur.Total, processed)
				return putReplay(ctx, tx, cur)
			})
		})
	}
	if ctx.Err() != nil {
		return false, ctx.Err() // the lease lapses; another run starts it again
	}
	failure := ""
	if err != nil {
		failure = err.Error()
	}
	err = s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		var end error
		if failure == "" {
			_, end = jobs.Finish(ctx, tx, held, nil)
		} else {
			_, end = jobs.Fail(ctx, tx, held, failure)
		}
		if end != nil {
			return end
		}
		var cur replayRecord
		if err := core.ReadRecord(ctx, tx, kindReplay, id, &cur); err != nil {
			return err
		}
		return s.endReplay(ctx, tx, &cur, res, failure)
	})
	return err == nil, err
}

// endReplay records a replay's end: done with res, or failed with why.
func (s *Service) endReplay(ctx context.Context, tx store.Tx, rec *replayRecord, res *ReplayResult, failure string) error {
	now := s.d.Now().UTC()
	rec.UpdatedAt, rec.FinishedAt = now, &now
	if failure != "" {
		rec.Status, rec.Failure = ReplayFailed, failure
	} else {
		rec.Status, rec.Result, rec.Processed = ReplayDone, res, res.Total
		rec.Total = res.Total
	}
	if err := countActiveReplays(ctx, tx, -1, now); err != nil {
		return err
	}
	return putReplay(ctx, tx, *rec)
}

// MaxActiveReplays bounds an org's queued and running replays: each holds
// a worker for as long as its window takes.
const MaxActiveReplays = 3

const kindReplayCount, idReplayCount = "policy.replay_count", "active"

type replayCount struct {
	Active int `json:"active"`
}

// countActiveReplays moves the org's count of queued and running replays
// by delta in the transaction that queues or ends one, refusing a replay
// past MaxActiveReplays.
func countActiveReplays(ctx context.Context, tx store.Tx, delta int, at time.Time) error {
	var c replayCount
	if err := core.ReadRecord(ctx, tx, kindReplayCount, idReplayCount, &c); err != nil && !core.IsNotFound(err) {
		return err
	}
	if delta > 0 && c.Active >= MaxActiveReplays {
		return core.New(core.ErrConflict, CodeReplayLimit,
			"the org has %d replays queued or running, the most it may; wait for one to end", MaxActiveReplays)
	}
	c.Active = max(0, c.Active+delta)
	return core.WriteRecord(ctx, tx, kindReplayCount, idReplayCount, at, c)
}
