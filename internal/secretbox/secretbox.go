// Package secretbox seals the secrets Clearance must use again (callback
// signing secrets, connector secrets) for storage: AES-256-GCM under a key
// derived from the operator's data key, with the record the secret belongs
// to as additional data, so that a sealed value copied into another record
// (another org, another destination) does not open there.
//
// # Contract
//
// Seal returns "v1." followed by base64url (no padding) of a fresh random
// 12-byte nonce and the ciphertext with its tag. Open accepts only that
// form, with the same context, under the same data key; anything else is
// ErrOpen, never a partial plaintext. The data key is any secret of at
// least MinKeyLen bytes; the AES key is HKDF-SHA256 of it, so a key file
// holding text works as well as one holding raw bytes.
//
// MAC is for the secrets Clearance only compares but that are too short
// to store as a plain hash (a 6-digit code has a million values: its
// SHA-256 is reversed at once): HMAC-SHA256 under another key derived from
// the same data key, so a copy of the database alone does not reveal them.
package secretbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// MinKeyLen is the shortest data key New accepts, in bytes.
const MinKeyLen = 32

const (
	prefix    = "v1."
	nonceSize = 12
	hkdfInfo  = "clearance secretbox v1"
	macInfo   = "clearance secretbox mac v1"
)

// Sentinels.
var (
	// ErrKey: a data key too short to seal with.
	ErrKey = errors.New("secretbox: data key too short")
	// ErrOpen: a sealed value that is malformed, sealed under another key
	// or for another context.
	ErrOpen = errors.New("secretbox: cannot open")
)

// Box seals and opens secrets under one data key. It is safe for
// concurrent use.
type Box struct {
	aead   cipher.AEAD
	macKey []byte
}

// New returns a Box keyed by dataKey (at least MinKeyLen bytes).
func New(dataKey []byte) (*Box, error) {
	if len(dataKey) < MinKeyLen {
		return nil, fmt.Errorf("%w: %d bytes, at least %d", ErrKey, len(dataKey), MinKeyLen)
	}
	key, err := hkdf.Key(sha256.New, dataKey, nil, hkdfInfo, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	macKey, err := hkdf.Key(sha256.New, dataKey, nil, macInfo, 32)
	if err != nil {
		return nil, err
	}
	return &Box{aead: aead, macKey: macKey}, nil
}

// MAC returns HMAC-SHA256 of secret for the record named by context, under
// the box's MAC key: equal inputs give equal MACs, so it is stored and
// compared (with hmac.Equal) in place of the secret.
func (b *Box) MAC(secret []byte, context string) []byte {
	m := hmac.New(sha256.New, b.macKey)
	// Length-prefixed context: ("ab", "c") and ("a", "bc") differ.
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(context)))
	m.Write(n[:])
	m.Write([]byte(context))
	m.Write(secret)
	return m.Sum(nil)
}

// Seal encrypts secret for the record named by context (e.g.
// "webhook/<org>/<destination>").
func (b *Box) Seal(secret []byte, context string) (string, error) {
	out := make([]byte, nonceSize, nonceSize+len(secret)+b.aead.Overhead())
	if _, err := rand.Read(out); err != nil {
		return "", fmt.Errorf("secretbox: random: %w", err)
	}
	out = b.aead.Seal(out, out[:nonceSize], secret, []byte(context))
	return prefix + base64.RawURLEncoding.EncodeToString(out), nil
}

// Open decrypts a value Seal returned for the same context.
func (b *Box) Open(sealed, context string) ([]byte, error) {
	rest, ok := strings.CutPrefix(sealed, prefix)
	if !ok {
		return nil, fmt.Errorf("%w: unknown format", ErrOpen)
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(rest)
	if err != nil || len(raw) < nonceSize+b.aead.Overhead() {
		return nil, fmt.Errorf("%w: malformed", ErrOpen)
	}
	plain, err := b.aead.Open(nil, raw[:nonceSize], raw[nonceSize:], []byte(context))
	if err != nil {
		return nil, fmt.Errorf("%w: wrong key or context, or tampered", ErrOpen)
	}
	return plain, nil
}
