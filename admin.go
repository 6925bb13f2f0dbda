package clearance

import (
	"context"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/clearancehq/clearance/admin"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/registry"
	"github.com/clearancehq/clearance/tenant"
)

// Principal is an authenticated caller.
type Principal = core.Principal

// RegisteredKey is a registered agent or provider key as the API shows it.
type RegisteredKey = admin.Key

// IssuedKey is a newly created API key; Secret is shown only here.
type IssuedKey = admin.IssuedKey

// CreatedOrg is the result of CreateOrg.
type CreatedOrg = admin.CreatedOrg

// DefaultKeyRevocationInterval is how often RunKeyRevocations rereads the
// grant keys revoked in the store.
const DefaultKeyRevocationInterval = admin.DefaultKeyRevocationInterval

// Authenticate forwards to Admin.Authenticate.
func (e *Engine) Authenticate(ctx context.Context, secret string) (Principal, error) {
	return e.Admin.Authenticate(ctx, secret)
}

// CreateOrg forwards to Admin.CreateOrg.
func (e *Engine) CreateOrg(ctx context.Context, name string) (CreatedOrg, error) {
	return e.Admin.CreateOrg(ctx, name)
}

// CreateAPIKey forwards to Admin.CreateAPIKey.
func (e *Engine) CreateAPIKey(ctx context.Context, orgID string, scopes []string) (IssuedKey, error) {
	return e.Admin.CreateAPIKey(ctx, orgID, scopes)
}

// Org forwards to Admin.Org.
func (e *Engine) Org(ctx context.Context, orgID string) (tenant.Org, error) {
	return e.Admin.Org(ctx, orgID)
}

// EnsurePlatformKey forwards to Admin.EnsurePlatformKey.
func (e *Engine) EnsurePlatformKey(ctx context.Context, secret string) error {
	return e.Admin.EnsurePlatformKey(ctx, secret)
}

// NewPlatformSecret forwards to Admin.NewPlatformSecret.
func (e *Engine) NewPlatformSecret() (string, error) { return e.Admin.NewPlatformSecret() }

// RegisterKey forwards to Admin.RegisterKey.
func (e *Engine) RegisterKey(ctx context.Context, orgID string, kind registry.Kind, r registry.Registration) (RegisteredKey, bool, error) {
	return e.Admin.RegisterKey(ctx, orgID, kind, r)
}

// RevokeKey forwards to Admin.RevokeKey.
func (e *Engine) RevokeKey(ctx context.Context, orgID string, kind registry.Kind, kid string) (RegisteredKey, error) {
	return e.Admin.RevokeKey(ctx, orgID, kind, kid)
}

// Keys forwards to Admin.Keys.
func (e *Engine) Keys(ctx context.Context, orgID string, kind registry.Kind) ([]RegisteredKey, error) {
	return e.Admin.Keys(ctx, orgID, kind)
}

// JWKS forwards to Admin.JWKS.
func (e *Engine) JWKS() (jose.JSONWebKeySet, bool) { return e.Admin.JWKS() }

// RevokeGrantKey forwards to Admin.RevokeGrantKey.
func (e *Engine) RevokeGrantKey(ctx context.Context, kid string) error {
	return e.Admin.RevokeGrantKey(ctx, kid)
}

// RefreshKeyRevocations forwards to Admin.RefreshKeyRevocations.
func (e *Engine) RefreshKeyRevocations(ctx context.Context) error {
	return e.Admin.RefreshKeyRevocations(ctx)
}

// RunKeyRevocations forwards to Admin.RunKeyRevocations.
func (e *Engine) RunKeyRevocations(ctx context.Context, interval time.Duration) {
	e.Admin.RunKeyRevocations(ctx, interval)
}
