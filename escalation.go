package clearance

import (
	"github.com/clearancehq/clearance/escalation"
)

// Managed escalation (see package escalation).
type (
	// EscalationStatus is a managed escalation as its status route answers it.
	EscalationStatus = escalation.Status
	// Completion is a presence-completion hint.
	Completion = escalation.Completion
	// EscalationState is where a managed escalation stands.
	EscalationState = escalation.State
)

// Escalation states.
const (
	EscalationPendingApproval = escalation.StatePendingApproval
	EscalationVerifying       = escalation.StateVerifying
	EscalationGrantReady      = escalation.StateGrantReady
	EscalationDenied          = escalation.StateDenied
	EscalationExpired         = escalation.StateExpired
	EscalationCancelled       = escalation.StateCancelled
	EscalationFailed          = escalation.StateFailed
)
