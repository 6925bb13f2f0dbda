package analytics

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
)

// Consent is an org's consent to be counted in growth reports, as it
// stands, with every change before it.
type Consent struct {
	OrgID            string         `json:"org_id"`
	OptedIn          bool           `json:"opted_in"`
	ConsentReference string         `json:"consent_reference"`
	RecordedAt       time.Time      `json:"recorded_at"`
	History          []ConsentEntry `json:"history"` // oldest first, the current one last
}

// ConsentEntry is one recorded consent change.
type ConsentEntry struct {
	OptedIn          bool      `json:"opted_in"`
	ConsentReference string    `json:"consent_reference"`
	RecordedAt       time.Time `json:"recorded_at"`
}

// UTM is a first-touch attribution: where the org came from.
type UTM struct {
	Source   string `json:"source,omitempty"`
	Medium   string `json:"medium,omitempty"`
	Campaign string `json:"campaign,omitempty"`
}

// Classification is an org's growth classification and its first-touch
// attribution.
type Classification struct {
	OrgID       string `json:"org_id"`
	Environment string `json:"environment"`
	Audience    string `json:"audience"`
	Surface     string `json:"surface"`
	// Reviewed: prod and external, the orgs the scorecard counts.
	Reviewed   bool       `json:"reviewed"`
	FirstTouch FirstTouch `json:"first_touch"`
	UpdatedAt  time.Time  `json:"updated_at"`
}

// FirstTouch is what the first classification froze.
type FirstTouch struct {
	Surface      string    `json:"surface"`
	SourceUTM    *UTM      `json:"source_utm"` // null when the first classification had none
	ClassifiedAt time.Time `json:"classified_at"`
}

// profile is the stored record of an org (kindProfile).
type profile struct {
	OrgID          string          `json:"org_id"`
	Consent        []ConsentEntry  `json:"consent,omitempty"`
	Classification *Classification `json:"classification,omitempty"`
}

func (p profile) consented() bool {
	return len(p.Consent) > 0 && p.Consent[len(p.Consent)-1].OptedIn
}

func (p profile) reviewed() bool { return p.Classification != nil && p.Classification.Reviewed }

type consentBody struct {
	OptedIn          *bool   `json:"opted_in"`
	ConsentReference *string `json:"consent_reference"`
}

// SetConsent records the org's consent from a body of exactly opted_in
// (boolean) and consent_reference (1 to MaxConsentReference characters):
// the operator's reference to where the org gave or withdrew it.
func (s *Service) SetConsent(ctx context.Context, orgID string, raw []byte) (Consent, error) {
	if _, err := core.ReadOrg(ctx, s.d.Store, orgID); err != nil {
		return Consent{}, err
	}
	var b consentBody
	if err := strictjson.Decode(raw, &b, s.d.JSON); err != nil {
		return Consent{}, core.TranslateInput(err)
	}
	var p problems
	if b.OptedIn == nil {
		p.missing("opted_in")
	}
	switch {
	case b.ConsentReference == nil:
		p.missing("consent_reference")
	default:
		p.text("consent_reference", *b.ConsentReference, 1, MaxConsentReference)
	}
	if err := p.err(CodeInvalidConsent, "the consent"); err != nil {
		return Consent{}, err
	}
	entry := ConsentEntry{OptedIn: *b.OptedIn, ConsentReference: *b.ConsentReference, RecordedAt: s.d.Now().UTC()}
	var out profile
	err := s.updateProfile(ctx, orgID, func(pr *profile) {
		pr.Consent = append(pr.Consent, entry)
		out = *pr
	})
	if err != nil {
		return Consent{}, err
	}
	return Consent{OrgID: orgID, OptedIn: entry.OptedIn, ConsentReference: entry.ConsentReference,
		RecordedAt: entry.RecordedAt, History: out.Consent}, nil
}

// Classification values.
var (
	environments = []string{"prod", "staging", "dev"}
	audiences    = []string{"external", "internal", "sandbox", "demo"}
	surfaceRE    = regexp.MustCompile(`^[a-z][a-z0-9_]{0,79}$`)
)

type classifyBody struct {
	Environment *string  `json:"environment"`
	Audience    *string  `json:"audience"`
	Surface     *string  `json:"surface"`
	SourceUTM   *utmBody `json:"source_utm"`
}

type utmBody struct {
	Source   *string `json:"source"`
	Medium   *string `json:"medium"`
	Campaign *string `json:"campaign"`
}

