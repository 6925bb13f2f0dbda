package onboarding

import (
	"context"
	"time"
	"unicode/utf8"

	"github.com/clearancehq/clearance/admin"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/signals"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
)

const (
	kindSession = "onboarding.session" // the org, id: the session id
	kindCount   = "onboarding.count"   // the org, id: idSessions
	idSessions  = "sessions"
)

// MaxSessions bounds the mapping sessions an org opens, ever.
const MaxSessions = 25

// sessionCount is the org's count of mapping sessions opened.
type sessionCount struct {
	Sessions int `json:"sessions"`
}

// Session statuses.
const (
	SessionOpen   = "open"
	SessionIssued = "bundle_issued"
)

// SessionRequest is the body of a new mapping session.
type SessionRequest struct {
	OrgID string `json:"org_id"`
}

// Session is a signal-mapping session of an org.
type Session struct {
	SessionID      string `json:"session_id"`
	OrgID          string `json:"org_id"`
	Status         string `json:"status"`
	CreatedAt      string `json:"created_at"`
	BundleIssuedAt string `json:"bundle_issued_at,omitempty"`
	// What the bundle was issued for and with (never its secrets).
	ProviderKey string `json:"provider_key,omitempty"`
	WorkflowKey string `json:"workflow_key,omitempty"`
	SourceLabel string `json:"source_label,omitempty"`
	KeyID       string `json:"key_id,omitempty"`
	ConnectorID string `json:"connector_id,omitempty"`
}

// BundleRequest is the body of a deployment bundle.
type BundleRequest struct {
	ProviderKey string `json:"provider_key"`
	WorkflowKey string `json:"workflow_key"`
	SourceLabel string `json:"source_label"`
}

// Bundle is what a deployment needs, shown once: the org's API key and its
// signals connector's secret are never shown again.
type Bundle struct {
	OrgID         string         `json:"org_id"`
	SessionID     string         `json:"session_id"`
	APIKey        string         `json:"api_key"`
	KeyID         string         `json:"key_id"`
	Scopes        []tenant.Scope `json:"scopes"`
	ConnectorID   string         `json:"connector_id"`
	WebhookSecret string         `json:"webhook_secret"`
	// WebhookPath is the connector's ingress path; the server answers it
	// as an absolute webhook_url.
	WebhookPath   string `json:"webhook_path"`
	PolicyVersion string `json:"policy_version"`
	ProviderKey   string `json:"provider_key"`
	WorkflowKey   string `json:"workflow_key"`
	SourceLabel   string `json:"source_label"`
}

// bundleEvent is the ledgered form of an issued bundle.
type bundleEvent struct {
	SessionID   string `json:"session_id"`
	KeyID       string `json:"key_id"`
	ConnectorID string `json:"connector_id"`
	ProviderKey string `json:"provider_key"`
	WorkflowKey string `json:"workflow_key"`
	SourceLabel string `json:"source_label"`
	// GrantsRevoked are the key ids of the onboarding grants it revoked.
	GrantsRevoked []string `json:"grants_revoked"`
	At            string   `json:"at"`
}

// mayMap reports whether p may use the mapping routes of its org: an
// onboarding grant, or an org key with org:* (the bundle issues one).
func mayMap(p core.Principal) error {
	if p.Kind == tenant.KindOnboarding || p.Kind == tenant.KindOrg && p.Allows(tenant.ScopeOrgAll) {
		return nil
	}
	return core.New(core.ErrForbidden, core.CodeInsufficientScope,
		"the mapping routes take an onboarding grant or an org key with org:*")
}

// CreateSession opens a mapping session for the body's org, which must be
// the credential's.
func (s *Service) CreateSession(ctx context.Context, p core.Principal, raw []byte) (Session, error) {
	if err := mayMap(p); err != nil {
		return Session{}, err
	}
	var req SessionRequest
	if err := strictjson.Decode(raw, &req, s.d.JSON); err != nil {
		return Session{}, err
	}
	if req.OrgID == "" {
		return Session{}, core.Invalid(core.CodeMissingField, "org_id", "org_id is required")
	}
	if !core.ValidID(req.OrgID) {
		return Session{}, core.Invalid(core.CodeInvalidRequest, "org_id", "org_id must be a UUID")
	}
	if req.OrgID != p.OrgID {
		return Session{}, core.New(core.ErrForbidden, core.CodeOrgMismatch, "org_id does not match the credential's organization")
	}
	id, err := s.d.IDs.New()
	if err != nil {
		return Session{}, core.Unavailable("id generation", err)
	}
	now := s.d.Now()
	sess := Session{SessionID: id, OrgID: p.OrgID, Status: SessionOpen, CreatedAt: core.Format(now)}
	err = s.d.Store.Update(ctx, p.OrgID, func(tx store.Tx) error {
		if err := stillLive(ctx, tx, p, ""); err != nil {
			return err
		}
		// Each session may mint an org key: an org has at most
		// MaxSessions, so a leaked key cannot mint keys without bound.
		var n sessionCount
		if err := core.ReadRecord(ctx, tx, kindCount, idSessions, &n); err != nil && !core.IsNotFound(err) {
			return err
		}
		if n.Sessions >= MaxSessions {
			return core.New(core.ErrConflict, CodeSessionLimitReached,
				"the org has opened %d mapping sessions, the most it may", MaxSessions)
		}
		n.Sessions++
		if err := core.WriteRecord(ctx, tx, kindCount, idSessions, now, n); err != nil {
			return err
		}
		return core.WriteRecord(ctx, tx, kindSession, id, now, sess)
	})
	if err != nil {
		return Session{}, core.Translate("create mapping session", err)
	}
	return sess, nil
}

