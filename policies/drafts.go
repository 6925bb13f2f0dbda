package policies

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
)

// Drafts are records of the org (kind kindDraft, id the name) indexed by
// state: the live ones under refLive, deleted ones under refDeleted (a
// record is never removed, so a name's revisions keep counting).
const (
	kindDraft  = "policy.draft"
	refLive    = "live"
	refDeleted = "deleted"
	// MaxDrafts bounds an org's live drafts.
	MaxDrafts = 100
	// draftPrefix names a draft where a version could be named (diff refs).
	draftPrefix = "draft:"
)

// draftRecord is a draft as stored.
type draftRecord struct {
	Name      string          `json:"name"`
	Revision  int64           `json:"revision"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	Deleted   bool            `json:"deleted,omitempty"`
	Bundle    json.RawMessage `json:"bundle"` // canonical JSON of the policy.Bundle as decoded
}

// Draft is a bundle being written: stored as sent (well-formed, not
// necessarily valid), never evaluated in production — no pin, grant or
// decision ever resolves to one. It becomes a version by PromoteDraft.
type Draft struct {
	OrgID     string    `json:"org_id"`
	Name      string    `json:"name"`
	Revision  int64     `json:"revision"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Bundle is the draft's content; absent in lists.
	Bundle *policy.Bundle `json:"bundle,omitempty"`
}

// DraftRequest creates or replaces the draft Name with Raw, a bundle as
// JSON. With ExpectedRevision > 0 the write happens only while the draft
// is at that revision (a guard against a concurrent edit).
type DraftRequest struct {
	OrgID            string
	Name             string
	Raw              []byte
	ExpectedRevision int64
}

// PutDraft creates the draft (created true) or replaces its content,
// raising its revision. The body must be a well-formed bundle document
// (unknown members, duplicates and wrong types are refused, 400); its
// semantic problems are ValidateDraft's, so a half-written policy can be
// kept.
func (s *Service) PutDraft(ctx context.Context, req DraftRequest) (Draft, bool, error) {
	if err := checkDraftName(req.Name); err != nil {
		return Draft{}, false, err
	}
	if req.ExpectedRevision < 0 {
		return Draft{}, false, core.Invalid(core.CodeInvalidRequest, "expected_revision", "the expected revision must be a positive integer")
	}
	if err := strictjson.Validate(req.Raw, s.d.JSON); err != nil {
		return Draft{}, false, core.TranslateInput(err)
	}
	var b policy.Bundle
	if err := strictjson.Decode(req.Raw, &b, strictjson.Options{RejectUnknown: true}); err != nil {
		return Draft{}, false, core.TranslateInput(err)
	}
	body, err := canon.Marshal(b)
	if err != nil {
		return Draft{}, false, core.Invalid(core.CodeInvalidRequest, "", "the bundle cannot be canonicalized: %v", err)
	}
	var out draftRecord
	var created bool
	err = s.d.Store.Update(ctx, req.OrgID, func(tx store.Tx) error {
		now := s.d.Now().UTC()
		var rec draftRecord
		err := core.ReadRecord(ctx, tx, kindDraft, req.Name, &rec)
		switch {
		case core.IsNotFound(err):
			rec = draftRecord{Name: req.Name, CreatedAt: now, Deleted: true}
		case err != nil:
			return err
		}
		if x := req.ExpectedRevision; x > 0 && (rec.Deleted || rec.Revision != x) {
			return revisionMismatch(rec, x)
		}
		created = rec.Deleted
		if created {
			if err := countDrafts(ctx, tx, +1, now); err != nil {
				return err
			}
		}
		if created {
			rec.CreatedAt = now
		}
		rec.Revision++
		rec.UpdatedAt, rec.Deleted, rec.Bundle = now, false, body
		out = rec
		return putDraft(ctx, tx, rec)
	})
	if err != nil {
		return Draft{}, false, core.Translate("put draft", err)
	}
	d, err := draftOf(req.OrgID, out, true)
	return d, created, err
}

// draftCount is the org's number of live drafts, kept in the transactions
// that create and delete them, so that concurrent creations cannot pass
// MaxDrafts.
type draftCount struct {
	Live int `json:"live"`
}

const kindDraftCount, idDraftCount = "policy.draft_count", "live"

// countDrafts moves the org's live-draft count by delta, refusing a
// creation past MaxDrafts.
func countDrafts(ctx context.Context, tx store.Tx, delta int, at time.Time) error {
	var c draftCount
	if err := core.ReadRecord(ctx, tx, kindDraftCount, idDraftCount, &c); err != nil && !core.IsNotFound(err) {
		return err
	}
	if delta > 0 && c.Live >= MaxDrafts {
		return core.New(core.ErrConflict, CodeDraftLimit, "the org has %d drafts, the most it may keep; delete one first", MaxDrafts)
	}
	c.Live = max(0, c.Live+delta)
	return core.WriteRecord(ctx, tx, kindDraftCount, idDraftCount, at, c)
}

