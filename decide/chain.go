package decide

import (
	"context"
	"crypto/sha1"

	"github.com/google/uuid"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/core"
)

// ChainNamespace is the UUID namespace of chain ids: every chain id is a
// name-based UUID (version 5, SHA-1) in it, so a client can compute the id
// of a correlation chain itself (see Chain).
var ChainNamespace = uuid.MustParse("1e48acd0-17a6-4137-8d1d-019667328429")

// CorrelationChainID is the id of the chain that decisions of org with
// workflowKey and correlationID join when they name no parent decision:
// UUIDv5(ChainNamespace, "correlation" NUL org NUL workflow_key NUL
// correlation_id). Neither name can contain NUL.
func CorrelationChainID(orgID, workflowKey, correlationID string) string {
	return chainUUID("correlation", orgID, workflowKey, correlationID)
}

// RootChainID is the id of the chain a decision starts when it names no
// parent and carries no correlation id: UUIDv5(ChainNamespace, "decision"
// NUL org NUL decision_id).
func RootChainID(orgID, decisionID string) string {
	return chainUUID("decision", orgID, decisionID)
}

// chainUUID is uuid.NewSHA1(ChainNamespace, names joined by NUL) without
// its allocations (it runs on every decision).
func chainUUID(names ...string) string {
	var buf [256]byte
	b := append(buf[:0], ChainNamespace[:]...)
	for i, n := range names {
		if i > 0 {
			b = append(b, 0)
		}
		b = append(b, n...)
	}
	sum := sha1.Sum(b)
	var u uuid.UUID
	copy(u[:], sum[:])
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return u.String()
}

// chainFor is the chain a new decision joins: its parent's (parentChain,
// when the request named a parent), else its correlation's, else its own.
func chainFor(orgID, parentChain, workflowKey, correlationID, decisionID string) string {
	switch {
	case parentChain != "":
		return parentChain
	case correlationID != "":
		return CorrelationChainID(orgID, workflowKey, correlationID)
	default:
		return RootChainID(orgID, decisionID)
	}
}

// parentChain returns the chain of the org's decision parentID ("" when
// parentID is ""). A parentID that is not a decision id is a 400 with code
// on field; one the org has no decision of is a 409
// PARENT_DECISION_UNKNOWN, like an unknown policy pin.
func (s *Service) parentChain(ctx context.Context, orgID, parentID, field, code string) (string, error) {
	if parentID == "" {
		return "", nil
	}
	if !core.ValidID(parentID) {
		return "", core.Invalid(code, field, "%s must be a decision id (a lowercase UUID)", field)
	}
	r, err := s.d.Store.DossierByDecision(ctx, orgID, parentID)
	if core.IsNotFound(err) {
		return "", core.New(core.ErrConflict, CodeParentDecisionUnknown, "the organization has no decision %s", parentID)
	}
	if err != nil {
		return "", core.Unavailable("read parent decision", err)
	}
	p, err := dossier.Decode(r.Body)
	if err != nil {
		return "", core.Unavailable("read parent decision", err)
	}
	if p.ChainID == "" {
		// Recorded before chains existed: it would have started its own.
		return RootChainID(orgID, parentID), nil
	}
	return p.ChainID, nil
}
