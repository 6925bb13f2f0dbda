package admin

import (
	"encoding/json"
	"time"

	"github.com/clearancehq/clearance/registry"
)

// Key is a registered agent or provider key as the API shows it. It is not
// the stored record (registry.Key): renaming a member here is a change of
// the wire, never a storage migration.
type Key struct {
	OrgID     string          `json:"org_id"`
	Kind      registry.Kind   `json:"kind"`
	KID       string          `json:"kid"`
	Issuer    string          `json:"iss,omitempty"`
	PublicJWK json.RawMessage `json:"public_jwk"` // public members only, as registered
	PublicKey []byte          `json:"public_key"` // the 32-byte Ed25519 key
	Status    registry.Status `json:"status"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	RevokedAt *time.Time      `json:"revoked_at"`
}

func keyOf(k registry.Key) Key {
	return Key{OrgID: k.OrgID, Kind: k.Kind, KID: k.KID, Issuer: k.Issuer, PublicJWK: k.PublicJWK, PublicKey: k.PublicKey,
		Status: k.Status, CreatedAt: k.CreatedAt, UpdatedAt: k.UpdatedAt, RevokedAt: k.RevokedAt}
}
