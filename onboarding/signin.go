package onboarding

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/clearancehq/clearance/admin"
	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/internal/core"
	imail "github.com/clearancehq/clearance/internal/mail"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
)

// Record kinds of sign-in, in AccountsOrgID.
const (
	kindSignIn         = "onboarding.signin"          // id: addressKey
	kindAccountSession = "onboarding.account_session" // id: sessionKey
)

// PrefixSession starts an account session's secret (the cookie's value).
const PrefixSession = "clr_ses_"

// DefaultSessionTTL is how long an account session lasts.
const DefaultSessionTTL = 12 * time.Hour

// SignInRequest is the body of login/start.
type SignInRequest struct {
	Email string `json:"email"`
}

// SignInVerifyRequest is the body of login/verify.
type SignInVerifyRequest struct {
	Email   string `json:"email"`
	OTPCode string `json:"otp_code"`
}

// AccountView is an account as its owner sees it, with its workspaces.
type AccountView struct {
	AccountID  string      `json:"account_id"`
	Email      string      `json:"email"`
	Name       string      `json:"name,omitempty"`
	Workspaces []Workspace `json:"workspaces"`
	// SessionExpiresAt is when the session answering ends.
	SessionExpiresAt string `json:"session_expires_at"`
}

// SignedIn is the answer to VerifySignIn: the session's secret (set as a
// cookie by the server, never in a body) and the account.
type SignedIn struct {
	Secret    string
	ExpiresAt time.Time
	// TTL is the session's lifetime (the cookie's Max-Age): ExpiresAt is
	// on the engine's clock, which need not be the wall clock.
	TTL     time.Duration
	Account AccountView
}

