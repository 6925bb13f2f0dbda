package capsule

// Profile constants of draft-mih-scitt-agent-action-capsule-04, the one draft
// this package implements.
const (
	// SpecVersion is the spec_version a format-4 capsule carries.
	SpecVersion = "draft-mih-scitt-agent-action-capsule-04"
	// FormatVersion is the only format this package produces. Format "2"
	// (VintageFormatVersion) is verified, never produced.
	FormatVersion = "4"
	// VintageFormatVersion is the verification-only format-2 identity path.
	VintageFormatVersion = "2"
	// CanonicalizationJCS is the canonicalization_id of a format-4 capsule:
	// plain RFC 8785 JCS, no absent-field normalization.
	CanonicalizationJCS = "jcs"

	// MediaType is the media type of capsule JSON (draft §12.3).
	MediaType = "application/agent-action-capsule+json"
	// IDMediaType is the content type of a Producer Envelope's raw 32-byte
	// Capsule-ID payload (draft §3.1, §12.3).
	IDMediaType = "application/agent-action-capsule-id"

	// ExtensionKey is the top-level member under which Build records
	// Clearance's own references (decision, dossier, grant). It is
	// namespaced per draft §9.1, so it never collides with a profile field.
	ExtensionKey = "com.github.clearancehq"
	// ExtensionProfile names the layout of the ExtensionKey member.
	ExtensionProfile = "clearance-capsule/1"
	// PolicyConstraintID is the id of the one Constraint Record Build
	// writes: the org's policy bundle evaluated against the intent.
	PolicyConstraintID = "com.github.clearancehq.policy"
)

// ActionType is action_type: whether a disposition was required.
type ActionType string

// Action types (draft §5.1, closed).
const (
	ActionDecide ActionType = "decide" // a disposition was required
	ActionFYI    ActionType = "fyi"    // informational
)

// Decision is disposition.decision (registry-governed, draft §5.5).
type Decision string

// Seeded decisions.
const (
	DecisionAccept     Decision = "accept"
	DecisionReject     Decision = "reject"
	DecisionNeedsInput Decision = "needs_input"
	DecisionDeferred   Decision = "deferred"
)

// Approver is disposition.approver: a closed enum, never a registry.
type Approver string

// Approvers (draft §5.5).
const (
	ApproverHuman        Approver = "human"
	ApproverPolicy       Approver = "policy"
	ApproverCounterparty Approver = "counterparty"
)

// VerdictClass is disposition.verdict_class: why the action terminated as
// it did (registry-governed, draft §5.5.1).
type VerdictClass string

// Seeded verdict classes.
const (
	VerdictExecuted       VerdictClass = "executed"
	VerdictBlocked        VerdictClass = "blocked"
	VerdictHITLDispatched VerdictClass = "hitl_dispatched"
	VerdictDenied         VerdictClass = "denied"
	VerdictTimeout        VerdictClass = "timeout"
	VerdictErrored        VerdictClass = "errored"
	VerdictEngineFailure  VerdictClass = "engine_failure"
	VerdictDeferred       VerdictClass = "deferred"
	VerdictNeedsDecision  VerdictClass = "needs_decision"
	VerdictExpired        VerdictClass = "expired"
	VerdictEscalated      VerdictClass = "escalated"
	VerdictResolved       VerdictClass = "resolved"
	VerdictEpochBoundary  VerdictClass = "epoch_boundary"
)

// NeverDispatches reports whether v is a class that by its kind never
// dispatches an effect and so requires effect_mode "not_applicable" (draft
// §5.5.2, with resolved per the pairing rule and epoch_boundary per §12.1).
func (v VerdictClass) NeverDispatches() bool {
	switch v {
	case VerdictBlocked, VerdictHITLDispatched, VerdictDenied, VerdictEngineFailure, VerdictDeferred,
		VerdictNeedsDecision, VerdictExpired, VerdictEscalated, VerdictResolved, VerdictEpochBoundary:
		return true
	}
	return false
}

// EffectStatus is effect.status (draft §5.3, Table 3; closed).
type EffectStatus string

// Effect statuses.
const (
	EffectPlanned    EffectStatus = "planned"    // intended, not dispatched
	EffectDispatched EffectStatus = "dispatched" // sent, result not observed
	EffectConfirmed  EffectStatus = "confirmed"  // result observed and bound
	EffectFailed     EffectStatus = "failed"     // attempted, runtime reported failure
	EffectReverted   EffectStatus = "reverted"   // a committed effect was undone
)

