package core

import (
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
)

// IDs mints the identifiers of records from one source of randomness.
type IDs struct{ Rand io.Reader }

// New returns a time-ordered UUID (v7), or a 503-kind error when the
// randomness fails.
func (g IDs) New() (string, error) {
	id, err := uuid.NewV7FromReader(g.Rand)
	if err != nil {
		return "", Unavailable("id generation", err)
	}
	return id.String(), nil
}

// ValidID reports whether s is a canonical lowercase UUID.
func ValidID(s string) bool {
	if len(s) != 36 {
		return false
	}
	u, err := uuid.Parse(s)
	return err == nil && u.String() == s
}

// MaxKeyLength bounds Idempotency-Key, correlation and request ids.
const MaxKeyLength = 255

// ValidToken is the one rule of the tokens a client names things with:
// Idempotency-Key, correlation and request ids, and an intent's intent_id,
// nonce and concurrency_scope. s must be 1 to MaxKeyLength bytes of visible
// ASCII (0x21 to 0x7E): no space, no control character and nothing beyond
// ASCII, where a zero-width space, a bidi override or a homoglyph would
// make two tokens that read the same.
func ValidToken(s string) bool {
	if s == "" || len(s) > MaxKeyLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// ValidText reports whether s is UTF-8 without control characters (C0, DEL
// or C1, as unicode.IsControl says).
func ValidText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl)
}

// ValidName reports whether s is 1 to max bytes of ValidText.
func ValidName(s string, max int) bool { return s != "" && len(s) <= max && ValidText(s) }
