// Package dossier stores one Decision Dossier per decision: the exact intent
// as received, its canonical digest, the decision, the policy snapshot and
// the ledger position that records it.
//
// A dossier is stored as its RFC 8785 canonical JSON (Stored.Body), and its
// digest — the payload_digest of its ledger entry — is SHA-256 of that body.
// Backends keep the body opaque and index only the summary fields.
package dossier

import (
	"context"
	"time"
)

// Stored is the stored form of a dossier.
type Stored struct {
	OrgID        string
	DossierID    string
	DecisionID   string
	EvaluationID string
	CreatedAt    time.Time
	Outcome      string
	Mode         string
	WorkflowKey  string
	DecisionType string
	Body         []byte // canonical JSON of the dossier
}

// Summary is the indexed part of a Stored, used for reports.
type Summary struct {
	DossierID    string
	DecisionID   string
	CreatedAt    time.Time
	Outcome      string
	Mode         string
	WorkflowKey  string
	DecisionType string
}

// Summary returns r's indexed fields.
func (r Stored) Summary() Summary {
	return Summary{r.DossierID, r.DecisionID, r.CreatedAt, r.Outcome, r.Mode, r.WorkflowKey, r.DecisionType}
}

// Tx is what recording a dossier needs from a backend transaction.
type Tx interface {
	PutDossier(ctx context.Context, r Stored) error
}

// Reader reads an org's dossiers. Lookups never cross orgs: a dossier of
// another org is ErrNotFound of the backend.
type Reader interface {
	Dossier(ctx context.Context, orgID, dossierID string) (Stored, error)
	DossierByDecision(ctx context.Context, orgID, decisionID string) (Stored, error)
	// DossierSummaries calls fn for the org's dossiers created in [from, to),
	// oldest first, until fn returns false.
	DossierSummaries(ctx context.Context, orgID string, from, to time.Time, fn func(Summary) bool) error
	// Dossiers calls fn for the org's dossiers created in [from, to), oldest
	// first (ties in dossier id order), with their bodies, until fn returns
	// false. Same order and window as DossierSummaries. A yielded Body is
	// valid only until fn returns (a backend may hand out its own buffer, as
	// a scan of a large window reads every body once): copy it to keep it.
	Dossiers(ctx context.Context, orgID string, from, to time.Time, fn func(Stored) bool) error
}
