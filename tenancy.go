package clearance

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

// Principal is an authenticated caller.
type Principal = core.Principal

// Authenticate resolves a bearer secret to its principal.
func (e *Engine) Authenticate(ctx context.Context, secret string) (Principal, error) {
	if !tenant.LooksLikeKey(secret) {
		return Principal{}, newError(ErrUnauthenticated, CodeUnauthenticated, "missing or malformed API key")
	}
	hash := tenant.HashSecret(secret)
	var k tenant.APIKey
	if v, ok := e.apiKeys.Load(hash); ok {
		k = v.(tenant.APIKey)
	} else {
		got, err := e.store.APIKeyByHash(ctx, hash)
		if isNotFound(err) {
			return Principal{}, newError(ErrUnauthenticated, CodeUnauthenticated, "unknown API key")
		}
		if err != nil {
			return Principal{}, unavailable("authentication", err)
		}
		k = got
		e.apiKeys.Store(hash, k) // keys are immutable once issued
	}
	if !k.Matches(secret) {
		return Principal{}, newError(ErrUnauthenticated, CodeUnauthenticated, "unknown API key")
	}
	return core.PrincipalOf(k), nil
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
func (e *Engine) CreateOrg(ctx context.Context, name string) (CreatedOrg, error) {
	name = strings.TrimSpace(name)
	if name == "" || utf8.RuneCountInString(name) > 200 || strings.ContainsFunc(name, unicode.IsControl) {
		return CreatedOrg{}, invalid(CodeInvalidRequest, "name", "name is required: 1 to 200 characters, no control characters")
	}
	orgID, err := e.newID()
	if err != nil {
		return CreatedOrg{}, unavailable("id generation", err)
	}
	org := tenant.Org{ID: orgID, Name: name, CreatedAt: e.now()}
	var issued IssuedKey
	err = e.store.UpdateNew(ctx, orgID, func(tx store.Tx) error {
		if err := tx.PutOrg(ctx, org); err != nil {
			return err
		}
		if err := e.appendRecord(ctx, tx, ledger.KindOrgCreated, orgID, org); err != nil {
			return err
		}
		k, err := e.issueKey(ctx, tx, orgID, []tenant.Scope{tenant.ScopeOrgAll})
		issued = k
		return err
	})
	if err != nil {
		return CreatedOrg{}, asEngineError("create org", err)
	}
	e.store.KnowOrg(orgID)
	return CreatedOrg{Org: org, Key: issued}, nil
}

// CreateAPIKey issues another key for an existing org.
func (e *Engine) CreateAPIKey(ctx context.Context, orgID string, scopes []string) (IssuedKey, error) {
	sc, err := tenant.ParseScopes(scopes)
	if err != nil {
		return IssuedKey{}, invalid(CodeInvalidRequest, "scopes", "%v", err)
	}
	var issued IssuedKey
	err = e.store.Update(ctx, orgID, func(tx store.Tx) error {
		k, err := e.issueKey(ctx, tx, orgID, sc)
		issued = k
		return err
	})
	if err != nil {
		return IssuedKey{}, asEngineError("create API key", err)
	}
	return issued, nil
}

// Org returns an organization.
func (e *Engine) Org(ctx context.Context, orgID string) (tenant.Org, error) {
	return readOrg(ctx, e.store, orgID)
}

func readOrg(ctx context.Context, r store.Reader, orgID string) (tenant.Org, error) {
	return core.ReadOrg(ctx, r, orgID)
}

// keyRecord is what the ledger records about a key: never its hash.
type keyRecord struct {
	KeyID     string         `json:"key_id"`
	OrgID     string         `json:"org_id"`
	Kind      tenant.KeyKind `json:"kind"`
	Scopes    []tenant.Scope `json:"scopes"`
	CreatedAt string         `json:"created_at"`
}

func (e *Engine) issueKey(ctx context.Context, tx store.Tx, orgID string, scopes []tenant.Scope) (IssuedKey, error) {
	secret, hash, err := tenant.NewSecret(e.opts.Rand, tenant.PrefixOrg)
	if err != nil {
		return IssuedKey{}, err
	}
	id, err := e.newID()
	if err != nil {
		return IssuedKey{}, err
	}
	k := tenant.APIKey{ID: id, OrgID: orgID, Kind: tenant.KindOrg, Hash: hash, Scopes: scopes, CreatedAt: e.now()}
	if err := tx.PutAPIKey(ctx, k); err != nil {
		return IssuedKey{}, err
	}
	rec := keyRecord{k.ID, k.OrgID, k.Kind, k.Scopes, k.CreatedAt.Format(timeFormat)}
	if err := e.appendRecord(ctx, tx, ledger.KindAPIKeyCreated, k.ID, rec); err != nil {
		return IssuedKey{}, err
	}
	return IssuedKey{KeyID: id, OrgID: orgID, Secret: secret, Scopes: scopes}, nil
}

// EnsurePlatformKey registers the platform key's secret (idempotent).
func (e *Engine) EnsurePlatformKey(ctx context.Context, secret string) error {
	if !strings.HasPrefix(secret, tenant.PrefixPlatform) {
		return invalid(CodeInvalidRequest, "", "a platform key starts with %s", tenant.PrefixPlatform)
	}
	hash := tenant.HashSecret(secret)
	if _, err := e.store.APIKeyByHash(ctx, hash); err == nil {
		return nil
	} else if !isNotFound(err) {
		return unavailable("read platform key", err)
	}
	k := tenant.APIKey{ID: "platform", OrgID: tenant.PlatformOrgID, Kind: tenant.KindPlatform, Hash: hash, CreatedAt: e.now()}
	// The raw backend: the platform pseudo-org is no org, and a key is no
	// ledger growth.
	err := e.store.Backend.Update(ctx, tenant.PlatformOrgID, func(tx store.Tx) error { return tx.PutAPIKey(ctx, k) })
	if err != nil {
		return unavailable("store platform key", err)
	}
	return nil
}

// NewPlatformSecret returns a fresh platform key secret (not yet registered).
func (e *Engine) NewPlatformSecret() (string, error) {
	s, _, err := tenant.NewSecret(e.opts.Rand, tenant.PrefixPlatform)
	return s, err
}

// appendRecord ledgers a change whose stored form is v.
func (e *Engine) appendRecord(ctx context.Context, tx store.Tx, kind, subject string, v any) error {
	return core.AppendRecord(ctx, tx, kind, subject, v, e.now())
}

// asEngineError passes *Error through and turns anything else into the
// kernel's answer for it (core.Translate).
func asEngineError(op string, err error) error { return core.Translate(op, err) }
