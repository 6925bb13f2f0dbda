package checkout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/store"
)

// recordKind files a checkout's retained authority: the grant last issued
// for its id.
const recordKind = "ucp.checkout_authority"

// authority is the grant last issued for a checkout id.
type authority struct {
	CheckoutID string    `json:"checkout_id"`
	Digest     string    `json:"checkout_digest"`
	Key        string    `json:"idempotency_key"` // the decision's, to replay it
	GrantID    string    `json:"grant_id"`
	DecisionID string    `json:"decision_id"`
	IssuedAt   time.Time `json:"issued_at"`
}

// errRetainedMeanwhile: another request bound a grant to the same checkout
// between the read of its authority and this commit.
var errRetainedMeanwhile = errors.New("checkout: authority retained meanwhile")

// recordID is the artifact id of a checkout id's authority (ids may be any
// string).
func recordID(checkoutID string) string {
	sum := sha256.Sum256([]byte(checkoutID))
	return hex.EncodeToString(sum[:])
}

// retains reports whether g still holds its checkout's authority at now,
// the store's clock (by which a claim judges the grant's expiry): it can
// still be claimed, is claimed, committed, or its effect is unknown.
// Expired unclaimed and FAILED grants release it.
func retains(g claim.Grant, now time.Time) bool {
	switch g.State {
	case claim.StateFailed:
		return false
	case claim.StateIssued:
		return now.Before(g.ExpiresAt)
	}
	return true
}

// retained reads, in tx, the checkout's authority and whether its grant
// still holds it.
func retained(ctx context.Context, tx store.Tx, checkoutID string) (authority, bool, error) {
	var prior authority
	err := core.ReadRecord(ctx, tx, recordKind, recordID(checkoutID), &prior)
	switch {
	case core.IsNotFound(err):
		return prior, false, nil
	case err != nil:
		return prior, false, err
	}
	g, err := tx.Grant(ctx, prior.GrantID)
	if err != nil {
		return prior, false, err
	}
	return prior, retains(g, tx.Now()), nil
}

// keyFor is the idempotency key v's decision is recorded under: the
// retained authority's when the checkout retains one for the same exact
// checkout (its answer is replayed), the caller's, or a fresh one. A
// checkout retaining authority for another exact checkout is 409.
func (s *Service) keyFor(ctx context.Context, req Request, v verified) (string, error) {
	var key string
	err := s.d.Store.Update(ctx, req.OrgID, func(tx store.Tx) error {
		prior, held, err := retained(ctx, tx, v.c.ID)
		switch {
		case err != nil:
			return err
		case held && prior.Digest != v.c.Digest:
			return conflict(v.c.ID)
		case held:
			key = prior.Key
		}
		return nil
	})
	if err != nil {
		return "", core.Translate("read checkout authority", err)
	}
	switch {
	case key != "":
		return key, nil
	case req.IdempotencyKey != "":
		return req.IdempotencyKey, nil
	}
	id, err := s.d.IDs.New()
	if err != nil {
		return "", core.Unavailable("id generation", err)
	}
	return "ucp:" + id, nil
}

// retain records, in the transaction that issues a grant for v, that the
// checkout's authority is that grant's; a grant issued for it meanwhile
// that still retains it aborts the unit.
func (s *Service) retain(v verified, key string) func(ctx context.Context, tx store.Tx, a decide.AuthorityDecision) error {
	return func(ctx context.Context, tx store.Tx, a decide.AuthorityDecision) error {
		if a.GrantID == "" {
			return nil
		}
		prior, held, err := retained(ctx, tx, v.c.ID)
		switch {
		case err != nil:
			return err
		case held && prior.GrantID != a.GrantID && prior.Digest == v.c.Digest:
			return errRetainedMeanwhile
		case held && prior.GrantID != a.GrantID:
			return conflict(v.c.ID)
		}
		now := s.d.Now()
		return core.WriteRecord(ctx, tx, recordKind, recordID(v.c.ID), now, authority{CheckoutID: v.c.ID, Digest: v.c.Digest,
			Key: key, GrantID: a.GrantID, DecisionID: a.DecisionID, IssuedAt: now})
	}
}

func conflict(checkoutID string) error {
	return core.New(core.ErrConflict, CodeAuthorityConflict,
		"checkout %q retains authority for another exact checkout; finalize it as FAILED or let its grant expire first", checkoutID)
}
