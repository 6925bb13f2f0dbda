package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Accounts and onboarding: sign-up and sign-in by mailed code, the owner's
// account session (a cookie, see the package doc), provisional workspaces
// and their claim, the automation connector (OAuth 2.0 with PKCE) and its
// credential's routes, and the signal-mapping session of a new org.

// SessionCookieNames are the names of the account session cookie: the
// Secure __Host- one over HTTPS, the plain one on plain HTTP to a loopback
// host (local development).
var SessionCookieNames = []string{"__Host-clearance_session", "clearance_session"}

// RegisterStart mails a one-time sign-up code to the owner (the same answer
// for every address): POST /v1/public/auth/register/start.
func (c *Client) RegisterStart(ctx context.Context, req RegisterStartRequest, opts ...CallOption) (*RegisterStarted, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/public/auth/register/start", req, opts)
	return call[RegisterStarted](ctx, c, r, err)
}

// RegisterVerify exchanges the mailed code for a new org and its onboarding
// grant (a credential of the signal-mapping routes only):
// POST /v1/public/auth/register/verify.
func (c *Client) RegisterVerify(ctx context.Context, req RegisterVerifyRequest, opts ...CallOption) (*OnboardingVerified, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/public/auth/register/verify", req, opts)
	return call[OnboardingVerified](ctx, c, r, err)
}

// SignInStart mails a one-time sign-in code (the same answer for every
// address): POST /v1/public/auth/login/start.
func (c *Client) SignInStart(ctx context.Context, req SignInRequest, opts ...CallOption) (*RegisterStarted, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/public/auth/login/start", req, opts)
	return call[RegisterStarted](ctx, c, r, err)
}

// SignInVerify exchanges the mailed sign-in code for an account session:
// the account, and the session cookie the answer set (the secret is never
// in the body): POST /v1/public/auth/login/verify.
func (c *Client) SignInVerify(ctx context.Context, req SignInVerifyRequest, opts ...CallOption) (*AccountView, *http.Cookie, error) {
	var got Response
	r, err := c.newRequest(http.MethodPost, "/v1/public/auth/login/verify", req, append(opts, Received(&got)))
	acc, err := call[AccountView](ctx, c, r, err)
	if err != nil {
		return nil, nil, err
	}
	resp := http.Response{Header: got.Header}
	for _, ck := range resp.Cookies() {
		for _, name := range SessionCookieNames {
			if ck.Name == name && ck.Value != "" {
				return acc, ck, nil
			}
		}
	}
	return nil, nil, fmt.Errorf("client: POST /v1/public/auth/login/verify: the answer set no session cookie")
}

// withSession sends the session cookie (nil: none of its own, see above).
func withSession(session *http.Cookie) CallOption {
	return func(r *request) {
		if session != nil {
			r.header.Add("Cookie", (&http.Cookie{Name: session.Name, Value: session.Value}).String())
		}
	}
}

// csrf marks a signed-in request that changes something.
func csrf(r *request) { r.header.Set("X-Clearance-CSRF", "1") }

// AccountSession reads the signed-in account and its workspaces (401
// SIGN_IN_REQUIRED without a live session): GET /v1/public/auth/session.
func (c *Client) AccountSession(ctx context.Context, session *http.Cookie, opts ...CallOption) (*AccountView, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/public/auth/session", nil, append(opts, withSession(session)))
	return call[AccountView](ctx, c, r, err)
}

// SignOut ends the account session everywhere:
// DELETE /v1/public/auth/session.
func (c *Client) SignOut(ctx context.Context, session *http.Cookie, opts ...CallOption) error {
	r, err := c.newRequest(http.MethodDelete, "/v1/public/auth/session", nil, append(opts, withSession(session), csrf))
	_, err = raw(ctx, c, r, err)
	return err
}

// RevokeWorkspaceCredentials revokes every credential of one of the
// account's workspaces, and issues a fresh org key when asked:
// POST /v1/public/auth/workspaces/{orgId}/revoke-credentials.
func (c *Client) RevokeWorkspaceCredentials(ctx context.Context, session *http.Cookie, orgID string, req RevokeCredentialsRequest, opts ...CallOption) (*RevokedCredentials, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/public/auth/workspaces/"+escape(orgID)+"/revoke-credentials", req, append(opts, withSession(session), csrf))
	return call[RevokedCredentials](ctx, c, r, err)
}

// IssueConsoleKey trades the account session for the operator console's
// org key for one of its workspaces (an hour at most, revoked when the
// session signs out):
// POST /v1/public/auth/workspaces/{orgId}/console-key.
func (c *Client) IssueConsoleKey(ctx context.Context, session *http.Cookie, orgID string, opts ...CallOption) (*ConsoleKey, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/public/auth/workspaces/"+escape(orgID)+"/console-key", nil, append(opts, withSession(session), csrf))
	return call[ConsoleKey](ctx, c, r, err)
}

