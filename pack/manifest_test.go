package pack_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/clearancehq/clearance/pack"
)

// A manifest alone: its hash, its shape and its checkpoint are checked,
// and what only the files could show is named as skipped.
func TestVerifyManifest(t *testing.T) {
	f := newFixture(t, 5)
	for _, format := range []pack.Format{pack.FormatJSON, pack.FormatCSV} {
		bundle, res := f.build(t, format, true)
		opts := f.opts(bundle, res)
		opts.Key, opts.Signature = nil, ""
		rep, err := pack.VerifyManifest(res.ManifestBytes, opts)
		if err != nil || !rep.Valid || !slices.Contains(rep.Checked, "checkpoint signature") ||
			!slices.ContainsFunc(rep.Skipped, func(s string) bool { return strings.HasPrefix(s, "files, rows") }) {
			t.Fatalf("%s manifest: %+v, %v", format, rep, err)
		}

		for _, c := range []struct {
			name     string
			manifest []byte
			opts     pack.VerifyOptions
			reason   string
		}{
			{"another ledger key", res.ManifestBytes, func() pack.VerifyOptions { o := opts; o.LedgerVerifierKey = ledgerKey(t, 9).VerifierKey(); return o }(), pack.ReasonCheckpointInvalid},
			{"another manifest hash", res.ManifestBytes, func() pack.VerifyOptions { o := opts; o.ManifestSHA256 = pack.Digest([]byte("x")); return o }(), pack.ReasonManifestHash},
			{"not JSON", []byte("{"), pack.VerifyOptions{}, pack.ReasonManifestInvalid},
			{"another pack version", bytes.Replace(res.ManifestBytes, []byte(pack.PackVersion), []byte("clearance.validation-pack/9"), 1), pack.VerifyOptions{}, pack.ReasonManifestInvalid},
		} {
			rep, err := pack.VerifyManifest(c.manifest, c.opts)
			if err == nil || rep.Valid || rep.Problems[0].Reason != c.reason {
				t.Errorf("%s %s: %+v, %v; want %s", format, c.name, rep.Problems, err, c.reason)
			}
		}
	}
}
