package connector_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance/connector"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/onboarding"
	"github.com/clearancehq/clearance/tenant"
)

const verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk" // RFC 7636 appendix B

func challengeOf(v string) string {
	sum := sha256.Sum256([]byte(v))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func authorizeQuery(client, redirect string, edit func(url.Values)) url.Values {
	q := url.Values{"response_type": {"code"}, "client_id": {client}, "redirect_uri": {redirect}, "state": {"xyz"},
		"code_challenge": {challengeOf(verifier)}, "code_challenge_method": {"S256"}}
	if edit != nil {
		edit(q)
	}
	return q
}

// The connector's flow: a registered client, the owner's consent for one
// workspace (the starter policy installed), a code exchanged once with its
// PKCE verifier for an automation credential; a replay revokes it.
func TestAutomationAuthorizeAndExchange(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	const redirect = "https://automation.example/oauth/callback?app=1"
	c, err := h.engine.Connector.RegisterClient(ctx, []byte(`{"name":"Flows","redirect_uris":["`+redirect+`","http://127.0.0.1:8765/cb"]}`))
	if err != nil {
		t.Fatal(err)
	}
	const addr = "owner@example.com"
	v := h.signUp(addr)
	in, err := h.signIn(addr)
	if err != nil {
		t.Fatal(err)
	}
	as, err := h.engine.Onboarding.Session(ctx, in.Secret)
	if err != nil {
		t.Fatal(err)
	}

	// Refusals: the first two are shown, never redirected.
	for name, tc := range map[string]struct {
		q        url.Values
		redirect bool
		code     string
	}{
		"unknown client":        {authorizeQuery("01a2117b-0000-7000-8000-000000000000", redirect, nil), false, "invalid_request"},
		"unregistered redirect": {authorizeQuery(c.ClientID, "https://automation.example/other", nil), false, "invalid_request"},
		"redirect prefix":       {authorizeQuery(c.ClientID, "https://automation.example/oauth/callback", nil), false, "invalid_request"},
		"no state":              {authorizeQuery(c.ClientID, redirect, func(q url.Values) { q.Del("state") }), true, "invalid_request"},
		"plain PKCE": {authorizeQuery(c.ClientID, redirect, func(q url.Values) {
			q.Set("code_challenge_method", "plain")
			q.Set("code_challenge", verifier)
		}), true, "invalid_request"},
		"no PKCE":        {authorizeQuery(c.ClientID, redirect, func(q url.Values) { q.Del("code_challenge") }), true, "invalid_request"},
		"implicit grant": {authorizeQuery(c.ClientID, redirect, func(q url.Values) { q.Set("response_type", "token") }), true, "unsupported_response_type"},
		"two client ids": {authorizeQuery(c.ClientID, redirect, func(q url.Values) { q.Add("client_id", c.ClientID) }), false, "invalid_request"},
	} {
		_, err := h.engine.Connector.CheckAuthorize(ctx, tc.q)
		var ae *connector.AuthorizeError
		if !errors.As(err, &ae) || ae.Redirect != tc.redirect || ae.OAuthCode != tc.code {
			t.Errorf("%s: %v (%+v), want %s redirect=%v", name, err, ae, tc.code, tc.redirect)
		}
		if ae != nil && ae.Redirect && !strings.Contains(ae.Location(), "state=xyz") && tc.q.Get("state") != "" {
			t.Errorf("%s: the error redirect %s loses the state", name, ae.Location())
		}
	}

	a, err := h.engine.Connector.CheckAuthorize(ctx, authorizeQuery(c.ClientID, redirect, nil))
	if err != nil {
		t.Fatal(err)
	}
	other, err := h.engine.Admin.CreateOrg(ctx, "Not theirs")
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.engine.Connector.Approve(ctx, as, a, other.Org.ID)
	wantCode(t, "consent for another account's org", err, onboarding.CodeWorkspaceNotFound)
	loc, err := h.engine.Connector.Approve(ctx, as, a, v.OrgID)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(loc)
	code := u.Query().Get("code")
	if !strings.HasPrefix(loc, "https://automation.example/oauth/callback?") || u.Query().Get("app") != "1" ||
		u.Query().Get("state") != "xyz" || code == "" {
		t.Fatalf("redirect %s", loc)
	}
	bundles, err := h.engine.Policies.Bundles(ctx, v.OrgID)
	if err != nil || len(bundles) != 1 || bundles[0].Version != "starter-1" || !bundles[0].Active || bundles[0].Mode != "SHADOW" {
		t.Fatalf("starter policy after consent: %+v, %v", bundles, err)
	}

	form := func(edit func(url.Values)) url.Values {
		f := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect},
			"client_id": {c.ClientID}, "code_verifier": {verifier}}
		if edit != nil {
			edit(f)
		}
		return f
	}
	for name, f := range map[string]url.Values{
		"wrong verifier":   form(func(f url.Values) { f.Set("code_verifier", strings.Repeat("a", 43)) }),
		"another redirect": form(func(f url.Values) { f.Set("redirect_uri", "http://127.0.0.1:8765/cb") }),
		"another client":   form(func(f url.Values) { f.Set("client_id", other.Org.ID) }),
		"unknown code":     form(func(f url.Values) { f.Set("code", "nope") }),
		"password grant":   form(func(f url.Values) { f.Set("grant_type", "password") }),
		"short verifier":   form(func(f url.Values) { f.Set("code_verifier", "abc") }),
	} {
		_, err := h.engine.Connector.Exchange(ctx, f)
		var te *connector.TokenError
		if !errors.As(err, &te) {
			t.Errorf("%s: %v, want a token error", name, err)
		}
	}
	tok, err := h.engine.Connector.Exchange(ctx, form(nil))
	if err != nil {
		t.Fatal(err)
	}
	p, err := h.engine.Admin.Authenticate(ctx, tok.AccessToken)
	if err != nil || p.OrgID != v.OrgID || !p.Allows(tenant.ScopeAutomation) || p.Allows(tenant.ScopePolicyWrite) {
		t.Fatalf("automation credential: %+v, %v", p, err)
	}
	_, err = h.engine.Connector.Exchange(ctx, form(nil))
	var te *connector.TokenError
	if !errors.As(err, &te) || te.OAuthCode != "invalid_grant" {
		t.Fatalf("replayed code: %v", err)
	}
	if _, err := h.engine.Admin.Authenticate(ctx, tok.AccessToken); err == nil {
		t.Fatal("the credential of a replayed code still works")
	}

	// A code expires after a minute; the starter is installed only once.
	a2, _ := h.engine.Connector.CheckAuthorize(ctx, authorizeQuery(c.ClientID, redirect, nil))
	loc2, err := h.engine.Connector.Approve(ctx, as, a2, v.OrgID)
	if err != nil {
		t.Fatal(err)
	}
	u2, _ := url.Parse(loc2)
	h.advance(connector.CodeLifetime)
	_, err = h.engine.Connector.Exchange(ctx, form(func(f url.Values) { f.Set("code", u2.Query().Get("code")) }))
	if !errors.As(err, &te) || te.OAuthCode != "invalid_grant" {
		t.Fatalf("expired code: %v", err)
	}
	if bundles, _ := h.engine.Policies.Bundles(ctx, v.OrgID); len(bundles) != 1 {
		t.Fatalf("%d versions after two consents, want 1", len(bundles))
	}
	if d := h.engine.Connector.Deny(a2); !strings.Contains(d, "error=access_denied") || !strings.Contains(d, "state=xyz") {
		t.Fatalf("Deny = %s", d)
	}
}

