package escalation

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/clearancehq/clearance/approval"
	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/jobs"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
)

// The escalation feature is both features' way to approvals.
var (
	_ decide.Approvals = (*Service)(nil)
)

// StatusPath is the status locator of escalation id.
func StatusPath(id string) string { return "/v1/authority/escalations/" + id }

// OpenEscalation implements decide.Approvals: it opens m's approval request
// at the org's approval service (idempotent by escalation id at the
// service) before the ESCALATE decision is recorded.
func (s *Service) OpenEscalation(ctx context.Context, m decide.ManagedEscalation) (decide.ManagedEscalation, error) {
	ep, err := s.endpoint(ctx, m.OrgID)
	if err != nil {
		return m, err
	}
	// The deadline counts from the signed issued_at, so that the same intent
	// sent again opens the very same request (same body) at the service.
	issued, err := time.Parse(time.RFC3339, m.Intent.IssuedAt)
	if err != nil {
		return m, core.Invalid(decide.CodeIntentMalformed, "issued_at", "intent.issued_at must be an RFC 3339 timestamp")
	}
	m.Deadline = issued.Add(s.cfg.TTL).UTC().Truncate(time.Second)
	a := m.Intent.Action
	req := approval.OpenRequest{OrgID: m.OrgID, EscalationID: m.EscalationID, IntentHash: m.IntentHash,
		Actor:     approval.Actor{ID: m.Intent.Actor.ID, Type: m.Intent.Actor.Type},
		Action:    approval.Action{Type: a.Type, Currency: a.Currency, Target: a.Target, WorkflowKey: m.Intent.WorkflowKey},
		ExpiresAt: m.Deadline}
	if a.Amount.Set {
		b, _ := a.Amount.MarshalJSON() // a literal or the shortest decimal form
		req.Action.Amount = string(b)
	}
	r, err := s.cfg.Client.Open(ctx, ep, req)
	if err != nil {
		return m, serviceError("open the approval request", err)
	}
	if r.OrgID != m.OrgID || r.EscalationID != m.EscalationID || r.IntentHash != m.IntentHash || r.RequestID == "" {
		return m, core.New(core.ErrUnavailable, decide.CodeApprovalServiceUnavailable, "the approval service answered a request for another action")
	}
	m.RequestID, m.ApprovalURL = r.RequestID, r.ApprovalURL
	return m, nil
}

// RecordEscalation implements decide.Approvals: in the ESCALATE decision's
// transaction it stores the escalation (PENDING_APPROVAL, ledgered as
// escalation.opened) and queues its deadline.
func (s *Service) RecordEscalation(ctx context.Context, tx store.Tx, m decide.ManagedEscalation) (decide.EscalationRef, error) {
	r := record{EscalationID: m.EscalationID, OrgID: m.OrgID, State: StatePendingApproval, IntentID: m.IntentID,
		IntentHash: m.IntentHash, Intent: m.Payload, SignedIntent: m.SignedIntent, RequestedMode: m.RequestedMode,
		CredentialID: m.Principal.KeyID, CredentialKnd: string(m.Principal.Kind), CorrelationID: m.CorrelationID,
		DecisionID: m.DecisionID, DossierID: m.DossierID, RequestID: m.RequestID, ApprovalURL: m.ApprovalURL,
		CreatedAt: m.CreatedAt, Deadline: m.Deadline, PersonalData: m.PersonalData}
	if _, err := readIn(ctx, tx, m.EscalationID); err == nil {
		// The intent's escalation exists: only a replay of the same intent
		// gets here, and record answers it before this runs.
		return decide.EscalationRef{}, core.New(core.ErrConflict, decide.CodeIntentAlreadyBound, "the intent's escalation already exists")
	} else if !core.IsNotFound(err) {
		return decide.EscalationRef{}, err
	}
	if err := put(ctx, tx, &r, m.CreatedAt); err != nil {
		return decide.EscalationRef{}, err
	}
	if _, _, err := jobs.EnqueueAt(ctx, tx, jobDeadline, r.EscalationID, nil, r.Deadline); err != nil {
		return decide.EscalationRef{}, err
	}
	return decide.EscalationRef{EscalationID: r.EscalationID, Status: string(r.State), StatusURL: StatusPath(r.EscalationID),
		ExpiresAt: r.Deadline.Format(core.TimeFormat)}, nil
}

// Evidence is approval evidence as presented with an intent: the approval
// request and the receipt its approver's decision sealed.
type Evidence struct {
	RequestID string `json:"request_id"`
	Receipt   string `json:"receipt"`
}

