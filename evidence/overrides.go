package evidence

import (
	"context"
	"strings"
	"unicode"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/idempotency"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
)

// OverrideResolution is how a person resolved a decision that was not ALLOW.
type OverrideResolution string

// Override resolutions.
const (
	OverrideApproved OverrideResolution = "APPROVED"
	OverrideRejected OverrideResolution = "REJECTED"
)

// scopeOverride is the idempotency scope of overrides (a key is scoped per
// org and per operation, like the decision routes' keys).
const scopeOverride = "dossier.override"

// Limits of override fields, in bytes.
const (
	MaxOverrideNote = 2000
	maxActorID      = 200
	maxActorType    = 64
	maxReasonCode   = 64
)

// MaxEvidenceItems bounds the overrides or dispatches one listing returns.
const MaxEvidenceItems = 1000

// OverrideActor is who resolved: a person's (or a review tool's) id and
// kind, as the caller states them; the credential that recorded it is
// recorded separately.
type OverrideActor struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

// OverrideRequest records one human resolution of a dossier.
type OverrideRequest struct {
	OrgID      string
	DossierID  string
	Resolution OverrideResolution
	Actor      OverrideActor
	Note       string
	ReasonCode string
	// IdempotencyKey, when set, makes a retry return the recorded override.
	IdempotencyKey string
	Principal      core.Principal
	RequestID      string
}

// Override is a recorded resolution. Its RFC 8785 form is the stored body,
// and its SHA-256 the payload_digest of its ledger entry (kind
// decision.overridden, at LedgerSeq, subject OverrideID).
type Override struct {
	OverrideID      string             `json:"override_id"`
	OrgID           string             `json:"org_id"`
	DossierID       string             `json:"dossier_id"`
	DossierDigest   string             `json:"dossier_digest"`
	DecisionID      string             `json:"decision_id"`
	DecisionOutcome policy.Outcome     `json:"decision_outcome"`
	DecisionMode    policy.Mode        `json:"decision_mode"`
	Resolution      OverrideResolution `json:"resolution"`
	Actor           OverrideActor      `json:"actor"`
	Note            string             `json:"note,omitempty"`
	ReasonCode      string             `json:"reason_code,omitempty"`
	CredentialID    string             `json:"credential_id"`
	RequestID       string             `json:"request_id,omitempty"`
	CreatedAt       string             `json:"created_at"`
	LedgerSeq       uint64             `json:"ledger_seq"`
	// Replayed is true when an Idempotency-Key returned a recorded override.
	Replayed bool `json:"-"`
}

// RecordOverride records a human resolution (APPROVED or REJECTED) of a
// decision whose outcome was ESCALATE, REVIEW_REQUIRED or BLOCK, as an
// artifact of the dossier and a ledger entry, in one atomic write. The
// dossier itself is never changed.
//
// An override is evidence, never authority: it issues no grant and no
// token, a later claim of any grant is judged exactly as before, and an
// agent that wants to act after an approval must ask again (a new
// evaluation, which may name the overridden decision as its parent).
// Errors: an ALLOW dossier is core.ErrConflict (OVERRIDE_NOT_APPLICABLE); an
// unknown dossier (or another org's) core.ErrNotFound; bad fields
// core.ErrInvalidRequest (INVALID_OVERRIDE).
func (s *Service) RecordOverride(ctx context.Context, req OverrideRequest) (Override, error) {
	if err := checkOverride(req); err != nil {
		return Override{}, err
	}
	if req.IdempotencyKey != "" && !core.ValidToken(req.IdempotencyKey) {
		return Override{}, core.Invalid(core.CodeInvalidIdempotencyKey, "Idempotency-Key", "Idempotency-Key must be 1 to %d visible ASCII characters", core.MaxKeyLength)
	}
	d, digest, err := core.ReadDossier(ctx, s.d.Store, req.OrgID, req.DossierID)
	if err != nil {
		return Override{}, err
	}
	if d.Outcome == policy.OutcomeAllow {
		return Override{}, core.New(core.ErrConflict, CodeOverrideNotApplicable, "the decision was ALLOW: there is nothing to override")
	}
	requestDigest, err := canon.DigestValue(struct {
		DossierID  string             `json:"dossier_id"`
		Resolution OverrideResolution `json:"resolution"`
		Actor      OverrideActor      `json:"actor"`
		Note       string             `json:"note"`
		ReasonCode string             `json:"reason_code"`
	}{req.DossierID, req.Resolution, req.Actor, req.Note, req.ReasonCode})
	if err != nil {
		return Override{}, core.Invalid(CodeInvalidOverride, "", "the override cannot be canonicalized: %v", err)
	}
	id, err := s.d.IDs.New()
	if err != nil {
		return Override{}, core.Unavailable("id generation", err)
	}
	now := s.d.Now()
	o := Override{
		OverrideID: id, OrgID: req.OrgID, DossierID: d.DossierID, DossierDigest: digest, DecisionID: d.DecisionID,
		DecisionOutcome: d.Outcome, DecisionMode: d.Mode, Resolution: req.Resolution, Actor: req.Actor, Note: req.Note,
		ReasonCode: req.ReasonCode, CredentialID: req.Principal.KeyID, RequestID: req.RequestID, CreatedAt: now.Format(core.TimeFormat),
	}
	var out Override
	err = s.d.Store.Update(ctx, req.OrgID, func(tx store.Tx) error {
		out = Override{}
		replayed, err := idempotency.Replay(ctx, tx, scopeOverride, req.IdempotencyKey, requestDigest, &out)
		if err != nil || replayed {
			out.Replayed = replayed
			return err
		}
		out = o
		if err := artifact.RecordLedgered(ctx, tx, KindOverride, out.OverrideID, out.DossierID, ledger.KindOverride, now, &out.LedgerSeq, &out); err != nil {
			return err
		}
		return idempotency.Remember(ctx, tx, scopeOverride, req.IdempotencyKey, requestDigest, out, now)
	})
	if err != nil {
		return Override{}, core.Translate("record override", err)
	}
	return out, nil
}

