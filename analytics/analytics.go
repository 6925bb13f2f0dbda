package analytics

import (
	"context"
	"slices"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
)

// Codes of the analytics routes.
const (
	CodeInvalidConsent        = "INVALID_CONSENT"
	CodeInvalidClassification = "INVALID_CLASSIFICATION"
	CodeInvalidBaselineName   = "INVALID_BASELINE_NAME"
	CodeBaselineExists        = "BASELINE_EXISTS"
	CodeInvalidMonth          = "INVALID_MONTH"
	CodeMonthNotComplete      = "MONTH_NOT_COMPLETE"
	CodeInsufficientCohort    = "INSUFFICIENT_COHORT"
	// CodeCohortChanged: consents or classifications kept changing while
	// a report was being frozen (409): ask again.
	CodeCohortChanged = "COHORT_CHANGED"
	// CodeReportingKeyNotConfigured: a report must be signed and the
	// engine has no reporting key (503).
	CodeReportingKeyNotConfigured = "REPORTING_KEY_NOT_CONFIGURED"
)

// Limits of the analytics inputs.
const (
	MaxConsentReference = 500 // characters
	MaxSurface          = 80  // characters
	MaxUTMMember        = 120 // characters
	MaxBaselineName     = 80  // characters
	// MinOrgsPerCell is how many distinct orgs a published cell needs.
	MinOrgsPerCell = 5
)

// Config holds the analytics feature's own settings.
type Config struct {
	// ReportingKey signs blast-radius reports; the zero Key means none
	// (a new report is 503 REPORTING_KEY_NOT_CONFIGURED).
	ReportingKey grant.Key
}

// Service is the analytics feature. Create it with New.
type Service struct {
	d   core.Deps
	cfg Config
}

// New returns the analytics feature over the kernel d.
func New(d core.Deps, cfg Config) *Service {
	return &Service{d: d, cfg: cfg}
}

// ReportingJWKS returns the public reporting keys that verify reports:
// the one configured (first) and every other that signed a frozen report,
// so that a report frozen before a key change still verifies. It is empty
// when there is none.
func (s *Service) ReportingJWKS(ctx context.Context) (jose.JSONWebKeySet, error) {
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{}}
	current := ""
	if !s.cfg.ReportingKey.IsZero() {
		set.Keys = append(set.Keys, s.cfg.ReportingKey.PublicJWK())
		current = s.cfg.ReportingKey.KID()
	}
	used, err := listRecords[jose.JSONWebKey](ctx, s, kindKey, refKey)
	if err != nil {
		return set, err
	}
	kids := make([]string, 0, len(used))
	for kid := range used {
		if kid != current {
			kids = append(kids, kid)
		}
	}
	slices.Sort(kids)
	for _, kid := range kids {
		set.Keys = append(set.Keys, used[kid])
	}
	return set, nil
}

// Records of the feature, all in the platform's pseudo-org (tenant.
// PlatformOrgID), so that one indexed read lists each kind across orgs.
const (
	kindProfile  = "analytics.org"           // id org: consent and classification
	kindRollup   = "analytics.rollup"        // id org: ledger seq reached, firsts, totals
	kindMonth    = "analytics.month"         // id month/org, ref month: the org's cells
	kindBaseline = "analytics.baseline"      // id name
	kindReport   = "analytics.blast_radius"  // id month
	kindEpoch    = "analytics.epoch"         // id "profiles": changes of any profile
	kindKey      = "analytics.reporting_key" // id kid, ref "key": a key that signed a report
	refOrg       = "org"                     // the ref of every profile and rollup
	refKey       = "key"                     // the ref of every reporting key
)

// cells are the mode × outcome cells of a report, in report order.
var cells = func() []cell {
	var out []cell
	for _, m := range []policy.Mode{policy.ModeEnforcement, policy.ModeShadow} {
		for _, o := range []policy.Outcome{policy.OutcomeAllow, policy.OutcomeEscalate, policy.OutcomeReviewRequired, policy.OutcomeBlock} {
			out = append(out, cell{Mode: string(m), Outcome: string(o)})
		}
	}
	return out
}()

type cell struct{ Mode, Outcome string }

func (c cell) key() string { return c.Mode + "/" + c.Outcome }

// platformUpdate runs fn in the platform's transaction.
func (s *Service) platformUpdate(ctx context.Context, fn func(tx store.Tx) error) error {
	return s.d.Store.Backend.Update(ctx, tenant.PlatformOrgID, fn)
}

// monthOf is t's UTC calendar month, "YYYY-MM".
func monthOf(t time.Time) string { return t.UTC().Format("2006-01") }

func unavailable(op string, err error) error {
	if _, ok := err.(*core.Error); ok {
		return err
	}
	return core.Unavailable(op, err)
}