// accountSession is a browser's sign-in, filed by the hash of its secret.
type accountSession struct {
	AccountKey string    `json:"account_key"` // addressKey of the account
	AccountID  string    `json:"account_id"`
	CreatedAt  time.Time `json:"created_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	EndedAt    time.Time `json:"ended_at,omitzero"` // signed out
	// ConsoleKeys are the console keys issued to the session (console.go),
	// revoked when it signs out.
	ConsoleKeys []consoleKeyRef `json:"console_keys,omitempty"`
	// ClosingAt is when sign-out began: no console key is recorded from
	// then on (SignOut).
	ClosingAt time.Time `json:"closing_at,omitzero"`
}

// AccountSession is a live session, as Session resolves it.
type AccountSession struct {
	AccountID string
	Email     string
	ExpiresAt time.Time
	key       string // addressKey
	hash      string
}

// SessionKey identifies the session without its secret (the hash it is
// filed by): what a token bound to the session is computed over.
func (a AccountSession) SessionKey() string { return a.hash }

func sessionKey(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// StartSignIn mails a sign-in code to the body's address: the same answer
// and work whether or not it has an account (the code of an address with
// none makes one when it verifies).
func (s *Service) StartSignIn(ctx context.Context, raw []byte) (Started, error) {
	var req SignInRequest
	if err := strictjson.Decode(raw, &req, s.d.JSON); err != nil {
		return Started{}, err
	}
	email, err := normalEmail(req.Email)
	if err != nil {
		return Started{}, core.Invalid(core.CodeInvalidRequest, "email", "email must be one e-mail address (ASCII, at most %d bytes), without a display name", MaxEmailLen)
	}
	return s.sendCode(ctx, kindSignIn, email, challenge{Email: email}, "Your Clearance sign-in code",
		func(code string, minutes int) string {
			return fmt.Sprintf("Your Clearance sign-in code is %s.\r\n\r\nIt expires in %d minutes and works once. "+
				"If you did not ask for it, ignore this message.\r\n", code, minutes)
		})
}

// VerifySignIn checks the body's sign-in code and opens an account session.
func (s *Service) VerifySignIn(ctx context.Context, raw []byte) (SignedIn, error) {
	var req SignInVerifyRequest
	if err := strictjson.Decode(raw, &req, s.d.JSON); err != nil {
		return SignedIn{}, err
	}
	email, err := normalEmail(req.Email)
	if err != nil {
		return SignedIn{}, core.Invalid(core.CodeInvalidRequest, "email", "email must be one e-mail address (ASCII, at most %d bytes), without a display name", MaxEmailLen)
	}
	if !validCode(req.OTPCode) {
		return SignedIn{}, core.Invalid(core.CodeInvalidRequest, "otp_code", "otp_code must be exactly 6 ASCII digits")
	}
	if s.d.Secrets == nil {
		return SignedIn{}, core.New(core.ErrUnavailable, core.CodeSecretsNotConfigured, "sign-in codes need a secrets key, and none is configured")
	}
	secret, _, err := tenant.NewSecret(s.d.IDs.Rand, PrefixSession)
	if err != nil {
		return SignedIn{}, core.Unavailable("secret generation", err)
	}
	key, now := addressKey(email), s.d.Now()
	var acc account
	ok, err := s.spendCode(ctx, kindSignIn, key, req.OTPCode, now, func(tx store.Tx) error {
		acc = account{}
		switch err := core.ReadRecord(ctx, tx, kindAccount, key, &acc); {
		case core.IsNotFound(err):
			id, err := s.d.IDs.New()
			if err != nil {
				return err
			}
			acc = account{AccountID: id, Email: email, CreatedAt: now, OrgIDs: []string{}}
			if err := core.WriteRecord(ctx, tx, kindAccount, key, now, acc); err != nil {
				return err
			}
		case err != nil:
			return err
		}
		return core.WriteRecord(ctx, tx, kindAccountSession, sessionKey(secret), now, accountSession{AccountKey: key,
			AccountID: acc.AccountID, CreatedAt: now, ExpiresAt: now.Add(s.cfg.SessionTTL)})
	})
	if err != nil {
		return SignedIn{}, core.Translate("verify sign-in", err)
	}
	if !ok {
		return SignedIn{}, errOTP()
	}
	view, err := s.view(ctx, acc, now.Add(s.cfg.SessionTTL))
	if err != nil {
		return SignedIn{}, err
	}
	return SignedIn{Secret: secret, ExpiresAt: now.Add(s.cfg.SessionTTL), TTL: s.cfg.SessionTTL, Account: view}, nil
}

// Session resolves a session secret (the cookie's value): errNoAccountSession
// for a malformed, unknown, ended or expired one.
func (s *Service) Session(ctx context.Context, secret string) (AccountSession, error) {
	if !strings.HasPrefix(secret, PrefixSession) || len(secret) > 128 {
		return AccountSession{}, errNoAccountSession()
	}
	hash := sessionKey(secret)
	var sess accountSession
	err := core.ReadCommitted(ctx, s.d.Store, AccountsOrgID, kindAccountSession, hash, &sess)
	switch {
	case core.IsNotFound(err):
		return AccountSession{}, errNoAccountSession()
	case err != nil:
		return AccountSession{}, core.Unavailable("read account session", err)
	}
	if !sess.EndedAt.IsZero() || !s.d.Now().Before(sess.ExpiresAt) {
		return AccountSession{}, errNoAccountSession()
	}
	var acc account
	if err := core.ReadCommitted(ctx, s.d.Store, AccountsOrgID, kindAccount, sess.AccountKey, &acc); err != nil {
		return AccountSession{}, core.Translate("read account", err)
	}
	return AccountSession{AccountID: acc.AccountID, Email: acc.Email, ExpiresAt: sess.ExpiresAt, key: sess.AccountKey, hash: hash}, nil
}

// Account returns the session's account and its workspaces.
func (s *Service) Account(ctx context.Context, as AccountSession) (AccountView, error) {
	var acc account
	if err := core.ReadCommitted(ctx, s.d.Store, AccountsOrgID, kindAccount, as.key, &acc); err != nil {
		return AccountView{}, core.Translate("read account", err)
	}
	return s.view(ctx, acc, as.ExpiresAt)
}

// SignOut ends the session and revokes its console keys, in three
// steps: the session is marked closing (no console key is recorded in it
// from then on, so its list is final), every key of the list is revoked,
// and the session ends. A failure leaves the session live and closing:
// signing out again finishes the job. The revocations run to the end
// even if the caller goes away.
func (s *Service) SignOut(ctx context.Context, as AccountSession) error {
	ctx = context.WithoutCancel(ctx)
	var keys []consoleKeyRef
	err := s.updateSession(ctx, as, func(sess *accountSession, now time.Time) {
		if sess.ClosingAt.IsZero() {
			sess.ClosingAt = now
		}
		keys = sess.ConsoleKeys
	})
	if err != nil {
		return core.Translate("sign out", err)
	}
	if err := s.revokeConsoleKeys(ctx, as, keys); err != nil {
		return err
	}
	err = s.updateSession(ctx, as, func(sess *accountSession, now time.Time) { sess.EndedAt = now })
	return core.Translate("sign out", err)
}

// updateSession changes the session's record with fn in a transaction.
func (s *Service) updateSession(ctx context.Context, as AccountSession, fn func(*accountSession, time.Time)) error {
	now := s.d.Now()
	return s.d.Store.Backend.Update(ctx, AccountsOrgID, func(tx store.Tx) error {
		var sess accountSession
		if err := core.ReadRecord(ctx, tx, kindAccountSession, as.hash, &sess); err != nil {
			return err
		}
		fn(&sess, now)
		return core.WriteRecord(ctx, tx, kindAccountSession, as.hash, now, sess)
	})
}

// RevokeCredentials revokes every credential of one of the session's
// workspaces (admin.Service.RevokeOrgCredentials), ledgered with the
// account's id; replacement issues a fresh org key in the same step.
func (s *Service) RevokeCredentials(ctx context.Context, as AccountSession, orgID string, raw []byte) (admin.RevokedCredentials, error) {
	var req struct {
		IssueReplacementKey *bool `json:"issue_replacement_key"`
	}
	replacement := false
	if len(raw) > 0 {
		if err := strictjson.Decode(raw, &req, s.d.JSON); err != nil {
			return admin.RevokedCredentials{}, err
		}
		if req.IssueReplacementKey == nil {
			// Absent is false; null is refused rather than guessed at.
			var members map[string]json.RawMessage
			if json.Unmarshal(raw, &members) == nil && members["issue_replacement_key"] != nil {
				return admin.RevokedCredentials{}, core.Invalid(core.CodeInvalidRequest, "issue_replacement_key",
					"issue_replacement_key is true or false, not null")
			}
		} else {
			replacement = *req.IssueReplacementKey
		}
	}
	if err := s.Owns(ctx, as, orgID); err != nil {
		return admin.RevokedCredentials{}, err
	}
	out, err := s.cfg.Admin.RevokeOrgCredentials(ctx, orgID, as.AccountID, replacement)
	if errors.Is(err, core.ErrNotFound) {
		// An org the account lists but whose creation failed: the one
		// answer every workspace that is not there gets.
		return admin.RevokedCredentials{}, errNoWorkspace()
	}
	return out, err
}

// Owns refuses an org the session's account does not own, with the one
// answer an org that does not exist gets.
func (s *Service) Owns(ctx context.Context, as AccountSession, orgID string) error {
	var acc account
	if err := core.ReadCommitted(ctx, s.d.Store, AccountsOrgID, kindAccount, as.key, &acc); err != nil {
		return core.Translate("read account", err)
	}
	for _, id := range acc.OrgIDs {
		if id == orgID {
			return nil
		}
	}
	return errNoWorkspace()
}

func errNoWorkspace() error {
	return core.New(core.ErrNotFound, CodeWorkspaceNotFound, "no such workspace of this account")
}

// view is acc with its workspaces: the orgs it lists that exist.
func (s *Service) view(ctx context.Context, acc account, expires time.Time) (AccountView, error) {
	v := AccountView{AccountID: acc.AccountID, Email: acc.Email, Name: acc.Name, Workspaces: []Workspace{},
		SessionExpiresAt: core.Format(expires)}
	for _, id := range acc.OrgIDs {
		o, err := s.cfg.Admin.Org(ctx, id)
		if errors.Is(err, core.ErrNotFound) || core.IsNotFound(err) {
			continue // listed before the transaction that was to create it, which failed
		}
		if err != nil {
			return AccountView{}, err
		}
		v.Workspaces = append(v.Workspaces, workspaceOf(o.ID, o.Name))
	}
	return v, nil
}

func errNoAccountSession() error {
	return core.New(core.ErrUnauthenticated, CodeSignInRequired, "sign in first: no live account session")
}

// sendCode stores a fresh code of kind for email in c (its names kept),
// within the send limits, and mails it with the subject and text given.
func (s *Service) sendCode(ctx context.Context, kind, email string, c challenge, subject string,
	text func(code string, minutes int) string) (Started, error) {
	if s.cfg.Mailer == nil {
		return Started{}, core.New(core.ErrUnavailable, CodeMailNotConfigured, "sending codes needs a mailer, and none is configured")
	}
	if s.d.Secrets == nil {
		return Started{}, core.New(core.ErrUnavailable, core.CodeSecretsNotConfigured, "codes need a secrets key, and none is configured")
	}
	code, err := newCode(s.d.IDs.Rand)
	if err != nil {
		return Started{}, core.Unavailable("code generation", err)
	}
	key, now := addressKey(email), s.d.Now()
	var (
		prev artifact.Record // the record this send replaces, to put back if the mail fails
		had  bool
		mac  = macOf(s, kind, code, key)
	)
	err = s.d.Store.Backend.Update(ctx, AccountsOrgID, func(tx store.Tx) error {
		had = false
		// A locked address is sent nothing: no code would verify.
		if err := s.checkLocked(ctx, tx, key, now); err != nil {
			return err
		}
		var old challenge
		switch rec, err := tx.ArtifactInTx(ctx, kind, key); {
		case err == nil:
			if err := json.Unmarshal(rec.Body, &old); err != nil {
				return fmt.Errorf("onboarding: stored code of %s does not decode: %w", key, err)
			}
			prev, had = rec, true
		case !core.IsNotFound(err):
			return err
		}
		recent := []time.Time{}
		for _, at := range old.Sends {
			if now.Sub(at) < s.cfg.SendWindow {
				recent = append(recent, at)
			}
		}
		if len(recent) >= s.cfg.MaxSends {
			return &core.Error{Kind: core.ErrTooManyRequests, Code: CodeTooManyCodes,
				Detail:     "too many codes were sent to this address; retry after the Retry-After delay",
				RetryAfter: recent[0].Add(s.cfg.SendWindow).Sub(now)}
		}
		next := c
		next.CodeMAC, next.ExpiresAt, next.Attempts, next.Sends = mac, now.Add(s.cfg.CodeTTL), 0, append(recent, now)
		return core.WriteRecord(ctx, tx, kind, key, now, next)
	})
	if err != nil {
		return Started{}, core.Translate("send code", err)
	}
	minutes := int(s.cfg.CodeTTL / time.Minute)
	if err := s.cfg.Mailer.Send(ctx, imail.Message{To: email, Subject: subject, Text: text(code, minutes)}); err != nil {
		s.d.Logger.Warn("code not sent", "error", err)
		s.unsend(ctx, kind, key, mac, prev, had)
		return Started{}, core.New(core.ErrUnavailable, CodeMailUnavailable, "the code could not be sent; try again later")
	}
	return Started{Status: "code_sent", ExpiresInSeconds: int(s.cfg.CodeTTL / time.Second)}, nil
}

// unsend undoes a send whose mail failed: the record it replaced is put
// back (or, when there was none, its record deleted), so that a code never
// mailed neither replaces one that was, nor counts toward the address's
// sends. Only the record of this send (mac) is undone: a later send's is
// left alone. Should the store fail too, the unsent code stays stored,
// which authorizes nothing: nobody knows it.
func (s *Service) unsend(ctx context.Context, kind, key, mac string, prev artifact.Record, had bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unsendTimeout)
	defer cancel()
	err := s.d.Store.Backend.Update(ctx, AccountsOrgID, func(tx store.Tx) error {
		var cur challenge
		switch err := core.ReadRecord(ctx, tx, kind, key, &cur); {
		case core.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		if cur.CodeMAC != mac {
			return nil
		}
		if had {
			return tx.PutArtifact(ctx, prev)
		}
		_, err := tx.DeleteArtifact(ctx, kind, key)
		return err
	})
	if err != nil {
		s.d.Logger.Warn("a code that was not sent stays stored", "error", err)
	}
}

// unsendTimeout bounds the undoing of a failed send, which runs even when
// the caller has gone.
const unsendTimeout = 10 * time.Second

// spendCode checks code against the pending code of kind for the address
// key, in one transaction of AccountsOrgID: a wrong try is counted (and
// burns the code at MaxAttempts), and counted among the address's failures
// (attempts.go); the right one spends it and runs then in the same
// transaction. It reports whether the code was right. An address locked by
// its failures is refused before any code is checked, the right one too:
// 429 TOO_MANY_ATTEMPTS.
func (s *Service) spendCode(ctx context.Context, kind, key, code string, now time.Time, then func(tx store.Tx) error) (bool, error) {
	var ok bool
	err := s.d.Store.Backend.Update(ctx, AccountsOrgID, func(tx store.Tx) error {
		// fn may run again (a retried transaction): nothing of a run that
		// rolled back may leak into the next, or a spent code could be
		// written back.
		ok = false
		if err := s.checkLocked(ctx, tx, key, now); err != nil {
			return err
		}
		var c challenge
		switch err := core.ReadRecord(ctx, tx, kind, key, &c); {
		case core.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		if c.CodeMAC == "" || !now.Before(c.ExpiresAt) {
			return nil
		}
		want, err := base64.RawURLEncoding.DecodeString(c.CodeMAC)
		if err != nil {
			return fmt.Errorf("onboarding: stored code of %s: %w", key, err)
		}
		if !hmac.Equal(want, s.d.Secrets.MAC([]byte(code), codeContext(kind, key))) {
			c.Attempts++
			if c.Attempts >= s.cfg.MaxAttempts {
				c.CodeMAC = "" // burned
			}
			if err := s.noteFailure(ctx, tx, key, now); err != nil {
				return err
			}
			return core.WriteRecord(ctx, tx, kind, key, now, c)
		}
		c.CodeMAC = ""
		if err := core.WriteRecord(ctx, tx, kind, key, now, c); err != nil {
			return err
		}
		ok = true
		return then(tx)
	})
	return ok, err
}
