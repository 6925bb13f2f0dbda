package clearance

import (
	"context"
	"errors"
	"time"

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

// Published is the result of PublishBundle.
type Published struct {
	BundleInfo
	Created bool `json:"-"` // false when the identical version already existed
}

// PublishBundle validates raw (a policy bundle as JSON) and publishes it as
// an immutable version. The same version with the same content is returned
// again (Created false); with other content it is ErrConflict. Publishing is
// ledgered and the new version becomes the org's active one.
func (e *Engine) PublishBundle(ctx context.Context, orgID string, raw []byte) (Published, error) {
	// policy.Load holds bundles to the default JSON limits; configured
	// limits that are lower apply too.
	if err := strictjson.Validate(raw, e.decodeOptions()); err != nil {
		return Published{}, bundleError(err)
	}
	c, err := policy.Load(raw)
	if err != nil {
		return Published{}, bundleError(err)
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
			latest, err := tx.LatestBundleInTx(ctx)
			if err != nil {
				return err
			}
			out = Published{BundleInfo: infoOf(prev, latest.Version == prev.Version)}
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
		out = Published{BundleInfo: infoOf(rec, true), Created: true}
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

func bundleError(err error) error {
	var se *strictjson.Error
	if errors.As(err, &se) {
		return &Error{Kind: ErrInvalidRequest, Code: se.Code, Detail: se.Detail, Err: err}
	}
	var ve *policy.ValidationError
	if errors.As(err, &ve) {
		e := &Error{Kind: ErrUnprocessable, Code: CodePolicyInvalid, Detail: ve.Error()}
		for _, p := range ve.Problems {
			msg := p.Message
			if p.RuleID != "" {
				msg = "rule " + p.RuleID + ": " + msg
			}
			e.Fields = append(e.Fields, FieldError{Field: p.Field, Message: msg})
		}
		return e
	}
	return &Error{Kind: ErrInvalidRequest, Code: CodeInvalidRequest, Detail: err.Error()}
}

func infoOf(r store.BundleRecord, active bool) BundleInfo {
	return BundleInfo{OrgID: r.OrgID, BundleID: r.BundleID, Version: r.Version, Digest: r.Digest,
		Mode: policy.Mode(r.Mode), RuleCount: r.RuleCount, PublishedAt: r.PublishedAt, Active: active}
}

// Bundles lists the org's published versions, oldest first; the newest is active.
func (e *Engine) Bundles(ctx context.Context, orgID string) ([]BundleInfo, error) {
	recs, err := e.store.Bundles(ctx, orgID)
	if err != nil {
		return nil, unavailable("list bundles", err)
	}
	out := make([]BundleInfo, len(recs))
	for i, r := range recs {
		out[i] = infoOf(r, i == len(recs)-1)
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
	latest, err := e.store.LatestBundle(ctx, orgID)
	if err != nil {
		return BundleInfo{}, unavailable("read bundle", err)
	}
	info := infoOf(r, latest.Version == r.Version)
	b := c.Bundle()
	info.Bundle = &b
	return info, nil
}

// resolvePolicy applies policy.Resolve to the org's published versions.
func (e *Engine) resolvePolicy(ctx context.Context, orgID, pin string) (*policy.Compiled, error) {
	c, err := policy.Resolve(orgVersions{ctx: ctx, e: e, orgID: orgID}, pin)
	switch {
	case errors.Is(err, policy.ErrUnknownVersion):
		return nil, newError(ErrConflict, CodePolicyPinUnknown, "context.policy_version %q is not a published version", pin)
	case err != nil:
		return nil, asEngineError("resolve policy", err)
	}
	return c, nil
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

func (v orgVersions) Latest() (*policy.Compiled, error) {
	r, err := v.e.store.LatestBundle(v.ctx, v.orgID)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return v.e.compile(r)
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
