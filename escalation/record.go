package escalation

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
)

// State is where a managed escalation stands.
type State string

// States; GRANT_READY and the refusals after it in this list are final.
const (
	StatePendingApproval State = "PENDING_APPROVAL"
	StateVerifying       State = "VERIFYING"
	StateGrantReady      State = "GRANT_READY"
	StateDenied          State = "DENIED"
	StateExpired         State = "EXPIRED"
	StateCancelled       State = "CANCELLED"
	StateFailed          State = "FAILED"
)

// Final reports whether s is final: nothing moves it any more.
func (s State) Final() bool { return s != StatePendingApproval && s != StateVerifying }

// Artifact kinds: the escalation as it stands (Ref: the ESCALATE dossier),
// and each of its transitions (Ref: the escalation), ledgered.
const (
	KindEscalation = "escalation"
	KindTransition = "escalation.transition"
	// kindReceiptUse binds an approval receipt to the one intent it was
	// evidence for (ID: digest of issuer and jti; Ref: the intent hash).
	kindReceiptUse = "approval.receipt_use"
)

// Jobs: the deadline of an escalation, and the retried verification of a
// completion the approval service could not answer.
const (
	jobDeadline = "escalation.deadline"
	jobVerify   = "escalation.verify"
)

// record is an escalation as stored. Stored records, wire types and domain
// types are separate: Status is what callers see.
type record struct {
	EscalationID  string          `json:"escalation_id"`
	OrgID         string          `json:"org_id"`
	State         State           `json:"state"`
	Reason        string          `json:"reason,omitempty"`
	IntentID      string          `json:"intent_id"`
	IntentHash    string          `json:"intent_hash"`
	Intent        json.RawMessage `json:"intent"`
	SignedIntent  string          `json:"signed_intent"`
	RequestedMode policy.Mode     `json:"requested_mode,omitempty"`
	CredentialID  string          `json:"credential_id,omitempty"`
	CredentialKnd string          `json:"credential_kind,omitempty"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	DecisionID    string          `json:"decision_id"`
	DossierID     string          `json:"dossier_id"`
	// RequestID is the approval request; ApprovalURL its page, kept
	// private (never answered).
	RequestID   string    `json:"request_id"`
	ApprovalURL string    `json:"approval_url,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	Deadline    time.Time `json:"deadline"`
	// Approval is the verified approval, once there is one.
	Approval *approvalRef `json:"approval,omitempty"`
	// The fresh decision and, at GRANT_READY, its grant.
	ResolvedDecisionID string    `json:"resolved_decision_id,omitempty"`
	ResolvedDossierID  string    `json:"resolved_dossier_id,omitempty"`
	ResolvedOutcome    string    `json:"resolved_outcome,omitempty"`
	GrantID            string    `json:"grant_id,omitempty"`
	ExecutionToken     string    `json:"execution_token,omitempty"`
	GrantExpiresAt     time.Time `json:"grant_expires_at,omitzero"`
	// PersonalData is set when the ESCALATE decision was sealed (the org's
	// data-protection setting): Intent and SignedIntent then hold
	// "[sealed]", their values are sealed in it under the data subject's
	// key, and SealedToken holds the grant token instead of ExecutionToken.
	// Once the subject is erased, neither opens.
	PersonalData *dossier.Sealed `json:"personal_data,omitempty"`
	SealedToken  *dossier.Sealed `json:"sealed_execution_token,omitempty"`
}

// approvalRef is a verified approval as the escalation keeps it.
type approvalRef struct {
	Issuer    string    `json:"issuer"`
	RequestID string    `json:"request_id"`
	ReceiptID string    `json:"receipt_id"`
	Approver  string    `json:"approver"`
	Presence  string    `json:"presence"`
	DecidedAt time.Time `json:"decided_at"`
}

// transition is one ledgered step of an escalation: what the ledger
// entry's payload digest is the digest of.
type transition struct {
	EscalationID string       `json:"escalation_id"`
	State        State        `json:"state"`
	Reason       string       `json:"reason,omitempty"`
	At           string       `json:"at"`
	RequestID    string       `json:"request_id"`
	IntentHash   string       `json:"intent_hash"`
	DecisionID   string       `json:"decision_id"` // the ESCALATE decision
	Deadline     string       `json:"deadline"`
	Approval     *approvalRef `json:"approval,omitempty"`
	// ResolvedDecisionID is the fresh decision, GrantID its grant.
	ResolvedDecisionID string `json:"resolved_decision_id,omitempty"`
	GrantID            string `json:"grant_id,omitempty"`
	LedgerSeq          uint64 `json:"ledger_seq"`
}

