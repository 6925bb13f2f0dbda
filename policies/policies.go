package policies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
)

// Service publishes, stages and activates an org's policy bundles and
// resolves the policy a request is evaluated under. Create it with New.
type Service struct {
	d        core.Deps
	cfg      Config
	compiled sync.Map // bundleKey -> *policy.Compiled (published bundles are immutable)
	// active is the last activation seen per org (orgID -> string, the
	// version, "" for none), for ResolveSeen: it may be stale, and is
	// corrected by Current inside each transaction that relies on it.
	active sync.Map
	// signals reads recorded signal events for replays (UseSignals),
	// checkouts rebuilds recorded checkout decisions (UseCheckouts).
	signals   SignalReader
	checkouts func(checkout, evidence json.RawMessage, now time.Time) (policy.Input, error)
	// personal restores a sealed dossier's personal data (UsePersonal).
	personal PersonalOpener
	// queued wakes RunReplays when a replay is queued.
	queued chan struct{}
}

// Config tunes the policies feature; the zero value is the default.
type Config struct {
	// ReplayInlineLimit is the most recorded decisions a replay answers at
	// once; a larger window is queued as a job. 0 means InlineReplayLimit.
	ReplayInlineLimit int
}

// New returns the policies feature over the kernel d.
func New(d core.Deps, cfg Config) *Service {
	if cfg.ReplayInlineLimit <= 0 {
		cfg.ReplayInlineLimit = InlineReplayLimit
	}
	return &Service{d: d, cfg: cfg, queued: make(chan struct{}, 1)}
}

// BundleInfo describes a published bundle version.
type BundleInfo struct {
	OrgID       string         `json:"org_id"`
	BundleID    string         `json:"bundle_id"`
	Version     string         `json:"version"`
	Digest      string         `json:"bundle_digest"`
	Mode        policy.Mode    `json:"mode"`
	RuleCount   int            `json:"rule_count"`
	PublishedAt time.Time      `json:"published_at"`
	Active      bool           `json:"active"`
	LedgerSeq   uint64         `json:"ledger_seq,omitempty"`
	Bundle      *policy.Bundle `json:"bundle,omitempty"`
}

// Published is the result of PublishBundle and StageBundle.
type Published struct {
	BundleInfo
	Created bool `json:"-"` // false when the identical version already existed
}

// PublishBundle validates raw (a policy bundle as JSON), publishes it as an
// immutable version and makes it the org's active policy. The same version
// with the same content is returned again (Created false) and changes
// nothing, not even which version is active; with other content it is
// core.ErrConflict. Publishing and activating are both ledgered.
func (s *Service) PublishBundle(ctx context.Context, orgID string, raw []byte) (Published, error) {
	return s.publish(ctx, orgID, raw, true, false)
}

// StageBundle is PublishBundle without the activation: the version can be
// pinned (evaluated and recorded in SHADOW) and activated later with
// ActivateBundle, while the active version keeps deciding.
func (s *Service) StageBundle(ctx context.Context, orgID string, raw []byte) (Published, error) {
	return s.publish(ctx, orgID, raw, false, false)
}

// publish publishes raw, activating it when activate is set; with first
// set, only as the org's first version (otherwise nothing is written and
// Created is false), decided inside the publishing transaction.
func (s *Service) publish(ctx context.Context, orgID string, raw []byte, activate, first bool) (Published, error) {
	// policy.Load holds bundles to the default JSON limits; configured
	// limits that are lower apply too.
	if err := strictjson.Validate(raw, s.d.JSON); err != nil {
		return Published{}, core.TranslateInput(err)
	}
	c, err := policy.Load(raw)
	if err != nil {
		return Published{}, core.TranslateInput(err)
	}
	var out Published
	err = s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		var err error
		out, err = s.publishInTx(ctx, tx, c, activate, first)
		return err
	})
	if err != nil {
		return Published{}, core.Translate("publish bundle", err)
	}
	s.published(orgID, c, out.Created, activate)
	return out, nil
}

// published caches what a committed publish made: the compiled version
// and, when it was activated, the org's active version.
func (s *Service) published(orgID string, c *policy.Compiled, created, activated bool) {
	if !created {
		return
	}
	v := c.Bundle().Version
	s.compiled.Store(bundleKey(orgID, v), c)
	if activated {
		s.active.Store(orgID, v)
	}
}

