package admin

import (
	"context"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
)

// MaxOrgNameLength bounds an org's name, in characters.
const MaxOrgNameLength = 200

// Authenticate resolves a bearer secret to its principal.
func (s *Service) Authenticate(ctx context.Context, secret string) (core.Principal, error) {
	if !tenant.LooksLikeKey(secret) {
		return core.Principal{}, core.New(core.ErrUnauthenticated, core.CodeUnauthenticated, "missing or malformed API key")
	}
	hash := tenant.HashSecret(secret)
	var k tenant.APIKey
	if v, ok := s.apiKeys.Load(hash); ok {
		k = v.(tenant.APIKey)
	} else {
		got, err := s.d.Store.APIKeyByHash(ctx, hash)
		if core.IsNotFound(err) {
			return core.Principal{}, core.New(core.ErrUnauthenticated, core.CodeUnauthenticated, "unknown API key")
		}
		if err != nil {
			return core.Principal{}, core.Unavailable("authentication", err)
		}
		k = got
		// Only keys that neither expire nor are revoked stay in memory: a
		// credential with a lifetime is read from the store on every use,
		// so its revocation by any server holds at once on every other.
		if cacheable(k) {
			s.apiKeys.Store(hash, k)
		}
	}
	if !k.Matches(secret) {
		return core.Principal{}, core.New(core.ErrUnauthenticated, core.CodeUnauthenticated, "unknown API key")
	}
	if !k.Usable(s.d.Now()) {
		return core.Principal{}, core.New(core.ErrUnauthenticated, core.CodeUnauthenticated, "the credential expired or was revoked")
	}
	return core.PrincipalOf(k), nil
}

// cacheable reports whether k may be kept in memory after its first use:
// an org or platform key without an expiry and not revoked.
func cacheable(k tenant.APIKey) bool {
	return (k.Kind == tenant.KindOrg || k.Kind == tenant.KindPlatform) && k.ExpiresAt.IsZero() && k.RevokedAt.IsZero()
}

// IssuedKey is a newly created API key; Secret is shown only here.
type IssuedKey struct {
	KeyID  string         `json:"key_id"`
	OrgID  string         `json:"org_id"`
	Secret string         `json:"api_key"`
	Scopes []tenant.Scope `json:"scopes"`
}

// CreatedOrg is the result of CreateOrg.
type CreatedOrg struct {
	Org tenant.Org
	Key IssuedKey
}

// CreateOrg creates an organization and its first API key (scope org:*),
// ledgered as the org's first two entries.
func (s *Service) CreateOrg(ctx context.Context, name string) (CreatedOrg, error) {
	name = strings.TrimSpace(name)
	if name == "" || utf8.RuneCountInString(name) > MaxOrgNameLength || strings.ContainsFunc(name, unicode.IsControl) {
		return CreatedOrg{}, core.Invalid(core.CodeInvalidRequest, "name", "name is required: 1 to %d characters, no control characters", MaxOrgNameLength)
	}
	orgID, err := s.d.IDs.New()
	if err != nil {
		return CreatedOrg{}, core.Unavailable("id generation", err)
	}
	org := tenant.Org{ID: orgID, Name: name, CreatedAt: s.d.Now()}
	var issued IssuedKey
	// UpdateNew: the org this transaction creates does not exist yet.
	err = s.d.Store.UpdateNew(ctx, orgID, func(tx store.Tx) error {
		if err := tx.PutOrg(ctx, org); err != nil {
			return err
		}
		if err := core.AppendRecord(ctx, tx, ledger.KindOrgCreated, orgID, org, s.d.Now()); err != nil {
			return err
		}
		k, err := s.issueKey(ctx, tx, orgID, []tenant.Scope{tenant.ScopeOrgAll})
		issued = k
		return err
	})
	if err != nil {
		return CreatedOrg{}, core.Translate("create org", err)
	}
	s.d.Store.KnowOrg(orgID)
	return CreatedOrg{Org: org, Key: issued}, nil
}

// CreateAPIKey issues another key for an existing org.
func (s *Service) CreateAPIKey(ctx context.Context, orgID string, scopes []string) (IssuedKey, error) {
	sc, err := tenant.ParseScopes(scopes)
	if err != nil {
		return IssuedKey{}, core.Invalid(core.CodeInvalidRequest, "scopes", "%v", err)
	}
	var issued IssuedKey
	err = s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		k, err := s.issueKey(ctx, tx, orgID, sc)
		issued = k
		return err
	})
	if err != nil {
		return IssuedKey{}, core.Translate("create API key", err)
	}
	return issued, nil
}

// Org returns an organization.
func (s *Service) Org(ctx context.Context, orgID string) (tenant.Org, error) {
	return core.ReadOrg(ctx, s.d.Store, orgID)
}

// keyRecord is what the ledger records about a key: never its hash.
type keyRecord struct {
	KeyID     string         `json:"key_id"`
	OrgID     string         `json:"org_id"`
	Kind      tenant.KeyKind `json:"kind"`
	Scopes    []tenant.Scope `json:"scopes"`
	CreatedAt string         `json:"created_at"`
}

func (s *Service) issueKey(ctx context.Context, tx store.Tx, orgID string, scopes []tenant.Scope) (IssuedKey, error) {
	secret, hash, err := tenant.NewSecret(s.d.IDs.Rand, tenant.PrefixOrg)
	if err != nil {
		return IssuedKey{}, err
	}
	id, err := s.d.IDs.New()
	if err != nil {
		return IssuedKey{}, err
	}
	k := tenant.APIKey{ID: id, OrgID: orgID, Kind: tenant.KindOrg, Hash: hash, Scopes: scopes, CreatedAt: s.d.Now()}
	if err := tx.PutAPIKey(ctx, k); err != nil {
		return IssuedKey{}, err
	}
	rec := keyRecord{k.ID, k.OrgID, k.Kind, k.Scopes, k.CreatedAt.Format(core.TimeFormat)}
	if err := core.AppendRecord(ctx, tx, ledger.KindAPIKeyCreated, k.ID, rec, s.d.Now()); err != nil {
		return IssuedKey{}, err
	}
	return IssuedKey{KeyID: id, OrgID: orgID, Secret: secret, Scopes: scopes}, nil
}

// EnsurePlatformKey registers the platform key's secret (idempotent).
func (s *Service) EnsurePlatformKey(ctx context.Context, secret string) error {
	if !strings.HasPrefix(secret, tenant.PrefixPlatform) {
		return core.Invalid(core.CodeInvalidRequest, "", "a platform key starts with %s", tenant.PrefixPlatform)
	}
	hash := tenant.HashSecret(secret)
	if _, err := s.d.Store.APIKeyByHash(ctx, hash); err == nil {
		return nil
	} else if !core.IsNotFound(err) {
		return core.Unavailable("read platform key", err)
	}
	k := tenant.APIKey{ID: "platform", OrgID: tenant.PlatformOrgID, Kind: tenant.KindPlatform, Hash: hash, CreatedAt: s.d.Now()}
	// The raw backend: the platform pseudo-org is no org, and a key is no
	// ledger growth.
	err := s.d.Store.Backend.Update(ctx, tenant.PlatformOrgID, func(tx store.Tx) error { return tx.PutAPIKey(ctx, k) })
	if err != nil {
		return core.Unavailable("store platform key", err)
	}
	return nil
}

// NewPlatformSecret returns a fresh platform key secret (not yet registered).
func (s *Service) NewPlatformSecret() (string, error) {
	secret, _, err := tenant.NewSecret(s.d.IDs.Rand, tenant.PrefixPlatform)
	return secret, err
}
