package server

import (
	"bytes"
	"crypto/rand"
	"embed"
	"encoding/base64"
	"errors"
	"html/template"
	"net/http"
	"net/url"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/onboarding"
)

//go:embed pages/*.html
var pageFiles embed.FS

// pages are the automation connector's sign-in, consent and error pages.
var pages = template.Must(template.ParseFS(pageFiles, "pages/*.html"))

// writePage renders a page with a fresh script and style nonce, under a
// content security policy that runs nothing else, in no frame (consent
// cannot be clickjacked) and with no Referer (codes ride in URLs).
func writePage(c *call, status int, name string, data map[string]any) error {
	var n [16]byte
	_, _ = rand.Read(n[:])
	nonce := base64.RawStdEncoding.EncodeToString(n[:])
	data["Nonce"] = nonce
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, data); err != nil {
		return err
	}
	h := c.w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'nonce-"+nonce+"'; style-src 'nonce-"+nonce+
		"'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	c.w.WriteHeader(status)
	c.status = status
	_, err := c.w.Write(buf.Bytes())
	return err
}

// redirect sends the browser to loc (303: the next request is a GET).
func redirect(c *call, loc string) error {
	c.w.Header().Set("Cache-Control", "no-store")
	c.w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(c.w, c.r, loc, http.StatusSeeOther)
	c.status = http.StatusSeeOther
	return nil
}

// authorizeRefused answers a refused authorization request: back to the
// client when it may go there, else a page that sends nothing anywhere.
func authorizeRefused(c *call, err error) (bool, error) {
	var ae *clearance.AutomationAuthorizeError
	if !errors.As(err, &ae) {
		return false, err
	}
	if ae.Redirect {
		return true, redirect(c, ae.Location())
	}
	return true, writePage(c, statusPageRefused, "error.html", map[string]any{"Reason": ae.Description})
}

// session is the request's account session, or ok false.
func (s *Server) session(c *call) (clearance.AccountSession, bool, error) {
	secret := s.sessionSecret(c.r)
	if secret == "" {
		return clearance.AccountSession{}, false, nil
	}
	as, err := s.engine.Onboarding.Session(c.r.Context(), secret)
	var ce *clearance.Error
	if errors.As(err, &ce) && ce.Code == onboarding.CodeSignInRequired {
		return clearance.AccountSession{}, false, nil
	}
	return as, err == nil, err
}

// automationAuthorize is the connector's authorization endpoint: the
// sign-in page without an account session, else the consent page.
func (s *Server) automationAuthorize(c *call) error {
	a, err := s.engine.Connector.CheckAuthorize(c.r.Context(), c.r.URL.Query())
	if done, err := authorizeRefused(c, err); done || err != nil {
		return err
	}
	as, ok, err := s.session(c)
	if err != nil {
		return err
	}
	if !ok {
		return writePage(c, http.StatusOK, "signin.html", map[string]any{"ClientName": a.Client.Name})
	}
	acc, err := s.engine.Onboarding.Account(c.r.Context(), as)
	if err != nil {
		return err
	}
	return writePage(c, http.StatusOK, "consent.html", map[string]any{"ClientName": a.Client.Name, "Email": acc.Email,
		"Workspaces": acc.Workspaces, "ClientID": a.Client.ClientID, "RedirectURI": a.RedirectURI, "State": a.State,
		"CodeChallenge": a.CodeChallenge, "CSRF": s.engine.Connector.ConsentToken(as, a)})
}

