package approval

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"unicode/utf8"
)

// MaxCredentialLength is the longest credential an Endpoint may hold.
const MaxCredentialLength = 4096

// Endpoint is one org's approval service: where it is, the credential
// Clearance presents (bound to that org at the service), and the issuer
// its receipts must carry. String, GoString and Format never print the
// credential (a struct holding an Endpoint in an unexported field is
// printed by reflection, past them: do not log such structs).
type Endpoint struct {
	BaseURL    string // e.g. https://approvals.example.com or https://example.com/approvals
	Credential string // sent as Authorization: Bearer <Credential>
	Issuer     string // the iss of the service's receipts
}

// IsZero reports whether e is the zero Endpoint.
func (e Endpoint) IsZero() bool { return e == Endpoint{} }

// String describes e without its credential.
func (e Endpoint) String() string {
	cred := "unset"
	if e.Credential != "" {
		cred = "set"
	}
	return fmt.Sprintf("approval.Endpoint{BaseURL: %q, Issuer: %q, Credential: %s}", e.BaseURL, e.Issuer, cred)
}

// GoString is String, so %#v does not print the credential either.
func (e Endpoint) GoString() string { return e.String() }

// Format prints String under every verb.
func (e Endpoint) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, e.String()) }

// Validate checks e's shape: BaseURL an absolute http or https URL with a
// host and no userinfo, query or fragment; Credential 1 to
// MaxCredentialLength visible ASCII characters (no spaces: it goes into a
// header); Issuer 1 to MaxURLLength bytes of UTF-8 without control
// characters. Errors wrap ErrInvalidEndpoint. Whether the base URL may be
// reached (TLS, blocked destinations) is the outbound client's rule,
// applied on every call.
func (e Endpoint) Validate() error {
	u, err := url.Parse(e.BaseURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Opaque != "" ||
		u.User != nil || u.RawQuery != "" || strings.ContainsAny(e.BaseURL, "?#") {
		return fail(ErrInvalidEndpoint, "base URL %q is not an absolute http(s) URL without userinfo, query or fragment", truncate(e.BaseURL))
	}
	if len(e.Credential) == 0 || len(e.Credential) > MaxCredentialLength {
		return fail(ErrInvalidEndpoint, "the credential must be 1 to %d characters", MaxCredentialLength)
	}
	for i := 0; i < len(e.Credential); i++ {
		if c := e.Credential[i]; c < 0x21 || c > 0x7e {
			return fail(ErrInvalidEndpoint, "the credential must be visible ASCII without spaces")
		}
	}
	if e.Issuer == "" || len(e.Issuer) > MaxURLLength || !utf8.ValidString(e.Issuer) || strings.ContainsFunc(e.Issuer, isControl) {
		return fail(ErrInvalidEndpoint, "the issuer must be 1 to %d bytes of UTF-8 without control characters", MaxURLLength)
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// base is the base URL without a trailing slash, to which paths are joined.
func (e Endpoint) base() string { return strings.TrimRight(e.BaseURL, "/") }

// Directory finds the approval service of an org.
type Directory interface {
	// Endpoint returns orgID's approval service, or an error wrapping
	// ErrNotConfigured when it has none.
	Endpoint(ctx context.Context, orgID string) (Endpoint, error)
}

// Static is a Directory fixed at startup: Default for every org, except
// the orgs Orgs names. A zero Endpoint means "none": a zero Default leaves
// orgs without an entry unconfigured, and a zero entry in Orgs turns
// approvals off for that org even when Default is set.
type Static struct {
	Default Endpoint
	Orgs    map[string]Endpoint
}

var _ Directory = Static{}

// Endpoint implements Directory.
func (s Static) Endpoint(_ context.Context, orgID string) (Endpoint, error) {
	e, ok := s.Orgs[orgID]
	if !ok {
		e = s.Default
	}
	if e.IsZero() {
		return Endpoint{}, fail(ErrNotConfigured, "org %q has no approval service", truncate(orgID))
	}
	return e, nil
}

// Validate checks every endpoint Static holds (the zero ones mean none):
// a misconfiguration is found at startup, not at the first escalation.
func (s Static) Validate() error {
	if !s.Default.IsZero() {
		if err := s.Default.Validate(); err != nil {
			return fmt.Errorf("default approval service: %w", err)
		}
	}
	for org, e := range s.Orgs {
		if err := checkText("org id", org, true); err != nil {
			return fail(ErrInvalidEndpoint, "%v", err)
		}
		if e.IsZero() {
			continue
		}
		if err := e.Validate(); err != nil {
			return fmt.Errorf("approval service of org %q: %w", org, err)
		}
	}
	return nil
}