// publishInTx publishes c in the org's transaction tx: see publish.
func (s *Service) publishInTx(ctx context.Context, tx store.Tx, c *policy.Compiled, activate, first bool) (Published, error) {
	orgID := tx.OrgID()
	b := c.Bundle()
	var out Published
	prev, err := tx.BundleInTx(ctx, b.Version)
	if err == nil {
		if prev.Digest != c.Digest() {
			return out, core.New(core.ErrConflict, CodePolicyVersionConflict,
				"version %q is already published with other content (digest %s)", b.Version, prev.Digest)
		}
		active, err := activeVersionInTx(ctx, tx)
		if err != nil {
			return out, err
		}
		return Published{BundleInfo: infoOf(prev, active == prev.Version)}, nil
	}
	if !core.IsNotFound(err) {
		return out, err
	}
	var seq uint64 = 1
	if latest, err := tx.LatestBundleInTx(ctx); err == nil {
		if first {
			return Published{}, nil // the org has a version: nothing to install
		}
		seq = latest.Seq + 1
	} else if !core.IsNotFound(err) {
		return out, err
	}
	rec := store.BundleRecord{
		OrgID: orgID, BundleID: b.BundleID, Version: b.Version, Seq: seq, Digest: c.Digest(),
		Mode: string(c.Mode()), RuleCount: len(b.Rules), PublishedAt: s.d.Now(), Body: c.Canonical(),
	}
	if err := tx.PutBundle(ctx, rec); err != nil {
		return out, err
	}
	entry, err := ledger.Append(ctx, tx, orgID, ledger.Record{
		Kind: ledger.KindPolicyPublished, SubjectID: b.Version, PayloadDigest: c.Digest()}, s.d.Now())
	if err != nil {
		return out, err
	}
	if activate {
		if _, err := s.activateInTx(ctx, tx, rec); err != nil {
			return out, err
		}
	}
	out = Published{BundleInfo: infoOf(rec, activate), Created: true}
	out.LedgerSeq = entry.Seq
	return out, nil
}

// PolicyActivation is the org's active policy version as ActivateBundle
// left it.
type PolicyActivation struct {
	OrgID         string    `json:"org_id"`
	ActiveVersion string    `json:"active_version"`
	BundleDigest  string    `json:"bundle_digest"`
	ActivatedAt   time.Time `json:"activated_at"`
	// LedgerSeq is the seq of the activation's policy.activated entry (absent
	// for an activation carried over from before activations were recorded).
	LedgerSeq uint64 `json:"ledger_seq,omitempty"`
	// Changed is false when the version was already active (nothing was
	// written); PreviousVersion is the version it replaced, if any.
	Changed         bool   `json:"changed"`
	PreviousVersion string `json:"previous_version,omitempty"`
}

// ActivateRequest asks ActivateBundle to make Version the org's active
// policy. With ExpectedActiveVersion set, the change happens only while
// that version is the active one (a guard against a concurrent change).
type ActivateRequest struct {
	OrgID                 string
	Version               string
	ExpectedActiveVersion string
}

// ActivateBundle makes a published version the org's active policy, the
// only one that authorizes: a newer version, or an older one to roll back
// or freeze on purpose. The change is ledgered. Activating the active
// version again changes nothing and succeeds whatever ExpectedActiveVersion
// says (so a retried activation succeeds). An unknown version is
// core.ErrNotFound; a failed expectation core.ErrConflict.
func (s *Service) ActivateBundle(ctx context.Context, req ActivateRequest) (PolicyActivation, error) {
	if !policy.ValidVersion(req.Version) {
		return PolicyActivation{}, core.New(core.ErrNotFound, CodePolicyNotFound, "policy version not found")
	}
	if x := req.ExpectedActiveVersion; x != "" && !policy.ValidVersion(x) {
		return PolicyActivation{}, core.Invalid(core.CodeInvalidRequest, "expected_active_version",
			"expected_active_version must be 1..%d characters of [A-Za-z0-9._-]", policy.MaxVersionLen)
	}
	var out PolicyActivation
	err := s.d.Store.Update(ctx, req.OrgID, func(tx store.Tx) error {
		rec, err := tx.BundleInTx(ctx, req.Version)
		if core.IsNotFound(err) {
			return core.New(core.ErrNotFound, CodePolicyNotFound, "policy version %q not found", req.Version)
		}
		if err != nil {
			return err
		}
		cur, err := tx.ActivationInTx(ctx)
		switch {
		case err == nil && cur.Version == req.Version:
			out = PolicyActivation{OrgID: req.OrgID, ActiveVersion: req.Version, BundleDigest: rec.Digest,
				ActivatedAt: cur.ActivatedAt, LedgerSeq: cur.LedgerSeq}
			return nil
		case err != nil && !core.IsNotFound(err):
			return err
		}
		if x := req.ExpectedActiveVersion; x != "" && x != cur.Version {
			return core.New(core.ErrConflict, CodeActiveVersionMismatch,
				"the active version is %q, not the expected %q", cur.Version, x)
		}
		a, err := s.activateInTx(ctx, tx, rec)
		if err != nil {
			return err
		}
		out = PolicyActivation{OrgID: req.OrgID, ActiveVersion: req.Version, BundleDigest: rec.Digest,
			ActivatedAt: a.ActivatedAt, LedgerSeq: a.LedgerSeq, Changed: true, PreviousVersion: cur.Version}
		return nil
	})
	if err != nil {
		return PolicyActivation{}, core.Translate("activate bundle", err)
	}
	s.active.Store(req.OrgID, out.ActiveVersion)
	return out, nil
}

