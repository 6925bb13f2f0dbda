package clearance

import (
	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/evidence"
	"github.com/clearancehq/clearance/execution"
)

// Artifact kinds of the evidence that follows a decision.
const (
	// KindChainMember: one decision's membership of its chain (ID the
	// evaluation id, Ref the chain id).
	KindChainMember = dossier.KindChainMember
	// KindOverride: a human resolution of a dossier (Ref the dossier id).
	KindOverride = evidence.KindOverride
	// KindDispatch: what an executor sent downstream under a claimed grant
	// (Ref the grant id).
	KindDispatch = execution.KindDispatch
)

// ChainNamespace is the UUID namespace of chain ids (decide.ChainNamespace).
var ChainNamespace = decide.ChainNamespace

// MaxChainMembers bounds the members one Chain answer lists.
const MaxChainMembers = evidence.MaxChainMembers

// CorrelationChainID is the id of the chain that decisions of org with
// workflowKey and correlationID join when they name no parent decision
// (see decide.CorrelationChainID).
func CorrelationChainID(orgID, workflowKey, correlationID string) string {
	return decide.CorrelationChainID(orgID, workflowKey, correlationID)
}

// RootChainID is the id of the chain a decision starts when it names no
// parent and carries no correlation id (see decide.RootChainID).
func RootChainID(orgID, decisionID string) string { return decide.RootChainID(orgID, decisionID) }

// ChainMember is one decision of a chain, as recorded with its dossier.
type ChainMember = dossier.ChainMember
