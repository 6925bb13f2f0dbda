// Package tenant holds organizations, API keys and scopes.
//
// Keys are random 256-bit secrets with a visible prefix (clr_org_ for org
// keys, clr_plat_ for the platform key). Only their SHA-256 is stored; a key
// is shown once, when it is issued. The package is pure: randomness comes in
// as an io.Reader.
package tenant

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Key prefixes.
const (
	PrefixOrg        = "clr_org_"
	PrefixPlatform   = "clr_plat_"
	PrefixOnboarding = "clr_onb_"
)

// PlatformOrgID is the pseudo-org that owns the platform key in storage.
const PlatformOrgID = "platform"

// Scope is a permission carried by an API key.
type Scope string

// Scopes, as on the wire.
const (
	ScopeDecisionWrite    Scope = "decision:write"
	ScopeDecisionRead     Scope = "decision:read"
	ScopePolicyWrite      Scope = "policy:write"
	ScopePolicyRead       Scope = "policy:read"
	ScopeAuditRead        Scope = "audit:read"
	ScopeAuditWrite       Scope = "audit:write"
	ScopeIntegrationWrite Scope = "integration:write"
	// ScopeEscalationWrite: cancelling a managed escalation, and nothing
	// else decision:write allows (the operator console's key).
	ScopeEscalationWrite Scope = "escalation:write"
	// ScopeAutomation: the automation connector's routes (/v1/automation/…).
	ScopeAutomation Scope = "automation"
	ScopeOrgAll     Scope = "org:*"
)

// AllScopes lists every scope an org key may carry.
var AllScopes = []Scope{ScopeDecisionWrite, ScopeDecisionRead, ScopePolicyWrite, ScopePolicyRead,
	ScopeAuditRead, ScopeAuditWrite, ScopeIntegrationWrite, ScopeEscalationWrite, ScopeAutomation, ScopeOrgAll}

// ParseScopes validates wire scope strings.
func ParseScopes(in []string) ([]Scope, error) {
	out := make([]Scope, 0, len(in))
	for _, s := range in {
		if !slices.Contains(AllScopes, Scope(s)) {
			return nil, fmt.Errorf("unknown scope %q", s)
		}
		if !slices.Contains(out, Scope(s)) {
			out = append(out, Scope(s))
		}
	}
	if len(out) == 0 {
		return nil, errors.New("at least one scope is required")
	}
	return out, nil
}

// Org is a tenant.
type Org struct {
	ID        string    `json:"org_id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// KeyKind tells org keys from the platform key.
type KeyKind string

// Key kinds.
const (
	KindOrg      KeyKind = "org"
	KindPlatform KeyKind = "platform"
	// KindOnboarding is an onboarding grant: short-lived, good only on the
	// onboarding routes of its org, revoked once the org's deployment
	// bundle is issued.
	KindOnboarding KeyKind = "onboarding"
)

// APIKey is the stored form of a key: never the secret itself.
type APIKey struct {
	ID        string    `json:"key_id"`
	OrgID     string    `json:"org_id"` // PlatformOrgID for the platform key
	Kind      KeyKind   `json:"kind"`
	Hash      string    `json:"hash"` // hex SHA-256 of the secret
	Scopes    []Scope   `json:"scopes"`
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is when the key stops working; zero: never.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// RevokedAt is when the key was revoked; zero: it was not.
	RevokedAt time.Time `json:"revoked_at,omitzero"`
}

// Usable reports whether the key authenticates at now: not revoked and
// not expired (a key expires at ExpiresAt itself).
func (k APIKey) Usable(now time.Time) bool {
	return k.RevokedAt.IsZero() && (k.ExpiresAt.IsZero() || now.Before(k.ExpiresAt))
}

// Allows reports whether the key carries any of the wanted scopes.
// org:* and the platform key allow everything.
func (k APIKey) Allows(want ...Scope) bool {
	if k.Kind == KindPlatform {
		return true
	}
	for _, s := range k.Scopes {
		if s == ScopeOrgAll || slices.Contains(want, s) {
			return true
		}
	}
	return false
}

// NewSecret returns a fresh key secret with the given prefix and its hash.
func NewSecret(rand io.Reader, prefix string) (secret, hash string, err error) {
	var b [32]byte
	if _, err := io.ReadFull(rand, b[:]); err != nil {
		return "", "", fmt.Errorf("tenant: random: %w", err)
	}
	secret = prefix + base64.RawURLEncoding.EncodeToString(b[:])
	return secret, HashSecret(secret), nil
}

// HashSecret returns the stored hash of a secret.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// Matches compares a presented secret with the stored hash in constant time.
func (k APIKey) Matches(secret string) bool {
	return subtle.ConstantTimeCompare([]byte(HashSecret(secret)), []byte(k.Hash)) == 1
}

// LooksLikeKey reports whether s has a known key prefix.
func LooksLikeKey(s string) bool {
	return strings.HasPrefix(s, PrefixOrg) || strings.HasPrefix(s, PrefixPlatform) || strings.HasPrefix(s, PrefixOnboarding)
}

// Tx is what tenancy writes need from a backend transaction.
type Tx interface {
	PutOrg(ctx context.Context, o Org) error
	PutAPIKey(ctx context.Context, k APIKey) error
}

// Reader reads orgs and keys.
type Reader interface {
	Org(ctx context.Context, orgID string) (Org, error)
	APIKeyByHash(ctx context.Context, hash string) (APIKey, error)
	// APIKeysOf returns every credential of the org (revoked and expired
	// ones included), ordered by CreatedAt then ID. It is for rare work
	// (revoking them all): a backend may scan every key to answer.
	APIKeysOf(ctx context.Context, orgID string) ([]APIKey, error)
	// Orgs returns up to limit orgs that come after the org afterID ("":
	// from the first) in the backend's order, which is stable: an org's
	// place never changes, so paging with the last id returned visits
	// every org once. It is for platform work over every org (analytics);
	// the platform's pseudo-org is not an org. limit <= 0 returns none.
	Orgs(ctx context.Context, afterID string, limit int) ([]Org, error)
}
