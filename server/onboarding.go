package server

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/clearancehq/clearance"
)

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

// The cookie that carries an account session: CookieSessionSecure, but
// over plain HTTP to a loopback host (local development), where it is
// CookieSession (see sessionCookie).
const (
	// CookieSessionSecure is the session cookie served over HTTPS (or
	// behind an https public URL): Secure, Path=/, no Domain, so that the
	// __Host- prefix makes browsers keep it only as this host set it over
	// HTTPS; a sibling subdomain or a plain-HTTP answer cannot plant or
	// shadow it.
	CookieSessionSecure = "__Host-clearance_session"
	// CookieSession is the session cookie of plain-HTTP local development
	// (a loopback host), not Secure.
	CookieSession = "clearance_session"
)

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
// cookie (the Secure __Host- one but in local development), never in the
// body.
func (s *Server) loginVerify(c *call) error {
	in, err := s.engine.Onboarding.VerifySignIn(c.r.Context(), c.body)
	if err != nil {
		return err
	}
	name, secure := s.sessionCookie(c.r)
	http.SetCookie(c.w, &http.Cookie{Name: name, Value: in.Secret, Path: "/", HttpOnly: true,
		Secure: secure, SameSite: http.SameSiteLaxMode, Expires: in.ExpiresAt,
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
	name, secure := s.sessionCookie(c.r)
	http.SetCookie(c.w, &http.Cookie{Name: name, Value: "", Path: "/", HttpOnly: true,
		Secure: secure, SameSite: http.SameSiteLaxMode, MaxAge: -1})
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

// issueConsoleKey issues the operator console's key for one of the
// session's workspaces: the console then signs in with it as with any
// org key (onboarding.IssueConsoleKey). The body is none or {}.
func (s *Server) issueConsoleKey(c *call) error {
	if err := c.noBody(); err != nil {
		return err
	}
	out, err := s.engine.Onboarding.IssueConsoleKey(c.r.Context(), c.account, c.r.PathValue("orgId"))
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusCreated, out)
}

// sessionCookie is the name of r's session cookie, the one set and the
// only one read, and whether it is Secure: CookieSessionSecure (Secure)
// when r came over TLS or the public URL is https, and whenever the host
// (the public URL's, else r's Host) is not a loopback one; CookieSession
// (not Secure) only for plain HTTP to a loopback host, local development.
// A plain-HTTP deployment on another host thus gets a cookie browsers
// keep only over HTTPS: put it behind TLS (and set --public-url).
func (s *Server) sessionCookie(r *http.Request) (name string, secure bool) {
	if s.secure(r) {
		return CookieSessionSecure, true
	}
	return CookieSession, false
}

// sessionSecret is r's session cookie's value ("" for none).
func (s *Server) sessionSecret(r *http.Request) string {
	name, _ := s.sessionCookie(r)
	if ck, err := r.Cookie(name); err == nil {
		return ck.Value
	}
	return ""
}

// secure reports whether the session cookie of r is the Secure one (see
// sessionCookie).
func (s *Server) secure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	host := r.Host
	if s.opts.PublicURL != "" {
		u, err := url.Parse(s.opts.PublicURL)
		if err != nil || u.Scheme != "http" {
			return true // https, or not understood: never the plain cookie
		}
		host = u.Host
	}
	return !loopbackHost(host)
}

// loopbackHost reports whether host (with or without a port) names the
// local machine: localhost (and *.localhost, RFC 6761) or a loopback IP.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return err == nil && a.Unmap().IsLoopback()
}
