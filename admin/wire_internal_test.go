package admin

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/clearancehq/clearance/registry"
)

// TestKeyWireIsTheStoredMembers: the key API answers with the same members
// it did when it wrote the stored record itself; a change to either struct
// that would change the wire fails here and must be made on purpose.
func TestKeyWireIsTheStoredMembers(t *testing.T) {
	at := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	for _, k := range []registry.Key{
		{OrgID: "o", Kind: registry.KindAgent, KID: "k1", Issuer: "iss", PublicJWK: json.RawMessage(`{"kty":"OKP"}`),
			PublicKey: []byte{1, 2, 3}, Status: registry.StatusRevoked, CreatedAt: at, UpdatedAt: at, RevokedAt: &at},
		{OrgID: "o", Kind: registry.KindProvider, KID: "k2", PublicJWK: json.RawMessage(`{}`), Status: registry.StatusActive},
	} {
		stored, err := json.Marshal(k)
		if err != nil {
			t.Fatal(err)
		}
		wire, err := json.Marshal(keyOf(k))
		if err != nil {
			t.Fatal(err)
		}
		if string(stored) != string(wire) {
			t.Errorf("wire %s\nstored %s", wire, stored)
		}
	}
}
