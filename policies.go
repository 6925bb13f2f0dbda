package clearance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
)

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
// ErrConflict. Publishing and activating are both ledgered.
func (e *Engine) PublishBundle(ctx context.Context, orgID string, raw []byte) (Published, error) {
	return e.publish(ctx, orgID, raw, true)
}

// StageBundle is PublishBundle without the activation: the version can be
// pinned (evaluated and recorded in SHADOW) and activated later with
// ActivateBundle, while the active version keeps deciding.
func (e *Engine) StageBundle(ctx context.Context, orgID string, raw []byte) (Published, error) {
	return e.publish(ctx, orgID, raw, false)
}

func (e *Engine) publish(ctx context.Context, orgID string, raw []byte, activate bool) (Published, error) {
	// policy.Load holds bundles to the default JSON limits; configured
	// limits that are lower apply too.
	if err := strictjson.Validate(raw, e.decodeOptions()); err != nil {
		return Published{}, core.TranslateInput(err)
	}
	c, err := policy.Load(raw)
	if err != nil {
		return Published{}, core.TranslateInput(err)
	}
	b := c.Bundle()
	var out Published
	err = e.store.Update(ctx, orgID, func(tx store.Tx) error {
		prev, err := tx.BundleInTx(ctx, b.Version)
		if err == nil {
			if prev.Digest != c.Digest() {
				return newError(ErrConflict, CodePolicyVersionConflict,
					"version %q is already published with other content (digest %s)", b.Version, prev.Digest)
			}
			active, err := activeVersionInTx(ctx, tx)
			if err != nil {
				return err
			}
			out = Published{BundleInfo: infoOf(prev, active == prev.Version)}
			return nil
		}
		if !isNotFound(err) {
			return err
		}
		var seq uint64 = 1
		if latest, err := tx.LatestBundleInTx(ctx); err == nil {
			seq = latest.Seq + 1
		} else if !isNotFound(err) {
			return err
		}
		rec := store.BundleRecord{
			OrgID: orgID, BundleID: b.BundleID, Version: b.Version, Seq: seq, Digest: c.Digest(),
			Mode: string(c.Mode()), RuleCount: len(b.Rules), PublishedAt: e.now(), Body: c.Canonical(),
		}
		if err := tx.PutBundle(ctx, rec); err != nil {
			return err
		}
		entry, err := ledger.Append(ctx, tx, orgID, ledger.Record{
			Kind: ledger.KindPolicyPublished, SubjectID: b.Version, PayloadDigest: c.Digest()}, e.now())
		if err != nil {
			return err
		}
		if activate {
			if _, err := e.activateInTx(ctx, tx, rec); err != nil {
				return err
			}
		}
		out = Published{BundleInfo: infoOf(rec, activate), Created: true}
		out.LedgerSeq = entry.Seq
		return nil
	})
	if err != nil {
		return Published{}, asEngineError("publish bundle", err)
	}
	if out.Created {
		e.compiled.Store(bundleKey(orgID, b.Version), c)
	}
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
// ErrNotFound; a failed expectation ErrConflict.
func (e *Engine) ActivateBundle(ctx context.Context, req ActivateRequest) (PolicyActivation, error) {
	if !policy.ValidVersion(req.Version) {
		return PolicyActivation{}, newError(ErrNotFound, CodePolicyNotFound, "policy version not found")
	}
	if x := req.ExpectedActiveVersion; x != "" && !policy.ValidVersion(x) {
		return PolicyActivation{}, invalid(CodeInvalidRequest, "expected_active_version",
			"expected_active_version must be 1..%d characters of [A-Za-z0-9._-]", policy.MaxVersionLen)
	}
	var out PolicyActivation
	err := e.store.Update(ctx, req.OrgID, func(tx store.Tx) error {
		rec, err := tx.BundleInTx(ctx, req.Version)
		if isNotFound(err) {
			return newError(ErrNotFound, CodePolicyNotFound, "policy version %q not found", req.Version)
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
		case err != nil && !isNotFound(err):
			return err
		}
		if x := req.ExpectedActiveVersion; x != "" && x != cur.Version {
			return newError(ErrConflict, CodeActiveVersionMismatch,
				"the active version is %q, not the expected %q", cur.Version, x)
		}
		a, err := e.activateInTx(ctx, tx, rec)
		if err != nil {
			return err
		}
		out = PolicyActivation{OrgID: req.OrgID, ActiveVersion: req.Version, BundleDigest: rec.Digest,
			ActivatedAt: a.ActivatedAt, LedgerSeq: a.LedgerSeq, Changed: true, PreviousVersion: cur.Version}
		return nil
	})
	if err != nil {
		return PolicyActivation{}, asEngineError("activate bundle", err)
	}
	return out, nil
}

// activateInTx makes rec the active version, with its ledger entry.
func (e *Engine) activateInTx(ctx context.Context, tx store.Tx, rec store.BundleRecord) (store.Activation, error) {
	now := e.now()
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
	if isNotFound(err) {
		return "", nil
	}
	return a.Version, err
}

// activeVersion returns the org's active version, "" when none is.
func (e *Engine) activeVersion(ctx context.Context, orgID string) (string, error) {
	a, err := e.store.Activation(ctx, orgID)
	if isNotFound(err) {
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
func (e *Engine) Bundles(ctx context.Context, orgID string) ([]BundleInfo, error) {
	recs, err := e.store.Bundles(ctx, orgID)
	if err != nil {
		return nil, unavailable("list bundles", err)
	}
	active, err := e.activeVersion(ctx, orgID)
	if err != nil {
		return nil, unavailable("list bundles", err)
	}
	out := make([]BundleInfo, len(recs))
	for i, r := range recs {
		out[i] = infoOf(r, r.Version == active)
	}
	return out, nil
}

// Bundle returns one published version with its content.
func (e *Engine) Bundle(ctx context.Context, orgID, version string) (BundleInfo, error) {
	r, err := e.store.Bundle(ctx, orgID, version)
	if isNotFound(err) {
		return BundleInfo{}, newError(ErrNotFound, CodePolicyNotFound, "policy version %q not found", version)
	}
	if err != nil {
		return BundleInfo{}, unavailable("read bundle", err)
	}
	c, err := e.compile(r)
	if err != nil {
		return BundleInfo{}, err
	}
	active, err := e.activeVersion(ctx, orgID)
	if err != nil {
		return BundleInfo{}, unavailable("read bundle", err)
	}
	info := infoOf(r, active == r.Version)
	b := c.Bundle()
	info.Bundle = &b
	return info, nil
}

// resolvePolicy applies policy.Resolve to the org's published versions and
// its active one. The active version is read from the store on every call,
// never cached: another server on the same database may have activated
// another version a moment ago. Compiled versions are cached (immutable).
func (e *Engine) resolvePolicy(ctx context.Context, orgID, pin string) (policy.Resolution, error) {
	r, err := policy.Resolve(orgVersions{ctx: ctx, e: e, orgID: orgID}, pin)
	switch {
	case errors.Is(err, policy.ErrUnknownVersion):
		return r, newError(ErrConflict, CodePolicyPinUnknown, "context.policy_version %q is not a published version", pin)
	case err != nil:
		return r, asEngineError("resolve policy", err)
	}
	return r, nil
}

// stillActive refuses, inside the org's transaction, an authorization
// decided under a version that is no longer the org's active one: an
// activation that committed between the evaluation and this transaction
// wins (the org lock orders them), so no grant is issued or claimed under
// a version other than the one active when it commits. The request can be
// sent again and is then decided under the new version.
func stillActive(ctx context.Context, tx store.Tx, version string) error {
	a, err := tx.ActivationInTx(ctx)
	switch {
	case isNotFound(err):
		return newError(ErrConflict, CodeStaleAuthorization, "the org has no active policy version any more; send the request again")
	case err != nil:
		return err
	case a.Version != version:
		return newError(ErrConflict, CodeStaleAuthorization,
			"the org's active policy changed from %q to %q while this request was decided; send it again", version, a.Version)
	}
	return nil
}

// orgVersions is a policy.Source over one org's stored bundles.
type orgVersions struct {
	ctx   context.Context
	e     *Engine
	orgID string
}

func (v orgVersions) Version(version string) (*policy.Compiled, error) {
	if c, ok := v.e.compiled.Load(bundleKey(v.orgID, version)); ok {
		return c.(*policy.Compiled), nil
	}
	r, err := v.e.store.Bundle(v.ctx, v.orgID, version)
	if isNotFound(err) {
		return nil, policy.ErrUnknownVersion
	}
	if err != nil {
		return nil, err
	}
	return v.e.compile(r)
}

func (v orgVersions) Active() (*policy.Compiled, error) {
	a, err := v.e.store.Activation(v.ctx, v.orgID)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c, err := v.Version(a.Version)
	if errors.Is(err, policy.ErrUnknownVersion) {
		// The store keeps activations pointing at published versions; a
		// missing one is damage, never a reason to fall back.
		return nil, fmt.Errorf("active policy version %q of org %q is missing", a.Version, v.orgID)
	}
	return c, err
}

func (e *Engine) compile(r store.BundleRecord) (*policy.Compiled, error) {
	k := bundleKey(r.OrgID, r.Version)
	if c, ok := e.compiled.Load(k); ok {
		return c.(*policy.Compiled), nil
	}
	c, err := policy.Load(r.Body)
	if err != nil {
		// A stored bundle that no longer compiles must not evaluate to anything.
		return nil, &Error{Kind: ErrUnavailable, Code: CodeStoreUnavailable, Detail: "stored policy bundle does not compile", Err: err}
	}
	e.compiled.Store(k, c)
	return c, nil
}

func bundleKey(orgID, version string) string { return orgID + "\x00" + version }
