package server

import (
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/clearancehq/clearance"
)

// throttleSignUp rate limits the public sign-up routes per client address,
// before the body is read. The per-address limits (codes sent, tries of a
// code) are the engine's, kept in the store for every server.
func (s *Server) throttleSignUp(c *call) error {
	addr, _, err := net.SplitHostPort(c.r.RemoteAddr)
	if err != nil {
		addr = c.r.RemoteAddr
	}
	return s.allow(c.w, "signup-addr:"+addr)
}

// registerStart mails a sign-up code: 202, the same for every address.
func (s *Server) registerStart(c *call) error {
	out, err := s.engine.Onboarding.Start(c.r.Context(), c.body)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusAccepted, out)
}

// registerVerify exchanges a code for an org and its onboarding grant.
func (s *Server) registerVerify(c *call) error {
	out, err := s.engine.Onboarding.Verify(c.r.Context(), c.body)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, out)
}

func (s *Server) createMappingSession(c *call) error {
	out, err := s.engine.Onboarding.CreateSession(c.r.Context(), c.principal, c.body)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusCreated, out)
}

// mappingBundle is a deployment bundle as answered: with the connector's
// absolute webhook URL.
type mappingBundle struct {
	clearance.DeploymentBundle
	WebhookURL string `json:"webhook_url"`
}

func (s *Server) deploymentBundle(c *call) error {
	out, err := s.engine.Onboarding.IssueBundle(c.r.Context(), c.principal, c.r.PathValue("sessionId"), c.body)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusCreated, mappingBundle{DeploymentBundle: out, WebhookURL: s.origin(c.r) + out.WebhookPath})
}

// origin is the origin answers name this server by: Options.PublicURL, or
// the request's scheme and Host.
func (s *Server) origin(r *http.Request) string {
	if s.opts.PublicURL != "" {
		return strings.TrimRight(s.opts.PublicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// CookieSession is the cookie that carries an account session.
const CookieSession = "clearance_session"

// HeaderCSRF must be "1" on every signed-in request that changes anything.
const HeaderCSRF = "X-Clearance-CSRF"

func (s *Server) loginStart(c *call) error {
	out, err := s.engine.Onboarding.StartSignIn(c.r.Context(), c.body)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusAccepted, out)
}

// loginVerify opens an account session: its secret goes in an HttpOnly
// cookie (Secure over HTTPS), never in the body.
func (s *Server) loginVerify(c *call) error {
	in, err := s.engine.Onboarding.VerifySignIn(c.r.Context(), c.body)
	if err != nil {
		return err
	}
	http.SetCookie(c.w, &http.Cookie{Name: CookieSession, Value: in.Secret, Path: "/", HttpOnly: true,
		Secure: s.secure(c.r), SameSite: http.SameSiteLaxMode, Expires: in.ExpiresAt,
		MaxAge: max(1, int(in.TTL/time.Second))})
	return c.writeJSON(http.StatusOK, in.Account)
}

func (s *Server) accountSession(c *call) error {
	out, err := s.engine.Onboarding.Account(c.r.Context(), c.account)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, out)
}

func (s *Server) signOut(c *call) error {
	if err := s.engine.Onboarding.SignOut(c.r.Context(), c.account); err != nil {
		return err
	}
	http.SetCookie(c.w, &http.Cookie{Name: CookieSession, Value: "", Path: "/", HttpOnly: true,
		Secure: s.secure(c.r), SameSite: http.SameSiteLaxMode, MaxAge: -1})
	c.w.WriteHeader(http.StatusNoContent)
	c.status = http.StatusNoContent
	return nil
}

func (s *Server) revokeCredentials(c *call) error {
	out, err := s.engine.Onboarding.RevokeCredentials(c.r.Context(), c.account, c.r.PathValue("orgId"), c.body)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, out)
}

// secure reports whether cookies set for r are to be Secure: the request
// came over TLS, or the server's public URL is HTTPS.
func (s *Server) secure(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(s.opts.PublicURL, "https://")
}
