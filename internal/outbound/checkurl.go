package outbound

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// MaxURLLength is the longest URL CheckURL accepts, in bytes.
const MaxURLLength = 2048

// localSuffixes are the name suffixes that never name a public service:
// RFC 6761 localhost, RFC 6762 multicast DNS, ICANN's private-use
// .internal (2024) and RFC 8375 home networks.
var localSuffixes = []string{".localhost", ".local", ".internal", ".home.arpa"}

// CheckURL checks raw as the URL of a destination registered now and used
// later, and returns it parsed. It must be an absolute URL of at most
// MaxURLLength bytes with scheme https (http too when AllowPrivate), a host,
// an optional port from 1 to 65535, no userinfo and no fragment. The host
// is an IP literal (IPv6 in brackets, without a zone) or an ASCII DNS name
// (one trailing dot allowed); percent-encoding in the authority, non-ASCII
// names and names whose last label is numeric (127.1, 0x7f.1, 2130706433:
// IPv4 in the forms some resolvers accept) are ErrInvalidURL.
//
// Unless AllowPrivate, an IP literal in a blocked range (Blocked) and an
// obviously local name are ErrBlockedDestination: a name of one label
// (resolved through search domains to internal hosts), localhost and
// *.localhost, *.local, *.internal and *.home.arpa. That a name passes says
// nothing about where it resolves: Do judges the resolved address again at
// dial time.
func (c *Client) CheckURL(raw string) (*url.URL, error) {
	return checkURL(raw, c.allowPrivate)
}

func checkURL(raw string, allowPrivate bool) (*url.URL, error) {
	if len(raw) > MaxURLLength {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrInvalidURL, MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidURL, unwrapURLError(err))
	}
	if !u.IsAbs() || u.Opaque != "" || !strings.HasPrefix(raw[len(u.Scheme)+1:], "//") {
		return nil, fmt.Errorf("%w: not an absolute URL with an authority", ErrInvalidURL)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !allowPrivate {
			return nil, fmt.Errorf("%w: scheme http: TLS is required (https)", ErrInvalidURL)
		}
	default:
		return nil, fmt.Errorf("%w: scheme %q, want https", ErrInvalidURL, u.Scheme)
	}
	authority := raw[len(u.Scheme)+3:]
	if i := strings.IndexAny(authority, "/?#"); i >= 0 {
		authority = authority[:i]
	}
	if u.User != nil || strings.Contains(authority, "@") {
		return nil, fmt.Errorf("%w: userinfo is not allowed", ErrInvalidURL)
	}
	if strings.Contains(raw, "#") {
		return nil, fmt.Errorf("%w: a fragment is not allowed", ErrInvalidURL)
	}
	if strings.Contains(authority, "%") {
		return nil, fmt.Errorf("%w: percent-encoding (or an IPv6 zone) in the host", ErrInvalidURL)
	}
	if strings.HasSuffix(u.Host, ":") {
		return nil, fmt.Errorf("%w: empty port", ErrInvalidURL)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 || (len(p) > 1 && p[0] == '0') {
			return nil, fmt.Errorf("%w: port %q", ErrInvalidURL, p)
		}
	}
	host := u.Hostname()
	if host == "" {
		return nil, fmt.Errorf("%w: no host", ErrInvalidURL)
	}
	if strings.HasPrefix(u.Host, "[") {
		addr, err := netip.ParseAddr(host)
		if err != nil || !addr.Is6() {
			return nil, fmt.Errorf("%w: host %q is not an IPv6 address", ErrInvalidURL, host)
		}
		return checkAddr(u, addr, allowPrivate)
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		return checkAddr(u, addr, allowPrivate)
	}
	name, err := checkName(host)
	if err != nil {
		return nil, err
	}
	if addr, err := netip.ParseAddr(name); err == nil { // "192.0.2.1." and the like
		return checkAddr(u, addr, allowPrivate)
	}
	if !allowPrivate && localName(name) {
		return nil, fmt.Errorf("%w: host %q is a local name", ErrBlockedDestination, host)
	}
	return u, nil
}

func checkAddr(u *url.URL, addr netip.Addr, allowPrivate bool) (*url.URL, error) {
	if !allowPrivate && Blocked(addr) {
		return nil, fmt.Errorf("%w: address %s", ErrBlockedDestination, addr)
	}
	return u, nil
}

// checkName checks a DNS host name and returns it lower-cased without its
// trailing dot.
func checkName(host string) (string, error) {
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if len(name) == 0 || len(name) > 253 {
		return "", fmt.Errorf("%w: host name %q is empty or longer than 253 bytes", ErrInvalidURL, host)
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if len(l) == 0 || len(l) > 63 {
			return "", fmt.Errorf("%w: host name %q has an empty label or one longer than 63 bytes", ErrInvalidURL, host)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("%w: host name %q: use ASCII letters, digits, '-' and '_' (punycode for other scripts)", ErrInvalidURL, host)
			}
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return "", fmt.Errorf("%w: host name %q has a label that starts or ends with '-'", ErrInvalidURL, host)
		}
	}
	if last := labels[len(labels)-1]; numeric(last) {
		if _, err := netip.ParseAddr(name); err != nil {
			return "", fmt.Errorf("%w: host %q looks like an IPv4 address in a non-standard form", ErrInvalidURL, host)
		}
	}
	return name, nil
}

// numeric reports whether a label would be read as a number by the WHATWG
// URL host parser (decimal, or hexadecimal with 0x): such a last label makes
// the whole host an IPv4 address to some parsers and resolvers.
func numeric(l string) bool {
	if rest, ok := strings.CutPrefix(l, "0x"); ok {
		l = rest
		for i := 0; i < len(l); i++ {
			if !(l[i] >= '0' && l[i] <= '9' || l[i] >= 'a' && l[i] <= 'f') {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(l); i++ {
		if l[i] < '0' || l[i] > '9' {
			return false
		}
	}
	return true
}

func localName(name string) bool {
	if !strings.Contains(name, ".") || name == "localhost" {
		return true
	}
	for _, s := range localSuffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}
