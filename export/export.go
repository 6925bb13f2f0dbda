package export

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/idempotency"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/jobs"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/pack"
	"github.com/clearancehq/clearance/store"
)

// Service queues, lists and serves an org's validation packs and builds
// them in the background (Run). Create it with New.
type Service struct {
	d      core.Deps
	cfg    Config
	signal signal // wakes Run when a pack is queued
}

// Ledger is what a build needs of the org's ledger (the audit feature):
// a checkpoint signed over every durable entry to anchor the pack in.
type Ledger interface {
	SealLedger(ctx context.Context, orgID string) (ledger.Checkpoint, error)
	LedgerVerifierKey() string
	LedgerOrigin(orgID string) string
}

// Config is what the export feature needs beside the kernel.
type Config struct {
	Ledger Ledger
	// Secret keys the HMAC of packs: each org's packs are signed with
	// pack.OrgKey(Secret, orgID); nil means packs carry no
	// bundle_signature_hmac_sha256.
	Secret []byte
}

// New returns the export feature over the kernel d.
func New(d core.Deps, cfg Config) *Service { return &Service{d: d, cfg: cfg} }

// Status is a validation pack's build state.
type Status string

// Build states: PENDING → RUNNING → SUCCEEDED, or FAILED with last_error.
// A RUNNING build that stops (shutdown, crash, lost lease) goes back to
// PENDING, or is taken over once its lease has passed.
const (
	Pending   Status = "PENDING"
	Running   Status = "RUNNING"
	Succeeded Status = "SUCCEEDED"
	Failed    Status = "FAILED"
)

// Limits and defaults of validation packs.
const (
	// MaxDecisions bounds one pack; a window holding more fails its
	// build with a last_error asking for a narrower window.
	MaxDecisions = 1_000_000
	// MaxAttempts is how many builds of one pack are started before it
	// is FAILED for good.
	MaxAttempts = 5
	// DefaultList and MaxList bound GET …/audit-exports.
	DefaultList = 20
	MaxList     = 100
	// DefaultPoll, DefaultLease and DefaultChunk are the
	// WorkerOptions defaults.
	DefaultPoll  = 2 * time.Second
	DefaultLease = time.Minute
	DefaultChunk = 4 << 20
)

// epoch is the default start of a pack's window: every decision.
var epoch = time.Unix(0, 0).UTC()

// Kinds of validation packs: the record users see (an artifact whose Ref is
// its status) and the job that builds it share kindExport and the export
// id; the pack's bytes are artifacts in chunks (ID "<export id>/<n>", Ref:
// the export id).
const (
	kindExport      = "export"
	kindExportChunk = "export_chunk"
)

// JobKind is the jobs kind of a validation pack's build.
const JobKind = kindExport