// ledgerKind is the ledger entry kind of a transition into s.
func ledgerKind(s State) string {
	if s == StatePendingApproval {
		return ledger.KindEscalationOpened
	}
	return "escalation." + strings.ToLower(string(s))
}

// escalation is r as decide knows it, for the fresh evaluation; a sealed
// one with its intent still sealed (decide.Service.OpenManaged opens it).
func (r *record) escalation() (decide.ManagedEscalation, error) {
	var in decide.ExecutionIntent
	if r.PersonalData == nil {
		if err := json.Unmarshal(r.Intent, &in); err != nil {
			return decide.ManagedEscalation{}, core.Unavailable("read escalation", err)
		}
	}
	return decide.ManagedEscalation{
		EscalationID: r.EscalationID, OrgID: r.OrgID, IntentID: r.IntentID, IntentHash: r.IntentHash, Intent: in,
		Payload: r.Intent, SignedIntent: r.SignedIntent, RequestedMode: r.RequestedMode,
		Principal:     core.Principal{KeyID: r.CredentialID, OrgID: r.OrgID, Kind: tenant.KeyKind(r.CredentialKnd)},
		CorrelationID: r.CorrelationID, DecisionID: r.DecisionID, DossierID: r.DossierID, CreatedAt: r.CreatedAt,
		RequestID: r.RequestID, Deadline: r.Deadline, PersonalData: r.PersonalData,
	}, nil
}

// errFinal: the escalation reached a final state before this change.
var errFinal = errors.New("escalation: already final")

// put stores r and records its move into r.State (with r.Reason) as a
// ledgered transition, at now. The caller checked that the move is
// allowed; the transition's id is the escalation's and the state's, so a
// state is entered once.
func put(ctx context.Context, tx store.Tx, r *record, now time.Time) error {
	r.UpdatedAt = now
	body, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := tx.PutArtifact(ctx, artifact.Record{OrgID: r.OrgID, Kind: KindEscalation, ID: r.EscalationID, Ref: r.DossierID,
		CreatedAt: r.CreatedAt, Body: body}); err != nil {
		return err
	}
	if err := indexOpen(ctx, tx, r); err != nil {
		return err
	}
	t := transition{EscalationID: r.EscalationID, State: r.State, Reason: r.Reason, At: now.Format(core.TimeFormat),
		RequestID: r.RequestID, IntentHash: r.IntentHash, DecisionID: r.DecisionID, Deadline: r.Deadline.Format(core.TimeFormat),
		Approval: r.Approval, ResolvedDecisionID: r.ResolvedDecisionID, GrantID: r.GrantID}
	return artifact.RecordLedgered(ctx, tx, KindTransition, r.EscalationID+"/"+string(r.State), r.EscalationID,
		ledgerKind(r.State), now, &t.LedgerSeq, &t)
}

// kindOpen indexes the org's escalations that are not final (ID: the
// escalation's, Ref: refOpen), so that they are listed without a scan.
const (
	kindOpen = "escalation.open"
	refOpen  = "open"
)

// indexOpen keeps r in the index of open escalations while it is not final.
func indexOpen(ctx context.Context, tx store.Tx, r *record) error {
	if r.State.Final() {
		_, err := tx.DeleteArtifact(ctx, kindOpen, r.EscalationID)
		return err
	}
	return tx.PutArtifact(ctx, artifact.Record{OrgID: r.OrgID, Kind: kindOpen, ID: r.EscalationID, Ref: refOpen,
		CreatedAt: r.CreatedAt, Body: []byte(`{}`)})
}

// readIn reads the org's escalation id in tx.
func readIn(ctx context.Context, tx store.Tx, id string) (record, error) {
	a, err := tx.ArtifactInTx(ctx, KindEscalation, id)
	if err != nil {
		return record{}, err
	}
	return decodeRecord(a.Body)
}

// read reads the org's escalation id as committed.
func read(ctx context.Context, r artifact.Reader, orgID, id string) (record, error) {
	a, err := r.Artifact(ctx, orgID, KindEscalation, id)
	if err != nil {
		return record{}, err
	}
	return decodeRecord(a.Body)
}

func decodeRecord(body []byte) (record, error) {
	var r record
	if err := json.Unmarshal(body, &r); err != nil {
		return record{}, core.Unavailable("read escalation", err)
	}
	return r, nil
}

// transitions lists the ledgered transitions of an escalation, oldest first.
func transitions(ctx context.Context, r artifact.Reader, orgID, id string) ([]transition, error) {
	var out []transition
	_, err := artifact.List(ctx, r, orgID, KindTransition, id, 16, &out)
	// Listed by time and id; two steps in one instant are ordered by seq.
	sort.Slice(out, func(i, j int) bool { return out[i].LedgerSeq < out[j].LedgerSeq })
	return out, err
}