// activateInTx makes rec the active version, with its ledger entry.
func (s *Service) activateInTx(ctx context.Context, tx store.Tx, rec store.BundleRecord) (store.Activation, error) {
	now := s.d.Now()
	entry, err := ledger.Append(ctx, tx, rec.OrgID, ledger.Record{
		Kind: ledger.KindPolicyActivated, SubjectID: rec.Version, PayloadDigest: rec.Digest}, now)
	if err != nil {
		return store.Activation{}, err
	}
	a := store.Activation{OrgID: rec.OrgID, Version: rec.Version, ActivatedAt: now, LedgerSeq: entry.Seq}
	return a, tx.PutActivation(ctx, a)
}

// activeVersionInTx returns the org's active version, "" when none is.
func activeVersionInTx(ctx context.Context, tx store.Tx) (string, error) {
	a, err := tx.ActivationInTx(ctx)
	if core.IsNotFound(err) {
		return "", nil
	}
	return a.Version, err
}

// activeVersion returns the org's active version, "" when none is.
func (s *Service) activeVersion(ctx context.Context, orgID string) (string, error) {
	a, err := s.d.Store.Activation(ctx, orgID)
	if core.IsNotFound(err) {
		return "", nil
	}
	return a.Version, err
}

func infoOf(r store.BundleRecord, active bool) BundleInfo {
	return BundleInfo{OrgID: r.OrgID, BundleID: r.BundleID, Version: r.Version, Digest: r.Digest,
		Mode: policy.Mode(r.Mode), RuleCount: r.RuleCount, PublishedAt: r.PublishedAt, Active: active}
}

// Bundles lists the org's published versions, oldest first, marking the
// active one (none is active when the org only staged versions).
func (s *Service) Bundles(ctx context.Context, orgID string) ([]BundleInfo, error) {
	recs, err := s.d.Store.Bundles(ctx, orgID)
	if err != nil {
		return nil, core.Unavailable("list bundles", err)
	}
	active, err := s.activeVersion(ctx, orgID)
	if err != nil {
		return nil, core.Unavailable("list bundles", err)
	}
	out := make([]BundleInfo, len(recs))
	for i, r := range recs {
		out[i] = infoOf(r, r.Version == active)
	}
	return out, nil
}

// Bundle returns one published version with its content.
func (s *Service) Bundle(ctx context.Context, orgID, version string) (BundleInfo, error) {
	r, err := s.d.Store.Bundle(ctx, orgID, version)
	if core.IsNotFound(err) {
		return BundleInfo{}, core.New(core.ErrNotFound, CodePolicyNotFound, "policy version %q not found", version)
	}
	if err != nil {
		return BundleInfo{}, core.Unavailable("read bundle", err)
	}
	c, err := s.compile(r)
	if err != nil {
		return BundleInfo{}, err
	}
	active, err := s.activeVersion(ctx, orgID)
	if err != nil {
		return BundleInfo{}, core.Unavailable("read bundle", err)
	}
	info := infoOf(r, active == r.Version)
	b := c.Bundle()
	info.Bundle = &b
	return info, nil
}

// Resolve applies policy.Resolve to the org's published versions and
// its active one. The active version is read from the store on every call,
// never cached: another server on the same database may have activated
// another version a moment ago. Compiled versions are cached (immutable).
func (s *Service) Resolve(ctx context.Context, orgID, pin string) (policy.Resolution, error) {
	return s.resolve(orgVersions{ctx: ctx, s: s, orgID: orgID}, pin)
}