// putDraft stores rec under the ref of its state.
func putDraft(ctx context.Context, tx store.Tx, rec draftRecord) error {
	body, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	ref := refLive
	if rec.Deleted {
		ref = refDeleted
	}
	return tx.PutArtifact(ctx, artifactOf(tx.OrgID(), rec, ref, body))
}

func revisionMismatch(rec draftRecord, expected int64) error {
	if rec.Deleted {
		return core.New(core.ErrConflict, CodeDraftRevisionMismatch, "draft %q does not exist; expected revision %d", rec.Name, expected)
	}
	return core.New(core.ErrConflict, CodeDraftRevisionMismatch, "draft %q is at revision %d, not the expected %d", rec.Name, rec.Revision, expected)
}

// Drafts lists the org's drafts, oldest first, without their content.
func (s *Service) Drafts(ctx context.Context, orgID string) ([]Draft, error) {
	recs, err := s.d.Store.ArtifactsByRef(ctx, orgID, kindDraft, refLive, 0)
	if err != nil {
		return nil, core.Unavailable("list drafts", err)
	}
	out := make([]Draft, 0, len(recs))
	for _, r := range recs {
		var rec draftRecord
		if err := json.Unmarshal(r.Body, &rec); err != nil {
			return nil, core.Unavailable("list drafts", err)
		}
		d, err := draftOf(orgID, rec, false)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// Draft returns one draft with its content.
func (s *Service) Draft(ctx context.Context, orgID, name string) (Draft, error) {
	rec, err := s.readDraft(ctx, orgID, name)
	if err != nil {
		return Draft{}, err
	}
	return draftOf(orgID, rec, true)
}

// DeleteDraft deletes the draft; with expectedRevision > 0 only while it is
// at that revision.
func (s *Service) DeleteDraft(ctx context.Context, orgID, name string, expectedRevision int64) error {
	if err := checkDraftName(name); err != nil {
		return draftNotFound(name)
	}
	err := s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		var rec draftRecord
		err := core.ReadRecord(ctx, tx, kindDraft, name, &rec)
		if core.IsNotFound(err) || err == nil && rec.Deleted {
			return draftNotFound(name)
		}
		if err != nil {
			return err
		}
		if expectedRevision > 0 && rec.Revision != expectedRevision {
			return revisionMismatch(rec, expectedRevision)
		}
		rec.Deleted, rec.UpdatedAt = true, s.d.Now().UTC()
		if err := countDrafts(ctx, tx, -1, rec.UpdatedAt); err != nil {
			return err
		}
		return putDraft(ctx, tx, rec)
	})
	return core.Translate("delete draft", err)
}

// DraftValidation is a draft that compiles: what publishing it would make.
type DraftValidation struct {
	Name      string      `json:"name"`
	Revision  int64       `json:"revision"`
	Valid     bool        `json:"valid"`
	BundleID  string      `json:"bundle_id"`
	Version   string      `json:"version"`
	Digest    string      `json:"bundle_digest"`
	Mode      policy.Mode `json:"mode"`
	RuleCount int         `json:"rule_count"`
}

// ValidateDraft compiles the draft. A draft with problems is a 422 error
// listing every one of them (core.CodePolicyInvalid with a field error
// each), exactly what publishing it would answer.
func (s *Service) ValidateDraft(ctx context.Context, orgID, name string) (DraftValidation, error) {
	rec, err := s.readDraft(ctx, orgID, name)
	if err != nil {
		return DraftValidation{}, err
	}
	c, err := compileDraft(rec, "")
	if err != nil {
		return DraftValidation{}, err
	}
	b := c.Bundle()
	return DraftValidation{Name: name, Revision: rec.Revision, Valid: true, BundleID: b.BundleID, Version: b.Version,
		Digest: c.Digest(), Mode: c.Mode(), RuleCount: len(b.Rules)}, nil
}

// compileDraft compiles a draft's content, under version when it is set.
func compileDraft(rec draftRecord, version string) (*policy.Compiled, error) {
	var b policy.Bundle
	if err := json.Unmarshal(rec.Bundle, &b); err != nil {
		return nil, core.Unavailable("read draft", err)
	}
	if version != "" {
		b.Version = version
	}
	c, err := policy.Compile(b)
	if err != nil {
		return nil, core.TranslateInput(err)
	}
	return c, nil
}

