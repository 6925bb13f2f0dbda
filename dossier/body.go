package dossier

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/policy"
)

// Body is the evidence of one decision as stored: its canonical JSON is
// Stored.Body and its SHA-256 the payload_digest of its ledger entry. The
// encoding is pinned by golden files: a member renamed here is a new
// dossier format, never a refactoring.
type Body struct {
	DossierID        string          `json:"dossier_id"`
	DecisionID       string          `json:"decision_id"`
	EvaluationID     string          `json:"evaluation_id"`
	OrgID            string          `json:"org_id"`
	Route            string          `json:"route"`
	Intent           json.RawMessage `json:"intent"`
	IntentAsReceived string          `json:"intent_as_received"`
	IntentDigest     string          `json:"intent_digest"`
	IntentProfile    string          `json:"intent_digest_profile"`
	Outcome          policy.Outcome  `json:"outcome"`
	ReasonCodes      []string        `json:"reason_codes"`
	MatchedRules     []string        `json:"matched_rules"`
	EvaluationError  string          `json:"evaluation_error,omitempty"`
	PolicySnapshot   policy.Snapshot `json:"policy_snapshot"`
	Mode             policy.Mode     `json:"mode"`
	RequestedMode    policy.Mode     `json:"requested_mode,omitempty"`
	BundleMode       policy.Mode     `json:"bundle_mode"`
	Actor            Actor           `json:"actor"`
	IdempotencyKey   string          `json:"idempotency_key,omitempty"`
	CorrelationID    string          `json:"correlation_id,omitempty"`
	RequestID        string          `json:"request_id,omitempty"`
	CreatedAt        string          `json:"created_at"`
	LedgerSeq        uint64          `json:"ledger_seq"`
	// GrantID names the execution grant this decision issued, if any.
	GrantID string `json:"grant_id,omitempty"`
	// ChainID is the decision chain the decision joined, ParentDecisionID
	// the decision the request named as its parent.
	ChainID          string `json:"chain_id,omitempty"`
	ParentDecisionID string `json:"parent_decision_id,omitempty"`
	// PolicyPin and ActivePolicyVersion are set when the request pinned
	// another version than the org's active one: the pinned version was
	// evaluated and recorded, in SHADOW (a pin never authorizes).
	PolicyPin           string `json:"policy_pin,omitempty"`
	ActivePolicyVersion string `json:"active_policy_version,omitempty"`
	// EscalationID names the managed escalation the decision opened (an
	// ESCALATE) or concluded (the fresh evaluation with its approval).
	EscalationID string `json:"escalation_id,omitempty"`
	// Approval is the verified approval the decision was evaluated with.
	Approval *Approval `json:"approval,omitempty"`
	// Signals are the inbound signals the policy saw (the org's latest of
	// each type), sorted by type; absent when the policy reads none.
	Signals []Signal `json:"signals,omitempty"`
	// Checkout is what a UCP checkout authorization verified before the
	// policy saw it; absent on every other route, so their dossiers hash
	// as before.
	Checkout *Checkout `json:"checkout,omitempty"`
	// Spend is what the spend gates that applied saw of their budgets;
	// absent when none applied, so other dossiers hash as before.
	Spend []SpendCheck `json:"spend,omitempty"`
	// PersonalData is set when the org's data-protection setting sealed
	// personal values of this dossier; absent otherwise, so the dossiers
	// of other orgs hash as before.
	PersonalData *PersonalData `json:"personal_data,omitempty"`
	// Federation are the federated decisions presented with the request,
	// as verified before the policy saw them; absent without any, so other
	// dossiers hash as before.
	Federation []Federated `json:"federation,omitempty"`
	// intentCanonical is set by SetCanonicalIntent.
	intentCanonical bool
}

