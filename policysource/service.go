package policysource

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/outbound"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/jobs"
	"github.com/clearancehq/clearance/policies"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
)

// Publish modes: what a pull that passes does with the bundle.
const (
	// PublishDraft writes the bundle into the draft Source.DraftName.
	PublishDraft = "draft"
	// PublishStage publishes the version without activating it.
	PublishStage = "stage"
	// PublishActivate publishes the version and makes it the active one.
	PublishActivate = "activate"
)

// Defaults and bounds of a link.
const (
	DefaultRef       = "main"
	DefaultDraftName = "source"
	// MinEveryMinutes and MaxEveryMinutes bound a schedule (a week at most);
	// 0 means none.
	MinEveryMinutes = 5
	MaxEveryMinutes = 7 * 24 * 60
	// MaxRefLen bounds ref, in bytes.
	MaxRefLen = 255
)

// Defaults of Config.
const (
	DefaultFetchTimeout  = 45 * time.Second // a pull by HTTP answers within the server's 60 s write timeout
	DefaultMaxFetchBytes = 32 << 20         // the pack, as received
	DefaultMaxTreeBytes  = 128 << 20        // the pack's objects, inflated
	DefaultMaxFiles      = 1000
	DefaultMaxFileBytes  = 8 << 20
)

// JobKind is the kind of the scheduled pulls (jobs/): one job per org, its
// id the org's.
const JobKind = "policy.source.pull"

// The link is one record of the org.
const (
	recordKind = "policy.source"
	recordID   = "source"
)

// Config is the feature's own settings.
type Config struct {
	// Policies publishes what a pull passes; required.
	Policies *policies.Service
	// Client reaches http(s) repositories through the engine's SSRF guard;
	// nil means one of its own with AllowPrivate.
	Client *outbound.Client
	// AllowPrivate is the engine's Options.AllowPrivateDestinations, used
	// when Client is nil (a Client carries its own).
	AllowPrivate bool
	// LocalRoots are the directories under which a repository may be
	// linked by a local path or file:// URL; none means local repositories
	// are refused.
	LocalRoots []string
	// FetchTimeout bounds reading a repository; 0 means DefaultFetchTimeout.
	FetchTimeout time.Duration
	// MaxFetchBytes bounds what is received from an http(s) repository;
	// MaxTreeBytes what its objects inflate to; MaxFiles and MaxFileBytes
	// the JSON and YAML files read from the directory. 0 means the default.
	MaxFetchBytes int64
	MaxTreeBytes  int64
	MaxFiles      int
	MaxFileBytes  int64
}

func (c *Config) ensureDefaults() {
	if c.Client == nil {
		c.Client = outbound.New(outbound.Options{AllowPrivate: c.AllowPrivate})
	}
	c.AllowPrivate = c.Client.AllowPrivate()
	if c.FetchTimeout <= 0 {
		c.FetchTimeout = DefaultFetchTimeout
	}
	if c.MaxFetchBytes <= 0 {
		c.MaxFetchBytes = DefaultMaxFetchBytes
	}
	if c.MaxTreeBytes <= 0 {
		c.MaxTreeBytes = DefaultMaxTreeBytes
	}
	if c.MaxFiles <= 0 {
		c.MaxFiles = DefaultMaxFiles
	}
	if c.MaxFileBytes <= 0 {
		c.MaxFileBytes = DefaultMaxFileBytes
	}
}

// Service links orgs to repositories and pulls their bundles. Create it
// with New.
type Service struct {
	d   core.Deps
	cfg Config
}

// New returns the policy-source feature over the kernel d.
func New(d core.Deps, cfg Config) *Service {
	cfg.ensureDefaults()
	cfg.LocalRoots = append([]string(nil), cfg.LocalRoots...)
	return &Service{d: d, cfg: cfg}
}

