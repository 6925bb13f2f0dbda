package policies

import (
	"context"
	"errors"
	"slices"

	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/policy"
)

// Reproduction is a recorded decision evaluated again: its exact recorded
// intent under its recorded bundle (found by version and checked by
// digest), with the recorded approval, signals and decision time.
type Reproduction struct {
	DossierID     string  `json:"dossier_id"`
	PolicyVersion string  `json:"policy_version"`
	BundleDigest  string  `json:"bundle_digest"`
	Recorded      Verdict `json:"recorded"`
	Reproduced    Verdict `json:"reproduced"`
	// Matches is true when outcome, reason codes and matched rules are the
	// recorded ones.
	Matches bool `json:"matches"`
}

// recordedDossier is a dossier read for evaluating it again.
type recordedDossier struct {
	rec     decide.Recorded
	snap    policy.Snapshot
	verdict Verdict
}

// recorded reads a dossier for evaluating it again.
func (s *Service) recorded(ctx context.Context, orgID, dossierID string) (recordedDossier, error) {
	var out recordedDossier
	if !core.ValidID(dossierID) {
		return out, core.New(core.ErrNotFound, core.CodeDossierNotFound, "dossier not found")
	}
	st, err := s.d.Store.Dossier(ctx, orgID, dossierID)
	if core.IsNotFound(err) {
		return out, core.New(core.ErrNotFound, core.CodeDossierNotFound, "dossier not found")
	}
	if err != nil {
		return out, core.Unavailable("read dossier", err)
	}
	body, err := s.openRecorded(ctx, orgID, st.Body)
	var nr *decide.NotReplayable
	if errors.As(err, &nr) {
		return out, core.New(core.ErrConflict, CodeNotReplayable, "%s: %s", nr.Reason, nr.Detail)
	}
	if err != nil {
		return out, err
	}
	if out.rec, err = decide.DecodeRecorded(body); err != nil {
		return out, core.Unavailable("read dossier", err)
	}
	if out.snap, err = out.rec.Snapshot(); err != nil {
		return out, core.Unavailable("read dossier", err)
	}
	if out.verdict, err = verdictOf(&out.rec); err != nil {
		return out, core.Unavailable("read dossier", err)
	}
	return out, nil
}

// recordedPolicy is the bundle a dossier records: the starter policy, or
// the org's published version of that name with that digest.
func (s *Service) recordedPolicy(ctx context.Context, orgID string, snap policy.Snapshot) (*policy.Compiled, error) {
	if st := policy.Starter(); snap.BundleDigest == st.Digest() {
		return st, nil
	}
	unavailable := core.New(core.ErrConflict, CodeRecordedPolicyUnavailable,
		"the dossier's policy %q (%s) is not among the org's published versions", snap.PolicyVersion, snap.BundleDigest)
	if !policy.ValidVersion(snap.PolicyVersion) {
		return nil, unavailable
	}
	r, err := s.d.Store.Bundle(ctx, orgID, snap.PolicyVersion)
	if core.IsNotFound(err) {
		return nil, unavailable
	}
	if err != nil {
		return nil, core.Unavailable("read bundle", err)
	}
	c, err := s.compile(r)
	if err != nil {
		return nil, err
	}
	if c.Digest() != snap.BundleDigest {
		return nil, unavailable
	}
	return c, nil
}

// input rebuilds a dossier's policy input for c.
func (s *Service) input(ctx context.Context, orgID string, rec *decide.Recorded, c *policy.Compiled) (policy.Input, error) {
	in, err := decide.RecordedInput(rec, c.UsesSignals(), s.sources(ctx, orgID))
	var nr *decide.NotReplayable
	if errors.As(err, &nr) {
		return in, core.New(core.ErrConflict, CodeNotReplayable, "%s: %s", nr.Reason, nr.Detail)
	}
	return in, err
}

// Reproduce evaluates a dossier's exact recorded intent again under its
// recorded bundle and compares the result with what was recorded. Anyone
// who may read the dossier may run it; it records nothing.
func (s *Service) Reproduce(ctx context.Context, orgID, dossierID string) (Reproduction, error) {
	r, err := s.recorded(ctx, orgID, dossierID)
	if err != nil {
		return Reproduction{}, err
	}
	c, err := s.recordedPolicy(ctx, orgID, r.snap)
	if err != nil {
		return Reproduction{}, err
	}
	in, err := s.input(ctx, orgID, &r.rec, c)
	if err != nil {
		return Reproduction{}, err
	}
	d := c.Evaluate(&in)
	out := Reproduction{DossierID: r.rec.DossierID, PolicyVersion: r.snap.PolicyVersion, BundleDigest: r.snap.BundleDigest,
		Recorded:   r.verdict,
		Reproduced: Verdict{Outcome: d.Outcome, ReasonCodes: slices.Clone(d.ReasonCodes), MatchedRules: slices.Clone(d.MatchedRules)}}
	out.Matches = d.Outcome == r.verdict.Outcome && slices.Equal(d.ReasonCodes, r.verdict.ReasonCodes) &&
		slices.Equal(d.MatchedRules, r.verdict.MatchedRules)
	return out, nil
}

// DossierExplanation explains a recorded decision under its recorded
// policy, or how a candidate would have decided it (a replayed decision).
type DossierExplanation struct {
	DossierID string `json:"dossier_id"`
	// Candidate is set when the explanation is of a candidate's replay.
	Candidate     *Candidate `json:"candidate,omitempty"`
	PolicyVersion string     `json:"policy_version"`
	BundleDigest  string     `json:"bundle_digest"`
	Recorded      Verdict    `json:"recorded"`
	policy.Explanation
}

// ExplainDossier explains a dossier's decision: which rules matched, the
// first failing condition of each that did not, and the smallest
// single-field changes that would flip it. With cand nil it is the
// recorded decision under its recorded policy; otherwise the candidate's
// decision of the same recorded input.
func (s *Service) ExplainDossier(ctx context.Context, orgID, dossierID string, cand *Candidate) (DossierExplanation, error) {
	r, err := s.recorded(ctx, orgID, dossierID)
	if err != nil {
		return DossierExplanation{}, err
	}
	var c *policy.Compiled
	if cand != nil {
		c, err = s.Compile(ctx, orgID, *cand)
	} else {
		c, err = s.recordedPolicy(ctx, orgID, r.snap)
	}
	if err != nil {
		return DossierExplanation{}, err
	}
	in, err := s.input(ctx, orgID, &r.rec, c)
	if err != nil {
		return DossierExplanation{}, err
	}
	return DossierExplanation{DossierID: r.rec.DossierID, Candidate: cand, PolicyVersion: c.Snapshot().PolicyVersion,
		BundleDigest: c.Digest(), Recorded: r.verdict, Explanation: c.Explain(&in)}, nil
}
