package clearance

import "github.com/clearancehq/clearance/analytics"

// Consent is an org's consent to growth reports with its history
// (analytics.Consent).
type Consent = analytics.Consent

// Classification is an org's growth classification and first-touch
// attribution (analytics.Classification).
type Classification = analytics.Classification

// Scorecard is the growth scorecard (analytics.Scorecard).
type Scorecard = analytics.Scorecard

// Baseline is a frozen scorecard (analytics.Baseline).
type Baseline = analytics.Baseline

// GrowthReport is the signed payload of a blast-radius report
// (analytics.Report).
type GrowthReport = analytics.Report