// Source is an org's link to a repository.
type Source struct {
	OrgID        string `json:"org_id"`
	Repository   string `json:"repository"`
	Ref          string `json:"ref"`
	Directory    string `json:"directory"`
	Publish      string `json:"publish"`
	DraftName    string `json:"draft_name,omitempty"`
	EveryMinutes int    `json:"every_minutes"`
	// NextPullAt is when the scheduled pull is due; absent without a
	// schedule.
	NextPullAt *time.Time `json:"next_pull_at,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	// LastPull is how the last pull of this repository, ref and directory
	// ended.
	LastPull *LastPull `json:"last_pull,omitempty"`
}

// LastPull is the end of a pull as the link keeps it.
type LastPull struct {
	At      time.Time `json:"at"`
	Commit  string    `json:"commit,omitempty"`
	Status  string    `json:"status"`
	Reason  string    `json:"reason,omitempty"`
	Version string    `json:"version,omitempty"`
	Message string    `json:"message,omitempty"`
}

// record is the link as stored.
type record struct {
	Repository   string      `json:"repository"`
	Ref          string      `json:"ref"`
	Directory    string      `json:"directory"`
	Publish      string      `json:"publish"`
	DraftName    string      `json:"draft_name,omitempty"`
	EveryMinutes int         `json:"every_minutes"`
	NextPullAt   time.Time   `json:"next_pull_at,omitzero"`
	CreatedAt    time.Time   `json:"created_at"`
	UpdatedAt    time.Time   `json:"updated_at"`
	Deleted      bool        `json:"deleted,omitempty"`
	LastPull     *pullRecord `json:"last_pull,omitempty"`
}

type pullRecord struct {
	At      time.Time `json:"at"`
	Commit  string    `json:"commit,omitempty"`
	Status  string    `json:"status"`
	Reason  string    `json:"reason,omitempty"`
	Version string    `json:"version,omitempty"`
	Message string    `json:"message,omitempty"`
}

func (r record) view(orgID string) Source {
	s := Source{OrgID: orgID, Repository: r.Repository, Ref: r.Ref, Directory: r.Directory, Publish: r.Publish,
		DraftName: r.DraftName, EveryMinutes: r.EveryMinutes, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if r.EveryMinutes > 0 && !r.NextPullAt.IsZero() {
		t := r.NextPullAt
		s.NextPullAt = &t
	}
	if p := r.LastPull; p != nil {
		s.LastPull = &LastPull{At: p.At, Commit: p.Commit, Status: p.Status, Reason: p.Reason, Version: p.Version, Message: p.Message}
	}
	return s
}

// body is the request of Put; pointers tell an absent member.
type body struct {
	Repository   *string `json:"repository"`
	Ref          *string `json:"ref"`
	Directory    *string `json:"directory"`
	Publish      *string `json:"publish"`
	DraftName    *string `json:"draft_name"`
	EveryMinutes *int    `json:"every_minutes"`
}

// Put links the org to a repository, replacing its link: raw is
// {"repository", "ref", "directory", "publish", "draft_name",
// "every_minutes"} (see the package documentation). A body that is
// malformed or names a repository that may not be read is refused (400)
// and changes nothing. A schedule starts, moves or stops with the link;
// last_pull is kept while the repository, ref and directory stay the same.
func (s *Service) Put(ctx context.Context, orgID string, raw []byte) (Source, error) {
	var b body
	if err := strictjson.Decode(raw, &b, s.d.JSON); err != nil {
		return Source{}, core.TranslateInput(err)
	}
	want, err := s.check(b)
	if err != nil {
		return Source{}, err
	}
	var out record
	err = s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		now := s.d.Now()
		var cur record
		switch err := core.ReadRecord(ctx, tx, recordKind, recordID, &cur); {
		case core.IsNotFound(err):
			cur = record{Deleted: true}
		case err != nil:
			return err
		}
		next := want
		next.CreatedAt, next.UpdatedAt = now, now
		if !cur.Deleted {
			next.CreatedAt = cur.CreatedAt
			if cur.Repository == next.Repository && cur.Ref == next.Ref && cur.Directory == next.Directory {
				next.LastPull = cur.LastPull
			}
		}
		keep := !cur.Deleted && cur.EveryMinutes == next.EveryMinutes
		due, err := schedule(ctx, tx, next.EveryMinutes, keep)
		if err != nil {
			return err
		}
		if keep && due.IsZero() {
			due = cur.NextPullAt
		}
		next.NextPullAt = due
		out = next
		return core.WriteRecord(ctx, tx, recordKind, recordID, next.CreatedAt, next)
	})
	if err != nil {
		return Source{}, core.Translate("link policy source", err)
	}
	return out.view(orgID), nil
}

// Get returns the org's link.
func (s *Service) Get(ctx context.Context, orgID string) (Source, error) {
	r, err := s.read(ctx, orgID)
	if err != nil {
		return Source{}, err
	}
	return r.view(orgID), nil
}

// Delete unlinks the org and stops its schedule; versions and drafts
// already published stay.
func (s *Service) Delete(ctx context.Context, orgID string) error {
	if _, err := s.read(ctx, orgID); err != nil {
		return err
	}
	err := s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		var cur record
		err := core.ReadRecord(ctx, tx, recordKind, recordID, &cur)
		if core.IsNotFound(err) || err == nil && cur.Deleted {
			return notFound()
		}
		if err != nil {
			return err
		}
		if _, err := schedule(ctx, tx, 0, false); err != nil {
			return err
		}
		cur.Deleted, cur.UpdatedAt, cur.NextPullAt = true, s.d.Now(), time.Time{}
		return core.WriteRecord(ctx, tx, recordKind, recordID, cur.CreatedAt, cur)
	})
	return core.Translate("unlink policy source", err)
}

// read returns the org's live link as committed.
func (s *Service) read(ctx context.Context, orgID string) (record, error) {
	var r record
	err := core.ReadCommitted(ctx, s.d.Store, orgID, recordKind, recordID, &r)
	if core.IsNotFound(err) || err == nil && r.Deleted {
		return record{}, notFound()
	}
	if err != nil {
		return record{}, core.Unavailable("read policy source", err)
	}
	return r, nil
}

func notFound() error {
	return core.New(core.ErrNotFound, CodeSourceNotFound, "the org has no policy source")
}

// schedule makes the org's pull job match every (minutes; 0: none), in
// the org's transaction tx, and returns when it is due next (zero when
// unknown or none). A job that runs now is left alone: its worker reads
// the link when it ends and schedules from it. With keep, a queued job
// keeps its due time (the interval did not change).
//
// The job is edited in place (as escalation does): a queued job has no
// owner to fence, and the org's transactions are serialized.
func schedule(ctx context.Context, tx store.Tx, every int, keep bool) (time.Time, error) {
	orgID := tx.OrgID()
	j, err := tx.JobInTx(ctx, JobKind, orgID)
	if err != nil && !errors.Is(err, jobs.ErrNotFound) {
		return time.Time{}, err
	}
	exists := err == nil
	now := tx.Now().UTC().Truncate(time.Microsecond)
	if every == 0 {
		if !exists || j.State != jobs.Queued {
			return time.Time{}, nil
		}
		j.State, j.Due, j.UpdatedAt = jobs.Done, time.Time{}, now
		return time.Time{}, tx.PutJob(ctx, j)
	}
	due := now.Add(time.Duration(every) * time.Minute)
	switch {
	case !exists:
		j, _, err := jobs.EnqueueAt(ctx, tx, JobKind, orgID, nil, due)
		return j.Due, err
	case j.State == jobs.Running:
		return time.Time{}, nil
	case j.State == jobs.Queued && keep:
		return j.Due, nil
	}
	// Queued (moved to the new interval) or finished (queued anew).
	j.State, j.Due, j.UpdatedAt, j.Attempts, j.Result, j.Failure = jobs.Queued, due, now, 0, nil, ""
	return due, tx.PutJob(ctx, j)
}

// check validates a body and returns the link it asks for (without times).
func (s *Service) check(b body) (record, error) {
	var p problems
	r := record{Ref: DefaultRef, Publish: PublishDraft}
	switch {
	case b.Repository == nil:
		p.missing("repository")
	case *b.Repository == "" || len(*b.Repository) > policy.MaxSourceLen || hasControl(*b.Repository):
		p.add("repository", "must be 1 to %d bytes without control, format or separator characters", policy.MaxSourceLen)
	default:
		r.Repository = *b.Repository
	}
	if b.Ref != nil {
		if err := checkRef(*b.Ref); err != nil {
			p.add("ref", "%s", err)
		} else {
			r.Ref = *b.Ref
		}
	}
	if b.Directory != nil {
		dir, err := cleanDirectory(*b.Directory)
		if err != nil {
			p.add("directory", "%s", err)
		}
		r.Directory = dir
	}
	if b.Publish != nil {
		switch *b.Publish {
		case PublishDraft, PublishStage, PublishActivate:
			r.Publish = *b.Publish
		default:
			p.add("publish", "must be one of %s, %s, %s", PublishDraft, PublishStage, PublishActivate)
		}
	}
	switch {
	case b.DraftName != nil && r.Publish != PublishDraft:
		p.add("draft_name", "is only for publish %s", PublishDraft)
	case b.DraftName != nil && !policy.ValidVersion(*b.DraftName):
		p.add("draft_name", "must be 1 to %d characters of [A-Za-z0-9._-]", policy.MaxVersionLen)
	case b.DraftName != nil:
		r.DraftName = *b.DraftName
	case r.Publish == PublishDraft:
		r.DraftName = DefaultDraftName
	}
	if b.EveryMinutes != nil {
		if n := *b.EveryMinutes; n != 0 && (n < MinEveryMinutes || n > MaxEveryMinutes) {
			p.add("every_minutes", "must be 0 (no schedule) or %d to %d", MinEveryMinutes, MaxEveryMinutes)
		} else {
			r.EveryMinutes = n
		}
	}
	if err := p.err(); err != nil {
		return record{}, err
	}
	if _, err := s.locate(r.Repository); err != nil {
		return record{}, err
	}
	return r, nil
}

// checkRef accepts a branch or tag name (or a full refs/… name, or HEAD)
// and a full commit id.
func checkRef(ref string) error {
	switch {
	case ref == "" || len(ref) > MaxRefLen:
		return fmt.Errorf("must be 1 to %d bytes", MaxRefLen)
	case hasControl(ref) || strings.ContainsFunc(ref, unicode.IsSpace):
		return errors.New("must not contain spaces or control, format or separator characters")
	case isCommitID(ref) || ref == "HEAD":
		return nil
	}
	name := plumbing.ReferenceName(ref)
	if !strings.HasPrefix(ref, "refs/") {
		name = plumbing.NewBranchReferenceName(ref)
	}
	if name.Validate() != nil || !name.IsSafe() {
		return errors.New("must be a branch or tag name, or a full commit id (40 lowercase hex digits)")
	}
	return nil
}

// isCommitID reports whether s is a full SHA-1 object name.
func isCommitID(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// cleanDirectory checks a directory of the repository: "" or "." for its
// root, else a relative slash path without empty, "." or ".." elements; a
// trailing slash is dropped.
func cleanDirectory(dir string) (string, error) {
	d := strings.TrimSuffix(dir, "/")
	switch {
	case d == "" || d == ".":
		return "", nil
	case len(d) > policy.MaxSourceLen || hasControl(d) || strings.Contains(d, `\`):
		return "", fmt.Errorf("must be at most %d bytes without backslashes or control, format or separator characters", policy.MaxSourceLen)
	case strings.HasPrefix(d, "/"):
		return "", errors.New("must be relative to the repository's root (no leading /)")
	}
	for _, el := range strings.Split(d, "/") {
		if el == "" || el == "." || el == ".." {
			return "", errors.New("must not contain empty, . or .. elements")
		}
	}
	return d, nil
}

// hasControl reports whether s is not UTF-8 or holds a character that
// does not show as itself: a control, format (zero-width, bidi override)
// or line/paragraph separator character.
func hasControl(s string) bool {
	return !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool {
		return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
	})
}

// problems collects the field errors of a body.
type problems []core.FieldError

func (p *problems) add(field, format string, args ...any) {
	*p = append(*p, core.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (p *problems) missing(field string) { p.add(field, "is required") }

// err is MISSING_FIELD when a required member is all that is wrong, else
// INVALID_POLICY_SOURCE, with every field error.
func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	code := core.CodeMissingField
	for _, f := range p {
		if f.Message != "is required" {
			code = CodeInvalidSource
		}
	}
	msgs := make([]string, len(p))
	for i, f := range p {
		msgs[i] = f.Field + " " + f.Message
	}
	e := core.New(core.ErrInvalidRequest, code, "the policy source is invalid: %s", strings.Join(msgs, "; "))
	e.Fields = append([]core.FieldError(nil), p...)
	return e
}
