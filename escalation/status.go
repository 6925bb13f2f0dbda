package escalation

import (
	"context"

	"github.com/clearancehq/clearance/capsule"
	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/store"
)

// Status is a managed escalation as its status route answers it. It never
// carries the approval page's locator, the approval service's credential,
// an assertion or biometric material; the grant only at GRANT_READY.
type Status struct {
	EscalationID string `json:"escalation_id"`
	OrgID        string `json:"org_id"`
	Status       State  `json:"status"`
	// Reason says why a final state other than GRANT_READY was reached.
	Reason     string `json:"reason,omitempty"`
	IntentID   string `json:"intent_id"`
	IntentHash string `json:"intent_hash"`
	// DecisionID and DossierID are the ESCALATE decision's.
	DecisionID       string          `json:"decision_id"`
	DossierID        string          `json:"dossier_id"`
	ApprovalRequest  string          `json:"approval_request_id"`
	CreatedAt        string          `json:"created_at"`
	UpdatedAt        string          `json:"updated_at"`
	ExpiresAt        string          `json:"expires_at"`
	Approval         *StatusApproval `json:"approval,omitempty"`
	ResolvedDecision string          `json:"resolved_decision_id,omitempty"`
	ResolvedDossier  string          `json:"resolved_dossier_id,omitempty"`
	ResolvedOutcome  string          `json:"resolved_outcome,omitempty"`
	// ExecutionToken, GrantID and GrantExpiresAt: at GRANT_READY only.
	ExecutionToken string       `json:"execution_token,omitempty"`
	GrantID        string       `json:"grant_id,omitempty"`
	GrantExpiresAt string       `json:"grant_expires_at,omitempty"`
	Transitions    []Transition `json:"transitions"`
}

// StatusApproval is the verified approval: who decided and how presence
// was proven, never the proof itself.
type StatusApproval struct {
	Approver  string `json:"approver"`
	Presence  string `json:"presence"`
	DecidedAt string `json:"decided_at"`
	ReceiptID string `json:"receipt_id"`
	Issuer    string `json:"issuer"`
}

// Transition is one ledgered step of the escalation.
type Transition struct {
	Status    State  `json:"status"`
	Reason    string `json:"reason,omitempty"`
	At        string `json:"at"`
	LedgerSeq uint64 `json:"ledger_seq"`
}

// Get returns the org's escalation id.
func (s *Service) Get(ctx context.Context, orgID, id string) (Status, error) {
	if !core.ValidID(id) {
		return Status{}, core.Invalid(CodeInvalidEscalationID, "escalationId", "the escalation id must be a canonical UUID")
	}
	r, err := read(ctx, s.d.Store, orgID, id)
	if err != nil {
		return Status{}, notFound(err)
	}
	return s.status(ctx, r)
}

// MaxOpenListed bounds how many open escalations Open lists.
const MaxOpenListed = 500

// Open lists the org's escalations that are not final (pending approval or
// being verified), oldest first, at most limit (1 to MaxOpenListed; 0: all
// up to it). Escalations opened before this index existed are not listed.
func (s *Service) Open(ctx context.Context, orgID string, limit int) ([]Status, error) {
	if limit == 0 {
		limit = MaxOpenListed
	}
	if limit < 1 || limit > MaxOpenListed {
		return nil, core.Invalid(core.CodeInvalidRequest, "limit", "limit must be 1 to %d", MaxOpenListed)
	}
	refs, err := s.d.Store.ArtifactsByRef(ctx, orgID, kindOpen, refOpen, limit)
	if err != nil {
		return nil, core.Unavailable("list escalations", err)
	}
	out := make([]Status, 0, len(refs))
	for _, ref := range refs {
		r, err := read(ctx, s.d.Store, orgID, ref.ID)
		if core.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, core.Unavailable("list escalations", err)
		}
		if r.State.Final() { // finished between the two reads
			continue
		}
		st, err := s.status(ctx, r)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// Cancel cancels the org's escalation id while it is pending (CANCELLED,
// ledgered; the approval request is cancelled at the service afterwards,
// best effort); a final one is returned as it stands.
func (s *Service) Cancel(ctx context.Context, orgID, id string) (Status, error) {
	if !core.ValidID(id) {
		return Status{}, core.Invalid(CodeInvalidEscalationID, "escalationId", "the escalation id must be a canonical UUID")
	}
	var r record
	err := s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		var err error
		if r, err = readIn(ctx, tx, id); err != nil || r.State.Final() {
			return err
		}
		r.State, r.Reason = StateCancelled, ReasonCancelled
		return put(ctx, tx, &r, s.d.Now())
	})
	if err != nil {
		return Status{}, notFound(err)
	}
	if r.State == StateCancelled && r.Reason == ReasonCancelled {
		s.cancelAtService(ctx, r)
	}
	return s.status(ctx, r)
}

