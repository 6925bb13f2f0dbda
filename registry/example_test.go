package registry_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance/registry"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// An agent's public key is registered under a kid, then looked up by that
// kid to verify what the agent signs; a kid nobody registered is refused.
func ExampleRegister() {
	ctx := context.Background()
	backend, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		panic(err)
	}
	defer backend.Close()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	pub := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize)).Public().(ed25519.PublicKey)
	reg := registry.Registration{KID: "agent-2026", PublicJWK: []byte(
		`{"kty":"OKP","crv":"Ed25519","x":"` + base64.RawURLEncoding.EncodeToString(pub) + `"}`)}
	var k registry.Key
	var created bool
	err = backend.Update(ctx, "org_1", func(tx store.Tx) error {
		var err error
		k, created, err = registry.Register(ctx, tx, "org_1", registry.KindAgent, reg, at)
		return err
	})
	fmt.Println(created, k.KID, k.Status, k.CreatedAt.Format(time.RFC3339), err)

	found, err := registry.Lookup(ctx, backend, "org_1", registry.KindAgent, "agent-2026")
	fmt.Println(found.Equal(pub), err)

	_, err = registry.Lookup(ctx, backend, "org_1", registry.KindAgent, "agent-unknown")
	var refusal *registry.Error
	if errors.As(err, &refusal) {
		fmt.Println(refusal.Code(), errors.Is(err, registry.ErrKeyNotFound))
	}
	// Output:
	// true agent-2026 ACTIVE 2026-03-01T12:00:00Z <nil>
	// true <nil>
	// KEY_NOT_FOUND true
}
