package pack

import (
	"github.com/go-json-experiment/json"
)

// VerifyManifest checks a pack's manifest alone (manifest.json of a zip, or
// the "manifest" member of a JSON pack): its exact bytes against
// manifest_sha256 when given, its shape, and its ledger anchor — the
// checkpoint's signature by the ledger key and that the checkpoint names
// the anchored size and root. The files it lists are not there to check:
// Report.Skipped says so. It answers like Verify.
func VerifyManifest(manifest []byte, opts VerifyOptions) (Report, error) {
	v := &verifier{opts: opts, rep: Report{Problems: []Problem{}, Checked: []string{}, Skipped: []string{}}}
	v.rep.ManifestSHA256 = Digest(manifest)
	v.skipped("bundle_sha256: a manifest alone")
	if want := opts.ManifestSHA256; want != "" {
		v.checked("manifest_sha256")
		if v.rep.ManifestSHA256 != want {
			v.problem(ReasonManifestHash, "", "the manifest is %s, the export recorded %s", v.rep.ManifestSHA256, want)
		}
	} else {
		v.skipped("manifest_sha256: no recorded hash given")
	}
	if err := json.Unmarshal(manifest, &v.m, json.RejectUnknownMembers(true)); err != nil {
		v.problem(ReasonManifestInvalid, "", "the manifest does not decode: %v", err)
	} else {
		container := FormatCSV
		if v.m.Format == FormatJSON {
			container = FormatJSON
		}
		if v.checkManifest(container) {
			v.rep.Format, v.rep.Manifest = v.m.Format, &v.m
			v.checked("manifest shape")
			v.checkLedger(nil)
			v.skipped("files, rows and ledger completeness: a manifest alone; verify the whole pack for them")
		}
	}
	v.rep.Valid = len(v.rep.Problems) == 0
	if !v.rep.Valid {
		return v.rep, &VerifyError{Problems: v.rep.Problems}
	}
	return v.rep, nil
}