// cancelAtService withdraws r's approval request; a failure is logged and
// harmless (the escalation is final, and the request expires).
func (s *Service) cancelAtService(ctx context.Context, r record) {
	ep, err := s.endpoint(ctx, r.OrgID)
	if err == nil {
		_, err = s.cfg.Client.Cancel(ctx, ep, r.RequestID)
	}
	if err != nil {
		s.d.Logger.Warn("escalation: cancelling the approval request failed", "org_id", r.OrgID,
			"escalation_id", r.EscalationID, "error", err.Error())
	}
}

func (s *Service) status(ctx context.Context, r record) (Status, error) {
	out := Status{EscalationID: r.EscalationID, OrgID: r.OrgID, Status: r.State, Reason: r.Reason, IntentID: r.IntentID,
		IntentHash: r.IntentHash, DecisionID: r.DecisionID, DossierID: r.DossierID, ApprovalRequest: r.RequestID,
		CreatedAt: r.CreatedAt.Format(core.TimeFormat), UpdatedAt: r.UpdatedAt.Format(core.TimeFormat),
		ExpiresAt: r.Deadline.Format(core.TimeFormat), ResolvedDecision: r.ResolvedDecisionID,
		ResolvedDossier: r.ResolvedDossierID, ResolvedOutcome: r.ResolvedOutcome}
	if a := r.Approval; a != nil {
		out.Approval = &StatusApproval{Approver: a.Approver, Presence: a.Presence, DecidedAt: a.DecidedAt.Format(core.TimeFormat),
			ReceiptID: a.ReceiptID, Issuer: a.Issuer}
	}
	if r.State == StateGrantReady {
		out.ExecutionToken, out.GrantID, out.GrantExpiresAt = r.ExecutionToken, r.GrantID, r.GrantExpiresAt.Format(core.TimeFormat)
		if r.SealedToken != nil {
			// Once the data subject is erased the token is gone (its grant
			// cannot be claimed any more): the status carries none.
			plain, _, err := s.decide.OpenSealed(ctx, r.OrgID, *r.SealedToken, decide.EscalationTokenContext(r.OrgID, r.EscalationID))
			if err != nil {
				return Status{}, err
			}
			out.ExecutionToken = string(plain)
		}
	}
	ts, err := transitions(ctx, s.d.Store, r.OrgID, r.EscalationID)
	if err != nil {
		return Status{}, core.Unavailable("read escalation", err)
	}
	out.Transitions = make([]Transition, len(ts))
	for i, t := range ts {
		out.Transitions[i] = Transition{Status: t.State, Reason: t.Reason, At: t.At, LedgerSeq: t.LedgerSeq}
	}
	return out, nil
}

// notFound maps a missing escalation to 404 and other failures to the
// kernel's answer.
func notFound(err error) error {
	if core.IsNotFound(err) {
		return core.New(core.ErrNotFound, CodeEscalationNotFound, "no escalation of this organization has this id")
	}
	return core.Translate("escalation", err)
}

// Capsule is the org's escalation id as the capsules of its ESCALATE
// decision show it: its state and, once final, when it ended.
func (s *Service) Capsule(ctx context.Context, orgID, id string) (capsule.Escalation, error) {
	r, err := read(ctx, s.d.Store, orgID, id)
	if err != nil {
		return capsule.Escalation{}, err
	}
	out := capsule.Escalation{EscalationID: r.EscalationID, State: string(r.State), ResolvedDecisionID: r.ResolvedDecisionID}
	if r.State.Final() {
		out.ConcludedAt = r.UpdatedAt
	}
	return out, nil
}
