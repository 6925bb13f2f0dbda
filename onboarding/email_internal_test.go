package onboarding

import "testing"

func TestNormalEmail(t *testing.T) {
	for in, want := range map[string]string{
		"Ada@Example.com":             "ada@example.com",
		"a.b+tag@mail.example.co":     "a.b+tag@mail.example.co",
		"o'brien@example.org":         "o'brien@example.org",
		"x@xn--bcher-kva.xn--p1ai":    "x@xn--bcher-kva.xn--p1ai",
		"first_last@sub-1.example.io": "first_last@sub-1.example.io",
	} {
		if got, err := normalEmail(in); err != nil || got != want {
			t.Errorf("normalEmail(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{
		"", "ada", "ada@", "@example.com", "ada@example", "ada@[127.0.0.1]", "ada@127.0.0.1", "ada@1.2",
		"ada@-example.com", "ada@example-.com", "ada@exa_mple.com", "ada@example..com", "ada@.example.com",
		`"ada"@example.com`, `"a b"@example.com`, ".ada@example.com", "ada.@example.com", "a..da@example.com",
		"Ada <ada@example.com>", "<ada@example.com>", "ada@example.com (Ada)", "ada@example.com, bob@example.com",
		"ada@exämple.com", "adä@example.com", "ada@example.com\r\nBcc: x@example.com", "ada @example.com",
		"ada@example.c", "ada@example.123",
	} {
		if got, err := normalEmail(in); err == nil {
			t.Errorf("normalEmail(%q) = %q, want refused", in, got)
		}
	}
}