// ProvisionWorkspace starts a provisional workspace (SHADOW only, decision
// scopes, 72 hours) without a credential; its claim code goes to the owner:
// POST /v1/public/workspaces/provisional.
func (c *Client) ProvisionWorkspace(ctx context.Context, req ProvisionRequest, opts ...CallOption) (*ProvisionalWorkspace, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/public/workspaces/provisional", req, opts)
	return call[ProvisionalWorkspace](ctx, c, r, err)
}

// ClaimWorkspace makes a provisional workspace the signed-in account's and
// issues its owner an org key (shown only here):
// POST /v1/public/auth/workspaces/claim.
func (c *Client) ClaimWorkspace(ctx context.Context, session *http.Cookie, req ClaimWorkspaceRequest, opts ...CallOption) (*ClaimedWorkspace, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/public/auth/workspaces/claim", req, append(opts, withSession(session), csrf))
	return call[ClaimedWorkspace](ctx, c, r, err)
}

// RegisterAutomationClient registers an automation platform, an OAuth
// client with exact redirect URIs (the platform key only):
// POST /v1/platform/automation/clients.
func (c *Client) RegisterAutomationClient(ctx context.Context, req AutomationClientRequest, opts ...CallOption) (*AutomationClient, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/platform/automation/clients", req, opts)
	return call[AutomationClient](ctx, c, r, err)
}

// AuthorizeStep is what the authorization endpoint answered: a page for
// the owner's browser, or a redirect back to the client's redirect_uri.
type AuthorizeStep struct {
	// Page is the HTML of a 200: the sign-in page without a session, the
	// consent page (with its csrf token) with one.
	Page []byte
	// Redirect is the Location of a 303: code and state (allowed), or
	// error and state (denied, or a defect RFC 6749 sends back).
	Redirect *url.URL
}

// AutomationAuthorize asks the authorization endpoint as the owner's
// browser would (params: response_type, client_id, redirect_uri, state,
// code_challenge, code_challenge_method); session may be nil:
// GET /v1/public/auth/automation/authorize. An unknown client or redirect
// URI is a 400 *Error whose Body is the error page.
func (c *Client) AutomationAuthorize(ctx context.Context, session *http.Cookie, params url.Values, opts ...CallOption) (*AuthorizeStep, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/public/auth/automation/authorize", nil, append(opts, withSession(session)))
	if err != nil {
		return nil, err
	}
	for k, vs := range params {
		r.query[k] = append(r.query[k], vs...)
	}
	return c.authorizeStep(ctx, r)
}

// AutomationConsent posts the consent form from the consent page (its
// csrf token with the same authorization parameters): the owner's allow
// or deny, answered by a redirect to the client:
// POST /v1/public/auth/automation/authorize. A forged or stale form is a
// 403 *Error, an unknown client or workspace a 400 one.
func (c *Client) AutomationConsent(ctx context.Context, session *http.Cookie, form AutomationConsentForm, opts ...CallOption) (*AuthorizeStep, error) {
	body, err := formOf(form)
	if err != nil {
		return nil, err
	}
	r, err := c.newRequest(http.MethodPost, "/v1/public/auth/automation/authorize", body, append(opts, withSession(session)))
	if err != nil {
		return nil, err
	}
	return c.authorizeStep(ctx, r)
}

func (c *Client) authorizeStep(ctx context.Context, r *request) (*AuthorizeStep, error) {
	r.redirect = true
	r.header.Set("Accept", "text/html, application/problem+json")
	resp, err := c.open(ctx, r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		loc, err := location(resp)
		if err != nil {
			return nil, fmt.Errorf("client: %s %s: %w", r.method, r.path, err)
		}
		return &AuthorizeStep{Redirect: loc}, nil
	}
	body, err := readAll(resp, r)
	if err != nil {
		return nil, err
	}
	return &AuthorizeStep{Page: body}, nil
}

// AutomationToken exchanges an authorization code and its PKCE verifier for
// an automation credential (RFC 6749 §4.1.3); a refusal is a 400 *Error
// whose Code is the OAuth error (invalid_grant, …):
// POST /v1/public/auth/automation/token.
func (c *Client) AutomationToken(ctx context.Context, req AutomationTokenRequest, opts ...CallOption) (*AutomationToken, error) {
	body, err := formOf(req)
	if err != nil {
		return nil, err
	}
	r, err := c.newRequest(http.MethodPost, "/v1/public/auth/automation/token", body, opts)
	return call[AutomationToken](ctx, c, r, err)
}

