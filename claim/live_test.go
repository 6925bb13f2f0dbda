package claim_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/clearancehq/clearance/claim"
)

func TestLive(t *testing.T) {
	ctx := context.Background()
	const lease = 30 * time.Second
	tx := newMemTx(t0)
	issue := func(id string) claim.Grant {
		t.Helper()
		g := claim.Grant{OrgID: "org", GrantID: id, IntentHash: "sha256:aa", Nonce: "n-" + id, Scope: "s-" + id,
			ExpiresAt: t0.Add(2 * time.Minute)}
		if err := claim.Issue(ctx, tx, g); err != nil {
			t.Fatal(err)
		}
		return g
	}
	claimed := func(id, token string) {
		t.Helper()
		issue(id)
		if _, err := claim.Claim(ctx, tx, claim.ClaimRequest{GrantID: id, IntentHash: "sha256:aa", ClaimTokenDigest: token, Lease: lease}); err != nil {
			t.Fatal(err)
		}
	}
	issue("issued")
	claimed("live", "sha256:live")
	claimed("done", "sha256:done")
	if _, err := claim.Finalize(ctx, tx, claim.FinalizeRequest{GrantID: "done", ClaimTokenDigest: "sha256:done", Outcome: claim.OutcomeFailed}); err != nil {
		t.Fatal(err)
	}

	writes := tx.writes
	g, err := claim.Live(ctx, tx, "live", "sha256:live")
	if err != nil || g.GrantID != "live" || g.State != claim.StateClaimed {
		t.Fatalf("live claim: %+v, %v", g, err)
	}
	for _, c := range []struct {
		name, id, token string
		want            error
	}{
		{"unknown grant", "nope", "sha256:live", claim.ErrGrantNotFound},
		{"empty grant id", "", "sha256:live", claim.ErrGrantNotFound},
		{"never claimed", "issued", "", claim.ErrNotClaimed},
		{"finalized", "done", "sha256:done", claim.ErrAlreadyFinalized},
		{"other claim token", "live", "sha256:other", claim.ErrClaimTokenMismatch},
		{"empty claim token", "live", "", claim.ErrClaimTokenMismatch},
	} {
		_, err := claim.Live(ctx, tx, c.id, c.token)
		var ce *claim.Error
		if !errors.Is(err, c.want) || !errors.As(err, &ce) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	if tx.writes != writes {
		t.Fatalf("Live wrote %d records", tx.writes-writes)
	}

	// The lease boundary is expired, by the store's clock.
	tx.now = t0.Add(lease - time.Nanosecond)
	if _, err := claim.Live(ctx, tx, "live", "sha256:live"); err != nil {
		t.Fatalf("a nanosecond before the boundary: %v", err)
	}
	tx.now = t0.Add(lease)
	if _, err := claim.Live(ctx, tx, "live", "sha256:live"); !errors.Is(err, claim.ErrLeaseExpired) {
		t.Fatalf("at the boundary: %v", err)
	}
	// Once swept INDETERMINATE, the lapse is still reported as such.
	if _, changed, err := claim.Expire(ctx, tx, "live"); err != nil || !changed {
		t.Fatalf("expire: %v %v", changed, err)
	}
	writes = tx.writes
	if _, err := claim.Live(ctx, tx, "live", "sha256:live"); !errors.Is(err, claim.ErrLeaseExpired) {
		t.Fatalf("after the sweep: %v", err)
	}
	if tx.writes != writes {
		t.Fatalf("Live wrote %d records", tx.writes-writes)
	}
}
