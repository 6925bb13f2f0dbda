package decide

import (
	"context"
	"time"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/jsonw"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
)

// Policies resolves the policy a request is evaluated under (the policies
// feature): the org's active version, or a pinned one, evaluated in SHADOW.
type Policies interface {
	Resolve(ctx context.Context, orgID, pin string) (policy.Resolution, error)
	// ResolveSeen is Resolve under the active version last seen, which
	// Current then confirms inside the org's transaction.
	ResolveSeen(ctx context.Context, orgID, pin string) (policy.Resolution, error)
	// Current reports whether r rests on the org's active version as of
	// tx, remembering the active version for ResolveSeen when it does not.
	Current(ctx context.Context, tx store.Tx, r policy.Resolution) (bool, error)
}

// Config is what the decide feature needs beside the kernel.
type Config struct {
	Policies Policies
	// StillActive refuses, inside the org's transaction, a policy version
	// that is no longer the active one (STALE_AUTHORIZATION): an activation
	// racing a grant's issue wins.
	StillActive  func(ctx context.Context, tx store.Tx, version string) error
	GrantTTL     time.Duration // a grant's and an envelope's lifetime
	IntentMaxAge time.Duration // how old a signed intent's issued_at may be
	// Approvals verifies approval evidence and opens managed escalations;
	// nil: none is configured (evidence is refused, MANAGED answers 503).
	Approvals Approvals
	// Events is called after a decision whose event (decision.resolved)
	// was committed, to wake the dispatcher; nil: nobody is waiting.
	Events func()
	// Signals reads the org's inbound signals for policies that read them;
	// nil: policies see none.
	Signals Signals
	// Spend reads the budgets of spend gates; nil: gates see unused
	// budgets (the reservation at claim still holds the line).
	Spend Spend
	// Federation verifies the federated decisions a request presents; nil:
	// a request that presents any is refused.
	Federation Federation
	// Personal seals the personal data of a dossier, in the decision's
	// transaction, as the org's data-protection setting says; nil: every
	// dossier is stored as it is.
	Personal Personal
}

// Personal is what recording needs of the data-protection feature
// (privacy.Service): the dossier as it is to be stored, nil when it is
// stored as it is, and then the Sealer that seals the decision's other
// records (its grant, its idempotent answer, its managed escalation) under
// the same data subject's key. It must never change b (the transaction may
// run again) and must cost an org without a setting no read.
type Personal interface {
	Seal(ctx context.Context, tx store.Tx, b *dossier.Body) (*dossier.Body, dossier.Sealer, error)
	PersonalOpener
}

// Federation verifies federated decisions (the federation feature) for a
// request whose policy input is in: it returns what the policy sees
// (in.Federation) and what the dossier records; a decision that does not
// verify is an error, and nothing is recorded. in is passed by value so
// that no caller's input escapes to the heap for it.
type Federation interface {
	Verify(ctx context.Context, orgID string, envelopes []string, in policy.Input) ([]policy.FederatedDecision, []dossier.Federated, error)
}

// Service makes decisions. Create it with New.
type Service struct {
	d   core.Deps
	cfg Config
}

// New returns the decide feature over the kernel d.
func New(d core.Deps, cfg Config) *Service { return &Service{d: d, cfg: cfg} }

// Decision is the answer to an EvaluateRequest. Its JSON form is the
// evaluate-decision response body.
type Decision struct {
	DecisionID     string          `json:"decision_id"`
	EvaluationID   string          `json:"evaluation_id"`
	DossierID      string          `json:"dossier_id"`
	OrgID          string          `json:"org_id"`
	Outcome        policy.Outcome  `json:"outcome"`
	ReasonCodes    []string        `json:"reason_codes"`
	PolicySnapshot policy.Snapshot `json:"policy_snapshot"`
	Mode           policy.Mode     `json:"mode"`
	DossierURL     string          `json:"dossier_url"`
	DossierDigest  string          `json:"dossier_digest"`
	LedgerSeq      uint64          `json:"ledger_seq"`
	CorrelationID  string          `json:"correlation_id,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	CreatedAt      string          `json:"created_at"`
	// ChainID names the decision chain the decision joined (see Chain).
	ChainID          string `json:"chain_id,omitempty"`
	ParentDecisionID string `json:"parent_decision_id,omitempty"`
	// ActivePolicyVersion is set when the request pinned another version
	// than the org's active one (this one): the answer is then SHADOW.
	ActivePolicyVersion string `json:"active_policy_version,omitempty"`
	// VerificationEnvelope is a signed summary of the decision, minted
	// from the recorded decision for a client that asks (WantEnvelope).
	VerificationEnvelope string `json:"verification_envelope,omitempty"`
	// Replayed is true when an Idempotency-Key returned a stored decision.
	Replayed bool `json:"-"`
}

// AppendJSON appends d's JSON form: byte for byte what encoding/json
// writes for d with HTML escaping off, without reflection (it answers
// every decision).
func (d *Decision) AppendJSON(b []byte) []byte {
	o := jsonw.Open(b)
	o.String("decision_id", d.DecisionID)
	o.String("evaluation_id", d.EvaluationID)
	o.String("dossier_id", d.DossierID)
	o.String("org_id", d.OrgID)
	o.String("outcome", string(d.Outcome))
	o.Strings("reason_codes", d.ReasonCodes)
	o.Member("policy_snapshot")
	p := jsonw.Open(o.B)
	p.String("policy_version", d.PolicySnapshot.PolicyVersion)
	p.String("bundle_id", d.PolicySnapshot.BundleID)
	p.String("bundle_digest", d.PolicySnapshot.BundleDigest)
	p.String("evaluator", d.PolicySnapshot.Evaluator)
	p.OmitEmpty("source_commit", d.PolicySnapshot.SourceCommit)
	o.B = p.Close()
	o.String("mode", string(d.Mode))
	o.String("dossier_url", d.DossierURL)
	o.String("dossier_digest", d.DossierDigest)
	o.Uint("ledger_seq", d.LedgerSeq)
	o.OmitEmpty("correlation_id", d.CorrelationID)
	o.OmitEmpty("idempotency_key", d.IdempotencyKey)
	o.String("created_at", d.CreatedAt)
	o.OmitEmpty("chain_id", d.ChainID)
	o.OmitEmpty("parent_decision_id", d.ParentDecisionID)
	o.OmitEmpty("active_policy_version", d.ActivePolicyVersion)
	o.OmitEmpty("verification_envelope", d.VerificationEnvelope)
	return o.Close()
}

// dossierURL is where a dossier is read.
func dossierURL(id string) string { return "/v1/protocol/dossiers/" + id }

// decisionOf is the answer recorded for dossier d with body digest digest.
func decisionOf(d *dossier.Body, digest string) Decision {
	return Decision{
		DecisionID: d.DecisionID, EvaluationID: d.EvaluationID, DossierID: d.DossierID, OrgID: d.OrgID,
		Outcome: d.Outcome, ReasonCodes: d.ReasonCodes, PolicySnapshot: d.PolicySnapshot, Mode: d.Mode,
		DossierURL: dossierURL(d.DossierID), DossierDigest: digest, LedgerSeq: d.LedgerSeq,
		CorrelationID: d.CorrelationID, IdempotencyKey: d.IdempotencyKey, CreatedAt: d.CreatedAt,
		ChainID: d.ChainID, ParentDecisionID: d.ParentDecisionID, ActivePolicyVersion: d.ActivePolicyVersion,
	}
}
