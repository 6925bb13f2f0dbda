package connector

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/clearancehq/clearance/admin"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/onboarding"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
)

// Record kinds of the automation connector, in onboarding.AccountsOrgID.
const (
	kindClient = "connector.client" // id: the client id
	kindCode   = "connector.code"   // id: sha256 of the code
)

// Limits of the automation connector.
const (
	MaxRedirectURIs   = 5
	MaxRedirectURILen = 512
	MaxStateLen       = 512
	// CodeLifetime is how long an authorization code may be exchanged.
	CodeLifetime = time.Minute
	// ReplayWindow is how long after its lifetime a code presented again
	// (by its client) still revokes the credential it was exchanged for.
	ReplayWindow = 10 * time.Minute
)

// AutomationScopes are the scopes of an automation credential.
var AutomationScopes = []tenant.Scope{tenant.ScopeAutomation, tenant.ScopeDecisionWrite, tenant.ScopeDecisionRead}

// ClientRequest registers an automation platform (the operator's call).
type ClientRequest struct {
	Name         string   `json:"name"`
	RedirectURIs []string `json:"redirect_uris"`
}

// Client is a registered automation platform: a public OAuth client (no
// secret; PKCE S256 proves the code's requester).
type Client struct {
	ClientID     string   `json:"client_id"`
	Name         string   `json:"name"`
	RedirectURIs []string `json:"redirect_uris"`
	CreatedAt    string   `json:"created_at"`
}

// RegisterClient registers an automation platform with its exact redirect
// URIs: https, or http on a loopback host (RFC 8252), no fragment.
func (s *Service) RegisterClient(ctx context.Context, raw []byte) (Client, error) {
	var req ClientRequest
	if err := strictjson.Decode(raw, &req, s.d.JSON); err != nil {
		return Client{}, err
	}
	name, err := onboarding.CheckName("name", req.Name)
	if err != nil {
		return Client{}, err
	}
	if len(req.RedirectURIs) == 0 || len(req.RedirectURIs) > MaxRedirectURIs {
		return Client{}, core.Invalid(core.CodeInvalidRequest, "redirect_uris", "1 to %d redirect URIs", MaxRedirectURIs)
	}
	for i, u := range req.RedirectURIs {
		if !validRedirect(u) {
			return Client{}, core.Invalid(core.CodeInvalidRequest, "redirect_uris["+strconv.Itoa(i)+"]",
				"a redirect URI is an absolute https URL (http only on 127.0.0.1, [::1] or localhost), without a fragment or user info, at most %d bytes", MaxRedirectURILen)
		}
	}
	id, err := s.d.IDs.New()
	if err != nil {
		return Client{}, core.Unavailable("id generation", err)
	}
	now := s.d.Now()
	c := Client{ClientID: id, Name: name, RedirectURIs: req.RedirectURIs, CreatedAt: core.Format(now)}
	err = s.d.Store.Backend.Update(ctx, onboarding.AccountsOrgID, func(tx store.Tx) error {
		return core.WriteRecord(ctx, tx, kindClient, id, now, c)
	})
	if err != nil {
		return Client{}, core.Translate("register client", err)
	}
	return c, nil
}

func validRedirect(raw string) bool {
	if raw == "" || len(raw) > MaxRedirectURILen || strings.ContainsAny(raw, " \t\r\n#") {
		return false
	}
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || u.Fragment != "" || u.Host == "" || u.Opaque != "" {
		return false
	}
	switch u.Scheme {
	case "https":
		return true
	case "http":
		h := u.Hostname()
		return h == "127.0.0.1" || h == "::1" || h == "localhost"
	}
	return false
}

// AuthorizeError is a refused authorization request. Redirect tells
// whether it may go back to the client (the client and its redirect URI
// were recognised) as ?error=Code&error_description=…&state=…; otherwise
// the user is shown the error and nothing is sent anywhere.
type AuthorizeError struct {
	Redirect    bool
	RedirectURI string
	State       string
	OAuthCode   string // OAuthInvalidRequest, OAuthUnsupportedResponseType or OAuthAccessDenied
	Description string
}

func (e *AuthorizeError) Error() string { return e.OAuthCode + ": " + e.Description }

// Location is where a redirectable error sends the browser.
func (e *AuthorizeError) Location() string {
	return withQuery(e.RedirectURI, url.Values{"error": {e.OAuthCode}, "error_description": {e.Description}, "state": {e.State}})
}

