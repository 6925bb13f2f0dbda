package admin

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
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
	if v, ok := s.apiKeys.Load(hash); ok && time.Since(v.(cachedKey).read) < KeyCacheTTL {
		k = v.(cachedKey).key
	} else {
		gen := s.forgets.Load()
		got, err := s.d.Store.APIKeyByHash(ctx, hash)
		if core.IsNotFound(err) {
			return core.Principal{}, core.New(core.ErrUnauthenticated, core.CodeUnauthenticated, "unknown API key")
		}
		if err != nil {
			return core.Principal{}, core.Unavailable("authentication", err)
		}
		k = got
		// Only keys that neither expire nor are revoked stay in memory, and
		// for KeyCacheTTL: a credential with a lifetime is read from the
		// store on every use, so its revocation holds at once everywhere;
		// an org key's holds here at once (Forget) and elsewhere within
		// KeyCacheTTL.
		if cacheable(k) && s.forgets.Load() == gen {
			s.apiKeys.Store(hash, cachedKey{key: k, read: time.Now()})
		} else {
			s.apiKeys.Delete(hash)
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

// forget drops keys from this server's cache, after their revocation.
func (s *Service) forget(keys ...tenant.APIKey) {
	s.forgets.Add(1)
	for _, k := range keys {
		s.apiKeys.Delete(k.Hash)
	}
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
	// Stored is the key as stored (its hash, never the secret).
	Stored tenant.APIKey `json:"-"`
}

// CreatedOrg is the result of CreateOrg.
type CreatedOrg struct {
	Org tenant.Org
	Key IssuedKey
}

// CreateOrg creates an organization and its first API key (scope org:*),
// ledgered as the org's first two entries.
func (s *Service) CreateOrg(ctx context.Context, name string) (CreatedOrg, error) {
	var issued IssuedKey
	org, err := s.CreateOrgWith(ctx, "", name, func(ctx context.Context, tx store.Tx, org tenant.Org) error {
		k, err := s.IssueKeyIn(ctx, tx, KeySpec{OrgID: org.ID, Kind: tenant.KindOrg, Scopes: []tenant.Scope{tenant.ScopeOrgAll}})
		issued = k
		return err
	})
	if err != nil {
		return CreatedOrg{}, err
	}
	return CreatedOrg{Org: org, Key: issued}, nil
}

// ValidOrgName returns name trimmed, or the error CreateOrg answers for it.
func ValidOrgName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" || utf8.RuneCountInString(name) > MaxOrgNameLength || strings.ContainsFunc(name, unicode.IsControl) {
		return "", core.Invalid(core.CodeInvalidRequest, "name", "name is required: 1 to %d characters, no control characters", MaxOrgNameLength)
	}
	return name, nil
}

// CreateOrgWith creates an organization named name, with the id orgID (""
// draws a fresh one), and runs then in the transaction that creates it:
// the org, its org.created entry and what then writes commit together or
// not at all. It issues no key (then may).
func (s *Service) CreateOrgWith(ctx context.Context, orgID, name string,
	then func(ctx context.Context, tx store.Tx, org tenant.Org) error) (tenant.Org, error) {
	name, err := ValidOrgName(name)
	if err != nil {
		return tenant.Org{}, err
	}
	if orgID == "" {
		if orgID, err = s.d.IDs.New(); err != nil {
			return tenant.Org{}, core.Unavailable("id generation", err)
		}
	}
	org := tenant.Org{ID: orgID, Name: name, CreatedAt: s.d.Now()}
	// UpdateNew: the org this transaction creates does not exist yet.
	err = s.d.Store.UpdateNew(ctx, orgID, func(tx store.Tx) error {
		if err := tx.PutOrg(ctx, org); err != nil {
			return err
		}
		if err := core.AppendRecord(ctx, tx, ledger.KindOrgCreated, orgID, org, s.d.Now()); err != nil {
			return err
		}
		if then == nil {
			return nil
		}
		return then(ctx, tx, org)
	})
	if err != nil {
		return tenant.Org{}, core.Translate("create org", err)
	}
	s.d.Store.KnowOrg(orgID)
	return org, nil
}

// CreateAPIKey issues another key for an existing org.
func (s *Service) CreateAPIKey(ctx context.Context, orgID string, scopes []string) (IssuedKey, error) {
	sc, err := tenant.ParseScopes(scopes)
	if err != nil {
		return IssuedKey{}, core.Invalid(core.CodeInvalidRequest, "scopes", "%v", err)
	}
	var issued IssuedKey
	err = s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		k, err := s.IssueKeyIn(ctx, tx, KeySpec{OrgID: orgID, Kind: tenant.KindOrg, Scopes: sc})
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
	// ExpiresAt is set for credentials with a lifetime (onboarding grants);
	// absent, the record's bytes are those of the keys ledgered before.
	ExpiresAt string `json:"expires_at,omitempty"`
}

// KeySpec is a credential to issue.
type KeySpec struct {
	OrgID  string
	Kind   tenant.KeyKind // KindOrg or KindOnboarding
	Scopes []tenant.Scope
	// ExpiresAt is when it stops working; zero: never.
	ExpiresAt time.Time
}

