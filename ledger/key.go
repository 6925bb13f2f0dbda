package ledger

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"io"
	"math/big"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"
)

// algEd25519 is the signed-note algorithm byte of Ed25519 keys.
const algEd25519 = 1

// Key is the ledger key: the Ed25519 key that signs every org's checkpoints,
// in the C2SP signed-note key format. It is dedicated to the ledger (never
// a grant key) and implements note.Signer, so it can be passed to Seal.
//
// Formatting a Key (%v, %+v, %#v, String) prints only its verifier key;
// the seed comes out only through Seed and PrivateKey.
type Key struct {
	name string
	hash uint32
	priv ed25519.PrivateKey
	vkey string
}

var _ note.Signer = (*Key)(nil)

// NewKey returns the ledger key with the given note key name and 32-byte
// Ed25519 seed. The name identifies the key in signature lines: non-empty,
// valid UTF-8, no spaces and no '+' (for example "clearance.example/ledger").
func NewKey(name string, seed []byte) (*Key, error) {
	if !validKeyName(name) {
		return nil, fmt.Errorf("%w: key name %q (non-empty, no spaces, no '+')", ErrInvalidKey, name)
	}
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: seed is %d bytes, want %d", ErrInvalidKey, len(seed), ed25519.SeedSize)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	vkey, err := note.NewEd25519VerifierKey(name, priv.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidKey, err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidKey, err)
	}
	return &Key{name: name, hash: v.KeyHash(), priv: priv, vkey: vkey}, nil
}

// GenerateKey returns a new ledger key named name, its seed read from rand
// (crypto/rand.Reader in production; a fixed reader gives a fixed key).
func GenerateKey(rand io.Reader, name string) (*Key, error) {
	seed := make([]byte, ed25519.SeedSize)
	if _, err := io.ReadFull(rand, seed); err != nil {
		return nil, fmt.Errorf("ledger: generate key: %w", err)
	}
	return NewKey(name, seed)
}

// ParseKey reads a private key in the signed-note format
// "PRIVATE+KEY+<name>+<hash>+<base64>", as PrivateKey writes it and as
// golang.org/x/mod/sumdb/note.GenerateKey produces it.
func ParseKey(private string) (*Key, error) {
	if _, err := note.NewSigner(private); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidKey, err)
	}
	parts := strings.Split(private, "+")
	if len(parts) != 5 {
		return nil, fmt.Errorf("%w: malformed private key", ErrInvalidKey)
	}
	raw, err := base64.StdEncoding.DecodeString(parts[4])
	if err != nil || len(raw) != 1+ed25519.SeedSize || raw[0] != algEd25519 {
		return nil, fmt.Errorf("%w: malformed private key", ErrInvalidKey)
	}
	return NewKey(parts[2], raw[1:])
}

// Name implements note.Signer: the key name.
func (k *Key) Name() string { return k.name }

// KeyHash implements note.Signer.
func (k *Key) KeyHash() uint32 { return k.hash }

// Sign implements note.Signer.
func (k *Key) Sign(msg []byte) ([]byte, error) { return ed25519.Sign(k.priv, msg), nil }

// VerifierKey returns the public verifier key, "<name>+<hash>+<base64>":
// what auditors need to check checkpoints offline (VerifyCheckpoint).
func (k *Key) VerifierKey() string { return k.vkey }

// Seed returns a copy of the 32-byte Ed25519 seed. Keep it secret.
func (k *Key) Seed() []byte { return append([]byte(nil), k.priv.Seed()...) }

// PrivateKey returns the key in the signed-note private format
// "PRIVATE+KEY+<name>+<hash>+<base64>", which ParseKey reads. Keep it secret.
func (k *Key) PrivateKey() string {
	raw := append([]byte{algEd25519}, k.priv.Seed()...)
	return fmt.Sprintf("PRIVATE+KEY+%s+%08x+%s", k.name, k.hash, base64.StdEncoding.EncodeToString(raw))
}

// String returns the verifier key; never the seed.
func (k *Key) String() string { return "ledger.Key(" + k.vkey + ")" }

// GoString is String, so %#v does not print the seed either.
func (k *Key) GoString() string { return k.String() }

// Format prints String for every verb.
func (k *Key) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, k.String()) }

// validKeyName is note's rule for key names.
func validKeyName(name string) bool {
	return name != "" && utf8.ValidString(name) && strings.IndexFunc(name, unicode.IsSpace) < 0 && !strings.Contains(name, "+")
}

// parseVerifier parses a verifier key and refuses what note.NewVerifier
// accepts but we must not: a public key that is a low-order point (the
// identity among them verifies forged signatures).
func parseVerifier(vkey string) (note.Verifier, error) {
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, fmt.Errorf("%w: verifier key: %v", ErrInvalidKey, err)
	}
	_, rest, _ := strings.Cut(vkey, "+")
	_, key64, _ := strings.Cut(rest, "+")
	raw, err := base64.StdEncoding.DecodeString(key64)
	if err != nil || len(raw) != 1+ed25519.PublicKeySize || raw[0] != algEd25519 {
		return nil, fmt.Errorf("%w: verifier key is not an Ed25519 key", ErrInvalidKey)
	}
	if lowOrder(raw[1:]) {
		return nil, fmt.Errorf("%w: verifier key is a low-order Ed25519 point", ErrInvalidKey)
	}
	return v, nil
}

var (
	fieldP = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	// lowOrderY are the y-coordinates of the eight points of small order of
	// edwards25519: 1 (the identity), p-1, 0 and ±c. Every encoding whose y
	// reduces to one of them is a low-order point or no point at all. (The
	// same rule as grant.ValidatePublicKey; ledger may not import grant.)
	lowOrderY = func() []*big.Int {
		c, _ := new(big.Int).SetString("05fc536d880238b13933c6d305acdfd5f098eff289f4c345b027b2c28f95e826", 16)
		return []*big.Int{big.NewInt(0), big.NewInt(1), new(big.Int).Sub(fieldP, big.NewInt(1)), c, new(big.Int).Sub(fieldP, c)}
	}()
)

// lowOrder reports whether the 32-byte encoding pub decodes to a point of
// small order, in any (also non-canonical) encoding.
func lowOrder(pub []byte) bool {
	be := make([]byte, len(pub))
	for i, b := range pub {
		be[len(pub)-1-i] = b
	}
	be[0] &= 0x7f // drop the sign bit of x
	y := new(big.Int).Mod(new(big.Int).SetBytes(be), fieldP)
	for _, w := range lowOrderY {
		if y.Cmp(w) == 0 {
			return true
		}
	}
	return false
}