// Authorization is a checked authorization request, ready for consent.
type Authorization struct {
	Client        Client
	RedirectURI   string
	State         string
	CodeChallenge string
}

// CheckAuthorize checks an authorization request's query: response_type
// code, a registered client and one of its redirect URIs exactly, state,
// and a PKCE S256 code_challenge.
func (s *Service) CheckAuthorize(ctx context.Context, q url.Values) (Authorization, error) {
	one := func(name string) string {
		if v := q[name]; len(v) == 1 {
			return v[0]
		}
		return ""
	}
	clientID, redirect := one("client_id"), one("redirect_uri")
	if !core.ValidID(clientID) {
		return Authorization{}, &AuthorizeError{OAuthCode: OAuthInvalidRequest, Description: "unknown client_id"}
	}
	var c Client
	err := core.ReadCommitted(ctx, s.d.Store, onboarding.AccountsOrgID, kindClient, clientID, &c)
	if core.IsNotFound(err) {
		return Authorization{}, &AuthorizeError{OAuthCode: OAuthInvalidRequest, Description: "unknown client_id"}
	}
	if err != nil {
		return Authorization{}, core.Translate("read client", err)
	}
	registered := false
	for _, u := range c.RedirectURIs {
		registered = registered || u == redirect
	}
	if !registered {
		return Authorization{}, &AuthorizeError{OAuthCode: OAuthInvalidRequest, Description: "redirect_uri is not one the client registered"}
	}
	state := one("state")
	refuse := func(code, desc string) (Authorization, error) {
		return Authorization{}, &AuthorizeError{Redirect: true, RedirectURI: redirect, State: state, OAuthCode: code, Description: desc}
	}
	switch {
	case one("response_type") == "":
		return refuse(OAuthInvalidRequest, "response_type is required (code)")
	case one("response_type") != "code":
		return refuse(OAuthUnsupportedResponseType, "response_type must be code")
	case state == "" || len(state) > MaxStateLen:
		return refuse(OAuthInvalidRequest, "state is required (at most 512 bytes)")
	case one("code_challenge_method") != "S256":
		return refuse(OAuthInvalidRequest, "PKCE is required: code_challenge_method must be S256")
	case !validChallenge(one("code_challenge")):
		return refuse(OAuthInvalidRequest, "code_challenge must be the base64url SHA-256 of the code verifier (43 characters)")
	}
	return Authorization{Client: c, RedirectURI: redirect, State: state, CodeChallenge: one("code_challenge")}, nil
}

func validChallenge(s string) bool {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	return err == nil && len(b) == sha256.Size
}

// codeRecord is an issued authorization code, filed by its hash.
type codeRecord struct {
	ClientID      string    `json:"client_id"`
	RedirectURI   string    `json:"redirect_uri"`
	CodeChallenge string    `json:"code_challenge"`
	OrgID         string    `json:"org_id"`
	AccountID     string    `json:"account_id"`
	IssuedAt      time.Time `json:"issued_at"`
	ExpiresAt     time.Time `json:"expires_at"`
	// KeyID is the credential the code was exchanged for ("" while
	// unused): the code presented again by its client within
	// ReplayWindow revokes it (RFC 6749 §4.1.2).
	KeyID   string `json:"key_id,omitempty"`
	KeyHash string `json:"key_hash,omitempty"`
	// Replayed: the code was presented again. An exchange still under way
	// when that happens revokes what it issues.
	Replayed bool `json:"replayed,omitempty"`
}

// Approve is the owner's consent: for one of the session's workspaces, the
// starter policy is installed when the org has none, and a one-time code
// is issued; it returns where the browser goes next.
func (s *Service) Approve(ctx context.Context, as onboarding.AccountSession, a Authorization, orgID string) (string, error) {
	if err := s.cfg.Accounts.Owns(ctx, as, orgID); err != nil {
		return "", err
	}
	if _, err := s.cfg.InstallStarter(ctx, orgID); err != nil {
		return "", err
	}
	code, _, err := tenant.NewSecret(s.d.IDs.Rand, "")
	if err != nil {
		return "", core.Unavailable("code generation", err)
	}
	now := s.d.Now()
	rec := codeRecord{ClientID: a.Client.ClientID, RedirectURI: a.RedirectURI, CodeChallenge: a.CodeChallenge,
		OrgID: orgID, AccountID: as.AccountID, IssuedAt: now, ExpiresAt: now.Add(CodeLifetime)}
	err = s.d.Store.Backend.Update(ctx, onboarding.AccountsOrgID, func(tx store.Tx) error {
		return core.WriteRecord(ctx, tx, kindCode, codeKey(code), now, rec)
	})
	if err != nil {
		return "", core.Translate("issue authorization code", err)
	}
	return withQuery(a.RedirectURI, url.Values{"code": {code}, "state": {a.State}}), nil
}

