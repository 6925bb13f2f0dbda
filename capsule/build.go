package capsule

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/clearancehq/clearance/internal/canon"
)

// Outcome is a Clearance decision outcome (the wire strings of the policy
// package).
type Outcome string

// Outcomes.
const (
	OutcomeAllow          Outcome = "ALLOW"
	OutcomeEscalate       Outcome = "ESCALATE"
	OutcomeReviewRequired Outcome = "REVIEW_REQUIRED"
	OutcomeBlock          Outcome = "BLOCK"
)

// Mode is a decision's effective mode.
type Mode string

// Modes.
const (
	ModeEnforcement Mode = "ENFORCEMENT"
	ModeShadow      Mode = "SHADOW"
)

// State is a grant lifecycle state as finalization records it.
type State string

// Final states.
const (
	StateCommitted     State = "COMMITTED"
	StateFailed        State = "FAILED"
	StateIndeterminate State = "INDETERMINATE"
)

// Final codes of refused finalizations, recorded as INDETERMINATE.
const (
	FinalCodeLeaseExpired   = "CLAIM_LEASE_EXPIRED"
	FinalCodeScopeInvariant = "CLAIM_SCOPE_INVARIANT_VIOLATION"
)

// Evidence is what Build projects: one Clearance decision, from its
// dossier, and the lifecycle of the grant it issued, if any. Digests are
// Clearance's "sha256:<64 lowercase hex>" strings. Times must be set; Build
// reads no clock.
type Evidence struct {
	// Operator is the accountable tenant: the org id.
	Operator string
	// Developer is the agent identity that asked: the intent's actor id,
	// or the credential id when the request named no actor.
	Developer string

	DecisionID    string
	DossierID     string
	DossierDigest string // digest of the dossier's canonical JSON (its ledger payload_digest)
	Outcome       Outcome
	Mode          Mode // the effective mode
	ReasonCodes   []string
	// EvaluationFailed: policy evaluation failed and the outcome is the
	// fail-closed BLOCK (the dossier's evaluation_error is set).
	EvaluationFailed bool
	Policy           PolicyRef
	IntentDigest     string // digest of the canonical intent or request as received
	DecidedAt        time.Time

	// EffectType is an effect.type registry value ("write_order",
	// "send_payment", …) for the finalization capsules. Empty omits it;
	// Build never guesses it from the action type.
	EffectType string

	// Grant is the execution grant issued with the decision; nil when none
	// was (every outcome but ALLOW, and SHADOW).
	Grant *Grant

	// Approval is the human approval the decision was evaluated with (a
	// managed escalation's fresh evaluation, or evidence presented with the
	// intent); nil when none. An ALLOW with one was disposed by a human.
	Approval *Approval
	// Escalation is the managed escalation this ESCALATE opened; nil when
	// none. Its verdict is hitl_dispatched, and once the escalation ended a
	// second capsule supersedes it with how.
	Escalation *Escalation
}

// Approval is a verified approval: which service's receipt recorded it.
type Approval struct {
	Issuer, RequestID, ReceiptID string
}

// Escalation is a managed escalation and, once it ended, how.
type Escalation struct {
	EscalationID string
	// State is the escalation's state; its end is one of GRANT_READY,
	// DENIED, EXPIRED, CANCELLED or FAILED, at ConcludedAt.
	State              string
	ConcludedAt        time.Time
	ResolvedDecisionID string // the fresh decision, when there was one
}

// Ended reports whether the escalation reached a final state.
func (e *Escalation) Ended() bool {
	switch e.State {
	case "GRANT_READY", "DENIED", "EXPIRED", "CANCELLED", "FAILED":
		return !e.ConcludedAt.IsZero()
	}
	return false
}

// Grant is an issued execution grant and, once it has one, its
// finalization.
type Grant struct {
	GrantID       string
	IssuedAt      time.Time
	ExpiresAt     time.Time
	PayloadDigest string // digest of the canonical bound action (the grant's payload_digest)
	// Finalization is nil while the grant is ISSUED or CLAIMED.
	Finalization *Finalization
}

