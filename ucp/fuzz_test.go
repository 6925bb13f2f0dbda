package ucp

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/clearancehq/clearance/internal/canon"
)

var knownCodes = map[string]bool{
	CodeUnsupportedRelease: true, CodeInvalidEnvelope: true, CodeInvalidMandate: true,
	CodeInvalidTerms: true, CodePrivateKeyMaterial: true, CodeInvalidKey: true,
}

func wantCoded(t *testing.T, err error) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || !knownCodes[e.Code] || !errors.Is(err, sentinel(e.Code)) {
		t.Fatalf("refusal is not an *Error with a known code: %T %v", err, err)
	}
}

// FuzzParse: Parse never panics and refuses only with a known code; an
// accepted body's Canonical digests to Digest and parses again to the same
// digest; the ap2 checks on it never panic and refuse with known codes.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds: %v", err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{`{}`, `[]`, `{"ucp":{"version":"2026-08-25"}}`, `{"ucp":{"version":1}}`, `{"a":1,"a":2}`, `{"x":1e400}`} {
		f.Add([]byte(s))
	}
	merchant := publicKey(f, merchantKey(f), merchantKID)
	lookup := func(kid string) (MerchantKey, error) {
		k := merchant
		k.KID = kid
		return k, nil
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := Parse(body)
		if err != nil {
			wantCoded(t, err)
			return
		}
		if canon.Digest(c.Canonical) != c.Digest {
			t.Fatal("Digest is not the digest of Canonical")
		}
		again, err := Parse(c.Canonical)
		if err != nil {
			t.Fatalf("canonical form refused: %v", err)
		}
		if again.Digest != c.Digest {
			t.Fatal("canonical form is not a fixed point")
		}
		if err := CheckMandate(c); err != nil {
			wantCoded(t, err)
		}
		if c.Terms != nil {
			if err := VerifyTerms(c, lookup); err != nil {
				wantCoded(t, err)
			}
		}
	})
}
