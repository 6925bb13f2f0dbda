package clearance

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/export"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/jobs"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
)

// Codes of the validation pack routes.
const (
	CodeExportNotFound      = "EXPORT_NOT_FOUND"
	CodeExportNotReady      = "EXPORT_NOT_READY"
	CodeExportFailed        = "EXPORT_FAILED"
	CodeInvalidExportFormat = "INVALID_EXPORT_FORMAT"
	CodeInvalidExportWindow = "INVALID_EXPORT_WINDOW"
)

// ExportStatus is a validation pack's build state.
type ExportStatus string

// Build states: PENDING → RUNNING → SUCCEEDED, or FAILED with last_error.
// A RUNNING build that stops (shutdown, crash, lost lease) goes back to
// PENDING, or is taken over once its lease has passed.
const (
	ExportPending   ExportStatus = "PENDING"
	ExportRunning   ExportStatus = "RUNNING"
	ExportSucceeded ExportStatus = "SUCCEEDED"
	ExportFailed    ExportStatus = "FAILED"
)

// Limits and defaults of validation packs.
const (
	// MaxExportDecisions bounds one pack; a window holding more fails its
	// build with a last_error asking for a narrower window.
	MaxExportDecisions = 1_000_000
	// MaxExportAttempts is how many builds of one pack are started before it
	// is FAILED for good.
	MaxExportAttempts = 5
	// DefaultExportList and MaxExportList bound GET …/audit-exports.
	DefaultExportList = 20
	MaxExportList     = 100
	// DefaultExportPoll, DefaultExportLease and DefaultExportChunk are the
	// ExportWorkerOptions defaults.
	DefaultExportPoll  = 2 * time.Second
	DefaultExportLease = time.Minute
	DefaultExportChunk = 4 << 20
)

// exportEpoch is the default start of a pack's window: every decision.
var exportEpoch = time.Unix(0, 0).UTC()

// Kinds of validation packs: the record users see (an artifact whose Ref is
// its status) and the job that builds it share kindExport and the export
// id; the pack's bytes are artifacts in chunks (ID "<export id>/<n>", Ref:
// the export id).
const (
	kindExport      = "export"
	kindExportChunk = "export_chunk"
)