// Finalization is a grant's finalization as Clearance recorded it.
type Finalization struct {
	// State is what finalization recorded: COMMITTED, FAILED or
	// INDETERMINATE (refusals and lapsed leases included). For a reconciled
	// grant it is INDETERMINATE; the resolution already stored in
	// claim.Grant.State is accepted too and read as INDETERMINATE.
	State State
	// FinalCode is CLAIM_LEASE_EXPIRED or CLAIM_SCOPE_INVARIANT_VIOLATION
	// for a refused (INDETERMINATE) finalization.
	FinalCode   string
	FinalizedAt time.Time
	// EffectConfirmed: digest-bound evidence confirmed the effect (only
	// ever with COMMITTED, and then Evidence.EffectDigest is required).
	EffectConfirmed bool
	Evidence        *EffectEvidence
	Reconciliation  *Reconciliation
}

// EffectEvidence is the effect evidence recorded with a finalization.
type EffectEvidence struct {
	Kind         string
	Status       string
	EffectDigest string
	Source       string
}

// Reconciliation settles an INDETERMINATE finalization with late evidence.
type Reconciliation struct {
	Resolution      State // COMMITTED or FAILED
	EffectConfirmed bool  // only with COMMITTED, and then Evidence.EffectDigest is required
	Evidence        *EffectEvidence
	ReconciledAt    time.Time
}

// Build projects one decision's evidence into its capsules, in ledger order
// (see MAPPING.md for the table):
//
//  1. the verdict capsule, sealed at decision time: the disposition the
//     policy reached, and no effect at all. An authorization verdict is
//     never evidence that anything was planned, dispatched or done;
//  2. when the grant was finalized, an outcome capsule that chains to the
//     verdict with relation "confirms" and carries the effect as the
//     executor reported it (effect_attestation runtime_claimed): confirmed
//     only with digest-bound evidence that confirmed it;
//  3. when an INDETERMINATE finalization was reconciled, a resolution
//     capsule that supersedes the outcome capsule.
//
// Every capsule is format 4, self-attested, and claims no transparency
// anchoring. The capsules are a compatibility projection: each binds the
// dossier by digest, and the dossier stays the canonical record. Build
// fails with ErrInvalidEvidence on inconsistent evidence (a grant for a
// non-ALLOW or SHADOW decision, a confirmed effect without a digest, …).
func Build(e Evidence) ([]Sealed, error) {
	if err := e.validate(); err != nil {
		return nil, err
	}
	verdict, err := Seal(e.verdictCapsule())
	if err != nil {
		return nil, err
	}
	out := []Sealed{verdict}
	if esc := e.Escalation; esc != nil && esc.Ended() && e.Mode == ModeEnforcement {
		ended, err := Seal(e.escalationCapsule(verdict.ID, esc))
		if err != nil {
			return nil, err
		}
		return append(out, ended), nil
	}
	if e.Grant == nil || e.Grant.Finalization == nil {
		return out, nil
	}
	f := e.Grant.Finalization
	outcome, err := Seal(e.outcomeCapsule(verdict.ID, f))
	if err != nil {
		return nil, err
	}
	out = append(out, outcome)
	if f.Reconciliation == nil {
		return out, nil
	}
	resolution, err := Seal(e.resolutionCapsule(outcome.ID, f.Reconciliation))
	if err != nil {
		return nil, err
	}
	return append(out, resolution), nil
}

func invalidEvidence(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidEvidence, fmt.Sprintf(format, args...))
}

