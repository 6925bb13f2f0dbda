package claim

import (
	"context"
	"crypto/subtle"
	"fmt"
	"time"
)

// Live returns the grant when it holds a live claim made with the claim
// token whose digest is claimTokenDigest: the grant is CLAIMED, the digest
// is the one recorded at the claim (compared in constant time) and the
// lease has not passed by the store's clock (tx.Now(), the boundary
// itself is expired, as in Finalize). It changes nothing.
//
// Refusals: ErrGrantNotFound; ErrNotClaimed for an ISSUED grant;
// ErrLeaseExpired for a claim whose lease passed (also one that Expire has
// already recorded INDETERMINATE); ErrAlreadyFinalized for a finalized
// grant; ErrClaimTokenMismatch for another claim token.
func Live(ctx context.Context, tx Tx, grantID, claimTokenDigest string) (Grant, error) {
	g, err := readGrant(ctx, tx, grantID)
	if err != nil {
		return Grant{}, err
	}
	switch {
	case g.State == StateClaimed:
	case g.State == StateIssued:
		return Grant{}, refuse(ErrNotClaimed, "grant %q was never claimed", g.GrantID)
	case g.State == StateIndeterminate && g.Lapsed:
		return Grant{}, refuse(ErrLeaseExpired, "claim lease of grant %q ended at %s", g.GrantID, g.LeaseExpiresAt.Format(time.RFC3339Nano))
	case g.State == StateCommitted, g.State == StateFailed, g.State == StateIndeterminate:
		return Grant{}, refuse(ErrAlreadyFinalized, "grant %q is already %s", g.GrantID, g.State)
	default:
		return Grant{}, fmt.Errorf("claim: grant %q is in unknown state %q", g.GrantID, g.State)
	}
	if claimTokenDigest == "" || subtle.ConstantTimeCompare([]byte(g.ClaimTokenDigest), []byte(claimTokenDigest)) != 1 {
		return Grant{}, refuse(ErrClaimTokenMismatch, "claim token is not the one grant %q was claimed with", g.GrantID)
	}
	if !tx.Now().Before(g.LeaseExpiresAt) {
		return Grant{}, refuse(ErrLeaseExpired, "claim lease of grant %q ended at %s", g.GrantID, g.LeaseExpiresAt.Format(time.RFC3339Nano))
	}
	return g, nil
}