// Deny is the owner's refusal: where the browser goes.
func (s *Service) Deny(a Authorization) string {
	return (&AuthorizeError{RedirectURI: a.RedirectURI, State: a.State, OAuthCode: OAuthAccessDenied,
		Description: "the owner did not allow the connection"}).Location()
}

func codeKey(code string) string {
	sum := sha256.Sum256([]byte("connector/code\x00" + code))
	return hex.EncodeToString(sum[:])
}

// TokenError is a refused token request, as RFC 6749 §5.2 words it.
type TokenError struct {
	OAuthCode   string `json:"error"` // OAuthInvalidRequest, OAuthInvalidGrant or OAuthUnsupportedGrantType
	Description string `json:"error_description"`
}

func (e *TokenError) Error() string { return e.OAuthCode + ": " + e.Description }

// Token is an automation credential: an org key with AutomationScopes.
type Token struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"` // Bearer
	Scope       string `json:"scope"`
	OrgID       string `json:"org_id"`
	KeyID       string `json:"key_id"`
}

// Exchange trades an authorization code for an automation credential: the
// code once, within CodeLifetime, with the client id and redirect URI it
// was issued for and the PKCE verifier of its challenge. A code presented
// again revokes the credential it was exchanged for.
func (s *Service) Exchange(ctx context.Context, form url.Values) (Token, error) {
	one := func(name string) string {
		if v := form[name]; len(v) == 1 {
			return v[0]
		}
		return ""
	}
	if one("grant_type") != "authorization_code" {
		return Token{}, &TokenError{OAuthUnsupportedGrantType, "grant_type must be authorization_code"}
	}
	code, verifier := one("code"), one("code_verifier")
	if code == "" || len(code) > 128 || !validVerifier(verifier) {
		return Token{}, &TokenError{OAuthInvalidRequest, "code and a code_verifier of 43 to 128 unreserved characters are required"}
	}
	key, now := codeKey(code), s.d.Now()
	var rec codeRecord
	bad := &TokenError{OAuthInvalidGrant, "the code is unknown, expired, used, or not this client's"}
	err := core.ReadCommitted(ctx, s.d.Store, onboarding.AccountsOrgID, kindCode, key, &rec)
	switch {
	case core.IsNotFound(err):
		return Token{}, bad
	case err != nil:
		return Token{}, core.Translate("read authorization code", err)
	case rec.KeyID != "":
		// A replay revokes only from the client the code was issued to and
		// while it could be a theft in progress: an old code found in a
		// log or a history cannot kill a credential.
		if one("client_id") == rec.ClientID && now.Before(rec.ExpiresAt.Add(ReplayWindow)) {
			s.replayed(ctx, key, now)
		}
		return Token{}, bad
	}
	challenge := sha256.Sum256([]byte(verifier))
	if !now.Before(rec.ExpiresAt) || one("client_id") != rec.ClientID || one("redirect_uri") != rec.RedirectURI ||
		subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(challenge[:])), []byte(rec.CodeChallenge)) != 1 {
		return Token{}, bad
	}
	// The credential is issued in the org's transaction; the code is spent
	// in its own, first, so that two exchanges cannot both issue one.
	var issued admin.IssuedKey
	spent := false
	err = s.d.Store.Backend.Update(ctx, onboarding.AccountsOrgID, func(tx store.Tx) error {
		var cur codeRecord
		if err := core.ReadRecord(ctx, tx, kindCode, key, &cur); err != nil {
			return err
		}
		spent = cur.KeyID != ""
		if spent {
			return nil
		}
		cur.KeyID = "pending"
		return core.WriteRecord(ctx, tx, kindCode, key, now, cur)
	})
	if err != nil {
		return Token{}, core.Translate("spend authorization code", err)
	}
	if spent {
		s.replayed(ctx, key, now)
		return Token{}, bad
	}
	var closed bool
	err = s.d.Store.Update(ctx, rec.OrgID, func(tx store.Tx) error {
		// A code approved before the org's last org-wide revocation issues
		// nothing: the revocation closed it.
		since, err := admin.RevokedSince(ctx, tx)
		if err != nil {
			return err
		}
		if closed = !since.IsZero() && rec.IssuedAt.Before(since); closed {
			return nil
		}
		issued, err = s.cfg.Admin.IssueKeyIn(ctx, tx, admin.KeySpec{OrgID: rec.OrgID, Kind: tenant.KindOrg, Scopes: AutomationScopes})
		return err
	})
	if err != nil {
		return Token{}, core.Translate("issue automation credential", err)
	}
	if closed {
		return Token{}, bad
	}
	var replayed bool
	err = s.d.Store.Backend.Update(ctx, onboarding.AccountsOrgID, func(tx store.Tx) error {
		var cur codeRecord
		if err := core.ReadRecord(ctx, tx, kindCode, key, &cur); err != nil {
			return err
		}
		replayed = cur.Replayed
		cur.KeyID, cur.KeyHash = issued.KeyID, issued.Stored.Hash
		return core.WriteRecord(ctx, tx, kindCode, key, now, cur)
	})
	if err != nil {
		return Token{}, core.Translate("record the exchange", err)
	}
	if replayed {
		// Presented again while this exchange ran: what it issued is
		// revoked before anyone sees it.
		s.revokeReplayed(ctx, codeRecord{OrgID: rec.OrgID, KeyID: issued.KeyID, KeyHash: issued.Stored.Hash})
		return Token{}, bad
	}
	scopes := make([]string, len(AutomationScopes))
	for i, sc := range AutomationScopes {
		scopes[i] = string(sc)
	}
	return Token{AccessToken: issued.Secret, TokenType: "Bearer", Scope: strings.Join(scopes, " "), OrgID: rec.OrgID, KeyID: issued.KeyID}, nil
}

