package policysource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"time"
	"unicode/utf8"

	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/policies"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/policy/policyfile"
	"github.com/clearancehq/clearance/store"
)

// Statuses of a pull.
const (
	// StatusPublished: the commit's bundle passed and was published (or
	// written into the draft).
	StatusPublished = "published"
	// StatusUnchanged: the commit's bundle passed and is already there
	// (the same version with the same content, or the draft holds it).
	StatusUnchanged = "unchanged"
	// StatusFailed: nothing was published; Reason and Message say why.
	StatusFailed = "failed"
)

// Bounds of what a pull reports.
const (
	maxFailures = 50   // test failures listed
	maxDiff     = 4096 // bytes of one failure's diff
	maxMessage  = 2000 // bytes of a message
	maxProblems = 100  // compile problems listed
)

// PullResult is what a pull did.
type PullResult struct {
	Status string `json:"status"`
	// Reason is a failure's stable word (Reason* constants).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Commit is the full id of the commit read, once the ref resolved.
	Commit string `json:"commit,omitempty"`
	// Version is the bundle's version (the commit id) and Digest its
	// digest, once it compiled.
	Version string `json:"version,omitempty"`
	Digest  string `json:"bundle_digest,omitempty"`
	Publish string `json:"publish"`
	// Draft and DraftRevision name the draft written (publish draft).
	Draft         string    `json:"draft,omitempty"`
	DraftRevision int64     `json:"draft_revision,omitempty"`
	Tests         Tests     `json:"tests"`
	Problems      []Problem `json:"problems,omitempty"`
	PulledAt      time.Time `json:"pulled_at"`
}

// Tests counts the test cases of the directory's tests/ and lists the
// failures (at most 50, each diff cut at 4 KiB).
type Tests struct {
	Passed   int           `json:"passed"`
	Failed   int           `json:"failed"`
	Failures []TestFailure `json:"failures"`
}

// TestFailure is one failed case, or a test file that did not parse (Case
// empty). File is its path in the repository.
type TestFailure struct {
	File string `json:"file"`
	Case string `json:"case,omitempty"`
	Diff string `json:"diff"`
}

