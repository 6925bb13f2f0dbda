package export

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strings"
	"time"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/audit"
	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/jobs"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/pack"
	"github.com/clearancehq/clearance/store"
)

// built is what a finished build stored.
type built struct {
	manifestSHA, bundleSHA, signature string
	size                              int64
	chunks                            int
	counts                            pack.Counts
	ledgerSize                        uint64
}

// packDecision is a dossier of the window, with its ledger entry once found.
type packDecision struct {
	s     dossier.Summary
	entry ledger.Entry
}

// build builds the pack of a claimed job and stores its chunks: the
// ledger anchor first (a checkpoint signed now, or the unsigned head), then
// every entry up to it, the window's decisions found among them, and the
// grants of those decisions.
func (s *Service) build(ctx context.Context, job stored, held jobs.Job, opts WorkerOptions, hook func(string, int)) (built, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopBeat := s.heartbeat(ctx, cancel, held, opts.Lease)
	defer stopBeat()
	org := job.OrgID

	anchor, err := s.anchorOf(ctx, org)
	if err != nil {
		return built{}, err
	}
	window := map[string]*packDecision{}
	var tooMany bool
	err = s.d.Store.DossierSummaries(ctx, org, job.Window.From, job.Window.To, func(s dossier.Summary) bool {
		if len(window) == MaxDecisions {
			tooMany = true
			return false
		}
		window[s.DossierID] = &packDecision{s: s}
		return true
	})
	if err != nil {
		return built{}, causeOr(ctx, core.Unavailable("read decisions", err))
	}
	if tooMany {
		return built{}, &permanentError{fmt.Sprintf("EXPORT_TOO_LARGE: the window holds more than %d decisions; ask for a narrower window", MaxDecisions)}
	}

	w := &chunkWriter{ctx: ctx, s: s, job: job, held: held, size: opts.ChunkBytes, lease: opts.Lease, sum: sha256.New(), hook: hook}
	if key := s.Key(org); key != nil {
		w.mac = hmac.New(sha256.New, key)
	}
	b, err := pack.NewBuilder(w, pack.Header{OrgID: org, ExportID: job.ExportID, Format: job.Format, Window: job.Window,
		IncludeEvents: job.IncludeEvents, GeneratedAt: s.d.Now(), Ledger: anchor})
	if err != nil {
		return built{}, &permanentError{"the pack cannot be built: " + err.Error()}
	}
	var inPack []*packDecision
	for after := uint64(0); after < anchor.Size; {
		page, err := s.d.Store.LedgerEntries(ctx, org, after, int(min(uint64(audit.MaxLedgerPage), anchor.Size-after)))
		if err != nil {
			return built{}, causeOr(ctx, core.Unavailable("read ledger", err))
		}
		if len(page) == 0 {
			return built{}, &permanentError{fmt.Sprintf("%s: ledger entry %d is missing", core.CodeLedgerBroken, after+1)}
		}
		for _, en := range page {
			if err := b.AddEntry(en); err != nil {
				return built{}, buildError(ctx, err)
			}
			if en.Kind != ledger.KindDecision {
				continue
			}
			if d := window[en.SubjectID]; d != nil {
				d.entry = en
				inPack = append(inPack, d)
			}
		}
		after = page[len(page)-1].Seq
	}
	byDossier := make(map[string]*packDecision, len(inPack))
	for _, d := range inPack {
		byDossier[d.s.DossierID] = d
		if err := b.AddDecision(pack.Decision{LedgerSeq: d.entry.Seq, CreatedAt: d.entry.RecordedAt, DossierID: d.s.DossierID,
			DecisionID: d.s.DecisionID, Outcome: d.s.Outcome, Mode: d.s.Mode, WorkflowKey: d.s.WorkflowKey,
			DecisionType: d.s.DecisionType, DossierDigest: d.entry.PayloadDigest, EntryHash: d.entry.EntryHash}); err != nil {
			return built{}, buildError(ctx, err)
		}
	}
	clear(window)
	if job.IncludeEvents {
		grants, err := s.grantRows(ctx, org, byDossier)
		if err != nil {
			return built{}, err
		}
		for _, g := range grants {
			if err := b.AddGrant(g); err != nil {
				return built{}, buildError(ctx, err)
			}
		}
	}
	res, err := b.Close()
	if err != nil {
		return built{}, buildError(ctx, err)
	}
	if err := w.close(); err != nil {
		return built{}, causeOr(ctx, err)
	}
	hook("built", w.chunks)
	out := built{manifestSHA: res.ManifestSHA256, bundleSHA: "sha256:" + hex.EncodeToString(w.sum.Sum(nil)),
		size: w.total, chunks: w.chunks, counts: res.Manifest.Counts, ledgerSize: anchor.Size}
	if w.mac != nil {
		out.signature = hex.EncodeToString(w.mac.Sum(nil))
	}
	return out, nil
}