// Export is a validation pack's record as the API shows it. Hashes, size,
// counts and completed_at are set once it SUCCEEDED.
type Export struct {
	ExportID      string      `json:"export_id"`
	OrgID         string      `json:"org_id"`
	Format        pack.Format `json:"format"`
	Window        pack.Window `json:"window"`
	IncludeEvents bool        `json:"include_events"`
	Status        Status      `json:"status"`
	// Attempts is how many builds started; LastError why the last one failed.
	Attempts    int       `json:"attempts"`
	LastError   string    `json:"last_error,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	StartedAt   time.Time `json:"started_at,omitzero"`
	CompletedAt time.Time `json:"completed_at,omitzero"`
	// ManifestSHA256 and BundleSHA256 are "sha256:<hex>" of the manifest's
	// bytes and of the download; BundleSignature is the lowercase hex of
	// HMAC-SHA256 over the download under the org's export key.
	ManifestSHA256  string       `json:"manifest_sha256,omitempty"`
	BundleSHA256    string       `json:"bundle_sha256,omitempty"`
	BundleSignature string       `json:"bundle_signature_hmac_sha256,omitempty"`
	SizeBytes       int64        `json:"size_bytes,omitempty"`
	ContentType     string       `json:"content_type,omitempty"`
	Counts          *pack.Counts `json:"counts,omitempty"`
	// LedgerSize is the tree size of the checkpoint the pack is anchored in.
	LedgerSize  uint64 `json:"ledger_size,omitempty"`
	DownloadURL string `json:"download_url,omitempty"`
}

// stored is the stored record: the Export and how many chunks hold its
// pack. Its build's queue and lease are a jobs.Job (kind kindExport, same
// id), changed in the same transactions as the record. Records written
// before jobs also carry "worker" and "lease_expires_at", which are ignored.
type stored struct {
	Export
	Chunks int `json:"chunks,omitempty"`
}

// view is the record as shown.
func (j stored) view() Export {
	x := j.Export
	x.DownloadURL = ""
	if x.Status == Succeeded {
		x.DownloadURL = "/v1/orgs/" + x.OrgID + "/audit-exports/" + x.ExportID + "/download"
	}
	return x
}

func (j stored) record() (artifact.Record, error) {
	body, err := json.Marshal(j)
	if err != nil {
		return artifact.Record{}, err
	}
	return artifact.Record{OrgID: j.OrgID, Kind: kindExport, ID: j.ExportID, Ref: string(j.Status), CreatedAt: j.CreatedAt, Body: body}, nil
}

func decodeStored(r artifact.Record) (stored, error) {
	var j stored
	if err := json.Unmarshal(r.Body, &j); err != nil {
		return j, fmt.Errorf("export record %s: %w", r.ID, err)
	}
	return j, nil
}

// Request queues a validation pack.
type Request struct {
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

// idempotencyScope scopes Idempotency-Keys of pack requests.
const idempotencyScope = "audit-export"

// Create queues a validation pack: the record (PENDING) and its
// ledger entry (export.requested) are written in one atomic write, and the
// worker (Run) is woken. With an Idempotency-Key already used for the
// same request, it returns that pack as it now stands and created false.
func (s *Service) Create(ctx context.Context, req Request) (Export, bool, error) {
	if err := (core.Caller{OrgID: req.OrgID, IdempotencyKey: req.IdempotencyKey}).Validate(); err != nil {
		return Export{}, false, err
	}
	format, err := pack.ParseFormat(req.Format)
	if err != nil {
		return Export{}, false, core.Invalid(CodeInvalidFormat, "format", "format must be json, csv or pdf")
	}
	now := s.d.Now()
	window, err := parseWindow(req.From, req.To, now)
	if err != nil {
		return Export{}, false, err
	}
	requestDigest, err := canon.DigestValue(map[string]any{"format": req.Format, "from": req.From, "to": req.To, "include_events": req.IncludeEvents})
	if err != nil {
		return Export{}, false, core.Unavailable("digest request", err)
	}
	id, err := s.d.IDs.New()
	if err != nil {
		return Export{}, false, core.Unavailable("id generation", err)
	}
	job := stored{Export: Export{ExportID: id, OrgID: req.OrgID, Format: format, Window: window,
		IncludeEvents: req.IncludeEvents, Status: Pending, CreatedAt: now}}
	created := true
	err = s.d.Store.Update(ctx, req.OrgID, func(tx store.Tx) error {
		created = true
		prevID, replayed, err := replayID(ctx, tx, req.IdempotencyKey, requestDigest)
		if err != nil {
			return err
		}
		if replayed {
			r, err := tx.ArtifactInTx(ctx, kindExport, prevID)
			if err != nil {
				return err
			}
			job, err = decodeStored(r)
			created = false
			return err
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
		if err := core.AppendRecord(ctx, tx, ledger.KindExportRequested, id, job.view(), now); err != nil {
			return err
		}
		return idempotency.Remember(ctx, tx, idempotencyScope, req.IdempotencyKey, requestDigest, id, now)
	})
	if err != nil {
		return Export{}, false, core.Translate("queue export", err)
	}
	if created {
		s.signal.wake()
	}
	return job.view(), created, nil
}

// replayID is the export id an Idempotency-Key already answered with
// (idempotency.Replay). Records written before the rule was shared hold the
// bare id rather than its JSON string; they are read as such.
func replayID(ctx context.Context, tx store.Tx, key, requestDigest string) (string, bool, error) {
	var id string
	replayed, err := idempotency.Replay(ctx, tx, idempotencyScope, key, requestDigest, &id)
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		prev, perr := tx.Idempotency(ctx, idempotencyScope, key)
		if perr != nil {
			return "", false, perr
		}
		return string(prev.Response), true, nil
	}
	return id, replayed, err
}

// parseWindow parses a request's window; bounds are kept to the
// microsecond, the precision every backend stores decision times at, so
// that the store's window and the ledger's times select the same decisions.
func parseWindow(from, to string, now time.Time) (pack.Window, error) {
	parse := func(field, s string, def time.Time) (time.Time, error) {
		if s == "" {
			return def, nil
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return t, core.Invalid(CodeInvalidWindow, field, "%s must be an RFC 3339 timestamp", field)
		}
		if y := t.UTC().Year(); y < 1970 || y > 9999 {
			return t, core.Invalid(CodeInvalidWindow, field, "%s must lie in the years 1970 to 9999", field)
		}
		return t, nil
	}
	f, err := parse("from", from, epoch)
	if err != nil {
		return pack.Window{}, err
	}
	t, err := parse("to", to, now)
	if err != nil {
		return pack.Window{}, err
	}
	w := pack.Window{From: f.UTC().Truncate(time.Microsecond), To: t.UTC().Truncate(time.Microsecond)}
	if !w.From.Before(w.To) {
		return pack.Window{}, core.Invalid(CodeInvalidWindow, "from", "from must be before to")
	}
	return w, nil
}

func notFound() error {
	return core.New(core.ErrNotFound, CodeNotFound, "validation pack not found")
}

// Export returns the org's validation pack record; another org's is
// EXPORT_NOT_FOUND.
func (s *Service) Get(ctx context.Context, orgID, exportID string) (Export, error) {
	j, err := s.load(ctx, orgID, exportID)
	if err != nil {
		return Export{}, err
	}
	return j.view(), nil
}

func (s *Service) load(ctx context.Context, orgID, exportID string) (stored, error) {
	if !core.ValidID(exportID) {
		return stored{}, notFound()
	}
	r, err := s.d.Store.Artifact(ctx, orgID, kindExport, exportID)
	if core.IsNotFound(err) {
		return stored{}, notFound()
	}
	if err != nil {
		return stored{}, core.Unavailable("read export", err)
	}
	j, err := decodeStored(r)
	if err != nil {
		return stored{}, core.Unavailable("read export", err)
	}
	return j, nil
}

// Exports lists the org's most recent validation packs, newest first, at
// most limit (DefaultList when 0, at most MaxList).
func (s *Service) List(ctx context.Context, orgID string, limit int) ([]Export, error) {
	if limit == 0 {
		limit = DefaultList
	}
	if limit < 1 || limit > MaxList {
		return nil, core.Invalid(core.CodeInvalidRequest, "limit", "limit must be 1 to %d", MaxList)
	}
	var out []Export
	for _, st := range []Status{Pending, Running, Succeeded, Failed} {
		recs, err := s.d.Store.ArtifactsByRef(ctx, orgID, kindExport, string(st), 0)
		if err != nil {
			return nil, core.Unavailable("list exports", err)
		}
		for _, r := range recs {
			j, err := decodeStored(r)
			if err != nil {
				return nil, core.Unavailable("list exports", err)
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

// Key is the org's export key (pack.OrgKey of the engine's
// ExportSecret), with which an operator verifies bundle_signature_hmac_sha256;
// nil when no export secret is configured.
func (s *Service) Key(orgID string) []byte {
	if len(s.cfg.Secret) == 0 {
		return nil
	}
	return pack.OrgKey(s.cfg.Secret, orgID)
}

// Open returns a SUCCEEDED pack's record and a reader of its bytes
// (streamed from the store, chunk by chunk). A pack still PENDING or
// RUNNING is 409 EXPORT_NOT_READY, a FAILED one 409 EXPORT_FAILED.
func (s *Service) Open(ctx context.Context, orgID, exportID string) (Export, io.Reader, error) {
	j, err := s.load(ctx, orgID, exportID)
	if err != nil {
		return Export{}, nil, err
	}
	switch j.Status {
	case Succeeded:
	case Failed:
		return Export{}, nil, core.New(core.ErrConflict, CodeFailed, "the validation pack failed to build: %s", j.LastError)
	default:
		return Export{}, nil, core.New(core.ErrConflict, CodeNotReady, "the validation pack is %s; download it once it is SUCCEEDED", j.Status)
	}
	return j.view(), &reader{ctx: ctx, s: s, job: j, sum: sha256.New()}, nil
}

// reader streams a pack's chunks and checks, before the last one,
// that they are the bytes whose hash the record holds.
type reader struct {
	ctx  context.Context
	s    *Service
	job  stored
	next int
	buf  []byte
	n    int64
	sum  hash.Hash
	err  error
}

func (r *reader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.next == r.job.Chunks {
			r.err = io.EOF
			continue
		}
		rec, err := r.s.d.Store.Artifact(r.ctx, r.job.OrgID, kindExportChunk, chunkID(r.job.ExportID, r.next))
		if err != nil {
			r.err = core.Unavailable("read export", err)
			continue
		}
		r.next++
		r.n += int64(len(rec.Body))
		r.sum.Write(rec.Body)
		// The last chunk is held back until the whole pack proves to be the
		// recorded one: a changed pack is cut short, never delivered whole.
		if r.next == r.job.Chunks {
			if got := "sha256:" + hex.EncodeToString(r.sum.Sum(nil)); got != r.job.BundleSHA256 || r.n != r.job.SizeBytes {
				r.err = core.Unavailable("read export", fmt.Errorf("the stored pack %s is %s (%d bytes), its record says %s (%d bytes)",
					r.job.ExportID, got, r.n, r.job.BundleSHA256, r.job.SizeBytes))
				r.s.d.Logger.Error("validation pack bytes differ from their record", "org_id", r.job.OrgID, "export_id", r.job.ExportID)
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
