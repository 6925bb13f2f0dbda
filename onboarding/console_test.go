package onboarding_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/onboarding"
	"github.com/clearancehq/clearance/store"
)

// failingOrg is a backend whose transactions of one org fail while armed.
type failingOrg struct {
	store.Backend
	org   atomic.Value // string
	armed atomic.Bool
}

var errDown = errors.New("the store is down for this org")

func (f *failingOrg) Update(ctx context.Context, org string, fn func(store.Tx) error) error {
	if f.armed.Load() && f.org.Load() == org {
		return errDown
	}
	return f.Backend.Update(ctx, org, fn)
}

// A sign-out whose revocations fail answers the failure and leaves the
// session live but closing: its console keys still work until a second
// sign-out, no key is issued meanwhile, and the second sign-out revokes
// them and ends the session.
func TestSignOutRetriesAfterFailedRevocation(t *testing.T) {
	backend := &failingOrg{}
	h := newHarnessOver(t, func(inner store.Backend) store.Backend { backend.Backend = inner; return backend })
	engine := h.engine
	ctx := context.Background()
	const addr = "owner@example.com"
	v := h.signUp(addr)
	as := h.account(addr)
	k, err := engine.Onboarding.IssueConsoleKey(ctx, as, v.OrgID)
	if err != nil {
		t.Fatal(err)
	}

	backend.org.Store(v.OrgID)
	backend.armed.Store(true)
	if err := engine.Onboarding.SignOut(ctx, as); !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("sign-out with the org's store down: %v, want unavailable", err)
	}
	backend.armed.Store(false)
	if _, err := engine.Admin.Authenticate(ctx, k.Secret); err != nil {
		t.Fatalf("the console key after the failed sign-out: %v (nothing was revoked)", err)
	}
	if _, err := engine.Onboarding.Account(ctx, as); err != nil {
		t.Fatalf("the session after the failed sign-out: %v, want live", err)
	}
	_, err = engine.Onboarding.IssueConsoleKey(ctx, as, v.OrgID)
	wantCode(t, "a console key while signing out", err, onboarding.CodeSignInRequired)

	if err := engine.Onboarding.SignOut(ctx, as); err != nil {
		t.Fatalf("the second sign-out: %v", err)
	}
	if _, err := engine.Admin.Authenticate(ctx, k.Secret); err == nil {
		t.Fatal("the console key works after sign-out")
	}
	in, err := h.signIn(addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Onboarding.Session(ctx, in.Secret); err != nil {
		t.Fatalf("a new session: %v", err)
	}
}