// PromoteRequest publishes the draft Name as a version.
type PromoteRequest struct {
	OrgID string
	Name  string
	// Version overrides the draft's own version when set.
	Version string
	// Activate makes the new version the org's active one (ledgered), only
	// while ExpectedActiveVersion is active when that is set.
	Activate              bool
	ExpectedActiveVersion string
	// ExpectedRevision, when > 0, promotes only that revision of the draft.
	ExpectedRevision int64
}

// Promotion is what PromoteDraft did.
type Promotion struct {
	Draft      string            `json:"draft"`
	Revision   int64             `json:"revision"`
	Published  BundleInfo        `json:"published"`
	Created    bool              `json:"created"` // false: that version already held this content
	Activation *PolicyActivation `json:"activation,omitempty"`
}

// PromoteDraft publishes the draft as an immutable version (ledgered),
// activates it when asked (ledgered) and deletes the draft, all in one
// transaction of the org: a promotion that fails leaves the draft and the
// org's policy as they were. Promoting a draft whose version is already
// published with the same content publishes nothing and still activates.
func (s *Service) PromoteDraft(ctx context.Context, req PromoteRequest) (Promotion, error) {
	if req.Version != "" && !policy.ValidVersion(req.Version) {
		return Promotion{}, core.Invalid(core.CodeInvalidRequest, "version",
			"version must be 1..%d characters of [A-Za-z0-9._-]", policy.MaxVersionLen)
	}
	if x := req.ExpectedActiveVersion; x != "" && !policy.ValidVersion(x) {
		return Promotion{}, core.Invalid(core.CodeInvalidRequest, "expected_active_version",
			"expected_active_version must be 1..%d characters of [A-Za-z0-9._-]", policy.MaxVersionLen)
	}
	if req.ExpectedRevision < 0 {
		return Promotion{}, core.Invalid(core.CodeInvalidRequest, "expected_revision", "the expected revision must be a positive integer")
	}
	rec, err := s.readDraft(ctx, req.OrgID, req.Name)
	if err != nil {
		return Promotion{}, err
	}
	c, err := compileDraft(rec, req.Version)
	if err != nil {
		return Promotion{}, err
	}
	var out Promotion
	err = s.d.Store.Update(ctx, req.OrgID, func(tx store.Tx) error {
		var cur draftRecord
		err := core.ReadRecord(ctx, tx, kindDraft, req.Name, &cur)
		if core.IsNotFound(err) || err == nil && cur.Deleted {
			return draftNotFound(req.Name)
		}
		if err != nil {
			return err
		}
		if x := req.ExpectedRevision; x > 0 && cur.Revision != x {
			return revisionMismatch(cur, x)
		}
		if cur.Revision != rec.Revision {
			// Edited since it was compiled: promote what was validated only.
			return core.New(core.ErrConflict, CodeDraftRevisionMismatch,
				"draft %q changed while it was promoted (revision %d, now %d); promote it again", req.Name, rec.Revision, cur.Revision)
		}
		if x := req.ExpectedActiveVersion; req.Activate && x != "" {
			active, err := activeVersionInTx(ctx, tx)
			if err != nil {
				return err
			}
			if active != x && active != c.Bundle().Version {
				return core.New(core.ErrConflict, CodeActiveVersionMismatch,
					"the active version is %q, not the expected %q", active, x)
			}
		}
		before, err := activeVersionInTx(ctx, tx)
		if err != nil {
			return err
		}
		p, err := s.publishInTx(ctx, tx, c, req.Activate, false)
		if err != nil {
			return err
		}
		out = Promotion{Draft: req.Name, Revision: cur.Revision, Published: p.BundleInfo, Created: p.Created}
		if req.Activate {
			a, err := s.ensureActiveInTx(ctx, tx, c, p, before)
			if err != nil {
				return err
			}
			out.Activation = &a
			out.Published.Active = true
		}
		cur.Deleted, cur.UpdatedAt = true, s.d.Now().UTC()
		if err := countDrafts(ctx, tx, -1, cur.UpdatedAt); err != nil {
			return err
		}
		return putDraft(ctx, tx, cur)
	})
	if err != nil {
		return Promotion{}, core.Translate("promote draft", err)
	}
	s.published(req.OrgID, c, out.Created, req.Activate)
	if req.Activate {
		s.active.Store(req.OrgID, c.Bundle().Version)
	}
	return out, nil
}