// formOf encodes a form schema's struct as its form: each JSON member a
// field, omitted members left out.
func formOf(v any) (url.Values, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("client: encode form: %w", err)
	}
	var members map[string]any
	if err := json.Unmarshal(b, &members); err != nil {
		return nil, fmt.Errorf("client: encode form: %w", err)
	}
	form := url.Values{}
	for k, v := range members {
		switch x := v.(type) {
		case nil:
		case string:
			form.Set(k, x)
		default:
			raw, _ := json.Marshal(x)
			form.Set(k, strings.Trim(string(raw), `"`))
		}
	}
	return form, nil
}

// AutomationMe validates an automation credential and names its workspace:
// GET /v1/automation/me.
func (c *Client) AutomationMe(ctx context.Context, opts ...CallOption) (*AutomationMe, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/automation/me", nil, opts)
	return call[AutomationMe](ctx, c, r, err)
}

// AutomationBootstrapPolicy installs the starter policy for a workspace
// that has none (Installed true), and changes nothing otherwise:
// POST /v1/automation/policy/bootstrap.
func (c *Client) AutomationBootstrapPolicy(ctx context.Context, opts ...CallOption) (*InstalledStarter, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/automation/policy/bootstrap", nil, opts)
	return call[InstalledStarter](ctx, c, r, err)
}

// AddAutomationWebhook registers a callback URL for decision.resolved; its
// signing secret is shown only here: POST /v1/automation/webhooks.
func (c *Client) AddAutomationWebhook(ctx context.Context, req AutomationWebhookRequest, opts ...CallOption) (*NewAutomationWebhook, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/automation/webhooks", req, opts)
	return call[NewAutomationWebhook](ctx, c, r, err)
}

// AutomationWebhooks lists the workspace's callbacks:
// GET /v1/automation/webhooks.
func (c *Client) AutomationWebhooks(ctx context.Context, opts ...CallOption) (*AutomationWebhookList, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/automation/webhooks", nil, opts)
	return call[AutomationWebhookList](ctx, c, r, err)
}

// RemoveAutomationWebhook removes a callback:
// DELETE /v1/automation/webhooks/{subscriptionId}.
func (c *Client) RemoveAutomationWebhook(ctx context.Context, subscriptionID string, opts ...CallOption) error {
	r, err := c.newRequest(http.MethodDelete, "/v1/automation/webhooks/"+escape(subscriptionID), nil, opts)
	_, err = raw(ctx, c, r, err)
	return err
}

// WebhookDeliveryList is a delivery log, newest first.
type WebhookDeliveryList struct {
	Deliveries []WebhookDelivery `json:"deliveries"`
}

// AutomationWebhookDeliveries is the delivery log of one callback
// (Query("day", …), Query("state", …), Query("limit", …)):
// GET /v1/automation/webhooks/{subscriptionId}/deliveries.
func (c *Client) AutomationWebhookDeliveries(ctx context.Context, subscriptionID string, opts ...CallOption) (*WebhookDeliveryList, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/automation/webhooks/"+escape(subscriptionID)+"/deliveries", nil, opts)
	return call[WebhookDeliveryList](ctx, c, r, err)
}

// CreateMappingSession opens the signal-mapping session of a new org (a
// Client whose key is the onboarding grant):
// POST /v1/public/pilot/signal-mapping/sessions.
func (c *Client) CreateMappingSession(ctx context.Context, req MappingSessionRequest, opts ...CallOption) (*MappingSession, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/public/pilot/signal-mapping/sessions", req, opts)
	return call[MappingSession](ctx, c, r, err)
}

// IssueDeploymentBundle issues a mapping session's deployment bundle, with
// the org's API key (shown only here), and spends the onboarding grant:
// POST /v1/public/pilot/signal-mapping/sessions/{sessionId}/deployment-bundle.
func (c *Client) IssueDeploymentBundle(ctx context.Context, sessionID string, req DeploymentBundleRequest, opts ...CallOption) (*DeploymentBundle, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/public/pilot/signal-mapping/sessions/"+escape(sessionID)+"/deployment-bundle", req, opts)
	return call[DeploymentBundle](ctx, c, r, err)
}

// errNoLocation is the error of a redirect without a Location.
var errNoLocation = errors.New("client: redirect without a Location")

// location resolves a redirect's Location against the request's URL.
func location(resp *http.Response) (*url.URL, error) {
	loc := resp.Header.Get("Location")
	if loc == "" {
		return nil, errNoLocation
	}
	return resp.Request.URL.Parse(loc)
}
