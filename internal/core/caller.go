package core

import (
	"time"

	"github.com/clearancehq/clearance/tenant"
)

// Principal is an authenticated credential.
type Principal struct {
	KeyID  string
	OrgID  string // tenant.PlatformOrgID for the platform key
	Kind   tenant.KeyKind
	Scopes []tenant.Scope
	key    tenant.APIKey
}

// PrincipalOf is the principal an API key authenticates as.
func PrincipalOf(k tenant.APIKey) Principal {
	return Principal{KeyID: k.ID, OrgID: k.OrgID, Kind: k.Kind, Scopes: k.Scopes, key: k}
}

// IssuedAt is when the caller's credential was issued: a change that
// issues credentials refuses a caller issued before the org's last
// org-wide revocation (admin.RevokedSince), which revoked it.
func (p Principal) IssuedAt() time.Time { return p.key.CreatedAt }

// KeyHash identifies the caller's credential as the store files it (the
// hash of its secret, never the secret): what a record bound to the
// credential keeps, to find out later whether it is still usable.
func (p Principal) KeyHash() string { return p.key.Hash }

// IsPlatform reports whether the caller holds the platform key.
func (p Principal) IsPlatform() bool { return p.Kind == tenant.KindPlatform }

// Allows reports whether the caller has any of the scopes.
func (p Principal) Allows(want ...tenant.Scope) bool { return p.key.Allows(want...) }

// ResolveOrg returns the org a request acts on: an org key's own org (an
// explicit org_id that differs is ErrForbidden), or for the platform key the
// explicit org_id, which is then required.
func (p Principal) ResolveOrg(explicit string) (string, error) {
	if p.IsPlatform() {
		if explicit == "" {
			return "", Invalid(CodeOrgRequired, "org_id", "org_id is required with the platform key")
		}
		if !ValidID(explicit) {
			return "", Invalid(CodeInvalidRequest, "org_id", "org_id must be a UUID")
		}
		return explicit, nil
	}
	if explicit != "" && explicit != p.OrgID {
		return "", New(ErrForbidden, CodeOrgMismatch, "org_id does not match the credential's organization")
	}
	return p.OrgID, nil
}

// Caller is who a library call acts for and the names the client gave it.
// Every entry point that records something validates it once (Validate);
// the tokens are optional, the org is not.
type Caller struct {
	OrgID          string
	Principal      Principal
	RequestID      string
	IdempotencyKey string
	CorrelationID  string
}

// Validate refuses a caller whose names could not be stored as given: an
// Idempotency-Key, correlation or request id that is not ValidToken (a
// control character in a correlation id would otherwise derive a chain id).
// The org's existence is the store's to check (Store.Update).
func (c Caller) Validate() error {
	if c.IdempotencyKey != "" && !ValidToken(c.IdempotencyKey) {
		return Invalid(CodeInvalidIdempotencyKey, "Idempotency-Key", "Idempotency-Key must be 1 to %d visible ASCII characters", MaxKeyLength)
	}
	if c.CorrelationID != "" && !ValidToken(c.CorrelationID) {
		return Invalid(CodeInvalidCorrelationID, "correlation_id", "the correlation id must be 1 to %d visible ASCII characters", MaxKeyLength)
	}
	if c.RequestID != "" && !ValidToken(c.RequestID) {
		return Invalid(CodeInvalidRequestID, "request_id", "the request id must be 1 to %d visible ASCII characters", MaxKeyLength)
	}
	return nil
}