// Export is a validation pack's record as the API shows it. Hashes, size,
// counts and completed_at are set once it SUCCEEDED.
type Export struct {
	ExportID      string        `json:"export_id"`
	OrgID         string        `json:"org_id"`
	Format        export.Format `json:"format"`
	Window        export.Window `json:"window"`
	IncludeEvents bool          `json:"include_events"`
	Status        ExportStatus  `json:"status"`
	// Attempts is how many builds started; LastError why the last one failed.
	Attempts    int       `json:"attempts"`
	LastError   string    `json:"last_error,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	StartedAt   time.Time `json:"started_at,omitzero"`
	CompletedAt time.Time `json:"completed_at,omitzero"`
	// ManifestSHA256 and BundleSHA256 are "sha256:<hex>" of the manifest's
	// bytes and of the download; BundleSignature is the lowercase hex of
	// HMAC-SHA256 over the download under the org's export key.
	ManifestSHA256  string         `json:"manifest_sha256,omitempty"`
	BundleSHA256    string         `json:"bundle_sha256,omitempty"`
	BundleSignature string         `json:"bundle_signature_hmac_sha256,omitempty"`
	SizeBytes       int64          `json:"size_bytes,omitempty"`
	ContentType     string         `json:"content_type,omitempty"`
	Counts          *export.Counts `json:"counts,omitempty"`
	// LedgerSize is the tree size of the checkpoint the pack is anchored in.
	LedgerSize  uint64 `json:"ledger_size,omitempty"`
	DownloadURL string `json:"download_url,omitempty"`
}

// exportJob is the stored record: the Export and how many chunks hold its
// pack. Its build's queue and lease are a jobs.Job (kind kindExport, same
// id), changed in the same transactions as the record. Records written
// before jobs also carry "worker" and "lease_expires_at", which are ignored.
type exportJob struct {
	Export
	Chunks int `json:"chunks,omitempty"`
}

// view is the record as shown.
func (j exportJob) view() Export {
	x := j.Export
	x.DownloadURL = ""
	if x.Status == ExportSucceeded {
		x.DownloadURL = "/v1/orgs/" + x.OrgID + "/audit-exports/" + x.ExportID + "/download"
	}
	return x
}

func (j exportJob) record() (artifact.Record, error) {
	body, err := json.Marshal(j)
	if err != nil {
		return artifact.Record{}, err
	}
	return artifact.Record{OrgID: j.OrgID, Kind: kindExport, ID: j.ExportID, Ref: string(j.Status), CreatedAt: j.CreatedAt, Body: body}, nil
}

func decodeJob(r artifact.Record) (exportJob, error) {
	var j exportJob
	if err := json.Unmarshal(r.Body, &j); err != nil {
		return j, fmt.Errorf("export record %s: %w", r.ID, err)
	}
	return j, nil
}

// ExportRequest queues a validation pack.
type ExportRequest struct {
	OrgID string
	// Format is "json", "csv" or "pdf".
	Format string
	// From and To bound the decisions covered, RFC 3339: [From, To). ""
	// means every decision (From) and the time of the request (To).
	From, To string
	// IncludeEvents adds the org's whole ledger, the grants of the pack's
	// decisions and the coverage per workflow.
	IncludeEvents  bool
	IdempotencyKey string
}

// idempotencyScopeExport scopes Idempotency-Keys of pack requests.
const idempotencyScopeExport = "audit-export"

// CreateExport queues a validation pack: the record (PENDING) and its
// ledger entry (export.requested) are written in one atomic write, and the
// worker (RunExports) is woken. With an Idempotency-Key already used for the
// same request, it returns that pack as it now stands and created false.
func (e *Engine) CreateExport(ctx context.Context, req ExportRequest) (Export, bool, error) {
	if req.IdempotencyKey != "" && !ValidToken(req.IdempotencyKey) {
		return Export{}, false, invalid(CodeInvalidIdempotencyKey, "Idempotency-Key", "Idempotency-Key must be 1 to %d visible ASCII characters", MaxKeyLength)
	}
	format, err := export.ParseFormat(req.Format)
	if err != nil {
		return Export{}, false, invalid(CodeInvalidExportFormat, "format", "format must be json, csv or pdf")
	}
	now := e.now()
	window, err := exportWindow(req.From, req.To, now)
	if err != nil {
		return Export{}, false, err
	}
	requestDigest, err := canon.DigestValue(map[string]any{"format": req.Format, "from": req.From, "to": req.To, "include_events": req.IncludeEvents})
	if err != nil {
		return Export{}, false, unavailable("digest request", err)
	}
	id, err := e.newID()
	if err != nil {
		return Export{}, false, unavailable("id generation", err)
	}
	job := exportJob{Export: Export{ExportID: id, OrgID: req.OrgID, Format: format, Window: window,
		IncludeEvents: req.IncludeEvents, Status: ExportPending, CreatedAt: now}}
	created := true
	err = e.store.Update(ctx, req.OrgID, func(tx store.Tx) error {
		if req.IdempotencyKey != "" {
			prev, err := tx.Idempotency(ctx, idempotencyScopeExport, req.IdempotencyKey)
			if err == nil {
				if prev.RequestDigest != requestDigest {
					return newError(ErrConflict, CodeIdempotencyKeyReused, "Idempotency-Key was already used with a different request body")
				}
				r, err := tx.ArtifactInTx(ctx, kindExport, string(prev.Response))
				if err != nil {
					return err
				}
				job, err = decodeJob(r)
				created = false
				return err
			}
			if !isNotFound(err) {
				return err
			}
		}
		rec, err := job.record()
		if err != nil {
			return err
		}
		if err := tx.PutArtifact(ctx, rec); err != nil {
			return err
		}
		if _, _, err := jobs.Enqueue(ctx, tx, kindExport, id, nil); err != nil {
			return err
		}
		if err := e.appendRecord(ctx, tx, ledger.KindExportRequested, id, job.view()); err != nil {
			return err
		}
		if req.IdempotencyKey != "" {
			return tx.PutIdempotency(ctx, store.IdempotencyRecord{OrgID: req.OrgID, Scope: idempotencyScopeExport,
				Key: req.IdempotencyKey, RequestDigest: requestDigest, Response: []byte(id), CreatedAt: now})
		}
		return nil
	})
	if err != nil {
		return Export{}, false, asEngineError("queue export", err)
	}
	if created {
		e.exports.wake()
	}
	return job.view(), created, nil
}

// exportWindow parses a request's window; bounds are kept to the
// microsecond, the precision every backend stores decision times at, so
// that the store's window and the ledger's times select the same decisions.
func exportWindow(from, to string, now time.Time) (export.Window, error) {
	parse := func(field, s string, def time.Time) (time.Time, error) {
		if s == "" {
			return def, nil
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return t, invalid(CodeInvalidExportWindow, field, "%s must be an RFC 3339 timestamp", field)
		}
		if y := t.UTC().Year(); y < 1970 || y > 9999 {
			return t, invalid(CodeInvalidExportWindow, field, "%s must lie in the years 1970 to 9999", field)
		}
		return t, nil
	}
	f, err := parse("from", from, exportEpoch)
	if err != nil {
		return export.Window{}, err
	}
	t, err := parse("to", to, now)
	if err != nil {
		return export.Window{}, err
	}
	w := export.Window{From: f.UTC().Truncate(time.Microsecond), To: t.UTC().Truncate(time.Microsecond)}
	if !w.From.Before(w.To) {
		return export.Window{}, invalid(CodeInvalidExportWindow, "from", "from must be before to")
	}
	return w, nil
}

func exportNotFound() error {
	return newError(ErrNotFound, CodeExportNotFound, "validation pack not found")
}

// Export returns the org's validation pack record; another org's is
// EXPORT_NOT_FOUND.
func (e *Engine) Export(ctx context.Context, orgID, exportID string) (Export, error) {
	j, err := e.exportJob(ctx, orgID, exportID)
	if err != nil {
		return Export{}, err
	}
	return j.view(), nil
}

func (e *Engine) exportJob(ctx context.Context, orgID, exportID string) (exportJob, error) {
	if !ValidID(exportID) {
		return exportJob{}, exportNotFound()
	}
	r, err := e.store.Artifact(ctx, orgID, kindExport, exportID)
	if isNotFound(err) {
		return exportJob{}, exportNotFound()
	}
	if err != nil {
		return exportJob{}, unavailable("read export", err)
	}
	j, err := decodeJob(r)
	if err != nil {
		return exportJob{}, unavailable("read export", err)
	}
	return j, nil
}

// Exports lists the org's most recent validation packs, newest first, at
// most limit (DefaultExportList when 0, at most MaxExportList).
func (e *Engine) Exports(ctx context.Context, orgID string, limit int) ([]Export, error) {
	if limit == 0 {
		limit = DefaultExportList
	}
	if limit < 1 || limit > MaxExportList {
		return nil, invalid(CodeInvalidRequest, "limit", "limit must be 1 to %d", MaxExportList)
	}
	var out []Export
	for _, st := range []ExportStatus{ExportPending, ExportRunning, ExportSucceeded, ExportFailed} {
		recs, err := e.store.ArtifactsByRef(ctx, orgID, kindExport, string(st), 0)
		if err != nil {
			return nil, unavailable("list exports", err)
		}
		for _, r := range recs {
			j, err := decodeJob(r)
			if err != nil {
				return nil, unavailable("list exports", err)
			}
			out = append(out, j.view())
		}
	}
	slices.SortFunc(out, func(a, b Export) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ExportID, a.ExportID)
	})
	if len(out) > limit {
		out = out[:limit]
	}
	if out == nil {
		out = []Export{}
	}
	return out, nil
}

// ExportKey is the org's export key (export.OrgKey of the engine's
// ExportSecret), with which an operator verifies bundle_signature_hmac_sha256;
// nil when no export secret is configured.
func (e *Engine) ExportKey(orgID string) []byte {
	if len(e.opts.ExportSecret) == 0 {
		return nil
	}
	return export.OrgKey(e.opts.ExportSecret, orgID)
}

// OpenExport returns a SUCCEEDED pack's record and a reader of its bytes
// (streamed from the store, chunk by chunk). A pack still PENDING or
// RUNNING is 409 EXPORT_NOT_READY, a FAILED one 409 EXPORT_FAILED.
func (e *Engine) OpenExport(ctx context.Context, orgID, exportID string) (Export, io.Reader, error) {
	j, err := e.exportJob(ctx, orgID, exportID)
	if err != nil {
		return Export{}, nil, err
	}
	switch j.Status {
	case ExportSucceeded:
	case ExportFailed:
		return Export{}, nil, newError(ErrConflict, CodeExportFailed, "the validation pack failed to build: %s", j.LastError)
	default:
		return Export{}, nil, newError(ErrConflict, CodeExportNotReady, "the validation pack is %s; download it once it is SUCCEEDED", j.Status)
	}
	return j.view(), &exportReader{ctx: ctx, e: e, job: j, sum: sha256.New()}, nil
}

// exportReader streams a pack's chunks and checks, before the last one,
// that they are the bytes whose hash the record holds.
type exportReader struct {
	ctx  context.Context
	e    *Engine
	job  exportJob
	next int
	buf  []byte
	n    int64
	sum  hash.Hash
	err  error
}

func (r *exportReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.next == r.job.Chunks {
			r.err = io.EOF
			continue
		}
		rec, err := r.e.store.Artifact(r.ctx, r.job.OrgID, kindExportChunk, chunkID(r.job.ExportID, r.next))
		if err != nil {
			r.err = unavailable("read export", err)
			continue
		}
		r.next++
		r.n += int64(len(rec.Body))
		r.sum.Write(rec.Body)
		// The last chunk is held back until the whole pack proves to be the
		// recorded one: a changed pack is cut short, never delivered whole.
		if r.next == r.job.Chunks {
			if got := "sha256:" + hex.EncodeToString(r.sum.Sum(nil)); got != r.job.BundleSHA256 || r.n != r.job.SizeBytes {
				r.err = unavailable("read export", fmt.Errorf("the stored pack %s is %s (%d bytes), its record says %s (%d bytes)",
					r.job.ExportID, got, r.n, r.job.BundleSHA256, r.job.SizeBytes))
				r.e.opts.Logger.Error("validation pack bytes differ from their record", "org_id", r.job.OrgID, "export_id", r.job.ExportID)
				continue
			}
		}
		r.buf = rec.Body
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func chunkID(exportID string, n int) string { return fmt.Sprintf("%s/%06d", exportID, n) }

// ---------------------------------------------------------------------------
// The worker

// exportSignal wakes RunExports; its zero value is ready.
type exportSignal struct {
	once sync.Once
	ch   chan struct{}
}

func (s *exportSignal) c() chan struct{} {
	s.once.Do(func() { s.ch = make(chan struct{}, 1) })
	return s.ch
}

func (s *exportSignal) wake() {
	select {
	case s.c() <- struct{}{}:
	default:
	}
}

// ExportWorkerOptions tune the export worker. The zero value is a good
// default.
type ExportWorkerOptions struct {
	// Poll is how often RunExports looks for work queued by other
	// processes or left by a dead worker; 0 means DefaultExportPoll.
	Poll time.Duration
	// Lease is how long a RUNNING build is this worker's without a sign of
	// life (every chunk stored, and a heartbeat every Lease/3, renew it);
	// after that another worker takes the build over. 0 means
	// DefaultExportLease. It is judged by the store's clock (jobs).
	Lease time.Duration
	// ChunkBytes is the size of the pieces a pack is stored in; 0 means
	// DefaultExportChunk.
	ChunkBytes int
	// Hook, when set, is called at the stages of every build (tests use it
	// to stop a build at a chosen point).
	Hook func(ExportStage)
}

// ExportStage is a point of a build, reported to ExportWorkerOptions.Hook:
// "claimed" (the record is RUNNING), "chunk" (chunk Chunk is stored) and
// "built" (every chunk is stored, the record not yet SUCCEEDED).
type ExportStage struct {
	OrgID, ExportID string
	Attempt         int
	Stage           string
	Chunk           int
}

func (o *ExportWorkerOptions) ensureDefaults() {
	if o.Poll <= 0 {
		o.Poll = DefaultExportPoll
	}
	if o.Lease <= 0 {
		o.Lease = DefaultExportLease
	}
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = DefaultExportChunk
	}
}

// RunExports builds queued validation packs until ctx ends: at start (so
// PENDING packs and those whose worker died are resumed after a restart),
// whenever CreateExport queues one, and every Poll. It builds one pack at a
// time. When ctx ends during a build, the pack goes back to PENDING and
// RunExports returns once it has.
func (e *Engine) RunExports(ctx context.Context, opts ExportWorkerOptions) {
	opts.ensureDefaults()
	t := time.NewTicker(opts.Poll)
	defer t.Stop()
	for {
		if _, err := e.ProcessExports(ctx, opts); err != nil && ctx.Err() == nil {
			e.opts.Logger.Warn("export worker: listing queued packs failed", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-e.exports.c():
		}
	}
}

// ProcessExports builds, one after another, every validation pack that is
// ready now: PENDING ones, and RUNNING ones whose lease has passed by the
// store's clock (their worker died). It returns how many it finished
// (SUCCEEDED or FAILED).
func (e *Engine) ProcessExports(ctx context.Context, opts ExportWorkerOptions) (int, error) {
	opts.ensureDefaults()
	worker, err := e.newID()
	if err != nil {
		return 0, unavailable("id generation", err)
	}
	ready, err := e.store.DueJobs(ctx, kindExport, 0)
	if err != nil {
		return 0, unavailable("list exports", err)
	}
	done := 0
	for _, r := range ready {
		if ctx.Err() != nil {
			break
		}
		job, held, ok, err := e.claimExport(ctx, r.OrgID, r.ID, worker, opts.Lease)
		if err != nil {
			if ctx.Err() == nil {
				e.opts.Logger.Warn("export worker: claiming a pack failed", "org_id", r.OrgID, "export_id", r.ID, "error", err.Error())
			}
			continue
		}
		if !ok {
			continue
		}
		if job.Status != ExportRunning { // given up on
			done++
			continue
		}
		if e.runExport(ctx, job, held, opts) {
			done++
		}
	}
	return done, nil
}

// exportPolicy is how a build is leased.
func exportPolicy(lease time.Duration) jobs.Policy {
	return jobs.Policy{Lease: lease, MaxAttempts: MaxExportAttempts}
}

// claimExport claims the pack's job for worker (jobs.Claim: due, by the
// store's clock) and makes its record RUNNING with the job's attempts. A
// pack that reached MaxExportAttempts is FAILED instead (returned with that
// status). It returns the claimed job, the fence of the build's writes.
func (e *Engine) claimExport(ctx context.Context, orgID, exportID, worker string, lease time.Duration) (exportJob, jobs.Job, bool, error) {
	var job exportJob
	var held jobs.Job
	var final bool // the record was final already: nothing to build
	now := e.now()
	err := e.store.Update(ctx, orgID, func(tx store.Tx) error {
		h, err := jobs.Claim(ctx, tx, kindExport, exportID, worker, exportPolicy(lease))
		if err != nil {
			return err
		}
		held = h
		r, err := tx.ArtifactInTx(ctx, kindExport, exportID)
		if err != nil {
			return err
		}
		if job, err = decodeJob(r); err != nil {
			return err
		}
		final = false
		switch job.Status {
		case ExportSucceeded, ExportFailed: // already final: only the job was left
			final = true
			if h.State == jobs.Running {
				_, err = jobs.Finish(ctx, tx, h, nil)
			}
			return err
		case ExportRunning:
			if job.LastError == "" {
				job.LastError = "the build was interrupted (its worker stopped without finishing)"
			}
		}
		if h.State == jobs.Failed {
			return e.finishExport(ctx, tx, &job, now, fmt.Sprintf("gave up after %d attempts; the last: %s", h.Attempts, job.LastError))
		}
		job.Status, job.Attempts, job.StartedAt = ExportRunning, h.Attempts, now
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

func putJob(ctx context.Context, tx store.Tx, j exportJob) error {
	rec, err := j.record()
	if err != nil {
		return err
	}
	return tx.PutArtifact(ctx, rec)
}

// finishExport records the end of a build: FAILED with why (failure not
// ""), or SUCCEEDED, and its ledger entry export.completed.
func (e *Engine) finishExport(ctx context.Context, tx store.Tx, j *exportJob, now time.Time, failure string) error {
	j.CompletedAt = now
	if failure != "" {
		j.Status, j.LastError = ExportFailed, failure
	} else {
		j.Status, j.LastError = ExportSucceeded, ""
	}
	if err := putJob(ctx, tx, *j); err != nil {
		return err
	}
	return e.appendRecord(ctx, tx, ledger.KindExportCompleted, j.ExportID, j.view())
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
func (e *Engine) updateOwned(ctx context.Context, held jobs.Job, end func(tx store.Tx) error, fn func(tx store.Tx, j *exportJob) error) error {
	return lostLease(e.store.Update(ctx, held.OrgID, func(tx store.Tx) error {
		if err := end(tx); err != nil {
			return err
		}
		r, err := tx.ArtifactInTx(ctx, kindExport, held.ID)
		if err != nil {
			return err
		}
		j, err := decodeJob(r)
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
func (e *Engine) whileHeld(ctx context.Context, held jobs.Job, lease time.Duration, fn func(tx store.Tx) error) error {
	return lostLease(e.store.Update(ctx, held.OrgID, func(tx store.Tx) error {
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

// runExport builds a claimed pack and records how it ended; it reports
// whether the pack is finished (SUCCEEDED or FAILED).
func (e *Engine) runExport(ctx context.Context, job exportJob, held jobs.Job, opts ExportWorkerOptions) bool {
	log := e.opts.Logger.With("org_id", job.OrgID, "export_id", job.ExportID, "attempt", job.Attempts)
	hook := func(stage string, chunk int) {
		if opts.Hook != nil {
			opts.Hook(ExportStage{OrgID: job.OrgID, ExportID: job.ExportID, Attempt: job.Attempts, Stage: stage, Chunk: chunk})
		}
	}
	hook("claimed", 0)
	res, err := e.buildExport(ctx, job, held, opts, hook)
	// The outcome is recorded even when ctx ended: a stopping worker hands
	// its build back rather than leaving it to its lease.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var pe *permanentError
	switch {
	case err == nil:
		finish := func(tx store.Tx) error { _, err := jobs.Finish(rctx, tx, held, nil); return err }
		err = e.updateOwned(rctx, held, finish, func(tx store.Tx, j *exportJob) error {
			j.ManifestSHA256, j.BundleSHA256, j.BundleSignature = res.manifestSHA, res.bundleSHA, res.signature
			j.SizeBytes, j.Chunks, j.ContentType, j.Counts, j.LedgerSize = res.size, res.chunks, j.Format.MediaType(), &res.counts, res.ledgerSize
			return e.finishExport(rctx, tx, j, e.now(), "")
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
		err = e.updateOwned(rctx, held, release(rctx, held, why), func(tx store.Tx, j *exportJob) error {
			j.Status, j.LastError = ExportPending, why
			return nil
		})
		if err == nil {
			log.Info("validation pack build handed back: shutting down")
		}
		return false
	case errors.As(err, &pe) || job.Attempts >= MaxExportAttempts:
		msg := buildFailure(err)
		log.Warn("validation pack failed", "error", err.Error())
		fail := func(tx store.Tx) error { _, err := jobs.Fail(rctx, tx, held, msg); return err }
		err = e.updateOwned(rctx, held, fail, func(tx store.Tx, j *exportJob) error { return e.finishExport(rctx, tx, j, e.now(), msg) })
		if err == nil {
			return true
		}
	default:
		msg := buildFailure(err)
		log.Warn("validation pack build failed; it will be retried", "error", err.Error())
		err = e.updateOwned(rctx, held, release(rctx, held, msg), func(tx store.Tx, j *exportJob) error {
			j.Status, j.LastError = ExportPending, msg
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
	var ee *Error
	switch {
	case errors.As(err, &pe):
		return pe.msg
	case errors.As(err, &ee):
		return ee.Code + ": " + ee.Detail
	}
	return "the build failed reading the store; it is retried"
}

// built is what a finished build stored.
type built struct {
	manifestSHA, bundleSHA, signature string
	size                              int64
	chunks                            int
	counts                            export.Counts
	ledgerSize                        uint64
}

// packDecision is a dossier of the window, with its ledger entry once found.
type packDecision struct {
	s     dossier.Summary
	entry ledger.Entry
}

// buildExport builds the pack of a claimed job and stores its chunks: the
// ledger anchor first (a checkpoint signed now, or the unsigned head), then
// every entry up to it, the window's decisions found among them, and the
// grants of those decisions.
func (e *Engine) buildExport(ctx context.Context, job exportJob, held jobs.Job, opts ExportWorkerOptions, hook func(string, int)) (built, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopBeat := e.heartbeat(ctx, cancel, held, opts.Lease)
	defer stopBeat()
	org := job.OrgID

	anchor, err := e.exportAnchor(ctx, org)
	if err != nil {
		return built{}, err
	}
	window := map[string]*packDecision{}
	var tooMany bool
	err = e.store.DossierSummaries(ctx, org, job.Window.From, job.Window.To, func(s dossier.Summary) bool {
		if len(window) == MaxExportDecisions {
			tooMany = true
			return false
		}
		window[s.DossierID] = &packDecision{s: s}
		return true
	})
	if err != nil {
		return built{}, causeOr(ctx, unavailable("read decisions", err))
	}
	if tooMany {
		return built{}, &permanentError{fmt.Sprintf("EXPORT_TOO_LARGE: the window holds more than %d decisions; ask for a narrower window", MaxExportDecisions)}
	}

	w := &chunkWriter{ctx: ctx, e: e, job: job, held: held, size: opts.ChunkBytes, lease: opts.Lease, sum: sha256.New(), hook: hook}
	if key := e.ExportKey(org); key != nil {
		w.mac = hmac.New(sha256.New, key)
	}
	b, err := export.NewBuilder(w, export.Header{OrgID: org, ExportID: job.ExportID, Format: job.Format, Window: job.Window,
		IncludeEvents: job.IncludeEvents, GeneratedAt: e.now(), Ledger: anchor})
	if err != nil {
		return built{}, &permanentError{"the pack cannot be built: " + err.Error()}
	}
	var inPack []*packDecision
	for after := uint64(0); after < anchor.Size; {
		page, err := e.store.LedgerEntries(ctx, org, after, int(min(uint64(MaxLedgerPage), anchor.Size-after)))
		if err != nil {
			return built{}, causeOr(ctx, unavailable("read ledger", err))
		}
		if len(page) == 0 {
			return built{}, &permanentError{fmt.Sprintf("%s: ledger entry %d is missing", CodeLedgerBroken, after+1)}
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
		if err := b.AddDecision(export.Decision{LedgerSeq: d.entry.Seq, CreatedAt: d.entry.RecordedAt, DossierID: d.s.DossierID,
			DecisionID: d.s.DecisionID, Outcome: d.s.Outcome, Mode: d.s.Mode, WorkflowKey: d.s.WorkflowKey,
			DecisionType: d.s.DecisionType, DossierDigest: d.entry.PayloadDigest, EntryHash: d.entry.EntryHash}); err != nil {
			return built{}, buildError(ctx, err)
		}
	}
	clear(window)
	if job.IncludeEvents {
		grants, err := e.packGrants(ctx, org, byDossier)
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

// exportAnchor is the ledger anchor of a pack built now: a checkpoint
// signed over every durable entry when a ledger key is configured, else the
// durable head, unsigned.
func (e *Engine) exportAnchor(ctx context.Context, org string) (export.Ledger, error) {
	if e.opts.LedgerKey != nil {
		cp, err := e.Audit.SealLedger(ctx, org)
		if err != nil {
			var ee *Error
			if errors.As(err, &ee) && ee.Code == CodeLedgerBroken {
				return export.Ledger{}, &permanentError{ee.Code + ": " + ee.Detail}
			}
			return export.Ledger{}, causeOr(ctx, err)
		}
		return export.Ledger{Origin: cp.Origin, Size: cp.Size, RootHash: base64.StdEncoding.EncodeToString(cp.Root[:]),
			Signed: true, Checkpoint: string(cp.Note), VerifierKey: e.Audit.LedgerVerifierKey()}, nil
	}
	if err := e.store.Sync(ctx); err != nil {
		return export.Ledger{}, causeOr(ctx, unavailable("sync ledger", err))
	}
	head, err := e.store.LedgerHeadOf(ctx, org)
	if err != nil {
		return export.Ledger{}, causeOr(ctx, unavailable("read ledger", err))
	}
	return export.Ledger{Origin: e.Audit.LedgerOrigin(org), Size: head.Seq, UnsignedReason: CodeLedgerKeyNotConfigured}, nil
}

// packGrants returns the grants issued by the pack's decisions, oldest first.
func (e *Engine) packGrants(ctx context.Context, org string, byDossier map[string]*packDecision) ([]export.Grant, error) {
	var out []export.Grant
	ts := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(export.TimeFormat)
	}
	for _, st := range []claim.State{claim.StateIssued, claim.StateClaimed, claim.StateCommitted, claim.StateFailed, claim.StateIndeterminate} {
		err := e.store.GrantsInState(ctx, org, st, func(g claim.Grant) bool {
			d := byDossier[g.DossierID]
			if d == nil {
				return true
			}
			row := export.Grant{GrantID: g.GrantID, DecisionID: d.s.DecisionID, DossierID: g.DossierID, WorkflowKey: d.s.WorkflowKey,
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
			return nil, causeOr(ctx, unavailable("read grants", err))
		}
	}
	slices.SortFunc(out, func(a, b export.Grant) int {
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
	case errors.Is(err, export.ErrLedger):
		return &permanentError{CodeLedgerBroken + ": " + err.Error()}
	case errors.Is(err, export.ErrInput) || errors.Is(err, export.ErrOrder):
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
func (e *Engine) heartbeat(ctx context.Context, cancel context.CancelCauseFunc, held jobs.Job, lease time.Duration) (stop func()) {
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
			if err := e.whileHeld(ctx, held, lease, nil); errors.Is(err, errLostLease) {
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
	e      *Engine
	job    exportJob
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
	err := w.e.whileHeld(w.ctx, w.held, w.lease, func(tx store.Tx) error {
		return tx.PutArtifact(w.ctx, artifact.Record{OrgID: j.OrgID, Kind: kindExportChunk, ID: chunkID(j.ExportID, n),
			Ref: j.ExportID, CreatedAt: j.CreatedAt, Body: data})
	})
	if err != nil {
		if errors.Is(err, errLostLease) {
			return err
		}
		return causeOr(w.ctx, unavailable("store export", err))
	}
	w.chunks++
	w.hook("chunk", n)
	return nil
}