// IssueBundle issues the deployment bundle of the credential org's session
// sessionID: once.
func (s *Service) IssueBundle(ctx context.Context, p core.Principal, sessionID string, raw []byte) (Bundle, error) {
	if err := mayMap(p); err != nil {
		return Bundle{}, err
	}
	var req BundleRequest
	if err := strictjson.Decode(raw, &req, s.d.JSON); err != nil {
		return Bundle{}, err
	}
	if err := checkKey("provider_key", req.ProviderKey); err != nil {
		return Bundle{}, err
	}
	if !policy.ValidWorkflowKey(req.WorkflowKey) {
		// The rule of the decision routes: a bundle records no key a
		// decision would refuse.
		return Bundle{}, core.Invalid(core.CodeInvalidRequest, "workflow_key",
			"workflow_key must match ^[A-Za-z0-9][A-Za-z0-9._:/-]*$ (at most %d bytes)", policy.MaxWorkflowKeyLen)
	}
	label, err := CheckName("source_label", req.SourceLabel)
	if err != nil {
		return Bundle{}, err
	}
	if utf8.RuneCountInString(label) > signals.MaxNameLen {
		return Bundle{}, core.Invalid(core.CodeInvalidRequest, "source_label", "source_label is at most %d characters", signals.MaxNameLen)
	}
	if !core.ValidID(sessionID) {
		return Bundle{}, errNoSession()
	}
	org := p.OrgID
	sess, err := s.session(ctx, org, sessionID)
	if err != nil {
		return Bundle{}, err
	}
	if sess.Status != SessionOpen {
		return Bundle{}, errIssued(sess)
	}
	version, err := s.cfg.PolicyVersion(ctx, org)
	if err != nil {
		return Bundle{}, err
	}
	// The connector first: should the bundle's transaction not commit, it
	// is revoked, never shown; a retry makes another.
	conn, err := s.cfg.Signals.CreateConnector(ctx, org, signals.NewConnector{Name: label})
	if err != nil {
		return Bundle{}, err
	}
	// Grants revoked already (by an org-wide revocation) keep their record.
	done, err := s.revokedGrants(ctx, org)
	if err != nil {
		return Bundle{}, err
	}
	var key admin.IssuedKey
	var issued bool
	now := s.d.Now()
	err = s.d.Store.Update(ctx, org, func(tx store.Tx) error {
		// fn may run again: start from nothing each time.
		issued, sess, key = false, Session{}, admin.IssuedKey{}
		if err := core.ReadRecord(ctx, tx, kindSession, sessionID, &sess); err != nil {
			return err
		}
		if sess.Status != SessionOpen {
			return nil
		}
		if err := stillLive(ctx, tx, p, sess.CreatedAt); err != nil {
			return err
		}
		var err error
		key, err = s.cfg.Admin.IssueKeyIn(ctx, tx, admin.KeySpec{OrgID: org, Kind: tenant.KindOrg,
			Scopes: []tenant.Scope{tenant.ScopeOrgAll}})
		if err != nil {
			return err
		}
		revoked, err := revokeGrants(ctx, tx, now, done)
		if err != nil {
			return err
		}
		sess.Status, sess.BundleIssuedAt = SessionIssued, core.Format(now)
		sess.ProviderKey, sess.WorkflowKey, sess.SourceLabel = req.ProviderKey, req.WorkflowKey, label
		sess.KeyID, sess.ConnectorID = key.KeyID, conn.ConnectorID
		if err := core.WriteRecord(ctx, tx, kindSession, sessionID, now, sess); err != nil {
			return err
		}
		issued = true
		return core.AppendRecord(ctx, tx, ledger.KindOnboardingBundleIssued, sessionID, bundleEvent{
			SessionID: sessionID, KeyID: key.KeyID, ConnectorID: conn.ConnectorID, ProviderKey: req.ProviderKey,
			WorkflowKey: req.WorkflowKey, SourceLabel: label, GrantsRevoked: revoked, At: core.Format(now)}, now)
	})
	if err != nil || !issued {
		if _, rerr := s.cfg.Signals.RevokeConnector(context.WithoutCancel(ctx), org, conn.ConnectorID); rerr != nil {
			s.d.Logger.Warn("connector of an unissued bundle not revoked", "org_id", org, "connector_id", conn.ConnectorID, "error", rerr)
		}
		if err != nil {
			return Bundle{}, core.Translate("issue deployment bundle", err)
		}
		return Bundle{}, errIssued(sess)
	}
	return Bundle{OrgID: org, SessionID: sessionID, APIKey: key.Secret, KeyID: key.KeyID, Scopes: key.Scopes,
		ConnectorID: conn.ConnectorID, WebhookSecret: conn.WebhookSecret, WebhookPath: conn.WebhookPath,
		PolicyVersion: version, ProviderKey: req.ProviderKey, WorkflowKey: req.WorkflowKey, SourceLabel: label}, nil
}