// ensureActiveInTx makes the promoted version active: publishInTx did so for
// a version it created; an existing one is activated here (ledgered) unless
// it was already active.
func (s *Service) ensureActiveInTx(ctx context.Context, tx store.Tx, c *policy.Compiled, p Published, before string) (PolicyActivation, error) {
	v := c.Bundle().Version
	a := PolicyActivation{OrgID: tx.OrgID(), ActiveVersion: v, BundleDigest: c.Digest(), PreviousVersion: before}
	if p.Created {
		cur, err := tx.ActivationInTx(ctx)
		if err != nil {
			return a, err
		}
		a.ActivatedAt, a.LedgerSeq, a.Changed = cur.ActivatedAt, cur.LedgerSeq, true
		return a, nil
	}
	if before == v {
		cur, err := tx.ActivationInTx(ctx)
		if err != nil {
			return a, err
		}
		a.ActivatedAt, a.LedgerSeq, a.PreviousVersion = cur.ActivatedAt, cur.LedgerSeq, ""
		return a, nil
	}
	rec, err := tx.BundleInTx(ctx, v)
	if err != nil {
		return a, err
	}
	act, err := s.activateInTx(ctx, tx, rec)
	if err != nil {
		return a, err
	}
	a.ActivatedAt, a.LedgerSeq, a.Changed = act.ActivatedAt, act.LedgerSeq, true
	return a, nil
}

// readDraft reads a live draft.
func (s *Service) readDraft(ctx context.Context, orgID, name string) (draftRecord, error) {
	if err := checkDraftName(name); err != nil {
		return draftRecord{}, draftNotFound(name)
	}
	var rec draftRecord
	err := core.ReadCommitted(ctx, s.d.Store, orgID, kindDraft, name, &rec)
	if core.IsNotFound(err) || err == nil && rec.Deleted {
		return draftRecord{}, draftNotFound(name)
	}
	if err != nil {
		return draftRecord{}, core.Unavailable("read draft", err)
	}
	return rec, nil
}

func draftNotFound(name string) error {
	return core.New(core.ErrNotFound, CodeDraftNotFound, "policy draft %q not found", name)
}

// checkDraftName holds draft names to the grammar of versions.
func checkDraftName(name string) error {
	if policy.ValidVersion(name) {
		return nil
	}
	return core.Invalid(core.CodeInvalidRequest, "name", "a draft name must be 1..%d characters of [A-Za-z0-9._-]", policy.MaxVersionLen)
}

func draftOf(orgID string, rec draftRecord, withBundle bool) (Draft, error) {
	d := Draft{OrgID: orgID, Name: rec.Name, Revision: rec.Revision, CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt}
	if withBundle {
		var b policy.Bundle
		if err := json.Unmarshal(rec.Bundle, &b); err != nil {
			return Draft{}, core.Unavailable("read draft", err)
		}
		d.Bundle = &b
	}
	return d, nil
}

// bundleOfRef reads the bundle a diff names: "draft:NAME" or a published
// version. A draft need not be valid to be compared.
func (s *Service) bundleOfRef(ctx context.Context, orgID, ref string) (policy.Bundle, error) {
	if name, ok := strings.CutPrefix(ref, draftPrefix); ok {
		rec, err := s.readDraft(ctx, orgID, name)
		if err != nil {
			return policy.Bundle{}, err
		}
		var b policy.Bundle
		if err := json.Unmarshal(rec.Bundle, &b); err != nil {
			return policy.Bundle{}, core.Unavailable("read draft", err)
		}
		return b, nil
	}
	if !policy.ValidVersion(ref) {
		return policy.Bundle{}, core.New(core.ErrNotFound, CodePolicyNotFound, "policy version %q not found", ref)
	}
	info, err := s.Bundle(ctx, orgID, ref)
	if err != nil {
		return policy.Bundle{}, err
	}
	return *info.Bundle, nil
}

func artifactOf(orgID string, rec draftRecord, ref string, body []byte) artifact.Record {
	return artifact.Record{OrgID: orgID, Kind: kindDraft, ID: rec.Name, Ref: ref, CreatedAt: rec.CreatedAt, Body: body}
}

// Comparison is a diff of two of the org's bundles, each named by a
// published version or "draft:NAME".
type Comparison struct {
	From string `json:"from"`
	To   string `json:"to"`
	policy.BundleDiff
}

// Diff compares two bundles of the org rule by rule.
func (s *Service) Diff(ctx context.Context, orgID, from, to string) (Comparison, error) {
	a, err := s.bundleOfRef(ctx, orgID, from)
	if err != nil {
		return Comparison{}, err
	}
	b, err := s.bundleOfRef(ctx, orgID, to)
	if err != nil {
		return Comparison{}, err
	}
	return Comparison{From: from, To: to, BundleDiff: policy.Diff(a, b)}, nil
}
