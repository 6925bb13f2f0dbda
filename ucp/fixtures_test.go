package ucp

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated fixtures in testdata")

// generatedFixtures derives, per release, the official ready_for_complete
// example signed by the test merchant key (…-ap2.json) and that envelope
// with a checkout mandate bound to it (…-ap2-mandate.json).
func generatedFixtures(t *testing.T) map[string][]byte {
	out := map[string][]byte{}
	for _, r := range Releases() {
		base := official(t, r)
		withTerms := withMember(t, base, "ap2", map[string]string{
			"merchant_authorization": merchantAuthorization(t, merchantKey(t), merchantKID, base),
		})
		prefix := filepath.Join("testdata", string(r), "checkout-response-"+string(r)+"-ready-for-complete")
		out[prefix+"-ap2.json"] = withTerms
		mandate := buildMandate(t, mandateOpts{checkout: bound(t, withTerms)})
		out[prefix+"-ap2-mandate.json"] = withMember(t, base, "ap2", map[string]string{
			"merchant_authorization": merchantAuthorization(t, merchantKey(t), merchantKID, base),
			"checkout_mandate":       mandate,
		})
	}
	return out
}

// TestGeneratedFixtures keeps the signed fixtures reproducible: run
// go test -run TestGeneratedFixtures -update to rewrite them.
func TestGeneratedFixtures(t *testing.T) {
	for path, want := range generatedFixtures(t) {
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got := readFile(t, path); !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go test -run TestGeneratedFixtures -update", path)
		}
	}
}
