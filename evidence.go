package clearance

import (
	"github.com/clearancehq/clearance/escalation"
	"github.com/clearancehq/clearance/evidence"
	"github.com/clearancehq/clearance/policy"
)

// Types of the evidence of decisions (package evidence).
type (
	DossierRecord      = evidence.DossierRecord
	ShadowReport       = evidence.ShadowReport
	WorkflowShadow     = evidence.WorkflowShadow
	Window             = evidence.Window
	DecisionChain      = evidence.DecisionChain
	Capsules           = evidence.Capsules
	ProducerEnvelope   = evidence.ProducerEnvelope
	OverrideResolution = evidence.OverrideResolution
	OverrideActor      = evidence.OverrideActor
	OverrideRequest    = evidence.OverrideRequest
	Override           = evidence.Override
	OverrideTrail      = evidence.OverrideTrail
	DecisionFilter     = evidence.DecisionFilter
	DecisionSummary    = evidence.DecisionSummary
	DecisionList       = evidence.DecisionList
	Activity           = evidence.Activity
	ActivityStep       = evidence.ActivityStep
	ActivityBucket     = evidence.Bucket
)

// Console pages.
const (
	MaxDecisionsPage = evidence.MaxDecisionsPage
	// MaxOpenEscalationsListed bounds GET /v1/console/escalations.
	MaxOpenEscalationsListed = escalation.MaxOpenListed
)

// Activity buckets.
const (
	BucketHour = evidence.BucketHour
	BucketDay  = evidence.BucketDay
)

// Override resolutions.
const (
	OverrideApproved = evidence.OverrideApproved
	OverrideRejected = evidence.OverrideRejected
)

// Limits of the evidence.
const (
	MaxOverrideNote     = evidence.MaxOverrideNote
	MaxEvidenceItems    = evidence.MaxEvidenceItems
	DefaultShadowWindow = evidence.DefaultShadowWindow
	// CapsuleProfile names the capsule draft every export is pinned to.
	CapsuleProfile = evidence.CapsuleProfile
)

// Between is the window [from, to).
var Between = evidence.Between

// ReasonCodes lists the reason codes policies may use.
func ReasonCodes() []policy.ReasonCode { return policy.ReasonCodes() }
