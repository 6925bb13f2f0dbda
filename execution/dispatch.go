package execution

import (
	"context"
	"errors"
	"time"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/idempotency"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
)

// MaxDispatchTarget bounds a dispatch's target, in bytes.
const MaxDispatchTarget = 2048

// DispatchRequest reports what an executor sent downstream under a claimed
// grant. The grant is named by its execution token or by its id (both may
// be given; they must agree); the claim token proves the caller holds the
// live claim.
type DispatchRequest struct {
	OrgID          string
	ExecutionToken string
	GrantID        string
	ClaimToken     string
	// RequestDigest is sha256:<hex> of the request sent downstream.
	RequestDigest string
	// Target names where it went (a URL, a queue, a system of record).
	Target string
	// DispatchedAt is when it was sent, RFC 3339, as the executor says.
	DispatchedAt   string
	IdempotencyKey string
	Principal      core.Principal
	RequestID      string
}

// Dispatch is a recorded execution dispatch. Its RFC 8785 form is the
// stored body and its SHA-256 the payload_digest of its ledger entry (kind
// execution.dispatched, at LedgerSeq, subject DispatchID). DispatchedAt is
// the executor's statement; RecordedAt is Clearance's clock.
type Dispatch struct {
	DispatchID       string `json:"dispatch_id"`
	OrgID            string `json:"org_id"`
	GrantID          string `json:"grant_id"`
	DecisionID       string `json:"decision_id"`
	DossierID        string `json:"dossier_id"`
	ClaimTokenDigest string `json:"claim_token_digest"`
	RequestDigest    string `json:"request_digest"`
	Target           string `json:"target"`
	DispatchedAt     string `json:"dispatched_at"`
	RecordedAt       string `json:"recorded_at"`
	CredentialID     string `json:"credential_id"`
	RequestID        string `json:"request_id,omitempty"`
	LedgerSeq        uint64 `json:"ledger_seq"`
	// Replayed is true when an Idempotency-Key returned a recorded dispatch.
	Replayed bool `json:"-"`
}

// RecordDispatch records what an executor sent downstream for a grant it
// holds a live claim on: the grant must be CLAIMED, the claim token the one
// the claim returned and the lease not passed by the store's clock (checked
// by claim.Live in the same transaction that stores the dispatch as an
// artifact of the grant and ledgers it). Recording changes neither the
// grant nor its dossier; several dispatches per claim are allowed (retries).
//
// Errors: bad fields are core.ErrInvalidRequest (INVALID_DISPATCH); an unknown
// grant or another org's is core.ErrNotFound (GRANT_NOT_FOUND); a token that
// does not verify is core.ErrConflict (GRANT_INVALID); a grant that is not
// claimed, already finalized, claimed with another token or whose lease
// passed is core.ErrConflict (GRANT_NOT_CLAIMED, ALREADY_FINALIZED,
// CLAIM_TOKEN_MISMATCH, CLAIM_LEASE_EXPIRED).
func (s *Service) RecordDispatch(ctx context.Context, req DispatchRequest) (Dispatch, error) {
	at, err := checkDispatch(req)
	if err != nil {
		return Dispatch{}, err
	}
	grantID, err := s.dispatchGrant(ctx, req)
	if err != nil {
		return Dispatch{}, err
	}
	id, err := s.d.IDs.New()
	if err != nil {
		return Dispatch{}, core.Unavailable("id generation", err)
	}
	tokenDigest := canon.Digest([]byte(req.ClaimToken))
	requestDigest, err := canon.DigestValue(struct {
		GrantID          string `json:"grant_id"`
		ClaimTokenDigest string `json:"claim_token_digest"`
		RequestDigest    string `json:"request_digest"`
		Target           string `json:"target"`
		DispatchedAt     string `json:"dispatched_at"`
	}{grantID, tokenDigest, req.RequestDigest, req.Target, at})
	if err != nil {
		return Dispatch{}, core.Invalid(CodeInvalidDispatch, "", "the dispatch cannot be canonicalized: %v", err)
	}
	now := s.d.Now()
	var out Dispatch
	err = s.d.Store.Update(ctx, req.OrgID, func(tx store.Tx) error {
		out = Dispatch{}
		replayed, err := idempotency.Replay(ctx, tx, scopeDispatch, req.IdempotencyKey, requestDigest, &out)
		if err != nil || replayed {
			out.Replayed = replayed
			return err
		}
		g, err := claim.Live(ctx, tx, grantID, tokenDigest)
		if err != nil {
			return err
		}
		out = Dispatch{DispatchID: id, OrgID: req.OrgID, GrantID: g.GrantID, DecisionID: g.DecisionID, DossierID: g.DossierID,
			ClaimTokenDigest: tokenDigest, RequestDigest: req.RequestDigest, Target: req.Target, DispatchedAt: at,
			RecordedAt: now.Format(core.TimeFormat), CredentialID: req.Principal.KeyID, RequestID: req.RequestID}
		if err := artifact.RecordLedgered(ctx, tx, KindDispatch, out.DispatchID, out.GrantID, ledger.KindDispatched, now, &out.LedgerSeq, &out); err != nil {
			return err
		}
		return idempotency.Remember(ctx, tx, scopeDispatch, req.IdempotencyKey, requestDigest, out, now)
	})
	if errors.Is(err, claim.ErrGrantNotFound) {
		return Dispatch{}, errGrantNotFound()
	}
	if err != nil {
		return Dispatch{}, lifecycleError("record dispatch", err)
	}
	return out, nil
}