// Problem is one reason the bundle does not compile. File is the bundle's
// path in the repository.
type Problem struct {
	File    string `json:"file"`
	RuleID  string `json:"rule_id,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// Pull reads the org's link now: the commit its ref names, the bundle of
// its directory, compiled with the commit as its version and the link as
// its source, and the tests of its tests/ run against it. Only a bundle
// that compiles and passes every test is published, as the link says
// (draft, stage or activate). A repository that cannot be read, a bundle
// that does not compile, a failing test or a refused publish is a result
// with status failed, not an error; errors are the store's (and
// SOURCE_NOT_FOUND). Every pull is kept as the link's last_pull.
func (s *Service) Pull(ctx context.Context, orgID string) (PullResult, error) {
	r, err := s.read(ctx, orgID)
	if err != nil {
		return PullResult{}, err
	}
	return s.pull(ctx, orgID, r)
}

func (s *Service) pull(ctx context.Context, orgID string, r record) (PullResult, error) {
	res := PullResult{Publish: r.Publish, Tests: Tests{Failures: []TestFailure{}}}
	if r.Publish == PublishDraft {
		res.Draft = r.DraftName
	}
	fctx, cancel := context.WithTimeout(ctx, s.cfg.FetchTimeout)
	snap, f := s.snapshotOf(fctx, r)
	cancel()
	if err := ctx.Err(); err != nil {
		return PullResult{}, err // the caller left: nothing to report to
	}
	res.Commit = snap.commit
	if f == nil {
		var err error
		if f, err = s.compileTestPublish(ctx, orgID, r, snap, &res); err != nil {
			return PullResult{}, err
		}
	}
	if f != nil {
		res.Status, res.Reason, res.Message = StatusFailed, f.reason, clip(f.message, maxMessage)
		res.Problems = f.problems
	}
	res.PulledAt = s.d.Now()
	if err := s.remember(ctx, orgID, r, res); err != nil {
		return PullResult{}, core.Translate("record the pull", err)
	}
	return res, nil
}

// compileTestPublish compiles the snapshot's bundle under the commit's
// version, runs the tests and publishes. It fills res; a failure is why
// nothing was published, an error the store's.
func (s *Service) compileTestPublish(ctx context.Context, orgID string, r record, snap snapshot, res *PullResult) (*failure, error) {
	name := path.Join(r.Directory, snap.bundle)
	raw, err := policyfile.BundleJSON(name, snap.files[snap.bundle].Data)
	if err != nil {
		return invalidBundle(name, []Problem{{File: name, Message: err.Error()}}), nil
	}
	var b policy.Bundle
	opts := s.d.JSON
	opts.RejectUnknown = true
	if err := strictjson.Decode(raw, &b, opts); err != nil {
		p := Problem{File: name, Message: err.Error()}
		var se *strictjson.Error
		if errors.As(err, &se) {
			p.Field, p.Message = se.Field, se.Code+": "+se.Detail
		}
		return invalidBundle(name, []Problem{p}), nil
	}
	// The commit is the version, and the link the provenance: the bundle
	// the tests pass is the one published, digest for digest.
	b.Version = snap.commit
	b.Source = &policy.Provenance{Repository: r.Repository, Commit: snap.commit, Path: r.Directory}
	body, err := canon.Marshal(b)
	if err != nil {
		return invalidBundle(name, []Problem{{File: name, Message: err.Error()}}), nil
	}
	c, err := policy.Load(body)
	if err != nil {
		var ve *policy.ValidationError
		if !errors.As(err, &ve) {
			return invalidBundle(name, []Problem{{File: name, Message: err.Error()}}), nil
		}
		ps := make([]Problem, 0, min(len(ve.Problems), maxProblems))
		for _, p := range ve.Problems[:min(len(ve.Problems), maxProblems)] {
			ps = append(ps, Problem{File: name, RuleID: p.RuleID, Field: p.Field, Message: p.Message})
		}
		return invalidBundle(name, ps), nil
	}
	res.Version, res.Digest = c.Bundle().Version, c.Digest()
	if f := s.test(r, snap, c, res); f != nil {
		return f, nil
	}
	return s.publish(ctx, orgID, r, body, res)
}

func invalidBundle(name string, ps []Problem) *failure {
	msg := fmt.Sprintf("%s does not compile", name)
	if len(ps) == 1 {
		msg += ": " + ps[0].Message
	} else {
		msg += fmt.Sprintf(" (%d problems)", len(ps))
	}
	return &failure{reason: ReasonBundleInvalid, message: msg, problems: ps}
}

// test runs the test files of the directory's tests/ against c; a
// directory without tests/ has none to fail.
func (s *Service) test(r record, snap snapshot, c *policy.Compiled, res *PullResult) *failure {
	if fi, err := fs.Stat(snap.files, testsDir); err != nil || !fi.IsDir() {
		return nil
	}
	rep, err := policyfile.RunDir(snap.files, testsDir, c)
	if err != nil {
		return unreadable("the tests cannot be listed: %v", err)
	}
	res.Tests.Passed, res.Tests.Failed = rep.Passed(), rep.Failed()
	for _, x := range rep.Results {
		if !x.Passed && len(res.Tests.Failures) < maxFailures {
			res.Tests.Failures = append(res.Tests.Failures, TestFailure{File: path.Join(r.Directory, x.File), Case: x.Case, Diff: clip(x.Diff, maxDiff)})
		}
	}
	if rep.Failed() == 0 {
		return nil
	}
	return &failure{reason: ReasonTestsFailed, message: rep.String()}
}

// publish hands the bundle to the policies feature as the link says.
func (s *Service) publish(ctx context.Context, orgID string, r record, body []byte, res *PullResult) (*failure, error) {
	switch r.Publish {
	case PublishDraft:
		cur, err := s.cfg.Policies.Draft(ctx, orgID, r.DraftName)
		switch {
		case err == nil && cur.Bundle != nil:
			if same, err := canon.Marshal(*cur.Bundle); err == nil && bytes.Equal(same, body) {
				res.Status, res.DraftRevision = StatusUnchanged, cur.Revision
				return nil, nil
			}
		case err != nil && !errors.Is(err, core.ErrNotFound):
			return refused(err)
		}
		d, _, err := s.cfg.Policies.PutDraft(ctx, policies.DraftRequest{OrgID: orgID, Name: r.DraftName, Raw: body})
		if err != nil {
			return refused(err)
		}
		res.Status, res.DraftRevision = StatusPublished, d.Revision
		return nil, nil
	default:
		publish := s.cfg.Policies.StageBundle
		if r.Publish == PublishActivate {
			publish = s.cfg.Policies.PublishBundle
		}
		p, err := publish(ctx, orgID, body)
		if err != nil {
			return refused(err)
		}
		res.Status = StatusUnchanged
		if p.Created {
			res.Status = StatusPublished
		}
		return nil, nil
	}
}

// refused is a publish the policies feature refused as a failure; the
// store's failures stay errors.
func refused(err error) (*failure, error) {
	if errors.Is(err, core.ErrUnavailable) || !errors.Is(err, core.ErrConflict) && !errors.Is(err, core.ErrInvalidRequest) &&
		!errors.Is(err, core.ErrUnprocessable) && !errors.Is(err, core.ErrNotFound) {
		return nil, err
	}
	return &failure{reason: ReasonPublishRefused, message: detail(err)}, nil
}

// detail is an error's text as a caller may see it.
func detail(err error) string {
	var ce *core.Error
	if errors.As(err, &ce) {
		return ce.Code + ": " + ce.Detail
	}
	return err.Error()
}

// remember keeps res as the link's last_pull, unless the link was
// removed or pointed elsewhere since the pull began, or a later pull
// already ended.
func (s *Service) remember(ctx context.Context, orgID string, r record, res PullResult) error {
	return s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		var cur record
		err := core.ReadRecord(ctx, tx, recordKind, recordID, &cur)
		if core.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if cur.Deleted || cur.Repository != r.Repository || cur.Ref != r.Ref || cur.Directory != r.Directory ||
			cur.LastPull != nil && cur.LastPull.At.After(res.PulledAt) {
			return nil
		}
		cur.LastPull = &pullRecord{At: res.PulledAt, Commit: res.Commit, Status: res.Status, Reason: res.Reason,
			Version: res.Version, Message: res.Message}
		return core.WriteRecord(ctx, tx, recordKind, recordID, cur.CreatedAt, cur)
	})
}

// clip cuts s to at most n bytes on a character boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