func (e *Evidence) validate() error {
	for _, f := range []struct{ name, v string }{
		{"Operator", e.Operator}, {"Developer", e.Developer}, {"DecisionID", e.DecisionID}, {"DossierID", e.DossierID},
	} {
		if f.v == "" {
			return invalidEvidence("%s is required", f.name)
		}
	}
	if _, err := canon.ParseDigest(e.DossierDigest); err != nil {
		return invalidEvidence("DossierDigest: %v", err)
	}
	for _, d := range []struct{ name, v string }{
		{"IntentDigest", e.IntentDigest}, {"Policy.BundleDigest", e.Policy.BundleDigest},
	} {
		if d.v == "" {
			continue
		}
		if _, err := canon.ParseDigest(d.v); err != nil {
			return invalidEvidence("%s: %v", d.name, err)
		}
	}
	switch e.Outcome {
	case OutcomeAllow, OutcomeEscalate, OutcomeReviewRequired, OutcomeBlock:
	default:
		return invalidEvidence("Outcome %q is not ALLOW, ESCALATE, REVIEW_REQUIRED or BLOCK", e.Outcome)
	}
	if e.Mode != ModeEnforcement && e.Mode != ModeShadow {
		return invalidEvidence("Mode %q is not ENFORCEMENT or SHADOW", e.Mode)
	}
	if e.EvaluationFailed && e.Outcome != OutcomeBlock {
		return invalidEvidence("a failed evaluation fails closed to BLOCK, not %s", e.Outcome)
	}
	if e.DecidedAt.IsZero() {
		return invalidEvidence("DecidedAt is required")
	}
	g := e.Grant
	if g == nil {
		return nil
	}
	if e.Outcome != OutcomeAllow || e.Mode != ModeEnforcement {
		return invalidEvidence("a grant is issued only for ALLOW in ENFORCEMENT, not %s in %s", e.Outcome, e.Mode)
	}
	if g.GrantID == "" || g.IssuedAt.IsZero() {
		return invalidEvidence("Grant needs GrantID and IssuedAt")
	}
	if g.PayloadDigest != "" {
		if _, err := canon.ParseDigest(g.PayloadDigest); err != nil {
			return invalidEvidence("Grant.PayloadDigest: %v", err)
		}
	}
	f := g.Finalization
	if f == nil {
		return nil
	}
	if f.FinalizedAt.IsZero() {
		return invalidEvidence("Finalization.FinalizedAt is required")
	}
	if r := f.Reconciliation; r != nil {
		if r.Resolution != StateCommitted && r.Resolution != StateFailed {
			return invalidEvidence("Reconciliation.Resolution %q is not COMMITTED or FAILED", r.Resolution)
		}
		if f.State != StateIndeterminate && f.State != r.Resolution {
			return invalidEvidence("only an INDETERMINATE finalization is reconciled, not %s", f.State)
		}
		if r.ReconciledAt.IsZero() {
			return invalidEvidence("Reconciliation.ReconciledAt is required")
		}
		if err := checkConfirmation("Reconciliation", r.Resolution, r.EffectConfirmed, r.Evidence); err != nil {
			return err
		}
		if f.EffectConfirmed {
			return invalidEvidence("an INDETERMINATE finalization never confirmed an effect")
		}
		return checkEvidence("Finalization", f.Evidence)
	}
	switch f.State {
	case StateCommitted, StateFailed, StateIndeterminate:
	default:
		return invalidEvidence("Finalization.State %q is not COMMITTED, FAILED or INDETERMINATE", f.State)
	}
	if f.FinalCode != "" && f.State != StateIndeterminate {
		return invalidEvidence("FinalCode %s goes only with INDETERMINATE", f.FinalCode)
	}
	return checkConfirmation("Finalization", f.State, f.EffectConfirmed, f.Evidence)
}

func checkConfirmation(what string, s State, confirmed bool, ev *EffectEvidence) error {
	if err := checkEvidence(what, ev); err != nil {
		return err
	}
	if !confirmed {
		return nil
	}
	if s != StateCommitted {
		return invalidEvidence("%s: only COMMITTED confirms an effect, not %s", what, s)
	}
	if ev == nil || ev.EffectDigest == "" {
		return invalidEvidence("%s: a confirmed effect needs the digest of the evidence that confirmed it", what)
	}
	return nil
}

func checkEvidence(what string, ev *EffectEvidence) error {
	if ev == nil || ev.EffectDigest == "" {
		return nil
	}
	if _, err := canon.ParseDigest(ev.EffectDigest); err != nil {
		return invalidEvidence("%s.Evidence.EffectDigest: %v", what, err)
	}
	return nil
}

// timestamp renders t as RFC 3339 UTC with a Z suffix.
func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func timestampOrEmpty(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return timestamp(t)
}

// hexOf turns a validated "sha256:<hex>" digest into the bare 64 hex digits
// of a JSON digest field; "" stays "".
func hexOf(digest string) string { return strings.TrimPrefix(digest, "sha256:") }

