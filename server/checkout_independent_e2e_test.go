package server_test

// A merchant terms signature made by an independent implementation:
// Python's cryptography package generates the P-256 key and signs the
// checkout, so that what Clearance verifies is not only what Go's own
// signing code produces. Skipped when python3 or the package is missing,
// unless CLEARANCE_REQUIRE_PYTHON=1.

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// requirePythonEnv makes a missing python3 or cryptography package a
// failure instead of a skip.
const requirePythonEnv = "CLEARANCE_REQUIRE_PYTHON"

// pythonSigner generates a P-256 key with cryptography, signs
// b64url(header) "." b64url(payload) (the payload read from argv[1], the
// kid argv[2]) with ES256, turns the DER signature into raw R||S and
// prints the public JWK, the detached JWS and, for a negative case, the
// same JWS with the DER signature left as it is.
const pythonSigner = `
import base64, json, sys
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode("ascii")

with open(sys.argv[1], "rb") as f:
    payload = f.read()
kid = sys.argv[2]

key = ec.generate_private_key(ec.SECP256R1())
pub = key.public_key().public_numbers()
jwk = {"kty": "EC", "crv": "P-256", "x": b64url(pub.x.to_bytes(32, "big")), "y": b64url(pub.y.to_bytes(32, "big"))}

header = b64url(json.dumps({"alg": "ES256", "kid": kid}, separators=(",", ":")).encode("utf-8"))
signing_input = (header + "." + b64url(payload)).encode("ascii")
der = key.sign(signing_input, ec.ECDSA(hashes.SHA256()))
r, s = decode_dss_signature(der)
raw = r.to_bytes(32, "big") + s.to_bytes(32, "big")

print(json.dumps({"jwk": jwk, "jws": header + ".." + b64url(raw), "jws_der": header + ".." + b64url(der)}))
`

// python3 returns the interpreter when it can import cryptography; it
// skips t otherwise (fails it under CLEARANCE_REQUIRE_PYTHON=1).
func python3(t *testing.T) string {
	t.Helper()
	missing := func(format string, args ...any) string {
		t.Helper()
		if os.Getenv(requirePythonEnv) == "1" {
			t.Fatalf(format+" ("+requirePythonEnv+"=1)", args...)
		}
		t.Skipf(format, args...)
		return ""
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		return missing("python3 not found: %v", err)
	}
	if out, err := exec.Command(py, "-c", "import cryptography").CombinedOutput(); err != nil {
		return missing("python3 cannot import cryptography: %v: %s", err, out)
	}
	return py
}

func TestCheckoutE2EIndependentSigner(t *testing.T) {
	t.Parallel()
	py := python3(t)
	x := newExecEnv(t, checkoutBundle)
	const kid = "py-merchant"

	// The payload the merchant signs: the RFC 8785 form of the envelope
	// without ap2, computed here with internal/canon.
	m := ucpCheckout(t, "chk_py_1", 2, 1500)
	payload := termsPayload(t, m)
	dir := t.TempDir()
	payloadFile, script := filepath.Join(dir, "payload.json"), filepath.Join(dir, "sign.py")
	if err := os.WriteFile(payloadFile, payload, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte(pythonSigner), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(py, script, payloadFile, kid)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python signer: %v: %s", err, stderr.String())
	}
	var signed struct {
		JWK    map[string]any `json:"jwk"`
		JWS    string         `json:"jws"`
		JWSDER string         `json:"jws_der"`
	}
	if err := json.Unmarshal(out, &signed); err != nil {
		t.Fatalf("python signer output %q: %v", out, err)
	}

	// Go's crypto/ecdsa agrees with the signature before Clearance sees it.
	header, sig, ok := strings.Cut(signed.JWS, "..")
	if !ok {
		t.Fatalf("not a detached JWS: %q", signed.JWS)
	}
	coord := func(name string) *big.Int {
		s, _ := signed.JWK[name].(string)
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || len(b) != 32 {
			t.Fatalf("JWK %s %q: %v", name, s, err)
		}
		return new(big.Int).SetBytes(b)
	}
	pub := &ecdsa.PublicKey{Curve: elliptic.P256(), X: coord("x"), Y: coord("y")}
	rawSig, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || len(rawSig) != 64 {
		t.Fatalf("signature %q: %v", sig, err)
	}
	digest := sha256.Sum256([]byte(header + "." + b64(payload)))
	if !ecdsa.Verify(pub, digest[:], new(big.Int).SetBytes(rawSig[:32]), new(big.Int).SetBytes(rawSig[32:])) {
		t.Fatal("crypto/ecdsa does not verify the python signature")
	}

	// Clearance verifies it with the registered key.
	x.registerMerchant(t, x.o.Key, kid, signed.JWK).want(t, http.StatusCreated)
	m["ap2"] = map[string]any{"merchant_authorization": signed.JWS}
	ok1 := x.authorizeCheckout(t, x.o.Key, checkoutBody(t, m), nil)
	wantCheckoutAnswer(t, ok1, http.StatusOK, "ALLOW", "VERIFIED")
	if ok1.str("terms.kid") != kid || ok1.str("checkout_id") != "chk_py_1" {
		t.Fatalf("authorize: %s", ok1)
	}

	// A tampered copy, and the DER signature python made before the
	// conversion: refused before any policy, nothing written.
	head := x.head(x.o.Key)
	tampered := ucpCheckout(t, "chk_py_1", 2, 1500)
	tampered["totals"].([]any)[2].(map[string]any)["amount"] = 1
	tampered["ap2"] = map[string]any{"merchant_authorization": signed.JWS}
	der := ucpCheckout(t, "chk_py_2", 2, 1500)
	der["ap2"] = map[string]any{"merchant_authorization": signed.JWSDER}
	for name, env := range map[string]map[string]any{"tampered": tampered, "DER signature": der} {
		r := x.authorizeCheckout(t, x.o.Key, checkoutBody(t, env), nil).
			wantProblem(t, http.StatusBadRequest, "UCP_MERCHANT_AUTHORIZATION_INVALID")
		if r.str("errors.0.field") != "/ap2/merchant_authorization" {
			t.Fatalf("%s: %s", name, r)
		}
	}
	x.wantNoWrite(t, x.o.Key, head, "refused python-signed envelopes")
}