// ResolveSeen is Resolve under the active version this process last saw
// for the org, without reading the store when it has seen one. The answer
// may be stale: a caller records under it only after Current, inside the
// org's transaction, confirms it (and evaluates again when it does not).
func (s *Service) ResolveSeen(ctx context.Context, orgID, pin string) (policy.Resolution, error) {
	return s.resolve(orgVersions{ctx: ctx, s: s, orgID: orgID, seen: true}, pin)
}

// Current reports, inside the org's transaction, whether r was resolved
// under the org's active version as of that transaction; when it was not,
// it also remembers the active version for the next ResolveSeen.
func (s *Service) Current(ctx context.Context, tx store.Tx, r policy.Resolution) (bool, error) {
	version, err := activeVersionInTx(ctx, tx)
	if err != nil {
		return false, err
	}
	var used string // "": the starter policy, no version active
	if r.Active != nil && r.Active != policy.Starter() {
		used = r.Active.Snapshot().PolicyVersion
	}
	if version == used {
		return true, nil
	}
	s.active.Store(tx.OrgID(), version)
	return false, nil
}

func (s *Service) resolve(src orgVersions, pin string) (policy.Resolution, error) {
	r, err := policy.Resolve(src, pin)
	switch {
	case errors.Is(err, policy.ErrUnknownVersion):
		return r, core.New(core.ErrConflict, CodePolicyPinUnknown, "context.policy_version %q is not a published version", pin)
	case err != nil:
		return r, core.Translate("resolve policy", err)
	}
	return r, nil
}

// StillActive refuses, inside the org's transaction, an authorization
// decided under a version that is no longer the org's active one: an
// activation that committed between the evaluation and this transaction
// wins (the org lock orders them), so no grant is issued or claimed under
// a version other than the one active when it commits. The request can be
// sent again and is then decided under the new version.
func StillActive(ctx context.Context, tx store.Tx, version string) error {
	a, err := tx.ActivationInTx(ctx)
	switch {
	case core.IsNotFound(err):
		return core.New(core.ErrConflict, CodeStaleAuthorization, "the org has no active policy version any more; send the request again")
	case err != nil:
		return err
	case a.Version != version:
		return core.New(core.ErrConflict, CodeStaleAuthorization,
			"the org's active policy changed from %q to %q while this request was decided; send it again", version, a.Version)
	}
	return nil
}

// orgVersions is a policy.Source over one org's stored bundles.
type orgVersions struct {
	ctx   context.Context
	s     *Service
	orgID string
	seen  bool // the active version last seen will do (ResolveSeen)
}

func (v orgVersions) Version(version string) (*policy.Compiled, error) {
	if c, ok := v.s.compiled.Load(bundleKey(v.orgID, version)); ok {
		return c.(*policy.Compiled), nil
	}
	r, err := v.s.d.Store.Bundle(v.ctx, v.orgID, version)
	if core.IsNotFound(err) {
		return nil, policy.ErrUnknownVersion
	}
	if err != nil {
		return nil, err
	}
	return v.s.compile(r)
}

func (v orgVersions) Active() (*policy.Compiled, error) {
	version, seen := "", false
	if v.seen {
		var x any
		if x, seen = v.s.active.Load(v.orgID); seen {
			version = x.(string)
		}
	}
	if !seen {
		var err error
		if version, err = v.s.activeVersion(v.ctx, v.orgID); err != nil {
			return nil, err
		}
		v.s.active.Store(v.orgID, version)
	}
	if version == "" {
		return nil, nil
	}
	c, err := v.Version(version)
	if errors.Is(err, policy.ErrUnknownVersion) {
		// The store keeps activations pointing at published versions; a
		// missing one is damage, never a reason to fall back.
		return nil, fmt.Errorf("active policy version %q of org %q is missing", version, v.orgID)
	}
	return c, err
}

func (s *Service) compile(r store.BundleRecord) (*policy.Compiled, error) {
	k := bundleKey(r.OrgID, r.Version)
	if c, ok := s.compiled.Load(k); ok {
		return c.(*policy.Compiled), nil
	}
	c, err := policy.Load(r.Body)
	if err != nil {
		// A stored bundle that no longer compiles must not evaluate to anything.
		return nil, &core.Error{Kind: core.ErrUnavailable, Code: core.CodeStoreUnavailable, Detail: "stored policy bundle does not compile", Err: err}
	}
	s.compiled.Store(k, c)
	return c, nil
}

func bundleKey(orgID, version string) string { return orgID + "\x00" + version }