// EffectAttestation is effect.effect_attestation: who vouches for the
// effect (registry-governed, draft §5.3, Table 4).
type EffectAttestation string

// Seeded effect attestations.
const (
	AttestationGateExecuted   EffectAttestation = "gate_executed"
	AttestationRuntimeClaimed EffectAttestation = "runtime_claimed"
)

// AttestationMode is assurance.attestation_mode (draft §5.4).
type AttestationMode string

// Attestation modes. This package never derives Anchored: receipts are a
// substrate concern verified elsewhere.
const (
	SelfAttested AttestationMode = "self_attested"
	Anchored     AttestationMode = "anchored"
)

// EffectMode is assurance.effect_mode (draft §5.4).
type EffectMode string

// Effect modes.
const (
	EffectModeNotApplicable         EffectMode = "not_applicable"
	EffectModeDispatchedUnconfirmed EffectMode = "dispatched_unconfirmed"
	EffectModeConfirmed             EffectMode = "confirmed"
)

// LedgerMode is assurance.ledger_mode (draft §5.4).
type LedgerMode string

// Ledger modes, ordered standalone < chained < anchored.
const (
	LedgerStandalone LedgerMode = "standalone"
	LedgerChained    LedgerMode = "chained"
	LedgerAnchored   LedgerMode = "anchored"
)

// Relation is chain.relation (registry-governed, draft §5.5.4).
type Relation string

// Seeded relations.
const (
	RelationConfirms   Relation = "confirms"   // non-terminal: records the parent's outcome
	RelationSupersedes Relation = "supersedes" // terminal transition over the parent
	RelationEpochOpens Relation = "epoch_opens"
)

// ConstraintResult is a Constraint Record's result (draft §8.1).
type ConstraintResult string

// Constraint results.
const (
	ResultPass ConstraintResult = "pass"
	ResultFail ConstraintResult = "fail"
	ResultNA   ConstraintResult = "n/a"
)

// Capsule is a format-4 Agent Action Capsule as a producer writes it. Its
// JSON member names are the draft's; optional members are omitted when
// empty. Seal fills the profile constants, derives Assurance and computes
// CapsuleID; verification never uses this type (Verify reads raw bytes, so
// members this type does not know are still checked and hashed).
type Capsule struct {
	SpecVersion        string       `json:"spec_version"`
	FormatVersion      string       `json:"format_version"`
	CanonicalizationID string       `json:"canonicalization_id"`
	CapsuleID          string       `json:"capsule_id,omitempty"`
	ActionID           string       `json:"action_id"`
	ActionType         ActionType   `json:"action_type"`
	Operator           string       `json:"operator"`
	Developer          string       `json:"developer"`
	Timestamp          string       `json:"timestamp"` // RFC 3339, UTC, "Z"
	EpochID            string       `json:"epoch_id,omitempty"`
	Disposition        Disposition  `json:"disposition"`
	Effect             *Effect      `json:"effect,omitempty"`
	Assurance          Assurance    `json:"assurance"`
	Constraints        []Constraint `json:"constraints,omitempty"`
	Chain              *Chain       `json:"chain,omitempty"`
	// Clearance is the namespaced extension Build writes (ExtensionKey).
	Clearance *Extension `json:"com.github.clearancehq,omitempty"`
}

// Disposition is how the decision was disposed (draft §5.5). HumanDisposed
// true requires ApproverHuman; Seal refuses anything else.
type Disposition struct {
	Decision      Decision     `json:"decision"`
	Approver      Approver     `json:"approver"`
	HumanDisposed bool         `json:"human_disposed"`
	Authority     string       `json:"authority,omitempty"`
	VerdictClass  VerdictClass `json:"verdict_class,omitempty"`
	ReasonDigest  string       `json:"reason_digest,omitempty"` // 64 lowercase hex
}

// Effect is the Effect Record (draft §5.3). Digests are 64 lowercase hex.
type Effect struct {
	Status               EffectStatus      `json:"status"`
	Type                 string            `json:"type,omitempty"`
	RequestDigest        string            `json:"request_digest,omitempty"`
	ResponseDigest       string            `json:"response_digest,omitempty"`
	ExternalRef          string            `json:"external_ref,omitempty"`
	DecisionID           string            `json:"decision_id,omitempty"`
	IrreversibilityClass string            `json:"irreversibility_class,omitempty"`
	EffectAttestation    EffectAttestation `json:"effect_attestation,omitempty"`
}

