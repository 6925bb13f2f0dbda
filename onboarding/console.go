package onboarding

import (
	"context"
	"errors"
	"time"

	"github.com/clearancehq/clearance/admin"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
)

// The operator console's credential for a signed-in owner: an org key
// with the console's scopes that lives at most ConsoleKeyTTL and never
// past its session, recorded in the session so that signing out revokes
// it. The console sends it as a bearer key like any other: the session
// cookie itself still opens the account routes only.
const (
	// ConsoleKeyTTL is the longest a console key lives; the console asks
	// for a fresh one while the session lasts.
	ConsoleKeyTTL = time.Hour
	// MaxConsoleKeys is how many console keys one session may be issued.
	MaxConsoleKeys = 48
	// CodeConsoleKeyLimit refuses a session that has had MaxConsoleKeys.
	CodeConsoleKeyLimit = "CONSOLE_KEY_LIMIT_REACHED"
)

// ConsoleScopes are a console key's scopes: reading decisions, policies
// and the ledger, and cancelling an escalation (escalation:write, not
// decision:write: a console key cannot decide, claim or finalize).
var ConsoleScopes = []tenant.Scope{tenant.ScopeDecisionRead, tenant.ScopePolicyRead, tenant.ScopeAuditRead, tenant.ScopeEscalationWrite}

// ConsoleKey is a console key as issued: its secret is shown only here.
type ConsoleKey struct {
	KeyID     string         `json:"key_id"`
	OrgID     string         `json:"org_id"`
	Secret    string         `json:"api_key"`
	Scopes    []tenant.Scope `json:"scopes"`
	ExpiresAt string         `json:"expires_at"`
}

// consoleKeyRef is a console key as its session records it.
type consoleKeyRef struct {
	OrgID string `json:"org_id"`
	KeyID string `json:"key_id"`
	Hash  string `json:"hash"`
}

// IssueConsoleKey issues a console key for orgID, one of the session's
// workspaces. The key is issued in the org's transaction, then recorded
// in the session's; a session that began signing out (or reached
// MaxConsoleKeys) in between gets its key revoked at once and the refusal.
func (s *Service) IssueConsoleKey(ctx context.Context, as AccountSession, orgID string) (ConsoleKey, error) {
	if err := s.Owns(ctx, as, orgID); err != nil {
		return ConsoleKey{}, err
	}
	var sess accountSession
	if err := core.ReadCommitted(ctx, s.d.Store, AccountsOrgID, kindAccountSession, as.hash, &sess); err != nil {
		return ConsoleKey{}, core.Translate("read account session", err)
	}
	if !sess.ClosingAt.IsZero() {
		return ConsoleKey{}, errNoAccountSession()
	}
	if len(sess.ConsoleKeys) >= MaxConsoleKeys {
		return ConsoleKey{}, errConsoleKeyLimit()
	}
	now := s.d.Now()
	expires := now.Add(ConsoleKeyTTL)
	if !as.ExpiresAt.IsZero() && as.ExpiresAt.Before(expires) {
		expires = as.ExpiresAt
	}
	var issued admin.IssuedKey
	err := s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		// A session signed in before the org revoked every credential
		// (the owner's answer to a leak) mints nothing more.
		since, err := admin.RevokedSince(ctx, tx)
		if err != nil {
			return err
		}
		if !since.IsZero() && !sess.CreatedAt.After(since) {
			return errRevokedSince()
		}
		k, err := s.cfg.Admin.IssueKeyIn(ctx, tx, admin.KeySpec{OrgID: orgID, Kind: tenant.KindOrg,
			Scopes: ConsoleScopes, ExpiresAt: expires})
		issued = k
		return err
	})
	if errors.Is(err, core.ErrNotFound) || core.IsNotFound(err) {
		// An org the account lists but whose creation failed.
		return ConsoleKey{}, errNoWorkspace()
	}
	if err != nil {
		return ConsoleKey{}, core.Translate("issue console key", err)
	}
	ref := consoleKeyRef{OrgID: orgID, KeyID: issued.KeyID, Hash: issued.Stored.Hash}
	err = s.d.Store.Backend.Update(ctx, AccountsOrgID, func(tx store.Tx) error {
		var sess accountSession
		if err := core.ReadRecord(ctx, tx, kindAccountSession, as.hash, &sess); err != nil {
			return err
		}
		if !sess.EndedAt.IsZero() || !sess.ClosingAt.IsZero() || !s.d.Now().Before(sess.ExpiresAt) {
			return errNoAccountSession()
		}
		if len(sess.ConsoleKeys) >= MaxConsoleKeys {
			return errConsoleKeyLimit()
		}
		sess.ConsoleKeys = append(sess.ConsoleKeys, ref)
		return core.WriteRecord(ctx, tx, kindAccountSession, as.hash, now, sess)
	})
	if err != nil {
		// Unrecorded, sign-out could not revoke it: it must not be used,
		// even if the caller went away meanwhile.
		if rerr := s.cfg.Admin.RevokeCredential(context.WithoutCancel(ctx), orgID, ref.Hash, as.AccountID); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return ConsoleKey{}, core.Translate("record console key", err)
	}
	return ConsoleKey{KeyID: issued.KeyID, OrgID: orgID, Secret: issued.Secret, Scopes: issued.Scopes,
		ExpiresAt: core.Format(expires)}, nil
}

// revokeConsoleKeys revokes every console key keys names (revoking one
// revoked already changes nothing).
func (s *Service) revokeConsoleKeys(ctx context.Context, as AccountSession, keys []consoleKeyRef) error {
	for _, k := range keys {
		if err := s.cfg.Admin.RevokeCredential(ctx, k.OrgID, k.Hash, as.AccountID); err != nil {
			return err
		}
	}
	return nil
}

func errRevokedSince() error {
	return core.New(core.ErrUnauthenticated, CodeSignInRequired,
		"the workspace revoked every credential after this session signed in: sign in again")
}

func errConsoleKeyLimit() error {
	return core.New(core.ErrConflict, CodeConsoleKeyLimit,
		"this session has had its %d console keys: sign out and in again", MaxConsoleKeys)
}