// revokedGrants returns the hashes of the org's onboarding grants that the
// store holds revoked.
func (s *Service) revokedGrants(ctx context.Context, org string) (map[string]bool, error) {
	keys, err := s.d.Store.APIKeysOf(ctx, org)
	if err != nil {
		return nil, core.Unavailable("list credentials", err)
	}
	done := map[string]bool{}
	for _, k := range keys {
		if k.Kind == tenant.KindOnboarding && !k.RevokedAt.IsZero() {
			done[k.Hash] = true
		}
	}
	return done, nil
}

// revokeGrants revokes every onboarding grant of the transaction's org
// that is not in done (revoked already) and returns their key ids.
func revokeGrants(ctx context.Context, tx store.Tx, now time.Time, done map[string]bool) ([]string, error) {
	var g grants
	switch err := core.ReadRecord(ctx, tx, kindGrants, idGrants, &g); {
	case core.IsNotFound(err):
		return []string{}, nil
	case err != nil:
		return nil, err
	}
	ids := make([]string, 0, len(g.Keys))
	for i := range g.Keys {
		if done[g.Keys[i].Hash] {
			continue
		}
		if g.Keys[i].RevokedAt.IsZero() {
			g.Keys[i].RevokedAt = now
			if err := tx.PutAPIKey(ctx, g.Keys[i]); err != nil {
				return nil, err
			}
			ids = append(ids, g.Keys[i].ID)
		}
	}
	return ids, core.WriteRecord(ctx, tx, kindGrants, idGrants, now, g)
}

func (s *Service) session(ctx context.Context, org, id string) (Session, error) {
	var sess Session
	err := core.ReadCommitted(ctx, s.d.Store, org, kindSession, id, &sess)
	if core.IsNotFound(err) {
		return Session{}, errNoSession()
	}
	if err != nil {
		return Session{}, core.Translate("read mapping session", err)
	}
	return sess, nil
}

func errNoSession() error {
	return core.New(core.ErrNotFound, CodeSessionNotFound, "no such mapping session in this org")
}

func errIssued(sess Session) error {
	return core.New(core.ErrConflict, CodeBundleAlreadyIssued,
		"the deployment bundle of session %s was issued at %s (key %s); it is shown once", sess.SessionID, sess.BundleIssuedAt, sess.KeyID)
}

// checkKey checks a provider key: 1 to MaxKeyLen bytes of [A-Za-z0-9_.:-].
func checkKey(field, s string) error {
	ok := s != "" && len(s) <= MaxKeyLen
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		ok = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-'
	}
	if !ok {
		return core.Invalid(core.CodeInvalidRequest, field, "%s must be 1 to %d characters of [A-Za-z0-9_.:-]", field, MaxKeyLen)
	}
	return nil
}

// stillLive refuses, inside the org's transaction, a caller credential or
// a mapping session (created at opened, "" for none) older than the org's
// last org-wide revocation: a request authenticated just before it, or a
// session opened with a credential it revoked, issues nothing after it.
func stillLive(ctx context.Context, tx store.Tx, p core.Principal, opened string) error {
	since, err := admin.RevokedSince(ctx, tx)
	if err != nil || since.IsZero() {
		return err
	}
	if p.IssuedAt().Before(since) {
		return core.New(core.ErrUnauthenticated, core.CodeUnauthenticated, "the credential expired or was revoked")
	}
	if opened != "" {
		if t, err := time.Parse(core.TimeFormat, opened); err != nil || t.Before(since) {
			return errNoSession() // closed by the revocation
		}
	}
	return nil
}
