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
	"math"
	"strconv"
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

// AppendNumber appends lit, which must be one valid JSON number literal, in
// its RFC 8785 form, as Transform writes it: an integer literal shorter
// than 16 characters as is, -0 as 0, anything else as the ECMAScript form
// of its nearest float64 (beyond the float64 range, the largest float64).
func AppendNumber(buf, lit []byte) []byte {
	if isPlainDecimal(lit) {
		return append(buf, lit...)
	}
	v, _ := strconv.ParseFloat(string(lit), 64)
	switch {
	case v == 0:
		v = 0 // -0 is written 0
	case math.IsInf(v, 1):
		v = math.MaxFloat64
	case math.IsInf(v, -1):
		v = -math.MaxFloat64
	}
	return appendFloat(buf, v)
}

// isPlainDecimal reports whether the JSON number lit is its own canonical
// form without parsing it: an integer shorter than 16 characters (exact in
// a float64) but -0, or a decimal fraction without exponent or trailing
// zero, of at least 1e-6 and at most 15 significant digits. Distinct
// decimals of 15 digits or fewer are distinct float64s, so no shorter
// digits round-trip: they are the shortest form ECMAScript writes.
func isPlainDecimal(lit []byte) bool {
	digits, leadingZeros := 0, 0 // significant digits; zeros before the first nonzero one
	point := -1
	for i, c := range lit {
		switch {
		case c == '.':
			point = i
		case c == 'e' || c == 'E':
			return false
		case c == '-':
		case c == '0' && digits == 0:
			leadingZeros++
		default:
			digits++
		}
	}
	if point < 0 {
		// 16: len("9007199254740992"), 2^53.
		return len(lit) < 16 && string(lit) != "-0"
	}
	// A fraction: the zeros before its first nonzero digit, bar the integer
	// part's 0, must be fewer than 6 (0.000001 is 1e-6; 0.0000001 is 1e-7).
	return digits > 0 && digits <= 15 && leadingZeros <= 6 && lit[len(lit)-1] != '0'
}

// appendFloat writes v as ECMAScript's Number::toString does: the
// shortest digits that round-trip, in exponent form below 1e-6 and from
// 1e21 on.
func appendFloat(buf []byte, v float64) []byte {
	format := byte('f')
	if abs := math.Abs(v); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	buf = strconv.AppendFloat(buf, v, format, -1, 64)
	if format == 'e' {
		// Go writes e-07 where ECMAScript writes e-7.
		if n := len(buf); n >= 4 && buf[n-4] == 'e' && buf[n-3] == '-' && buf[n-2] == '0' {
			buf[n-2] = buf[n-1]
			buf = buf[:n-1]
		}
	}
	return buf
}
