package grant_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/clearancehq/clearance/grant"
)

// A fixed seed gives a fixed key, so examples and tests print real kids.
// This is the Ed25519 key of RFC 8037 Appendix A; its kid is the RFC 7638
// thumbprint given in Appendix A.3.
func ExampleKeyFromSeed() {
	seed, _ := base64.RawURLEncoding.DecodeString("nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A")
	key, err := grant.KeyFromSeed(seed)
	if err != nil {
		panic(err)
	}
	fmt.Println(key.KID())
	fmt.Println(base64.RawURLEncoding.EncodeToString(key.Public()))
	// Output:
	// kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k
	// 11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo
}

// Rotation keeps the old key published until every grant it signed has
// expired and the longest claim lease after it has run out.
func ExampleKeyRing_Rotate() {
	oldKey, _ := grant.KeyFromSeed(bytes.Repeat([]byte{1}, 32))
	newKey, _ := grant.KeyFromSeed(bytes.Repeat([]byte{2}, 32))
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	drain := 120*time.Second + 30*time.Second // grant lifetime + claim lease

	ring := grant.NewKeyRing(oldKey).Rotate(newKey, now, drain)
	fmt.Println("signing with new key:", ring.Active().KID() == newKey.KID())
	fmt.Println("keys published now:", len(ring.JWKS(now).Keys))
	fmt.Println("keys published after drain:", len(ring.JWKS(now.Add(drain)).Keys))
	_, ok := ring.Lookup(oldKey.KID(), now.Add(drain))
	fmt.Println("old key verifies after drain:", ok)
	// Output:
	// signing with new key: true
	// keys published now: 2
	// keys published after drain: 1
	// old key verifies after drain: false
}

func ExampleParsePublicJWK() {
	_, _, err := grant.ParsePublicJWK([]byte(`{"kty":"OKP","crv":"Ed25519","x":"AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`))
	fmt.Println(err)
	pub, kid, err := grant.ParsePublicJWK([]byte(`{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"agent-7"}`))
	fmt.Println(len(pub), kid, err)
	// Output:
	// grant: weak key (low-order point): Ed25519 public key 0100000000000000000000000000000000000000000000000000000000000000
	// 32 agent-7 <nil>
}
