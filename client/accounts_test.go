package client_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"html"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/clearancehq/clearance/client"
)

// Sign-up by mailed code, then the new org's mapping session and its
// deployment bundle with the onboarding grant.
func TestSignUpAndMapping(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := t.Context()
	public := s.client("")

	started, err := public.RegisterStart(ctx, client.RegisterStartRequest{OwnerEmail: "ada@example.com", OwnerName: "Ada", OrgName: "Acme"})
	if err != nil || started.Status != "code_sent" || started.ExpiresInSeconds != 600 {
		t.Fatalf("register start %+v: %v", started, err)
	}
	_, err = public.RegisterVerify(ctx, client.RegisterVerifyRequest{OwnerEmail: "ada@example.com", OtpCode: "000000"})
	wantCode(t, err, http.StatusUnauthorized, "OTP_INVALID")
	// That wrong try burned nothing but a try; the mailed code still works.
	verified, err := public.RegisterVerify(ctx, client.RegisterVerifyRequest{OwnerEmail: "ada@example.com", OtpCode: s.mail.code(t, "ada@example.com")})
	if err != nil || !strings.HasPrefix(verified.OnboardingGrant, "clr_onb_") || verified.Workspace.Name != "Acme" || verified.Workspace.OrgId != verified.OrgId {
		t.Fatalf("register verify %+v: %v", verified, err)
	}

	onboarding := s.client(verified.OnboardingGrant)
	session, err := onboarding.CreateMappingSession(ctx, client.MappingSessionRequest{OrgId: verified.OrgId})
	if err != nil || session.OrgId != verified.OrgId || session.Status != "open" {
		t.Fatalf("mapping session %+v: %v", session, err)
	}
	bundle, err := onboarding.IssueDeploymentBundle(ctx, session.SessionId.String(),
		client.DeploymentBundleRequest{ProviderKey: "stripe", WorkflowKey: "ap.invoice", SourceLabel: "Stripe payouts"})
	if err != nil || bundle.OrgId != verified.OrgId || bundle.ApiKey == "" || bundle.WorkflowKey != "ap.invoice" ||
		!strings.HasPrefix(bundle.WebhookUrl, s.URL+"/v1/signals/webhooks/") || !strings.HasPrefix(bundle.WebhookSecret, "whsec_") {
		t.Fatalf("deployment bundle %+v: %v", bundle, err)
	}
	// The bundle's key decides; the spent grant no longer opens anything.
	if _, err := s.client(bundle.ApiKey).EvaluateDecision(ctx, decisionRequest(t, 10)); err != nil {
		t.Fatal(err)
	}
	_, err = onboarding.CreateMappingSession(ctx, client.MappingSessionRequest{OrgId: verified.OrgId})
	wantCode(t, err, http.StatusUnauthorized, "UNAUTHENTICATED")
}

// signIn signs addr in by mailed code with c and returns the session.
func (s *testServer) signIn(t *testing.T, c *client.Client, addr string) (*client.AccountView, *http.Cookie) {
	t.Helper()
	if _, err := c.SignInStart(t.Context(), client.SignInRequest{Email: client.Email(addr)}); err != nil {
		t.Fatal(err)
	}
	acc, cookie, err := c.SignInVerify(t.Context(), client.SignInVerifyRequest{Email: client.Email(addr), OtpCode: s.mail.code(t, addr)})
	if err != nil {
		t.Fatal(err)
	}
	return acc, cookie
}

