package approver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

// The authenticator data flags (WebAuthn §6.1).
const (
	flagUP = 0x01 // user present
	flagUV = 0x04 // user verified
	flagAT = 0x40 // attested credential data included
)

// softAuthenticator is a WebAuthn authenticator in software: an ECDSA P-256
// credential, attestation "none", and knobs to misbehave. It builds
// clientDataJSON, authenticatorData and the attestation object itself, as
// a browser and an authenticator together would.
type softAuthenticator struct {
	rpID, origin string
	key          *ecdsa.PrivateKey
	credID       []byte
	userHandle   []byte
	counter      uint32
	// Knobs.
	noUV       bool // leave the UV flag cleared
	zeroCount  bool // never advance the counter (authenticators without one)
	originOver string
}

func newSoftAuthenticator(t testing.TB, rpID, origin string) *softAuthenticator {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id := make([]byte, 32)
	if _, err := rand.Read(id); err != nil {
		t.Fatal(err)
	}
	return &softAuthenticator{rpID: rpID, origin: origin, key: key, credID: id}
}

var b64 = base64.RawURLEncoding

func (a *softAuthenticator) flags() byte {
	f := byte(flagUP)
	if !a.noUV {
		f |= flagUV
	}
	return f
}

func (a *softAuthenticator) clientData(t testing.TB, typ, challenge string) []byte {
	t.Helper()
	origin := a.origin
	if a.originOver != "" {
		origin = a.originOver
	}
	data, err := json.Marshal(map[string]any{"type": typ, "challenge": challenge, "origin": origin, "crossOrigin": false})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// coseKey is the credential's public key as a COSE_Key (EC2, ES256).
func (a *softAuthenticator) coseKey(t testing.TB) []byte {
	t.Helper()
	pub, err := a.key.PublicKey.Bytes() // 0x04 || X || Y
	if err != nil {
		t.Fatal(err)
	}
	em, err := cbor.CTAP2EncOptions().EncMode()
	if err != nil {
		t.Fatal(err)
	}
	key, err := em.Marshal(map[int]any{1: 2, 3: -7, -1: 1, -2: pub[1:33], -3: pub[33:65]})
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// register answers the options of POST /enroll/{token}/begin with a
// registration response (the JSON the page posts as "credential").
func (a *softAuthenticator) register(t testing.TB, options []byte) []byte {
	t.Helper()
	var o struct {
		PublicKey struct {
			Challenge string `json:"challenge"`
			RP        struct {
				ID string `json:"id"`
			} `json:"rp"`
			User struct {
				ID string `json:"id"`
			} `json:"user"`
			AuthenticatorSelection struct {
				UserVerification string `json:"userVerification"`
				ResidentKey      string `json:"residentKey"`
			} `json:"authenticatorSelection"`
			Attestation string `json:"attestation"`
		} `json:"publicKey"`
	}
	if err := json.Unmarshal(options, &o); err != nil {
		t.Fatalf("registration options: %v: %s", err, options)
	}
	pk := o.PublicKey
	if pk.RP.ID != a.rpID || pk.AuthenticatorSelection.UserVerification != "required" ||
		pk.AuthenticatorSelection.ResidentKey != "preferred" || pk.Attestation != "none" {
		t.Fatalf("registration options: %s", options)
	}
	handle, err := b64.DecodeString(pk.User.ID)
	if err != nil {
		t.Fatal(err)
	}
	a.userHandle = handle
	rpHash := sha256.Sum256([]byte(a.rpID))
	auth := append([]byte(nil), rpHash[:]...)
	auth = append(auth, a.flags()|flagAT)
	auth = binary.BigEndian.AppendUint32(auth, a.counter)
	auth = append(auth, make([]byte, 16)...) // AAGUID: zero, as with attestation "none"
	auth = binary.BigEndian.AppendUint16(auth, uint16(len(a.credID)))
	auth = append(auth, a.credID...)
	auth = append(auth, a.coseKey(t)...)
	att, err := cbor.Marshal(map[string]any{"fmt": "none", "attStmt": map[string]any{}, "authData": auth})
	if err != nil {
		t.Fatal(err)
	}
	return a.credentialJSON(t, map[string]any{
		"clientDataJSON":    b64.EncodeToString(a.clientData(t, "webauthn.create", pk.Challenge)),
		"attestationObject": b64.EncodeToString(att),
		"transports":        []string{"internal"},
	})
}

func (a *softAuthenticator) credentialJSON(t testing.TB, response map[string]any) []byte {
	t.Helper()
	data, err := json.Marshal(map[string]any{
		"id": b64.EncodeToString(a.credID), "rawId": b64.EncodeToString(a.credID), "type": "public-key",
		"response": response, "clientExtensionResults": map[string]any{}, "authenticatorAttachment": "platform",
	})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// assertionOptions are the members of POST /approve/{token}/begin's answer
// the tests look at.
type assertionOptions struct {
	PublicKey struct {
		Challenge        string `json:"challenge"`
		RPID             string `json:"rpId"`
		UserVerification string `json:"userVerification"`
		AllowCredentials []struct {
			Type string `json:"type"`
			ID   string `json:"id"`
		} `json:"allowCredentials"`
	} `json:"publicKey"`
}

func parseAssertionOptions(t testing.TB, options []byte) assertionOptions {
	t.Helper()
	var o assertionOptions
	if err := json.Unmarshal(options, &o); err != nil {
		t.Fatalf("assertion options: %v: %s", err, options)
	}
	return o
}

// assert answers the options of POST /approve/{token}/begin with an
// assertion response (the JSON the page posts as "assertion"). It signs
// whatever the options ask, even if its credential is not allowed: the
// service is the one that must refuse.
func (a *softAuthenticator) assert(t testing.TB, options []byte) []byte {
	t.Helper()
	return a.assertChallenge(t, parseAssertionOptions(t, options).PublicKey.Challenge)
}

// assertChallenge signs an assertion over challenge.
func (a *softAuthenticator) assertChallenge(t testing.TB, challenge string) []byte {
	t.Helper()
	if !a.zeroCount {
		a.counter++
	}
	rpHash := sha256.Sum256([]byte(a.rpID))
	auth := append([]byte(nil), rpHash[:]...)
	auth = append(auth, a.flags())
	auth = binary.BigEndian.AppendUint32(auth, a.counter)
	cd := a.clientData(t, "webauthn.get", challenge)
	cdHash := sha256.Sum256(cd)
	digest := sha256.Sum256(append(append([]byte(nil), auth...), cdHash[:]...))
	sig, err := ecdsa.SignASN1(rand.Reader, a.key, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	return a.credentialJSON(t, map[string]any{
		"clientDataJSON":    b64.EncodeToString(cd),
		"authenticatorData": b64.EncodeToString(auth),
		"signature":         b64.EncodeToString(sig),
		"userHandle":        b64.EncodeToString(a.userHandle),
	})
}