// Assurance holds the assurance claims (draft §5.4).
type Assurance struct {
	AttestationMode AttestationMode `json:"attestation_mode"`
	EffectMode      EffectMode      `json:"effect_mode"`
	LedgerMode      LedgerMode      `json:"ledger_mode"`
}

// Constraint is a Constraint Record (draft §8.1).
type Constraint struct {
	ID             string           `json:"id"`
	CheckType      string           `json:"check_type,omitempty"`
	Method         string           `json:"method,omitempty"`
	Result         ConstraintResult `json:"result"`
	Severity       string           `json:"severity,omitempty"`
	Blocking       bool             `json:"blocking"`
	EvidenceDigest string           `json:"evidence_digest,omitempty"` // 64 lowercase hex
}

// Chain links a capsule to its single parent (draft §5.5.4).
type Chain struct {
	ParentCapsuleID string   `json:"parent_capsule_id"`
	Relation        Relation `json:"relation"`
}

// Extension is Clearance's namespaced member. Digests here keep Clearance's
// own "sha256:<hex>" form; they reference the canonical records (the
// dossier, the policy bundle, the grant), which stay authoritative.
type Extension struct {
	Profile        string             `json:"profile"`
	DecisionID     string             `json:"decision_id"`
	DossierID      string             `json:"dossier_id"`
	DossierDigest  string             `json:"dossier_digest,omitempty"`
	Outcome        string             `json:"outcome,omitempty"`
	Mode           string             `json:"mode,omitempty"`
	ReasonCodes    []string           `json:"reason_codes,omitempty"`
	Policy         *PolicyRef         `json:"policy,omitempty"`
	IntentDigest   string             `json:"intent_digest,omitempty"`
	Grant          *GrantRef          `json:"grant,omitempty"`
	Finalization   *FinalizationRef   `json:"finalization,omitempty"`
	Reconciliation *ReconciliationRef `json:"reconciliation,omitempty"`
	// Approval names the human approval the decision was evaluated with.
	Approval *ApprovalRef `json:"approval,omitempty"`
	// Escalation is the managed escalation the decision opened (on the
	// verdict) or how it ended (on the escalation capsule).
	Escalation *EscalationRef `json:"escalation,omitempty"`
}

// ApprovalRef names a sealed approval receipt of an approval service; the
// receipt itself is in the dossier.
type ApprovalRef struct {
	Issuer    string `json:"issuer"`
	RequestID string `json:"request_id"`
	ReceiptID string `json:"receipt_id"`
}

// EscalationRef is a managed escalation.
type EscalationRef struct {
	EscalationID       string `json:"escalation_id"`
	State              string `json:"state,omitempty"`
	ConcludedAt        string `json:"concluded_at,omitempty"`
	ResolvedDecisionID string `json:"resolved_decision_id,omitempty"`
}

// PolicyRef is the policy snapshot of a decision.
type PolicyRef struct {
	BundleID      string `json:"bundle_id,omitempty"`
	PolicyVersion string `json:"policy_version,omitempty"`
	BundleDigest  string `json:"bundle_digest,omitempty"`
	Evaluator     string `json:"evaluator,omitempty"`
}

// GrantRef references the execution grant a decision issued.
type GrantRef struct {
	GrantID       string `json:"grant_id"`
	IssuedAt      string `json:"issued_at,omitempty"`
	ExpiresAt     string `json:"expires_at,omitempty"`
	PayloadDigest string `json:"payload_digest,omitempty"`
}

// FinalizationRef records a grant's finalization as Clearance recorded it.
type FinalizationRef struct {
	State           string       `json:"state"`
	FinalCode       string       `json:"final_code,omitempty"`
	FinalizedAt     string       `json:"finalized_at"`
	EffectConfirmed bool         `json:"effect_confirmed"`
	Evidence        *EvidenceRef `json:"evidence,omitempty"`
}

// ReconciliationRef records the settlement of an INDETERMINATE grant.
type ReconciliationRef struct {
	Resolution      string       `json:"resolution"`
	ReconciledAt    string       `json:"reconciled_at"`
	EffectConfirmed bool         `json:"effect_confirmed"`
	Evidence        *EvidenceRef `json:"evidence,omitempty"`
}

// EvidenceRef is digest-bound effect evidence as presented at finalization.
type EvidenceRef struct {
	Kind         string `json:"kind,omitempty"`
	Status       string `json:"status,omitempty"`
	EffectDigest string `json:"effect_digest,omitempty"`
	Source       string `json:"source,omitempty"`
}