// An agent's provisional workspace, claimed by a signed-in owner, whose
// credentials the owner then revokes; signing out ends the session.
func TestSessionClaimAndRevoke(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := t.Context()
	public := s.client("")

	prov, err := public.ProvisionWorkspace(ctx, client.ProvisionRequest{Name: ptr("Agent sandbox")})
	if err != nil || prov.Mode != "SHADOW" || !strings.HasPrefix(prov.ClaimCode, "clr_clm_") || prov.ApiKey == "" || prov.Workspace.Name != "Agent sandbox" {
		t.Fatalf("provision %+v: %v", prov, err)
	}
	agent := s.client(prov.ApiKey)
	if d, err := agent.EvaluateDecision(ctx, decisionRequest(t, 10)); err != nil || d.Mode != "SHADOW" {
		t.Fatalf("the provisional key decides %+v: %v", d, err)
	}

	acc, cookie := s.signIn(t, public, "owner@example.com")
	if acc.Email != "owner@example.com" || len(acc.Workspaces) != 0 || cookie.Name != "clearance_session" || !cookie.HttpOnly {
		t.Fatalf("signed in %+v with %+v", acc, cookie)
	}
	claimed, err := public.ClaimWorkspace(ctx, cookie, client.ClaimWorkspaceRequest{ClaimCode: prov.ClaimCode})
	if err != nil || claimed.OrgId != prov.OrgId || claimed.ApiKey == "" || !slices.Contains(claimed.Scopes, "org:*") {
		t.Fatalf("claim %+v: %v", claimed, err)
	}
	_, err = public.ClaimWorkspace(ctx, cookie, client.ClaimWorkspaceRequest{ClaimCode: prov.ClaimCode})
	wantCode(t, err, http.StatusConflict, "WORKSPACE_ALREADY_CLAIMED")
	view, err := public.AccountSession(ctx, cookie)
	if err != nil || len(view.Workspaces) != 1 || view.Workspaces[0].OrgId != prov.OrgId {
		t.Fatalf("session %+v: %v", view, err)
	}

	rev, err := public.RevokeWorkspaceCredentials(ctx, cookie, prov.OrgId.String(), client.RevokeCredentialsRequest{IssueReplacementKey: ptr(true)})
	if err != nil || !slices.Contains(rev.RevokedKeyIds, prov.KeyId) || !slices.Contains(rev.RevokedKeyIds, claimed.KeyId) || rev.Replacement == nil {
		t.Fatalf("revoke %+v: %v", rev, err)
	}
	_, err = agent.EvaluateDecision(ctx, decisionRequest(t, 10))
	wantCode(t, err, http.StatusUnauthorized, "UNAUTHENTICATED")
	if _, err := s.client(rev.Replacement.ApiKey).ReasonCodes(ctx); err != nil {
		t.Fatalf("the replacement key: %v", err)
	}

	if err := public.SignOut(ctx, cookie); err != nil {
		t.Fatal(err)
	}
	_, err = public.AccountSession(ctx, cookie)
	wantCode(t, err, http.StatusUnauthorized, "SIGN_IN_REQUIRED")
}