// VerifyEvidence implements decide.Approvals: evidence presented with an
// intent is verified directly with the org's approval service, which must
// hold the same receipt for an APPROVED request of this org and intent.
func (s *Service) VerifyEvidence(ctx context.Context, orgID string, raw json.RawMessage, intentHash string) (decide.VerifiedApproval, error) {
	var ev Evidence
	if err := strictjson.Decode(raw, &ev, s.d.JSON); err != nil {
		return decide.VerifiedApproval{}, core.Invalid(CodeInvalidEvidence, "approval_evidence", "approval_evidence must be an object {request_id, receipt}")
	}
	if ev.RequestID == "" || ev.Receipt == "" || len(ev.RequestID) > 200 || len(ev.Receipt) > 16<<10 {
		return decide.VerifiedApproval{}, core.Invalid(CodeInvalidEvidence, "approval_evidence", "approval_evidence needs request_id (1 to 200 characters) and receipt (a compact JWS)")
	}
	ep, err := s.endpoint(ctx, orgID)
	if err != nil {
		return decide.VerifiedApproval{}, err
	}
	v, err := approval.VerifyPresented(ctx, s.cfg.Client, ep, approval.Evidence{RequestID: ev.RequestID, Receipt: ev.Receipt},
		approval.Binding{OrgID: orgID, IntentHash: intentHash})
	if err != nil {
		return decide.VerifiedApproval{}, evidenceError(err)
	}
	if !v.Approved() {
		return decide.VerifiedApproval{}, core.New(core.ErrConflict, decide.CodeApprovalUnverified, "the approval request is not approved at the approval service")
	}
	return verified(v), nil
}

// UseReceipt implements decide.Approvals: in the transaction that issues a
// grant on v, the receipt is bound to intentHash; the same receipt for
// another intent is refused.
func (s *Service) UseReceipt(ctx context.Context, tx store.Tx, v decide.VerifiedApproval, intentHash string) error {
	id := canon.Digest([]byte(v.Issuer + "\x00" + v.ReceiptID))
	a, err := tx.ArtifactInTx(ctx, kindReceiptUse, id)
	switch {
	case err == nil && a.Ref == intentHash:
		return nil
	case err == nil:
		return core.New(core.ErrConflict, CodeApprovalReceiptReused, "the approval receipt was already evidence for another intent")
	case !core.IsNotFound(err):
		return err
	}
	use := receiptUse{Issuer: v.Issuer, ReceiptID: v.ReceiptID, RequestID: v.RequestID, IntentHash: intentHash, EscalationID: v.EscalationID}
	return artifact.RecordLedgered(ctx, tx, kindReceiptUse, id, intentHash, ledger.KindApprovalUsed, s.d.Now(), &use.LedgerSeq, &use)
}

// receiptUse records which intent an approval receipt was evidence for.
type receiptUse struct {
	Issuer       string `json:"issuer"`
	ReceiptID    string `json:"receipt_id"`
	RequestID    string `json:"request_id"`
	IntentHash   string `json:"intent_hash"`
	EscalationID string `json:"escalation_id,omitempty"`
	LedgerSeq    uint64 `json:"ledger_seq"`
}

// Recheck implements execution.Approvals: at claim time the approval a
// grant was issued on is asked for again; revoked (or anything but a
// standing approval of this intent) is a stale authorization.
func (s *Service) Recheck(ctx context.Context, orgID string, a claim.Approval, intentHash string) (*policy.Approval, error) {
	ep, err := s.endpoint(ctx, orgID)
	if err != nil {
		return nil, err
	}
	if ep.Issuer != a.Issuer {
		return nil, core.New(core.ErrConflict, CodeApprovalRevoked, "the grant's approval was issued by another approval service than the organization's")
	}
	v, err := approval.Verify(ctx, s.cfg.Client, ep, a.RequestID, approval.Binding{OrgID: orgID, IntentHash: intentHash})
	if err != nil && !errors.Is(err, approval.ErrEvidenceInvalid) && !errors.Is(err, approval.ErrNotApproved) {
		return nil, serviceError("re-check the approval", err)
	}
	if err != nil || !v.Approved() || v.Receipt.ID != a.ReceiptID {
		return nil, &core.Error{Kind: core.ErrConflict, Code: CodeApprovalRevoked,
			Detail: "the approval the grant was issued on no longer stands at the approval service", Err: opaque(err)}
	}
	return verified(v).Input(), nil
}

// verified is an approval.Verified as decide takes it.
func verified(v approval.Verified) decide.VerifiedApproval {
	r := v.Receipt
	return decide.VerifiedApproval{Issuer: r.Issuer, RequestID: r.RequestID, ReceiptID: r.ID, Receipt: v.ReceiptJWS,
		Approver: r.Approver, Presence: r.Presence, DecidedAt: time.Unix(r.IssuedAt, 0).UTC()}
}

// serviceError is an approval service that could not be asked, or
// refused to answer: 503, nothing granted.
func serviceError(op string, err error) error {
	return &core.Error{Kind: core.ErrUnavailable, Code: decide.CodeApprovalServiceUnavailable,
		Detail: "the approval service could not be reached to " + op, Err: opaque(err)}
}

// opaque keeps err's text for the logs but not its kind: the approval
// package's errors carry Kinds of their own, which must not decide the
// status of the answer that wraps them.
func opaque(err error) error {
	if err == nil {
		return nil
	}
	return errors.New(err.Error())
}

// evidenceError maps a failed verification of presented evidence: evidence
// that does not prove an approval of this intent is 409; a service that
// cannot be asked, or refuses to answer, 503.
func evidenceError(err error) error {
	if errors.Is(err, approval.ErrEvidenceInvalid) || errors.Is(err, approval.ErrNotApproved) {
		return &core.Error{Kind: core.ErrConflict, Code: decide.CodeApprovalUnverified,
			Detail: "the approval evidence failed verification with the approval service", Err: opaque(err)}
	}
	return serviceError("verify the approval evidence", err)
}