// disposition is the policy's disposition of the decision (MAPPING.md).
func (e *Evidence) disposition() Disposition {
	d := Disposition{Approver: ApproverPolicy, Authority: e.Policy.BundleDigest}
	switch e.Outcome {
	case OutcomeAllow:
		d.Decision = DecisionAccept
	case OutcomeEscalate:
		d.Decision, d.VerdictClass = DecisionNeedsInput, VerdictEscalated
	case OutcomeReviewRequired:
		d.Decision, d.VerdictClass = DecisionNeedsInput, VerdictNeedsDecision
	case OutcomeBlock:
		d.Decision, d.VerdictClass = DecisionReject, VerdictBlocked
		if e.EvaluationFailed {
			d.VerdictClass = VerdictEngineFailure
		}
	}
	if e.Outcome != OutcomeAllow {
		d.ReasonDigest = reasonDigest(e.Outcome, e.ReasonCodes)
	}
	if e.Mode == ModeShadow {
		// Observed, not enforced: nothing was stopped or routed, so no
		// terminal reason-class is claimed.
		d.VerdictClass = ""
		return d
	}
	if e.Outcome == OutcomeEscalate && e.Escalation != nil {
		d.VerdictClass = VerdictHITLDispatched // routed to a human approver
	}
	if e.Outcome == OutcomeAllow && e.Approval != nil {
		// A human approved with presence; the policy accepted on it.
		d.Approver, d.HumanDisposed, d.Authority = ApproverHuman, true, "" // authority is a non-human's
	}
	return d
}

// escalationCapsule closes a managed escalation's chain (supersedes the
// hitl_dispatched verdict): a human approved (resolved; the action runs
// under the fresh decision) or denied, or the escalation expired, was
// cancelled or failed.
func (e *Evidence) escalationCapsule(parent ID, esc *Escalation) Capsule {
	d := Disposition{Approver: ApproverPolicy, Decision: DecisionReject, Authority: e.Policy.BundleDigest}
	switch esc.State {
	case "GRANT_READY":
		d = Disposition{Approver: ApproverHuman, HumanDisposed: true, Decision: DecisionAccept, VerdictClass: VerdictResolved}
	case "DENIED":
		d = Disposition{Approver: ApproverHuman, HumanDisposed: true, Decision: DecisionReject, VerdictClass: VerdictDenied}
	case "EXPIRED":
		d.VerdictClass = VerdictExpired
	case "CANCELLED":
		d.VerdictClass = VerdictResolved
	default: // FAILED: the approval did not verify, or the policy refused on it
		d.VerdictClass = VerdictDenied
	}
	ext := e.extension()
	ext.Escalation = &EscalationRef{EscalationID: esc.EscalationID, State: esc.State, ConcludedAt: timestamp(esc.ConcludedAt),
		ResolvedDecisionID: esc.ResolvedDecisionID}
	return Capsule{
		ActionID: e.DecisionID + "/escalation", ActionType: ActionDecide, Operator: e.Operator, Developer: e.Developer,
		Timestamp:   timestamp(esc.ConcludedAt),
		Disposition: d,
		Chain:       &Chain{ParentCapsuleID: parent.String(), Relation: RelationSupersedes},
		Clearance:   ext,
	}
}