// checkDispatch checks the fields and returns dispatched_at in UTC.
func checkDispatch(req DispatchRequest) (string, error) {
	if req.ExecutionToken == "" && req.GrantID == "" {
		return "", core.Invalid(CodeInvalidDispatch, "execution_token", "execution_token or grant_id is required")
	}
	if req.ClaimToken == "" {
		return "", core.Invalid(CodeInvalidDispatch, "claim_token", "claim_token is required")
	}
	if _, err := canon.ParseDigest(req.RequestDigest); err != nil {
		return "", core.Invalid(CodeInvalidDispatch, "request_digest", "request_digest must be sha256:<64 lowercase hex>")
	}
	if !core.ValidName(req.Target, MaxDispatchTarget) {
		return "", core.Invalid(CodeInvalidDispatch, "target", "target is required: 1 to %d bytes without control characters", MaxDispatchTarget)
	}
	at, err := time.Parse(time.RFC3339, req.DispatchedAt)
	if err != nil {
		return "", core.Invalid(CodeInvalidDispatch, "dispatched_at", "dispatched_at must be an RFC 3339 timestamp")
	}
	if req.IdempotencyKey != "" && !core.ValidToken(req.IdempotencyKey) {
		return "", core.Invalid(core.CodeInvalidIdempotencyKey, "Idempotency-Key", "Idempotency-Key must be 1 to %d visible ASCII characters", core.MaxKeyLength)
	}
	return at.UTC().Format(core.TimeFormat), nil
}

// dispatchGrant returns the id of the grant a dispatch names. A token is
// verified like at finalization (signature, type, issuer; not its
// lifetime: the claim lease bounds a dispatch).
func (s *Service) dispatchGrant(ctx context.Context, req DispatchRequest) (string, error) {
	if req.ExecutionToken == "" {
		if !core.ValidID(req.GrantID) {
			return "", errGrantNotFound()
		}
		return req.GrantID, nil
	}
	tg, err := s.checkToken(ctx, req.OrgID, req.ExecutionToken, true)
	var te *grant.TokenError
	if errors.As(err, &te) {
		return "", &core.Error{Kind: core.ErrConflict, Code: CodeGrantInvalid, Detail: "the execution grant is not valid", Err: err}
	}
	if err != nil {
		return "", err
	}
	if tg.claims.OrgID != req.OrgID {
		return "", errGrantNotFound()
	}
	if req.GrantID != "" && req.GrantID != tg.claims.ID {
		return "", core.Invalid(CodeInvalidDispatch, "grant_id", "grant_id is not the grant the execution token names")
	}
	return tg.claims.ID, nil
}

func errGrantNotFound() error {
	return core.New(core.ErrNotFound, claim.CodeGrantNotFound, "grant not found")
}

// DispatchList is what an executor reported sending downstream under the
// grant a dossier's decision issued, oldest first: the dossier's dispatch
// evidence. GrantID is empty (and the list too) for a decision that issued
// no grant; GrantState is the grant's current lifecycle state.
type DispatchList struct {
	OrgID      string      `json:"org_id"`
	DossierID  string      `json:"dossier_id"`
	DecisionID string      `json:"decision_id"`
	GrantID    string      `json:"grant_id,omitempty"`
	GrantState claim.State `json:"grant_state,omitempty"`
	Dispatches []Dispatch  `json:"dispatches"`
	Truncated  bool        `json:"truncated,omitempty"`
}

// Dispatches returns the dispatches recorded under the grant of the org's
// dossier: a dossier is immutable and digest-bound, so its dispatches are
// linked to it by its grant id and ledgered, never written into it. An
// unknown dossier (or another org's) is core.ErrNotFound.
func (s *Service) Dispatches(ctx context.Context, orgID, dossierID string) (DispatchList, error) {
	d, _, err := core.ReadDossier(ctx, s.d.Store, orgID, dossierID)
	if err != nil {
		return DispatchList{}, err
	}
	out := DispatchList{OrgID: orgID, DossierID: d.DossierID, DecisionID: d.DecisionID, GrantID: d.GrantID, Dispatches: []Dispatch{}}
	if d.GrantID == "" {
		return out, nil
	}
	g, err := s.d.Store.GrantOf(ctx, orgID, d.GrantID)
	if err != nil {
		return DispatchList{}, core.Unavailable("read grant", err)
	}
	out.GrantState = g.State
	out.Truncated, err = listDispatches(ctx, s.d.Store, orgID, d.GrantID, &out.Dispatches)
	return out, err
}

// listDispatches decodes the dispatches recorded under grantID into *out,
// oldest first, at most MaxEvidenceItems; it reports whether more exist.
func listDispatches(ctx context.Context, r artifact.Reader, orgID, grantID string, out *[]Dispatch) (bool, error) {
	truncated, err := artifact.List(ctx, r, orgID, KindDispatch, grantID, MaxEvidenceItems, out)
	if err != nil {
		return false, core.Unavailable("read dispatch records", err)
	}
	return truncated, nil
}