// automationConsent takes the consent form: allow issues a code for the
// chosen workspace, deny refuses; either goes back to the client.
func (s *Server) automationConsent(c *call) error {
	form, err := url.ParseQuery(string(c.body))
	if err != nil {
		return writePage(c, statusPageRefused, "error.html", map[string]any{"Reason": "the form could not be read"})
	}
	a, err := s.engine.Connector.CheckAuthorize(c.r.Context(), form)
	if done, err := authorizeRefused(c, err); done || err != nil {
		return err
	}
	as, ok, err := s.session(c)
	if err != nil {
		return err
	}
	if !ok || len(form["csrf"]) != 1 || !s.engine.Connector.CheckConsentToken(as, a, form.Get("csrf")) {
		return writePage(c, statusPageForged, "error.html", map[string]any{
			"Reason": "the consent form is not this signed-in session's: open the connection link again"})
	}
	if len(form["decision"]) > 1 || len(form["org_id"]) > 1 {
		return writePage(c, statusPageRefused, "error.html", map[string]any{"Reason": "one decision for one workspace"})
	}
	switch form.Get("decision") {
	case "allow":
		loc, err := s.engine.Connector.Approve(c.r.Context(), as, a, form.Get("org_id"))
		var ce *clearance.Error
		if errors.As(err, &ce) && ce.Code == onboarding.CodeWorkspaceNotFound {
			return writePage(c, statusPageRefused, "error.html", map[string]any{"Reason": "choose one of your workspaces"})
		}
		if err != nil {
			return err
		}
		return redirect(c, loc)
	case "deny":
		return redirect(c, s.engine.Connector.Deny(a))
	}
	return writePage(c, statusPageRefused, "error.html", map[string]any{"Reason": "allow or deny the connection"})
}

// automationToken is the connector's token endpoint (RFC 6749 §4.1.3):
// form-encoded, answers a credential or an OAuth error, never cached.
func (s *Server) automationToken(c *call) error {
	form, err := url.ParseQuery(string(c.body))
	if err != nil {
		form = url.Values{}
	}
	tok, err := s.engine.Connector.Exchange(c.r.Context(), form)
	c.w.Header().Set("Pragma", "no-cache")
	var te *clearance.AutomationTokenError
	if errors.As(err, &te) {
		return c.writeJSON(statusOAuthError, te)
	}
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, tok)
}

// automationMe validates an automation credential and names its workspace.
func (s *Server) automationMe(c *call) error {
	o, err := s.engine.Admin.Org(c.r.Context(), c.principal.OrgID)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, map[string]any{"org_id": o.ID, "key_id": c.principal.KeyID,
		"workspace": map[string]string{"org_id": o.ID, "name": o.Name}})
}

// automationBootstrap installs the starter policy for a connection whose
// org has none, and changes nothing otherwise.
func (s *Server) automationBootstrap(c *call) error {
	if len(c.body) > 0 { // none, or an empty object: it takes no members
		var none struct{}
		if err := c.decode(&none); err != nil {
			return err
		}
	}
	out, err := s.engine.Policies.InstallStarter(c.r.Context(), c.principal.OrgID)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if out.Installed {
		status = http.StatusCreated
	}
	return c.writeJSON(status, out)
}

// registerAutomationClient registers an automation platform (platform key).
func (s *Server) registerAutomationClient(c *call) error {
	out, err := s.engine.Connector.RegisterClient(c.r.Context(), c.body)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusCreated, out)
}

// addAutomationWebhook registers a callback URL for decision.resolved.
func (s *Server) addAutomationWebhook(c *call) error {
	out, err := s.engine.Connector.AddWebhook(c.r.Context(), c.principal, c.body)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusCreated, out)
}

// automationWebhooks lists the org's callback URLs.
func (s *Server) automationWebhooks(c *call) error {
	out, err := s.engine.Connector.Webhooks(c.r.Context(), c.principal.OrgID)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, map[string]any{"webhooks": out})
}

// removeAutomationWebhook removes one.
func (s *Server) removeAutomationWebhook(c *call) error {
	if err := s.engine.Connector.RemoveWebhook(c.r.Context(), c.principal.OrgID, c.r.PathValue("subscriptionId")); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	c.status = http.StatusNoContent
	return nil
}

// automationWebhookDeliveries is the delivery log of one callback.
func (s *Server) automationWebhookDeliveries(c *call) error {
	f, err := deliveryFilter(c)
	if err != nil {
		return err
	}
	list, err := s.engine.Connector.WebhookDeliveries(c.r.Context(), c.principal.OrgID, c.r.PathValue("subscriptionId"), f)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, map[string]any{"deliveries": list})
}