// replayed marks the code presented again and revokes the credential it
// was exchanged for, if that exchange has finished (an exchange still
// under way finds the mark and revokes its own).
func (s *Service) replayed(ctx context.Context, key string, now time.Time) {
	var cur codeRecord
	err := s.d.Store.Backend.Update(ctx, onboarding.AccountsOrgID, func(tx store.Tx) error {
		cur = codeRecord{}
		if err := core.ReadRecord(ctx, tx, kindCode, key, &cur); err != nil {
			return err
		}
		if cur.Replayed {
			return nil
		}
		cur.Replayed = true
		return core.WriteRecord(ctx, tx, kindCode, key, now, cur)
	})
	if err != nil {
		s.d.Logger.Warn("replayed code not marked", "error", err)
		return
	}
	s.revokeReplayed(ctx, cur)
}

// revokeReplayed revokes the credential a replayed code was exchanged for
// (best effort: the replay is refused either way).
func (s *Service) revokeReplayed(ctx context.Context, rec codeRecord) {
	if rec.KeyHash == "" {
		return
	}
	if err := s.cfg.Admin.RevokeCredential(ctx, rec.OrgID, rec.KeyHash, "oauth_code_replayed"); err != nil {
		s.d.Logger.Warn("credential of a replayed code not revoked", "org_id", rec.OrgID, "key_id", rec.KeyID, "error", err)
	}
}

// validVerifier: 43 to 128 of [A-Za-z0-9-._~] (RFC 7636 §4.1).
func validVerifier(v string) bool {
	if len(v) < 43 || len(v) > 128 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~') {
			return false
		}
	}
	return true
}

// withQuery adds v to raw's query, keeping what it has.
func withQuery(raw string, v url.Values) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	for k, vs := range v {
		if len(vs) == 1 && vs[0] == "" {
			continue
		}
		q[k] = vs
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// ConsentToken is the anti-forgery token of a consent form: a MAC of the
// account session and the authorization it answers, so that a form posted
// from another site, or for another request, is refused.
func (s *Service) ConsentToken(as onboarding.AccountSession, a Authorization) string {
	if s.d.Secrets == nil {
		return ""
	}
	msg := strings.Join([]string{as.SessionKey(), a.Client.ClientID, a.RedirectURI, a.State, a.CodeChallenge}, "\x00")
	return base64.RawURLEncoding.EncodeToString(s.d.Secrets.MAC([]byte(msg), "connector/consent"))
}

// CheckConsentToken reports whether token is ConsentToken(as, a).
func (s *Service) CheckConsentToken(as onboarding.AccountSession, a Authorization, token string) bool {
	want := s.ConsentToken(as, a)
	return want != "" && subtle.ConstantTimeCompare([]byte(want), []byte(token)) == 1
}