// anchorOf is the ledger anchor of a pack built now: a checkpoint
// signed over every durable entry when a ledger key is configured (the
// worker seals: it is not a read), else the durable head, unsigned.
func (s *Service) anchorOf(ctx context.Context, org string) (pack.Ledger, error) {
	if s.d.LedgerKey != nil { // SealLedger waits until every visible entry is durable
		cp, err := s.cfg.Ledger.SealLedger(ctx, org)
		if err != nil {
			var ee *core.Error
			if errors.As(err, &ee) && ee.Code == core.CodeLedgerBroken {
				return pack.Ledger{}, &permanentError{ee.Code + ": " + ee.Detail}
			}
			return pack.Ledger{}, causeOr(ctx, err)
		}
		return pack.Ledger{Origin: cp.Origin, Size: cp.Size, RootHash: base64.StdEncoding.EncodeToString(cp.Root[:]),
			Signed: true, Checkpoint: string(cp.Note), VerifierKey: s.cfg.Ledger.LedgerVerifierKey()}, nil
	}
	if err := s.d.Store.Sync(ctx); err != nil {
		return pack.Ledger{}, causeOr(ctx, core.Unavailable("sync ledger", err))
	}
	head, err := s.d.Store.LedgerHeadOf(ctx, org)
	if err != nil {
		return pack.Ledger{}, causeOr(ctx, core.Unavailable("read ledger", err))
	}
	return pack.Ledger{Origin: s.cfg.Ledger.LedgerOrigin(org), Size: head.Seq, UnsignedReason: audit.CodeLedgerKeyNotConfigured}, nil
}

// grantRows returns the grants issued by the pack's decisions, oldest first.
func (s *Service) grantRows(ctx context.Context, org string, byDossier map[string]*packDecision) ([]pack.Grant, error) {
	var out []pack.Grant
	ts := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(pack.TimeFormat)
	}
	for _, st := range []claim.State{claim.StateIssued, claim.StateClaimed, claim.StateCommitted, claim.StateFailed, claim.StateIndeterminate} {
		err := s.d.Store.GrantsInState(ctx, org, st, func(g claim.Grant) bool {
			d := byDossier[g.DossierID]
			if d == nil {
				return true
			}
			row := pack.Grant{GrantID: g.GrantID, DecisionID: d.s.DecisionID, DossierID: g.DossierID, WorkflowKey: d.s.WorkflowKey,
				State: string(g.State), IssuedAt: ts(g.IssuedAt), ExpiresAt: ts(g.ExpiresAt), ClaimedAt: ts(g.ClaimedAt),
				FinalizedAt: ts(g.FinalizedAt), FinalCode: g.FinalCode, EffectConfirmed: g.EffectConfirmed}
			if rc := g.Reconciliation; rc != nil {
				row.Reconciliation, row.ReconciledAt = string(rc.Resolution), ts(rc.ReconciledAt)
				row.EffectConfirmed = g.EffectConfirmed || rc.EffectConfirmed
			}
			out = append(out, row)
			return true
		})
		if err != nil {
			return nil, causeOr(ctx, core.Unavailable("read grants", err))
		}
	}
	slices.SortFunc(out, func(a, b pack.Grant) int {
		if c := strings.Compare(a.IssuedAt, b.IssuedAt); c != 0 {
			return c
		}
		return strings.Compare(a.GrantID, b.GrantID)
	})
	return out, nil
}

// buildError classifies a builder error: the ledger or content refused by
// the pure builder cannot be fixed by retrying; anything else (the chunk
// writer's store errors) can.
func buildError(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, pack.ErrLedger):
		return &permanentError{core.CodeLedgerBroken + ": " + err.Error()}
	case errors.Is(err, pack.ErrInput) || errors.Is(err, pack.ErrOrder):
		return &permanentError{"EXPORT_INCONSISTENT: the store's decisions disagree with its ledger: " + err.Error()}
	}
	return causeOr(ctx, err)
}

// causeOr returns why ctx ended (a lost lease), or err.
func causeOr(ctx context.Context, err error) error {
	if c := context.Cause(ctx); c != nil && errors.Is(c, errLostLease) {
		return c
	}
	return err
}

// heartbeat renews the build's lease every lease/3 until stopped; when the
// build is no longer this worker's it cancels ctx with errLostLease.
func (s *Service) heartbeat(ctx context.Context, cancel context.CancelCauseFunc, held jobs.Job, lease time.Duration) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(max(lease/3, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := s.whileHeld(ctx, held, lease, nil); errors.Is(err, errLostLease) {
				cancel(errLostLease)
				return
			}
		}
	}()
	return func() { close(done); <-finished }
}

// chunkWriter stores a pack as it is written, in chunks of size bytes, each
// in its own transaction (fenced: only while the build is still this
// attempt's), renewing the lease; it hashes and signs the bytes on the way.
type chunkWriter struct {
	ctx    context.Context
	s      *Service
	job    stored
	held   jobs.Job
	size   int
	lease  time.Duration
	buf    []byte
	chunks int
	total  int64
	sum    hash.Hash
	mac    hash.Hash
	hook   func(string, int)
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	w.sum.Write(p)
	if w.mac != nil {
		w.mac.Write(p)
	}
	w.total += int64(len(p))
	w.buf = append(w.buf, p...)
	for len(w.buf) >= w.size {
		if err := w.flush(w.buf[:w.size]); err != nil {
			return 0, err
		}
		w.buf = append(w.buf[:0], w.buf[w.size:]...)
	}
	return len(p), nil
}

// close stores the last, partial chunk.
func (w *chunkWriter) close() error {
	if len(w.buf) == 0 {
		return nil
	}
	err := w.flush(w.buf)
	w.buf = nil
	return err
}

func (w *chunkWriter) flush(data []byte) error {
	n := w.chunks
	j := w.job
	err := w.s.whileHeld(w.ctx, w.held, w.lease, func(tx store.Tx) error {
		return tx.PutArtifact(w.ctx, artifact.Record{OrgID: j.OrgID, Kind: kindExportChunk, ID: chunkID(j.ExportID, n),
			Ref: j.ExportID, CreatedAt: j.CreatedAt, Body: data})
	})
	if err != nil {
		if errors.Is(err, errLostLease) {
			return err
		}
		return causeOr(w.ctx, core.Unavailable("store export", err))
	}
	w.chunks++
	w.hook("chunk", n)
	return nil
}