// reasonDigest is the JSON digest of the structured reason object
// {"outcome", "reason_codes"}.
func reasonDigest(o Outcome, codes []string) string {
	if codes == nil {
		codes = []string{}
	}
	b, err := canon.Marshal(struct {
		Outcome     Outcome  `json:"outcome"`
		ReasonCodes []string `json:"reason_codes"`
	}{o, codes})
	if err != nil {
		return "" // strings and a slice of strings always marshal
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (e *Evidence) verdictCapsule() Capsule {
	actionType := ActionDecide
	if e.Mode == ModeShadow {
		actionType = ActionFYI
	}
	result := ResultPass
	if e.Outcome != OutcomeAllow {
		result = ResultFail
	}
	ext := e.extension()
	ext.DossierDigest = e.DossierDigest
	ext.Outcome, ext.Mode = string(e.Outcome), string(e.Mode)
	ext.ReasonCodes = e.ReasonCodes
	if e.Policy != (PolicyRef{}) {
		p := e.Policy
		ext.Policy = &p
	}
	ext.IntentDigest = e.IntentDigest
	if esc := e.Escalation; esc != nil {
		ext.Escalation = &EscalationRef{EscalationID: esc.EscalationID}
	}
	if g := e.Grant; g != nil {
		ext.Grant = &GrantRef{GrantID: g.GrantID, IssuedAt: timestamp(g.IssuedAt), ExpiresAt: timestampOrEmpty(g.ExpiresAt), PayloadDigest: g.PayloadDigest}
	}
	return Capsule{
		ActionID: e.DecisionID, ActionType: actionType, Operator: e.Operator, Developer: e.Developer,
		Timestamp:   timestamp(e.DecidedAt),
		Disposition: e.disposition(),
		Constraints: []Constraint{{
			ID: PolicyConstraintID, Result: result,
			Blocking:       e.Mode == ModeEnforcement && e.Outcome != OutcomeAllow,
			EvidenceDigest: hexOf(e.DossierDigest),
		}},
		Clearance: ext,
	}
}

func (e *Evidence) extension() *Extension {
	ext := &Extension{Profile: ExtensionProfile, DecisionID: e.DecisionID, DossierID: e.DossierID}
	if a := e.Approval; a != nil { // every capsule of the decision names it
		ext.Approval = &ApprovalRef{Issuer: a.Issuer, RequestID: a.RequestID, ReceiptID: a.ReceiptID}
	}
	return ext
}

// effect builds the Effect Record of a reported outcome. Nothing here is
// observed by the gate, so the grade is runtime_claimed; confirmed needs
// digest-bound evidence that confirmed the effect.
func (e *Evidence) effect(s State, confirmed bool, ev *EffectEvidence) *Effect {
	ef := &Effect{Type: e.EffectType, RequestDigest: hexOf(e.Grant.PayloadDigest), ExternalRef: e.Grant.GrantID,
		DecisionID: e.DecisionID, EffectAttestation: AttestationRuntimeClaimed}
	switch {
	case s == StateCommitted && confirmed:
		ef.Status, ef.ResponseDigest = EffectConfirmed, hexOf(ev.EffectDigest)
	case s == StateFailed:
		ef.Status = EffectFailed
	default: // COMMITTED without confirming evidence, INDETERMINATE
		ef.Status = EffectDispatched
	}
	return ef
}

func (e *Evidence) outcomeCapsule(parent ID, f *Finalization) Capsule {
	state := f.State
	if f.Reconciliation != nil {
		state = StateIndeterminate
	}
	d := e.disposition()
	switch {
	case state == StateIndeterminate && f.FinalCode == FinalCodeLeaseExpired:
		d.VerdictClass = VerdictTimeout
	case state == StateIndeterminate:
		d.VerdictClass = VerdictErrored
	default:
		d.VerdictClass = VerdictExecuted
	}
	ext := e.extension()
	ext.Grant = &GrantRef{GrantID: e.Grant.GrantID}
	ext.Finalization = &FinalizationRef{State: string(state), FinalCode: f.FinalCode, FinalizedAt: timestamp(f.FinalizedAt),
		EffectConfirmed: f.EffectConfirmed && state == StateCommitted, Evidence: evidenceRef(f.Evidence)}
	return Capsule{
		ActionID: e.DecisionID + "/finalization", ActionType: ActionDecide, Operator: e.Operator, Developer: e.Developer,
		Timestamp:   timestamp(f.FinalizedAt),
		Disposition: d,
		Effect:      e.effect(state, f.EffectConfirmed, f.Evidence),
		Chain:       &Chain{ParentCapsuleID: parent.String(), Relation: RelationConfirms},
		Clearance:   ext,
	}
}

func (e *Evidence) resolutionCapsule(parent ID, r *Reconciliation) Capsule {
	d := e.disposition()
	d.VerdictClass = VerdictExecuted
	ext := e.extension()
	ext.Grant = &GrantRef{GrantID: e.Grant.GrantID}
	ext.Reconciliation = &ReconciliationRef{Resolution: string(r.Resolution), ReconciledAt: timestamp(r.ReconciledAt),
		EffectConfirmed: r.EffectConfirmed, Evidence: evidenceRef(r.Evidence)}
	return Capsule{
		ActionID: e.DecisionID + "/reconciliation", ActionType: ActionDecide, Operator: e.Operator, Developer: e.Developer,
		Timestamp:   timestamp(r.ReconciledAt),
		Disposition: d,
		Effect:      e.effect(r.Resolution, r.EffectConfirmed, r.Evidence),
		Chain:       &Chain{ParentCapsuleID: parent.String(), Relation: RelationSupersedes},
		Clearance:   ext,
	}
}

func evidenceRef(ev *EffectEvidence) *EvidenceRef {
	if ev == nil {
		return nil
	}
	return &EvidenceRef{Kind: ev.Kind, Status: ev.Status, EffectDigest: ev.EffectDigest, Source: ev.Source}
}
