package server_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
)

// TestExecClaimAnsweredAfterItsLease: a claim whose transaction ran, and
// whose answer came back only once its lease had ended (a COMMIT held by a
// network stall, say), is refused 409 CLAIM_LEASE_EXPIRED with the
// fail-closed body: never should_execute true with a lease end in the
// past. The store's clock is read for the lease, then the test moves the
// clock by the time the rest of the claim took. One tick short of the
// lease end the claim is still answered; at it, it is not (the boundary is
// the finalization's). The refused claim stays recorded: a repeat is a
// replay, and once its lease passed it is an abandoned claim, listed and
// recorded INDETERMINATE (CLAIM_LEASE_EXPIRED, lapsed) and holding its
// concurrency scope until reconciled. On either backend
// (CLEARANCE_E2E_STORE).
func TestExecClaimAnsweredAfterItsLease(t *testing.T) {
	t.Parallel()
	var late atomic.Int64 // what the next reading of the store's clock is followed by
	x := newExecEnvWith(t, bandsBundle, func(x *execEnv) {
		x.storeClock = func() time.Time {
			now := x.clock()
			if d := late.Swap(0); d != 0 {
				x.advance(time.Duration(d))
			}
			return now
		}
	})
	lease := clearance.DefaultClaimLease
	// The first reading of the store's clock in a claim is the one the
	// lease starts from; the clock is on a whole second, so the lease ends
	// exactly lease later.
	claimTaking := func(g issued, d time.Duration) *result {
		t.Helper()
		late.Store(int64(d))
		r := x.claim(t, pathClaim, g.token, g.hash)
		if late.Load() != 0 {
			t.Fatal("the claim never read the store's clock")
		}
		return r
	}

	// One tick short of its lease end: answered, with a lease still live by
	// the clock that answered.
	live := x.grantFor(t, intentSpec{})
	r := claimTaking(live, lease-time.Nanosecond).want(t, http.StatusOK)
	end, err := time.Parse(time.RFC3339Nano, r.str("claim_lease_expires_at"))
	if err != nil || lookup(r.JSON, "should_execute") != true || !x.clock().Before(end) {
		t.Fatalf("claim answered a tick before its lease end (now %s): %s", x.clock().Format(time.RFC3339Nano), r)
	}
	x.finalize(t, live.token, r.str("claim_token"), "COMMITTED", nil).want(t, http.StatusOK)

	// At its lease end: refused, though recorded.
	g := x.grantFor(t, intentSpec{scope: "scope-late"})
	head := x.head(x.o.Key)
	r = claimTaking(g, lease)
	wantFailedClaim(t, r, "CLAIM_LEASE_EXPIRED")
	neverExecutes(t, r)
	if h := x.head(x.o.Key); h != head+1 {
		t.Fatalf("the refused claim moved the ledger head %d -> %d; want its claim entry", head, h)
	}
	if st, err := x.store.GrantOf(t.Context(), x.o.ID, g.grantID); err != nil || st.State != "CLAIMED" {
		t.Fatalf("the refused claim's grant: %s %v; want CLAIMED", st.State, err)
	}
	wantFailedClaim(t, x.claim(t, pathClaim, g.token, g.hash), "CLAIM_REPLAY")

	// Abandoned: listed and recorded as a lapse, and its scope held.
	l := x.req(t, "GET", pathReconcile, x.o.Key, nil, nil).want(t, http.StatusOK)
	if l.str("executions.0.grant_id") != g.grantID || l.str("executions.0.state") != "INDETERMINATE" ||
		l.str("executions.0.final_code") != "CLAIM_LEASE_EXPIRED" || lookup(l.JSON, "executions.0.lapsed") != true {
		t.Fatalf("reconciliation listing: %s; want the refused claim, lapsed", l)
	}
	if n, err := x.engine.Execution.ExpireLapsed(t.Context(), x.o.ID); err != nil || n != 1 {
		t.Fatalf("ExpireLapsed = %d, %v; want the refused claim recorded", n, err)
	}
	next := x.grantFor(t, intentSpec{scope: "scope-late"})
	wantFailedClaim(t, x.claim(t, pathClaim, next.token, next.hash), "CLAIM_SCOPE_UNRECONCILED")
	x.req(t, "POST", pathReconcile+"/"+g.grantID, x.o.Key, map[string]any{"resolution": "FAILED"}, nil).want(t, http.StatusOK)
	x.claimed(t, next)
	x.ledgerOK(t)
}