func checkOverride(req OverrideRequest) error {
	switch req.Resolution {
	case OverrideApproved, OverrideRejected:
	default:
		return core.Invalid(CodeInvalidOverride, "resolution", "resolution must be APPROVED or REJECTED")
	}
	if !core.ValidName(req.Actor.ID, maxActorID) {
		return core.Invalid(CodeInvalidOverride, "actor.id", "actor.id is required: 1 to %d bytes without control characters", maxActorID)
	}
	if !core.ValidName(req.Actor.Type, maxActorType) {
		return core.Invalid(CodeInvalidOverride, "actor.type", "actor.type is required: 1 to %d bytes without control characters", maxActorType)
	}
	if len(req.Note) > MaxOverrideNote || strings.ContainsFunc(req.Note, func(r rune) bool {
		return unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\t'
	}) {
		return core.Invalid(CodeInvalidOverride, "note", "note is at most %d bytes, without control characters other than line breaks and tabs", MaxOverrideNote)
	}
	if req.ReasonCode != "" && !validCode(req.ReasonCode) {
		return core.Invalid(CodeInvalidOverride, "reason_code", "reason_code is 1 to %d characters of A-Z, 0-9 and _, starting with a letter", maxReasonCode)
	}
	return nil
}

// validName reports whether s is 1 to max bytes of text without control
// characters.

// validCode reports whether s is an UPPER_SNAKE code of at most
// maxReasonCode bytes.
func validCode(s string) bool {
	if s == "" || len(s) > maxReasonCode || s[0] < 'A' || s[0] > 'Z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// OverrideTrail is a dossier's overrides, oldest first. Truncated says that
// more than MaxEvidenceItems exist (the oldest are listed).
type OverrideTrail struct {
	OrgID      string         `json:"org_id"`
	DossierID  string         `json:"dossier_id"`
	DecisionID string         `json:"decision_id"`
	Outcome    policy.Outcome `json:"outcome"`
	Overrides  []Override     `json:"overrides"`
	Truncated  bool           `json:"truncated,omitempty"`
}

// Overrides returns the trail of human resolutions of the org's dossier;
// an unknown dossier (or another org's) is core.ErrNotFound.
func (s *Service) Overrides(ctx context.Context, orgID, dossierID string) (OverrideTrail, error) {
	d, _, err := core.ReadDossier(ctx, s.d.Store, orgID, dossierID)
	if err != nil {
		return OverrideTrail{}, err
	}
	trail := OverrideTrail{OrgID: orgID, DossierID: d.DossierID, DecisionID: d.DecisionID, Outcome: d.Outcome}
	trail.Truncated, err = listOverrides(ctx, s.d.Store, orgID, d.DossierID, &trail.Overrides)
	return trail, err
}

// listOverrides decodes the overrides recorded for dossierID into *out,
// oldest first, at most MaxEvidenceItems; it reports whether more exist.
func listOverrides(ctx context.Context, r artifact.Reader, orgID, dossierID string, out *[]Override) (bool, error) {
	truncated, err := artifact.List(ctx, r, orgID, KindOverride, dossierID, MaxEvidenceItems, out)
	if err != nil {
		return false, core.Unavailable("read override records", err)
	}
	return truncated, nil
}