// The starter policy never replaces an org's own.
func TestInstallStarterKeepsTheOrgsPolicy(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	o, err := h.engine.Admin.CreateOrg(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	own := `{"bundle_id":"own","version":"v1","mode":"ENFORCEMENT","rules":[],"default":{"outcome":"BLOCK","reason_codes":["NO"]}}`
	if _, err := h.engine.Policies.PublishBundle(ctx, o.Org.ID, []byte(own)); err != nil {
		t.Fatal(err)
	}
	got, err := h.engine.Policies.InstallStarter(ctx, o.Org.ID)
	if err != nil || got.Installed || got.PolicyVersion != "v1" {
		t.Fatalf("InstallStarter = %+v, %v; want the org's own v1 kept", got, err)
	}
	fresh, _ := h.engine.Admin.CreateOrg(ctx, "Fresh")
	for i, want := range []bool{true, false} {
		got, err := h.engine.Policies.InstallStarter(ctx, fresh.Org.ID)
		if err != nil || got.Installed != want || got.PolicyVersion != "starter-1" {
			t.Fatalf("install %d = %+v, %v", i+1, got, err)
		}
	}
}

// An org-wide revocation closes what was opened or approved before it: a
// request authenticated just before it issues nothing, an open mapping
// session takes no bundle, an approved code exchanges for nothing.
func TestRevocationClosesWhatItRevoked(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	const addr = "owner@example.com"
	v := h.signUp(addr)
	in, err := h.signIn(addr)
	if err != nil {
		t.Fatal(err)
	}
	as, _ := h.engine.Onboarding.Session(ctx, in.Secret)
	grant, _ := h.engine.Admin.Authenticate(ctx, v.OnboardingGrant) // authenticated before the revocation
	sess, err := h.engine.Onboarding.CreateSession(ctx, grant, fmt.Appendf(nil, `{"org_id":%q}`, v.OrgID))
	if err != nil {
		t.Fatal(err)
	}
	const redirect = "https://automation.example/cb"
	c, _ := h.engine.Connector.RegisterClient(ctx, []byte(`{"name":"Flows","redirect_uris":["`+redirect+`"]}`))
	a, err := h.engine.Connector.CheckAuthorize(ctx, authorizeQuery(c.ClientID, redirect, nil))
	if err != nil {
		t.Fatal(err)
	}
	loc, err := h.engine.Connector.Approve(ctx, as, a, v.OrgID)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(loc)

	h.advance(time.Second)
	r, err := h.engine.Onboarding.RevokeCredentials(ctx, as, v.OrgID, []byte(`{"issue_replacement_key":true}`))
	if err != nil {
		t.Fatal(err)
	}
	h.advance(time.Second)
	body := []byte(`{"provider_key":"stripe","workflow_key":"ap.invoice","source_label":"Stripe payouts"}`)
	_, err = h.engine.Onboarding.IssueBundle(ctx, grant, sess.SessionID, body)
	wantCode(t, "a bundle by a caller authenticated before the revocation", err, core.CodeUnauthenticated)
	_, err = h.engine.Onboarding.CreateSession(ctx, grant, fmt.Appendf(nil, `{"org_id":%q}`, v.OrgID))
	wantCode(t, "a session by a caller authenticated before the revocation", err, core.CodeUnauthenticated)
	fresh, err := h.engine.Admin.Authenticate(ctx, r.Replacement.Secret)
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.engine.Onboarding.IssueBundle(ctx, fresh, sess.SessionID, body)
	wantCode(t, "the bundle of a session opened before the revocation", err, onboarding.CodeSessionNotFound)
	_, err = h.engine.Connector.Exchange(ctx, url.Values{"grant_type": {"authorization_code"}, "code": {u.Query().Get("code")},
		"redirect_uri": {redirect}, "client_id": {c.ClientID}, "code_verifier": {verifier}})
	var te *connector.TokenError
	if !errors.As(err, &te) || te.OAuthCode != connector.OAuthInvalidGrant {
		t.Fatalf("a code approved before the revocation: %v", err)
	}
	// What comes after the revocation works.
	sess2, err := h.engine.Onboarding.CreateSession(ctx, fresh, fmt.Appendf(nil, `{"org_id":%q}`, v.OrgID))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.engine.Onboarding.IssueBundle(ctx, fresh, sess2.SessionID, body); err != nil {
		t.Fatalf("a bundle after the revocation: %v", err)
	}
}

// An org's own policy published while the starter is being installed stays
// the active one, whichever commits first.
func TestInstallStarterRacingTheOrgsOwn(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	own := `{"bundle_id":"own","version":"v1","mode":"ENFORCEMENT","rules":[],"default":{"outcome":"BLOCK","reason_codes":["NO"]}}`
	for i := range 20 {
		o, err := h.engine.Admin.CreateOrg(ctx, fmt.Sprintf("Org %d", i))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := h.engine.Policies.InstallStarter(ctx, o.Org.ID); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() {
			if _, err := h.engine.Policies.PublishBundle(ctx, o.Org.ID, []byte(own)); err != nil {
				t.Error(err)
			}
		})
		wg.Wait()
		r, err := h.engine.Policies.Resolve(ctx, o.Org.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if v := r.Active.Snapshot().PolicyVersion; v != "v1" {
			t.Fatalf("round %d: active version %s, want the org's own v1", i, v)
		}
	}
}
