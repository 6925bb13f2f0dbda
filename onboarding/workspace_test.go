package onboarding_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/onboarding"
	"github.com/clearancehq/clearance/tenant"
)

// An agent starts a workspace without a human: it decides in SHADOW with a
// key that can do nothing else and that ends with the claim window; an
// owner who proved an address claims it with the code, once, and gets the
// org's org:* key; both steps are in the org's ledger.
func TestProvisionalWorkspaceClaimed(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	e := h.engine
	p, err := e.Onboarding.Provision(ctx, "203.0.113.7", []byte(`{"name":"Invoice agent"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.APIKey, tenant.PrefixOrg) || !strings.HasPrefix(p.ClaimCode, onboarding.PrefixClaimCode) ||
		p.Mode != "SHADOW" || !slices.Equal(p.Scopes, onboarding.ProvisionalScopes) || p.Workspace.Name != "Invoice agent" {
		t.Fatalf("Provision answered %+v", p)
	}
	agent, err := e.Admin.Authenticate(ctx, p.APIKey)
	if err != nil || agent.OrgID != p.OrgID {
		t.Fatalf("the provisional key authenticates as %+v, %v", agent, err)
	}
	for _, sc := range []tenant.Scope{tenant.ScopePolicyWrite, tenant.ScopeIntegrationWrite, tenant.ScopeAuditWrite, tenant.ScopeOrgAll} {
		if agent.Allows(sc) {
			t.Fatalf("the provisional key has %s", sc)
		}
	}
	d, err := e.Evaluate(ctx, clearance.EvaluateRequest{OrgID: p.OrgID, Route: clearance.RouteEvaluateDecision,
		Body: []byte(`{"decision_type":"PAYMENT","workflow_key":"ap","amount":2500}`)})
	if err != nil || d.Mode != "SHADOW" {
		t.Fatalf("a provisional decision: %+v, %v; want SHADOW", d.Mode, err)
	}

	// Claims refused: malformed, unknown, then by the owner.
	owner := h.account("owner@example.com")
	_, err = e.Onboarding.Claim(ctx, owner, []byte(`{"claim_code":"123456"}`))
	wantCode(t, "a malformed code", err, core.CodeInvalidRequest)
	_, err = e.Onboarding.Claim(ctx, owner, []byte(`{"claim_code":"`+onboarding.PrefixClaimCode+strings.Repeat("A", 43)+`"}`))
	wantCode(t, "an unknown code", err, onboarding.CodeClaimCodeInvalid)
	body := fmt.Appendf(nil, `{"claim_code":%q}`, p.ClaimCode)
	c, err := e.Onboarding.Claim(ctx, owner, body)
	if err != nil {
		t.Fatal(err)
	}
	if c.OrgID != p.OrgID || !slices.Equal(c.Scopes, []tenant.Scope{tenant.ScopeOrgAll}) {
		t.Fatalf("Claim answered %+v", c)
	}
	if k, err := e.Admin.Authenticate(ctx, c.APIKey); err != nil || !k.Allows(tenant.ScopePolicyWrite) {
		t.Fatalf("the owner's key: %+v, %v", k, err)
	}
	view, err := e.Onboarding.Account(ctx, owner)
	if err != nil || len(view.Workspaces) != 1 || view.Workspaces[0].OrgID != p.OrgID {
		t.Fatalf("the owner's workspaces: %+v, %v", view.Workspaces, err)
	}
	_, err = e.Onboarding.Claim(ctx, owner, body)
	wantCode(t, "the same owner claiming twice", err, onboarding.CodeAlreadyClaimed)
	_, err = e.Onboarding.Claim(ctx, h.account("someone@example.com"), body)
	wantCode(t, "another account with the spent code", err, onboarding.CodeClaimCodeInvalid)

	page, err := e.Audit.Ledger(ctx, p.OrgID, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, en := range page.Entries {
		kinds = append(kinds, en.Kind)
	}
	if !slices.Contains(kinds, ledger.KindWorkspaceProvisioned) || !slices.Contains(kinds, ledger.KindWorkspaceClaimed) {
		t.Fatalf("the org's ledger holds %v", kinds)
	}

	// The provisional key ends with its window; the owner's does not.
	h.advance(onboarding.ProvisionalTTL)
	if _, err := e.Admin.Authenticate(ctx, p.APIKey); err == nil {
		t.Fatal("the provisional key works after ProvisionalTTL")
	}
	if _, err := e.Admin.Authenticate(ctx, c.APIKey); err != nil {
		t.Fatalf("the owner's key after ProvisionalTTL: %v", err)
	}
}

// A claim code ends with the window: an unclaimed workspace cannot be
// claimed after ProvisionalTTL.
func TestProvisionalClaimExpires(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	p, err := h.engine.Onboarding.Provision(ctx, "203.0.113.8", nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Workspace.Name != onboarding.DefaultProvisionalName {
		t.Fatalf("name %q", p.Workspace.Name)
	}
	h.advance(onboarding.ProvisionalTTL)
	_, err = h.engine.Onboarding.Claim(ctx, h.account("late@example.com"), fmt.Appendf(nil, `{"claim_code":%q}`, p.ClaimCode))
	wantCode(t, "a claim after the window", err, onboarding.CodeClaimCodeInvalid)
}

// Starts are budgeted in the store per source (an IPv4 address, an IPv6
// /64) and in all, with Retry-After; the window frees them.
func TestProvisionBudgets(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	start := func(source string) error {
		_, err := h.engine.Onboarding.Provision(ctx, source, nil)
		return err
	}
	tooMany := func(what string, err error) {
		t.Helper()
		var ce *core.Error
		if !errors.As(err, &ce) || ce.Code != onboarding.CodeTooManyWorkspaces || ce.RetryAfter <= 0 {
			t.Fatalf("%s: %v, want %s with a Retry-After", what, err, onboarding.CodeTooManyWorkspaces)
		}
	}
	for i := range onboarding.MaxProvisionsPerSource {
		if err := start(fmt.Sprintf("2001:db8::%d", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	tooMany("another address of the same /64", start("2001:db8::ffff"))
	if err := start("2001:db8:0:1::1"); err != nil {
		t.Fatalf("another /64: %v", err)
	}
	for i := onboarding.MaxProvisionsPerSource + 1; i < onboarding.MaxProvisions; i++ {
		if err := start(fmt.Sprintf("198.51.100.%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	tooMany("one start more than the global budget", start("192.0.2.1"))
	h.advance(onboarding.ProvisionWindow)
	if err := start("192.0.2.1"); err != nil {
		t.Fatalf("after the window: %v", err)
	}
}

// account signs addr in (an account is made for a new address) and
// returns its session.
func (h *harness) account(addr string) onboarding.AccountSession {
	h.t.Helper()
	in, err := h.signIn(addr)
	if err != nil {
		h.t.Fatal(err)
	}
	as, err := h.engine.Onboarding.Session(context.Background(), in.Secret)
	if err != nil {
		h.t.Fatal(err)
	}
	return as
}
