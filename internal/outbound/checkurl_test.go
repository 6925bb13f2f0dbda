package outbound_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/clearancehq/clearance/internal/outbound"
)

func TestCheckURL(t *testing.T) {
	var (
		ok      error
		invalid = outbound.ErrInvalidURL
		blocked = outbound.ErrBlockedDestination
	)
	long := "https://example.com/" + strings.Repeat("a", outbound.MaxURLLength)
	tests := []struct {
		raw     string
		strict  error // AllowPrivate false
		private error // AllowPrivate true
	}{
		// accepted
		{"https://example.com", ok, ok},
		{"https://example.com/hooks/1?x=y", ok, ok},
		{"HTTPS://Example.COM/a", ok, ok},
		{"https://example.com./a", ok, ok}, // one trailing dot: a fully qualified name
		{"https://example.com:8443/a", ok, ok},
		{"https://example.com:1/", ok, ok},
		{"https://example.com:65535/", ok, ok},
		{"https://xn--bcher-kva.example/", ok, ok}, // punycode
		{"https://under_score.example.com/", ok, ok},
		{"https://8.8.8.8/", ok, ok},
		{"https://8.8.8.8:443/", ok, ok},
		{"https://[2001:4860:4860::8888]/", ok, ok},
		{"https://[2001:4860:4860::8888]:8443/", ok, ok},
		{"https://[::ffff:8.8.8.8]/", ok, ok},
		{"https://a.b.c.d.example.co.uk/", ok, ok},
		{"https://1x.example/", ok, ok},
		{"https://example.123x/", ok, ok}, // a last label that is not a number
		// TLS by default
		{"http://example.com/", invalid, ok},
		{"http://127.0.0.1:8080/", invalid, ok},
		// other schemes
		{"ftp://example.com/", invalid, invalid},
		{"file:///etc/passwd", invalid, invalid},
		{"gopher://example.com/", invalid, invalid},
		{"ws://example.com/", invalid, invalid},
		{"javascript:alert(1)", invalid, invalid},
		{"https:example.com", invalid, invalid},
		{"https:/example.com", invalid, invalid},
		{"//example.com/", invalid, invalid},
		{"/relative", invalid, invalid},
		{"", invalid, invalid},
		{"example.com", invalid, invalid},
		// userinfo and fragment
		{"https://user@example.com/", invalid, invalid},
		{"https://user:pass@example.com/", invalid, invalid},
		{"https://:@example.com/", invalid, invalid},
		{"https://example.com@127.0.0.1/", invalid, invalid},
		{"https://example.com/#frag", invalid, invalid},
		{"https://example.com/#", invalid, invalid},
		// host and port syntax
		{"https:///path", invalid, invalid},
		{"https://:443/", invalid, invalid},
		{"https://example.com:/", invalid, invalid},
		{"https://example.com:0/", invalid, invalid},
		{"https://example.com:65536/", invalid, invalid},
		{"https://example.com:99999/", invalid, invalid},
		{"https://example.com:0443/", invalid, invalid},
		{"https://example.com:+443/", invalid, invalid},
		{"https://example.com:http/", invalid, invalid},
		{"https://exa mple.com/", invalid, invalid},
		{"https://exämple.com/", invalid, invalid}, // non-ASCII: use punycode
		{"https://example..com/", invalid, invalid},
		{"https://example.com../", invalid, invalid},
		{"https://.example.com/", invalid, invalid},
		{"https://-example.com/", invalid, invalid},
		{"https://example-.com/", invalid, invalid},
		{"https://" + strings.Repeat("a", 64) + ".com/", invalid, invalid},
		{"https://ex!ample.com/", invalid, invalid},
		{long, invalid, invalid},
		// percent-encoding and zones
		{"https://%65xample.com/", invalid, invalid},
		{"https://%31%32%37.0.0.1/", invalid, invalid},
		{"https://[fe80::1%25eth0]/", invalid, invalid},
		{"https://[2001:4860:4860::8888%25eth0]/", invalid, invalid},
		{"https://example.com/a%20b", ok, ok}, // in the path it is fine
		// IPv4 in forms some resolvers accept
		{"https://127.1/", invalid, invalid},
		{"https://2130706433/", invalid, invalid},
		{"https://0x7f000001/", invalid, invalid},
		{"https://0x7f.0.0.1/", invalid, invalid},
		{"https://017700000001/", invalid, invalid},
		{"https://example.0x1f/", invalid, invalid},
		{"https://1.2.3.4.5/", invalid, invalid},
		{"https://[127.0.0.1]/", invalid, invalid},
		{"https://[example.com]/", invalid, invalid},
		// IP literals in blocked ranges
		{"https://127.0.0.1/", blocked, ok},
		{"https://127.0.0.1./", blocked, ok}, // trailing dot on a literal
		{"https://10.0.0.1/", blocked, ok},
		{"https://169.254.169.254/latest/meta-data/", blocked, ok},
		{"https://0.0.0.0/", blocked, ok},
		{"https://100.64.0.1/", blocked, ok},
		{"https://[::1]/", blocked, ok},
		{"https://[::]/", blocked, ok},
		{"https://[::ffff:127.0.0.1]/", blocked, ok},
		{"https://[::ffff:7f00:1]/", blocked, ok},
		{"https://[64:ff9b::a9fe:a9fe]/", blocked, ok},
		{"https://[2002:7f00:1::1]/", blocked, ok},
		{"https://[fd00:ec2::254]/", blocked, ok},
		{"https://[fe80::1]:8443/", blocked, ok},
		{"https://[2001::1]/", blocked, ok},
		// obviously local names
		{"https://localhost/", blocked, ok},
		{"https://LOCALHOST:8443/", blocked, ok},
		{"https://localhost./", blocked, ok},
		{"https://api.localhost/", blocked, ok},
		{"https://printer.local/", blocked, ok},
		{"https://metadata.google.internal/", blocked, ok},
		{"https://router.home.arpa/", blocked, ok},
		{"https://approver/", blocked, ok}, // one label: a search-domain name
		{"https://approver./", blocked, ok},
		{"https://notlocalhost.example/", ok, ok},
		{"https://local.example.com/", ok, ok},
	}
	strict := outbound.New(outbound.Options{})
	private := outbound.New(outbound.Options{AllowPrivate: true})
	for _, tt := range tests {
		for _, c := range []struct {
			name   string
			client *outbound.Client
			want   error
		}{{"strict", strict, tt.strict}, {"private", private, tt.private}} {
			u, err := c.client.CheckURL(tt.raw)
			switch {
			case c.want == nil && err != nil:
				t.Errorf("%s CheckURL(%q): %v", c.name, tt.raw, err)
			case c.want == nil && u == nil:
				t.Errorf("%s CheckURL(%q): nil URL", c.name, tt.raw)
			case c.want != nil && !errors.Is(err, c.want):
				t.Errorf("%s CheckURL(%q) = %v, want %v", c.name, tt.raw, err, c.want)
			case c.want != nil && u != nil:
				t.Errorf("%s CheckURL(%q): a URL with an error", c.name, tt.raw)
			}
		}
	}
}

func TestCodeOf(t *testing.T) {
	for _, tt := range []struct {
		err  error
		code string
	}{
		{outbound.ErrInvalidURL, outbound.CodeInvalidURL},
		{outbound.ErrBlockedDestination, outbound.CodeBlockedDestination},
		{outbound.ErrRedirect, outbound.CodeRedirect},
		{outbound.ErrResponseTooLarge, outbound.CodeResponseTooLarge},
		{outbound.ErrUnreachable, outbound.CodeUnreachable},
		{errors.New("other"), ""},
		{nil, ""},
	} {
		if got := outbound.CodeOf(tt.err); got != tt.code {
			t.Errorf("CodeOf(%v) = %q, want %q", tt.err, got, tt.code)
		}
	}
}
