// Command verifyattestation is what a downstream system runs before it
// commits an agent's action: it verifies a Clearance claim attestation
// offline, with go-jose and the published JWKS only, and checks that the
// request it is about to execute is the one the attestation describes.
//
//	verifyattestation -jwks jwks.json -attestation TOKEN -grant GRANT_ID -intent-hash sha256:…
//
// The JWKS is the document served at
// /.well-known/clearance-execution-grant-jwks.json. No Clearance package is
// imported: any JOSE library can do the same.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Attestation holds the claims a downstream system matches.
type Attestation struct {
	Issuer           string `json:"iss"`
	Audience         string `json:"aud"`
	Expiry           int64  `json:"exp"`
	GrantID          string `json:"grant_id"`
	DecisionID       string `json:"decision_id"`
	ClaimTokenDigest string `json:"claim_token_digest"`
	Binding          struct {
		IntentHash    string `json:"intent_hash"`
		PayloadDigest string `json:"payload_digest"`
		Nonce         string `json:"nonce"`
		Scope         string `json:"scope"`
	} `json:"binding"`
	Action struct {
		Type   string `json:"type"`
		Target string `json:"target"`
	} `json:"act"`
}

// Verify checks token against the JWKS and returns its claims. It accepts
// only a compact EdDSA JWS with the attestation's typ, a kid found in the
// JWKS, no other header members, the audience clearance-downstream, the
// expected issuer, and exp in the future (no leeway).
func Verify(jwks []byte, token, issuer string, now time.Time) (Attestation, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(jwks, &set); err != nil {
		return Attestation{}, fmt.Errorf("jwks: %w", err)
	}
	jws, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil || len(jws.Signatures) != 1 {
		return Attestation{}, errors.New("not one compact EdDSA JWS")
	}
	h := jws.Signatures[0].Protected
	keys := set.Key(h.KeyID)
	if len(keys) != 1 || h.JSONWebKey != nil || len(h.ExtraHeaders) != 1 ||
		h.ExtraHeaders[jose.HeaderType] != "clearance-claim-attestation+jwt" {
		return Attestation{}, errors.New("unknown kid or unexpected header")
	}
	payload, err := jws.Verify(keys[0].Key) // the key comes from the JWKS, never from the token
	if err != nil {
		return Attestation{}, err
	}
	var a Attestation
	if err := json.Unmarshal(payload, &a); err != nil {
		return Attestation{}, err
	}
	if a.Audience != "clearance-downstream" || a.Issuer != issuer {
		return Attestation{}, errors.New("wrong audience or issuer")
	}
	if now.Unix() >= a.Expiry {
		return Attestation{}, errors.New("the claim lease has ended")
	}
	return a, nil
}

func main() {
	jwksPath := flag.String("jwks", "", "file holding the JWKS document")
	token := flag.String("attestation", "", "the claim_attestation to check")
	issuer := flag.String("issuer", "clearance", "the expected iss")
	grantID := flag.String("grant", "", "the grant id the executor says it holds")
	intentHash := flag.String("intent-hash", "", "the intent_hash of the request about to execute")
	flag.Parse()
	jwks, err := os.ReadFile(*jwksPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	a, err := Verify(jwks, *token, *issuer, time.Now())
	if err == nil && (a.GrantID != *grantID || a.Binding.IntentHash != *intentHash) {
		err = errors.New("the attestation describes another grant or intent")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "refuse:", err)
		os.Exit(1)
	}
	fmt.Printf("ok: grant %s, action %s on %q, lease until %s\n", a.GrantID, a.Action.Type, a.Action.Target,
		time.Unix(a.Expiry, 0).UTC().Format(time.RFC3339))
}
