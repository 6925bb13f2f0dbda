// Package canon produces RFC 8785 (JCS) canonical JSON and the digest strings
// Clearance uses everywhere ("sha256:" + 64 lowercase hex).
//
// Callers must only canonicalize JSON that has passed a strict decode
// (internal/strictjson): JCS is defined over I-JSON, which forbids duplicate
// member names and invalid UTF-8.
package canon

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// Profile names the canonicalization and hash used for payload digests.
const Profile = "JCS-SHA256"

// Transform returns the RFC 8785 canonical form of raw JSON in a new slice;
// raw is not modified.
func Transform(raw []byte) ([]byte, error) {
	v := jsontext.Value(bytes.Clone(raw))
	if err := v.Canonicalize(); err != nil {
		return nil, fmt.Errorf("canon: %w", err)
	}
	return v, nil
}

// Marshal encodes v with encoding/json and returns its canonical form.
func Marshal(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("canon: marshal: %w", err)
	}
	return Transform(raw)
}

// Digest returns "sha256:<hex>" of b as given (no canonicalization).
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return FormatDigest(sum)
}

// FormatDigest renders a SHA-256 sum as a digest string.
func FormatDigest(sum [32]byte) string {
	var buf [7 + 64]byte
	copy(buf[:], "sha256:")
	hex.Encode(buf[7:], sum[:])
	return string(buf[:])
}

// DigestJSON canonicalizes raw JSON and returns the digest of the result.
func DigestJSON(raw []byte) (string, error) {
	c, err := Transform(raw)
	if err != nil {
		return "", err
	}
	return Digest(c), nil
}

// DigestValue marshals v, canonicalizes it and returns the digest.
func DigestValue(v any) (string, error) {
	c, err := Marshal(v)
	if err != nil {
		return "", err
	}
	return Digest(c), nil
}

// ParseDigest checks that s is "sha256:" followed by 64 lowercase hex digits
// and returns the raw sum.
func ParseDigest(s string) ([32]byte, error) {
	var sum [32]byte
	hexPart, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(hexPart) != 64 || strings.ToLower(hexPart) != hexPart {
		return sum, fmt.Errorf("canon: %q is not a sha256:<64 lowercase hex> digest", s)
	}
	if _, err := hex.Decode(sum[:], []byte(hexPart)); err != nil {
		return sum, fmt.Errorf("canon: %q: %w", s, err)
	}
	return sum, nil
}

// MaxExactInteger is 2^53: integers up to it print the same in Go and as
// an RFC 8785 (ECMAScript) number, digit for digit.
const MaxExactInteger = 1 << 53

// AppendString appends s, which must be valid UTF-8, as an RFC 8785 string:
// '"' and '\' escaped, control characters as \b \t \n \f \r or \u00xx
// (lower-case hex), everything else (non-ASCII included) as is. It is for
// the writers that produce one fixed record shape directly, bypassing
// Marshal, and are held to Marshal byte for byte by their tests.
func AppendString(buf []byte, s string) []byte {
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		buf = append(buf, s[start:i]...)
		switch c {
		case '"', '\\':
			buf = append(buf, '\\', c)
		case '\b':
			buf = append(buf, '\\', 'b')
		case '\t':
			buf = append(buf, '\\', 't')
		case '\n':
			buf = append(buf, '\\', 'n')
		case '\f':
			buf = append(buf, '\\', 'f')
		case '\r':
			buf = append(buf, '\\', 'r')
		default:
			buf = append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}
