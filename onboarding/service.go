package onboarding

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/mail"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/clearancehq/clearance/admin"
	"github.com/clearancehq/clearance/internal/core"
	imail "github.com/clearancehq/clearance/internal/mail"
	"github.com/clearancehq/clearance/policies"
	"github.com/clearancehq/clearance/signals"
)

// AccountsOrgID is the pseudo-org that holds accounts and sign-up codes.
const AccountsOrgID = "accounts"

// Defaults of Config.
const (
	DefaultCodeTTL     = 10 * time.Minute
	DefaultGrantTTL    = 30 * time.Minute
	DefaultMaxAttempts = 5
	DefaultMaxSends    = 5
	DefaultSendWindow  = time.Hour
)

// Limits of the request fields.
const (
	MaxEmailLen = 254 // RFC 5321's path limit, less the brackets
	MaxNameLen  = 200 // characters, like an org's name
	MaxKeyLen   = 128 // provider_key and workflow_key, in bytes
)

// Config is the feature's settings and the features it orchestrates.
type Config struct {
	// Mailer sends the codes; nil: Start answers 503 MAIL_NOT_CONFIGURED.
	Mailer imail.Mailer
	// Admin creates orgs and issues their credentials.
	Admin *admin.Service
	// Signals makes the bundle's connector.
	Signals *signals.Service
	// PolicyVersion returns the org's active policy version.
	PolicyVersion func(ctx context.Context, orgID string) (string, error)
	// InstallStarter installs the starter policy (SHADOW) for an org with
	// no policy of its own, and does nothing otherwise.
	InstallStarter func(ctx context.Context, orgID string) (policies.InstalledStarter, error)

	CodeTTL     time.Duration // how long a code is good
	GrantTTL    time.Duration // how long an onboarding grant is good
	MaxAttempts int           // wrong tries that burn a code
	MaxSends    int           // codes sent to one address per SendWindow
	SendWindow  time.Duration
	SessionTTL  time.Duration // how long an account session lasts
	// MaxFailures is how many wrong codes an address (sign-up and sign-in
	// together) may give per FailureWindow; at that many it is locked,
	// every verify and send for it 429 TOO_MANY_ATTEMPTS (attempts.go).
	MaxFailures   int
	FailureWindow time.Duration
}

// withDefaults fills the zero settings.
func (c Config) withDefaults() Config {
	if c.CodeTTL <= 0 {
		c.CodeTTL = DefaultCodeTTL
	}
	if c.GrantTTL <= 0 {
		c.GrantTTL = DefaultGrantTTL
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.MaxSends <= 0 {
		c.MaxSends = DefaultMaxSends
	}
	if c.SendWindow <= 0 {
		c.SendWindow = DefaultSendWindow
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.MaxFailures <= 0 {
		c.MaxFailures = DefaultMaxFailures
	}
	if c.FailureWindow <= 0 {
		c.FailureWindow = DefaultFailureWindow
	}
	return c
}

// Service is the onboarding feature.
type Service struct {
	d   core.Deps
	cfg Config
}

// New returns the feature over d with cfg (zero settings: the defaults).
func New(d core.Deps, cfg Config) *Service { return &Service{d: d, cfg: cfg.withDefaults()} }

// Settings returns the settings in force.
func (s *Service) Settings() Config { return s.cfg }

// normalEmail returns the address s names, lowercased, or the error every
// route answers for a bad one: one bare ASCII addr-spec (no display name,
// no comments), at most MaxEmailLen bytes. Lowercasing the whole address
// makes Ada@x and ada@x one address for codes and limits alike.
func normalEmail(s string) (string, error) {
	bad := func() (string, error) {
		return "", core.Invalid(core.CodeInvalidRequest, "owner_email",
			"owner_email must be one e-mail address (ASCII, at most %d bytes), without a display name", MaxEmailLen)
	}
	if s == "" || len(s) > MaxEmailLen {
		return bad()
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return bad()
		}
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name != "" || a.Address != s {
		return bad()
	}
	at := strings.LastIndexByte(s, '@')
	if !dotAtom(s[:at]) || !hostname(s[at+1:]) {
		return bad()
	}
	return strings.ToLower(s), nil
}

// dotAtom reports whether local is an unquoted local part (RFC 5322
// dot-atom): quoted forms are refused, though valid, since no mailbox a
// person signs up with needs them.
func dotAtom(local string) bool {
	if local == "" || local[0] == '.' || local[len(local)-1] == '.' || strings.Contains(local, "..") {
		return false
	}
	for i := 0; i < len(local); i++ {
		c := local[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+/=?^_`{|}~.-", c) >= 0) {
			return false
		}
	}
	return true
}

// hostname reports whether domain is a DNS name of two labels or more,
// each 1 to 63 of [A-Za-z0-9-] without a hyphen at either end, the last
// alphabetic: address literals ([127.0.0.1]) and bare numbers are
// refused, so a sign-up cannot aim the server's mail at an address of the
// caller's choosing.
func hostname(domain string) bool {
	labels := strings.Split(domain, ".")
	if len(labels) < 2 || len(domain) > 253 {
		return false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
	}
	tld := labels[len(labels)-1]
	for i := 0; i < len(tld); i++ {
		if c := tld[i] | 0x20; c < 'a' || c > 'z' {
			return len(tld) >= 4 && strings.HasPrefix(strings.ToLower(tld), "xn--") // an IDN TLD in A-label form
		}
	}
	return len(tld) >= 2
}

// addressKey is the id an address's records are filed under.
func addressKey(email string) string {
	sum := sha256.Sum256([]byte("onboarding/address\x00" + email))
	return hex.EncodeToString(sum[:])
}

// CheckName returns a trimmed display name: 1 to MaxNameLen characters
// without control characters.
func CheckName(field, s string) (string, error) {
	s = strings.TrimSpace(s)
	n := utf8.RuneCountInString(s)
	if n == 0 || n > MaxNameLen || !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool {
		return unicode.IsControl(r) || r == '\u2028' || r == '\u2029'
	}) {
		return "", core.Invalid(core.CodeInvalidRequest, field, "%s must be 1 to %d characters without control characters", field, MaxNameLen)
	}
	return s, nil
}

// newCode returns six uniformly drawn decimal digits.
func newCode(rand io.Reader) (string, error) {
	// 4,294,000,000 is the largest multiple of 10^6 below 2^32: draws at
	// or above it are thrown away, so every code is equally likely.
	const limit = 4_294_000_000
	var b [4]byte
	for {
		if _, err := io.ReadFull(rand, b[:]); err != nil {
			return "", fmt.Errorf("onboarding: random: %w", err)
		}
		if v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]); v < limit {
			return fmt.Sprintf("%06d", v%1_000_000), nil
		}
	}
}

// validCode reports whether s is exactly six ASCII digits: fullwidth and
// other Unicode digits, signs and spaces are not digits here.
func validCode(s string) bool {
	if len(s) != 6 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