// Classify records the org's classification from a body of environment,
// audience, surface (all required) and optional source_utm. The first
// classification freezes surface and source_utm; a later one changes
// environment and audience only (its surface and source_utm are checked
// and otherwise ignored).
func (s *Service) Classify(ctx context.Context, orgID string, raw []byte) (Classification, error) {
	if _, err := core.ReadOrg(ctx, s.d.Store, orgID); err != nil {
		return Classification{}, err
	}
	var b classifyBody
	if err := strictjson.Decode(raw, &b, s.d.JSON); err != nil {
		return Classification{}, core.TranslateInput(err)
	}
	var p problems
	p.oneOf("environment", b.Environment, environments)
	p.oneOf("audience", b.Audience, audiences)
	switch {
	case b.Surface == nil:
		p.missing("surface")
	case !surfaceRE.MatchString(*b.Surface):
		p.add("surface", "must start with a lowercase letter, then lowercase letters, digits or underscores, 1 to %d characters", MaxSurface)
	}
	var utm *UTM
	if b.SourceUTM != nil {
		utm = &UTM{}
		for _, m := range []struct {
			name string
			v    *string
			to   *string
		}{{"source", b.SourceUTM.Source, &utm.Source}, {"medium", b.SourceUTM.Medium, &utm.Medium}, {"campaign", b.SourceUTM.Campaign, &utm.Campaign}} {
			if m.v != nil {
				p.text("source_utm."+m.name, *m.v, 0, MaxUTMMember)
				*m.to = *m.v
			}
		}
	}
	if err := p.err(CodeInvalidClassification, "the classification"); err != nil {
		return Classification{}, err
	}
	now := s.d.Now().UTC()
	var out Classification
	err := s.updateProfile(ctx, orgID, func(pr *profile) {
		c := pr.Classification
		if c == nil {
			c = &Classification{OrgID: orgID, Surface: *b.Surface, FirstTouch: FirstTouch{Surface: *b.Surface, SourceUTM: utm, ClassifiedAt: now}}
		}
		c.Environment, c.Audience, c.UpdatedAt = *b.Environment, *b.Audience, now
		c.Reviewed = c.Environment == "prod" && c.Audience == "external"
		pr.Classification = c
		out = *c
	})
	return out, err
}

// updateProfile changes the org's profile in the platform's transaction.
func (s *Service) updateProfile(ctx context.Context, orgID string, change func(*profile)) error {
	err := s.platformUpdate(ctx, func(tx store.Tx) error {
		pr := profile{OrgID: orgID}
		if err := core.ReadRecord(ctx, tx, kindProfile, orgID, &pr); err != nil && !core.IsNotFound(err) {
			return err
		}
		change(&pr)
		if err := s.putRecord(ctx, tx, kindProfile, orgID, refOrg, pr); err != nil {
			return err
		}
		var e epoch
		if err := core.ReadRecord(ctx, tx, kindEpoch, epochProfiles, &e); err != nil && !core.IsNotFound(err) {
			return err
		}
		e.N++
		return s.putRecord(ctx, tx, kindEpoch, epochProfiles, "", e)
	})
	if err != nil {
		return unavailable("record analytics profile", err)
	}
	return nil
}

// epoch counts the changes of every profile: a freeze computed under one
// count commits only if no consent or classification changed since.
type epoch struct {
	N uint64 `json:"n"`
}

const epochProfiles = "profiles"

// readEpoch reads the committed profile epoch.
func (s *Service) readEpoch(ctx context.Context) (epoch, error) {
	var e epoch
	err := core.ReadCommitted(ctx, s.d.Store, tenant.PlatformOrgID, kindEpoch, epochProfiles, &e)
	if err != nil && !core.IsNotFound(err) {
		return e, unavailable("read analytics epoch", err)
	}
	return e, nil
}

// problems collects what is wrong with a body, field by field.
type problems []core.FieldError

func (p *problems) add(field, format string, args ...any) {
	*p = append(*p, core.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (p *problems) missing(field string) { p.add(field, "is required") }

func (p *problems) oneOf(field string, v *string, allowed []string) {
	switch {
	case v == nil:
		p.missing(field)
	case !slices.Contains(allowed, *v):
		p.add(field, "must be one of %s", strings.Join(allowed, ", "))
	}
}

// text checks a free-text member: min to max characters, none of them a
// control, format (bidi overrides, zero-width) or line/paragraph separator
// character, which would let the text read differently than it is.
func (p *problems) text(field, v string, min, max int) {
	n := utf8.RuneCountInString(v)
	switch {
	case n < min || n > max:
		p.add(field, "must be %d to %d characters", min, max)
	case strings.ContainsFunc(v, invisible):
		p.add(field, "must not contain control, format or separator characters")
	}
}

func invisible(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

// err is the problems as one error: MISSING_FIELD when a required member
// is all that is wrong, else code.
func (p problems) err(code, what string) error {
	if len(p) == 0 {
		return nil
	}
	allMissing := true
	for _, f := range p {
		allMissing = allMissing && f.Message == "is required"
	}
	if allMissing {
		code = core.CodeMissingField
	}
	return &core.Error{Kind: core.ErrInvalidRequest, Code: code,
		Detail: what + " is not valid: " + p[0].Field + " " + p[0].Message, Fields: p}
}