// With a cookie jar in the http.Client the session needs no argument.
func TestSessionInACookieJar(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := s.client("", client.WithHTTPClient(&http.Client{Jar: jar}))
	s.signIn(t, browser, "jar@example.com")
	acc, err := browser.AccountSession(t.Context(), nil)
	if err != nil || acc.Email != "jar@example.com" {
		t.Fatalf("session from the jar %+v: %v", acc, err)
	}
	if err := browser.SignOut(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	_, err = browser.AccountSession(t.Context(), nil)
	wantCode(t, err, http.StatusUnauthorized, "SIGN_IN_REQUIRED")
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// The automation connector end to end: a registered platform, the owner's
// sign-in and consent, the code exchanged with PKCE, and the credential's
// own routes.
func TestAutomationConnector(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := t.Context()
	public := s.client("")
	const redirect = "http://127.0.0.1:9/callback"

	// The owner's workspace, made by sign-up.
	if _, err := public.RegisterStart(ctx, client.RegisterStartRequest{OwnerEmail: "flow@example.com", OwnerName: "Flo", OrgName: "Flows Inc"}); err != nil {
		t.Fatal(err)
	}
	verified, err := public.RegisterVerify(ctx, client.RegisterVerifyRequest{OwnerEmail: "flow@example.com", OtpCode: s.mail.code(t, "flow@example.com")})
	if err != nil {
		t.Fatal(err)
	}

	app, err := s.client(s.platform).RegisterAutomationClient(ctx, client.AutomationClientRequest{Name: "Flows", RedirectUris: []string{redirect}})
	if err != nil || app.Name != "Flows" || len(app.RedirectUris) != 1 {
		t.Fatalf("register client %+v: %v", app, err)
	}
	verifier := strings.Repeat("v", 43)
	sum := sha256.Sum256([]byte(verifier))
	challenge := base64.RawURLEncoding.EncodeToString(sum[:])
	params := url.Values{"response_type": {"code"}, "client_id": {app.ClientId.String()}, "redirect_uri": {redirect},
		"state": {"st-1"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}

	signin, err := public.AutomationAuthorize(ctx, nil, params)
	if err != nil || signin.Redirect != nil || !bytes.Contains(signin.Page, []byte("Flows")) || csrfField.Match(signin.Page) {
		t.Fatalf("without a session, the sign-in page: %v\n%.300s", err, signin.Page)
	}
	_, cookie := s.signIn(t, public, "flow@example.com")
	consent, err := public.AutomationAuthorize(ctx, cookie, params)
	if err != nil || consent.Redirect != nil {
		t.Fatalf("the consent page: %v", err)
	}
	m := csrfField.FindSubmatch(consent.Page)
	if m == nil || !bytes.Contains(consent.Page, []byte(verified.OrgId.String())) {
		t.Fatalf("the consent page has no form for the workspace:\n%s", consent.Page)
	}
	form := client.AutomationConsentForm{ClientId: app.ClientId, RedirectUri: redirect, State: "st-1", CodeChallenge: challenge,
		CodeChallengeMethod: "S256", ResponseType: "code", Csrf: html.UnescapeString(string(m[1])), Decision: "allow", OrgId: &verified.OrgId}
	forged := form
	forged.Csrf = "forged"
	_, err = public.AutomationConsent(ctx, cookie, forged)
	if e := wantCode(t, err, http.StatusForbidden, ""); !bytes.Contains(e.Body, []byte("<html")) {
		t.Fatalf("a forged consent: %s", e.Body)
	}
	back, err := public.AutomationConsent(ctx, cookie, form)
	if err != nil || back.Redirect == nil || back.Redirect.Host != "127.0.0.1:9" || back.Redirect.Query().Get("state") != "st-1" {
		t.Fatalf("consent %+v: %v", back, err)
	}
	code := back.Redirect.Query().Get("code")
	tok, err := public.AutomationToken(ctx, client.AutomationTokenRequest{GrantType: "authorization_code", Code: code,
		RedirectUri: redirect, ClientId: app.ClientId, CodeVerifier: verifier})
	if err != nil || tok.AccessToken == "" || tok.OrgId != verified.OrgId || tok.TokenType != "Bearer" {
		t.Fatalf("token %+v: %v", tok, err)
	}
	_, err = public.AutomationToken(ctx, client.AutomationTokenRequest{GrantType: "authorization_code", Code: code,
		RedirectUri: redirect, ClientId: app.ClientId, CodeVerifier: verifier})
	wantCode(t, err, http.StatusBadRequest, "invalid_grant")

	// A code presented twice revoked its credential: connect again.
	consent, err = public.AutomationAuthorize(ctx, cookie, params)
	if err != nil {
		t.Fatal(err)
	}
	form.Csrf = html.UnescapeString(string(csrfField.FindSubmatch(consent.Page)[1]))
	back, err = public.AutomationConsent(ctx, cookie, form)
	if err != nil {
		t.Fatal(err)
	}
	tok, err = public.AutomationToken(ctx, client.AutomationTokenRequest{GrantType: "authorization_code", Code: back.Redirect.Query().Get("code"),
		RedirectUri: redirect, ClientId: app.ClientId, CodeVerifier: verifier})
	if err != nil {
		t.Fatal(err)
	}

	auto := s.client(tok.AccessToken)
	me, err := auto.AutomationMe(ctx)
	if err != nil || me.OrgId != verified.OrgId || me.Workspace.Name != "Flows Inc" || me.KeyId != tok.KeyId {
		t.Fatalf("me %+v: %v", me, err)
	}
	boot, err := auto.AutomationBootstrapPolicy(ctx)
	if err != nil || boot.Installed || boot.PolicyVersion == "" {
		t.Fatalf("bootstrap after the consent installed the starter %+v: %v", boot, err)
	}

	rv := newReceiver(t)
	hook, err := auto.AddAutomationWebhook(ctx, client.AutomationWebhookRequest{Url: rv.URL + "/resolved"})
	if err != nil || !hook.Active || hook.Url != rv.URL+"/resolved" || hook.SigningSecret == "" {
		t.Fatalf("add callback %+v: %v", hook, err)
	}
	hooks, err := auto.AutomationWebhooks(ctx)
	if err != nil || len(hooks.Webhooks) != 1 || hooks.Webhooks[0].SubscriptionId != hook.SubscriptionId {
		t.Fatalf("callbacks %+v: %v", hooks, err)
	}
	d, err := auto.EvaluateDecision(ctx, decisionRequest(t, 10))
	if err != nil {
		t.Fatal(err)
	}
	s.deliver(t)
	log, err := auto.AutomationWebhookDeliveries(ctx, hook.SubscriptionId.String())
	if err != nil || len(log.Deliveries) != 1 || log.Deliveries[0].State != "delivered" || len(rv.requests()) != 1 ||
		!bytes.Contains(rv.requests()[0].body, []byte(d.DecisionId.String())) {
		t.Fatalf("callback deliveries %+v: %v", log, err)
	}
	if err := auto.RemoveAutomationWebhook(ctx, hook.SubscriptionId.String()); err != nil {
		t.Fatal(err)
	}
	if hooks, err := auto.AutomationWebhooks(ctx); err != nil || len(hooks.Webhooks) != 0 {
		t.Fatalf("after removal %+v: %v", hooks, err)
	}
}
