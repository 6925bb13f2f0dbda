// Package registry keeps an org's registered public keys: agent keys (which
// sign execution intents), provider keys (which sign effect receipts) and
// UCP merchant keys (which sign checkout terms).
//
// Agent and provider keys are public Ed25519 keys only (grant.ParsePublicJWK
// refuses private material, wrong lengths and low-order points); merchant
// keys are public EC keys on P-256 or P-384 only (ucp.ParseMerchantJWK
// refuses private material, other key types and curves, and points off the
// curve). Revocation keeps the
// metadata; registering a revoked kid again replaces the key and clears the
// revocation. A kid is ASCII (ValidKID), so two kids never read the same.
package registry

import (
	"context"
	"encoding/json"
	"time"
)

// Kind separates the registries.
type Kind string

// Registries.
const (
	KindAgent    Kind = "agent"
	KindProvider Kind = "provider"
	KindMerchant Kind = "merchant"
)

// Status of a registered key.
type Status string

// Statuses.
const (
	StatusActive  Status = "ACTIVE"
	StatusRevoked Status = "REVOKED"
)

// Key is a registered public key.
type Key struct {
	OrgID     string          `json:"org_id"`
	Kind      Kind            `json:"kind"`
	KID       string          `json:"kid"`
	Issuer    string          `json:"iss,omitempty"`
	PublicJWK json.RawMessage `json:"public_jwk"` // public members only, as registered
	// PublicKey is the 32-byte Ed25519 key, or a merchant key's
	// uncompressed EC point (0x04 ‖ X ‖ Y).
	PublicKey []byte     `json:"public_key"`
	Status    Status     `json:"status"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	RevokedAt *time.Time `json:"revoked_at"`
}

// Tx is what registration needs from a backend transaction scoped to one org.
type Tx interface {
	RegisteredKey(ctx context.Context, kind Kind, kid string) (Key, error)
	PutRegisteredKey(ctx context.Context, k Key) error
}

// Reader reads an org's registered keys.
type Reader interface {
	RegisteredKeyOf(ctx context.Context, orgID string, kind Kind, kid string) (Key, error)
	// RegisteredKeys lists the org's keys of kind, by kid.
	RegisteredKeys(ctx context.Context, orgID string, kind Kind) ([]Key, error)
}