// Checkout records a UCP checkout's verification: the release it was
// validated against, the merchant's terms signature and the checkout
// mandate. The checkout itself is the dossier's intent.
type Checkout struct {
	Release    string `json:"release"`
	CheckoutID string `json:"checkout_id"`
	// Terms is VERIFIED (the signature verified with MerchantKID, an active
	// merchant key of the org), UNKNOWN_KEY (signed under a kid the org has
	// no active key for) or ABSENT.
	Terms       string `json:"terms"`
	MerchantKID string `json:"merchant_kid,omitempty"`
	// Mandate is PRESENTED (an SD-JWT+kb checkout mandate whose shape and
	// binding to this checkout were checked; its signatures are the
	// wallet's and are not verified here) or ABSENT.
	Mandate string `json:"mandate"`
	// EvaluatedIntent is the intent the policy evaluated, derived from the
	// checkout (canonical JSON).
	EvaluatedIntent json.RawMessage `json:"evaluated_intent"`
}

// SpendCheck records one spend gate's budget as the decision saw it
// (amounts are decimals in the gate's currency). The guarantee is the
// reservation at claim; this is what the policy was shown. A per-actor
// gate's budget is the dossier's actor's.
type SpendCheck struct {
	GateID      string `json:"gate_id"`
	Currency    string `json:"currency"`
	WindowStart string `json:"window_start"`
	Limit       string `json:"limit"`
	Used        string `json:"used"`
	Amount      string `json:"amount"`
}

// PersonalData says which members of a stored dossier hold personal data
// and where their values are: each member named in Members (an RFC 6901
// pointer into the dossier) holds the string SealedMarker, and Ciphertext
// seals the JSON array of their values, in Members order, under the data
// subject's key KeyID. The body's digest, and so the ledger, covers the
// ciphertext only: destroying the key erases the values without changing
// a byte of what the ledger and proof packets check.
type PersonalData struct {
	Profile    string   `json:"profile"` // PersonalDataProfile
	KeyID      string   `json:"key_id"`
	Members    []string `json:"members"`
	Ciphertext string   `json:"ciphertext"`
}

// PersonalDataProfile names the sealing format of PersonalData: AES-256-GCM
// (internal/secretbox "v1.") under a random 256-bit key per data subject,
// with "dossier/<org_id>/<dossier_id>" as additional data.
const PersonalDataProfile = "clearance-personal-data/1"

// Markers stand in place of personal values: SealedMarker in the stored
// body; ErasedMarker in what a reader is shown once the subject's key is
// destroyed.
const (
	SealedMarker = "[sealed]"
	ErasedMarker = "[erased]"
)

// Sealed is more of a sealed decision's personal data, kept outside its
// dossier: a grant's bound intent, the grant token of an idempotent
// answer, a managed escalation's intent. Ciphertext (internal/secretbox
// "v1.") is sealed under the data subject's key KeyID, the one the
// dossier's PersonalData names, with the record that keeps it as
// additional data; erasing the subject erases it with the dossier.
type Sealed struct {
	KeyID      string `json:"key_id"`
	Ciphertext string `json:"ciphertext"`
}

// Sealer seals more of one decision's personal data under the key its
// dossier was sealed with (package privacy implements it). context names
// the record that keeps the result, so that it opens nowhere else.
type Sealer interface {
	Seal(plain []byte, context string) (Sealed, error)
}

// Federated records one federated decision a decision was evaluated with:
// the envelope whole (an auditor checks it against the issuer's published
// keys without trusting us), the key it verified with and what the policy
// saw of it.
type Federated struct {
	Envelope string `json:"envelope"` // the compact JWS as presented
	Issuer   string `json:"issuer"`
	// Org is the issuing org (the envelope's org claim); absent only in
	// dossiers recorded before it was kept.
	Org           string `json:"org,omitempty"`
	KID           string `json:"kid"`
	EnvelopeID    string `json:"envelope_id"` // its jti
	DecisionID    string `json:"decision_id"`
	DossierID     string `json:"dossier_id"`
	DossierDigest string `json:"dossier_digest"`
	Outcome       string `json:"outcome"`
	Mode          string `json:"mode"`
	IntentDigest  string `json:"intent_digest"`
	MatchesIntent bool   `json:"matches_intent"`
}