// IssueKeyIn issues a credential in tx, a transaction of spec.OrgID, with
// its api_key.created entry, and returns it with its secret (shown once).
// The stored key is returned too, for a caller that revokes it later in
// a transaction of its own (tenant.APIKey with RevokedAt set, put again).
func (s *Service) IssueKeyIn(ctx context.Context, tx store.Tx, spec KeySpec) (IssuedKey, error) {
	prefix := tenant.PrefixOrg
	switch spec.Kind {
	case tenant.KindOrg:
	case tenant.KindOnboarding:
		prefix = tenant.PrefixOnboarding
	default:
		return IssuedKey{}, fmt.Errorf("admin: cannot issue a key of kind %q", spec.Kind)
	}
	if tx.OrgID() != spec.OrgID {
		return IssuedKey{}, fmt.Errorf("admin: key of org %q in a transaction of org %q", spec.OrgID, tx.OrgID())
	}
	secret, hash, err := tenant.NewSecret(s.d.IDs.Rand, prefix)
	if err != nil {
		return IssuedKey{}, err
	}
	id, err := s.d.IDs.New()
	if err != nil {
		return IssuedKey{}, err
	}
	k := tenant.APIKey{ID: id, OrgID: spec.OrgID, Kind: spec.Kind, Hash: hash, Scopes: spec.Scopes, CreatedAt: s.d.Now(),
		ExpiresAt: spec.ExpiresAt}
	if err := tx.PutAPIKey(ctx, k); err != nil {
		return IssuedKey{}, err
	}
	rec := keyRecord{KeyID: k.ID, OrgID: k.OrgID, Kind: k.Kind, Scopes: k.Scopes, CreatedAt: k.CreatedAt.Format(core.TimeFormat)}
	if !k.ExpiresAt.IsZero() {
		rec.ExpiresAt = k.ExpiresAt.Format(core.TimeFormat)
	}
	if err := core.AppendRecord(ctx, tx, ledger.KindAPIKeyCreated, k.ID, rec, s.d.Now()); err != nil {
		return IssuedKey{}, err
	}
	return IssuedKey{KeyID: id, OrgID: spec.OrgID, Secret: secret, Scopes: spec.Scopes, Stored: k}, nil
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

// APIKeyInfo is an API key as listed: never its secret, nor its hash.
type APIKeyInfo struct {
	KeyID     string         `json:"key_id"`
	OrgID     string         `json:"org_id"`
	Kind      tenant.KeyKind `json:"kind"`
	Scopes    []tenant.Scope `json:"scopes"`
	Active    bool           `json:"active"`
	CreatedAt string         `json:"created_at"`
	ExpiresAt string         `json:"expires_at,omitempty"`
	RevokedAt string         `json:"revoked_at,omitempty"`
}

func apiKeyInfo(k tenant.APIKey, now time.Time) APIKeyInfo {
	info := APIKeyInfo{KeyID: k.ID, OrgID: k.OrgID, Kind: k.Kind, Scopes: k.Scopes, Active: k.Usable(now),
		CreatedAt: core.Format(k.CreatedAt)}
	if info.Scopes == nil {
		info.Scopes = []tenant.Scope{}
	}
	if !k.ExpiresAt.IsZero() {
		info.ExpiresAt = core.Format(k.ExpiresAt)
	}
	if !k.RevokedAt.IsZero() {
		info.RevokedAt = core.Format(k.RevokedAt)
	}
	return info
}

// APIKeys lists an org's API keys, revoked and expired ones included, by
// key id.
func (s *Service) APIKeys(ctx context.Context, orgID string) ([]APIKeyInfo, error) {
	if _, err := s.Org(ctx, orgID); err != nil {
		return nil, err
	}
	keys, err := s.d.Store.APIKeysOf(ctx, orgID)
	if err != nil {
		return nil, core.Unavailable("list API keys", err)
	}
	now := s.d.Now()
	out := make([]APIKeyInfo, len(keys))
	for i, k := range keys {
		out[i] = apiKeyInfo(k, now)
	}
	slices.SortFunc(out, func(a, b APIKeyInfo) int { return strings.Compare(a.KeyID, b.KeyID) })
	return out, nil
}

// CodeAPIKeyNotFound answers a key id that names no API key of the org.
const CodeAPIKeyNotFound = "API_KEY_NOT_FOUND"

// RevokeAPIKey revokes one API key of orgID by its id, ledgered as
// credentials.revoked naming by; it stops working on this server at once
// and on others within KeyCacheTTL. Revoking a revoked key changes nothing
// and answers it as it is; a key id the org does not have is 404
// API_KEY_NOT_FOUND.
func (s *Service) RevokeAPIKey(ctx context.Context, orgID, keyID, by string) (APIKeyInfo, error) {
	if _, err := s.Org(ctx, orgID); err != nil {
		return APIKeyInfo{}, err
	}
	stored, err := s.d.Store.APIKeysOf(ctx, orgID)
	if err != nil {
		return APIKeyInfo{}, core.Unavailable("list API keys", err)
	}
	j := slices.IndexFunc(stored, func(k tenant.APIKey) bool { return k.ID == keyID })
	if j < 0 {
		return APIKeyInfo{}, core.New(core.ErrNotFound, CodeAPIKeyNotFound, "API key not found")
	}
	if err := s.RevokeCredential(ctx, orgID, stored[j].Hash, by); err != nil {
		return APIKeyInfo{}, err
	}
	k, err := s.d.Store.APIKeyByHash(ctx, stored[j].Hash)
	if err != nil {
		return APIKeyInfo{}, core.Unavailable("read API key", err)
	}
	return apiKeyInfo(k, s.d.Now()), nil
}

// Orgs lists organizations by id, at most limit after afterID ("" from the
// start).
func (s *Service) Orgs(ctx context.Context, afterID string, limit int) ([]tenant.Org, error) {
	orgs, err := s.d.Store.Orgs(ctx, afterID, limit)
	if err != nil {
		return nil, core.Unavailable("list orgs", err)
	}
	return orgs, nil
}