// SetCanonicalIntent sets Intent to c, which the caller guarantees is
// already RFC 8785 canonical JSON (as canon.Transform writes it): the
// dossier's canonical body then copies it instead of parsing it again.
// Setting Intent directly afterwards is a mistake.
func (b *Body) SetCanonicalIntent(c json.RawMessage) {
	b.Intent, b.intentCanonical = c, true
}

// Approval records approval evidence as verified directly with the
// approval service: its sealed receipt is kept whole, so that an auditor
// can check it against the service's published keys without trusting us.
// Nothing of the WebAuthn ceremony behind it is recorded.
type Approval struct {
	Issuer    string `json:"issuer"`     // the approval service
	RequestID string `json:"request_id"` // the action-bound approval request
	ReceiptID string `json:"receipt_id"` // the receipt's jti
	Receipt   string `json:"receipt"`    // the compact JWS
	Approver  string `json:"approver"`
	Presence  string `json:"presence"`   // how the approver's presence was proven
	DecidedAt string `json:"decided_at"` // the receipt's iat
}

// Signal records one inbound signal a decision was evaluated with: what
// identifies the stored event, and the digest of its data's canonical JSON
// (the data itself stays with the signal, under the org's retention).
type Signal struct {
	Type       string `json:"type"`
	EventID    string `json:"event_id"`
	Timestamp  string `json:"timestamp"`
	ReceivedAt string `json:"received_at"`
	DataDigest string `json:"data_digest"`
}

// Actor records who asked: the credential, and the acting party the
// request named.
type Actor struct {
	CredentialID   string `json:"credential_id"`
	CredentialKind string `json:"credential_kind"`
	ID             string `json:"id,omitempty"`
	Type           string `json:"type,omitempty"`
}

// Decode reads a stored body. Every reader of a dossier decodes through it.
func Decode(body []byte) (Body, error) {
	var b Body
	err := json.Unmarshal(body, &b)
	return b, err
}

// RecordTx is what recording a decision needs from a backend transaction
// of the decision's org.
type RecordTx interface {
	Tx
	ledger.Tx
	artifact.Tx
}

// Index is what a dossier is listed by (the indexed summary fields that
// are not in its body as such).
type Index struct {
	WorkflowKey  string
	DecisionType string
}

// Record writes a decision's evidence in the caller's transaction, in one
// call: the dossier (b, its LedgerSeq set to the entry that records it),
// its ledger entry (payload digest = SHA-256 of the body's canonical JSON)
// and, when b names a chain, its chain member. It returns the body's
// digest. Nothing is written unless the transaction commits.
func Record(ctx context.Context, tx RecordTx, b *Body, ix Index, at time.Time) (string, error) {
	head, err := tx.LedgerHead(ctx)
	if err != nil {
		return "", err
	}
	b.LedgerSeq = head.Seq + 1
	body, ok, err := b.canonical()
	if err != nil {
		return "", err
	}
	if !ok {
		if body, err = canon.Marshal(b); err != nil {
			return "", err
		}
	}
	digest := canon.Digest(body)
	if err := tx.PutDossier(ctx, Stored{
		OrgID: b.OrgID, DossierID: b.DossierID, DecisionID: b.DecisionID, EvaluationID: b.EvaluationID,
		CreatedAt: at, Outcome: string(b.Outcome), Mode: string(b.Mode), WorkflowKey: ix.WorkflowKey,
		DecisionType: ix.DecisionType, Body: body,
	}); err != nil {
		return "", err
	}
	// The entry follows the head read above (the transaction holds the
	// org): reading it again would cost a round trip on PostgreSQL.
	e, err := ledger.Next(head, b.OrgID, ledger.Record{Kind: ledger.KindDecision, SubjectID: b.DossierID, PayloadDigest: digest}, at)
	if err != nil {
		return "", err
	}
	if err := tx.PutLedgerEntry(ctx, e); err != nil {
		return "", fmt.Errorf("ledger: append: %w", err)
	}
	if b.ChainID == "" {
		return digest, nil
	}
	return digest, putChainMember(ctx, tx, b, digest, ix.WorkflowKey, at)
}
