package pack_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/pack"
)

// Every format, with and without events, builds a pack that verifies
// against everything the service records, and its files hold what they say.
func TestExportBuildAndVerifyEveryFormat(t *testing.T) {
	f := newFixture(t, 20)
	for _, format := range []pack.Format{pack.FormatJSON, pack.FormatCSV, pack.FormatPDF} {
		for _, events := range []bool{true, false} {
			t.Run(string(format)+map[bool]string{true: "+events", false: ""}[events], func(t *testing.T) {
				bundle, res := f.build(t, format, events)
				rep, err := pack.Verify(bundle, f.opts(bundle, res))
				if err != nil || !rep.Valid {
					t.Fatalf("verify: %v %+v", err, rep.Problems)
				}
				if rep.ManifestSHA256 != res.ManifestSHA256 || rep.Format != format {
					t.Errorf("report %+v", rep)
				}
				m := res.Manifest
				if m.Counts.Decisions != len(f.decisions) || m.Ledger.Size != uint64(len(f.entries)) || !m.Ledger.Signed {
					t.Errorf("manifest counts %+v ledger %+v", m.Counts, m.Ledger)
				}
				names, data := files(t, bundle)
				wantNames := map[pack.Format][]string{
					pack.FormatJSON: {"events", "decisions", "grants", "workflows", "manifest"},
					pack.FormatCSV:  {"events.csv", "decisions.csv", "grants.csv", "workflows.csv", "manifest.json"},
					pack.FormatPDF:  {"events.csv", "decisions.csv", "grants.csv", "workflows.csv", "report.pdf", "manifest.json"},
				}[format]
				if !events {
					wantNames = slices.DeleteFunc(slices.Clone(wantNames), func(n string) bool {
						return strings.HasPrefix(n, "events") || strings.HasPrefix(n, "grants") || strings.HasPrefix(n, "workflows")
					})
				}
				if !slices.Equal(names, wantNames) {
					t.Fatalf("files %v, want %v", names, wantNames)
				}
				switch format {
				case pack.FormatJSON:
					var rows []pack.Decision
					if err := json.Unmarshal(data["decisions"], &rows); err != nil || len(rows) != len(f.decisions) || rows[3] != f.decisions[3] {
						t.Errorf("decisions member: %v, %d rows", err, len(rows))
					}
					if pack.Digest(data["manifest"]) != res.ManifestSHA256 {
						t.Error("manifest_sha256 is not the digest of the manifest member")
					}
				default:
					recs, err := csv.NewReader(bytes.NewReader(data["decisions.csv"])).ReadAll()
					if err != nil || len(recs) != len(f.decisions)+1 || recs[0][0] != "ledger_seq" || recs[1][2] != f.decisions[0].DossierID {
						t.Errorf("decisions.csv: %v, %d records", err, len(recs))
					}
					if pack.Digest(data["manifest.json"]) != res.ManifestSHA256 {
						t.Error("manifest_sha256 is not the digest of manifest.json")
					}
					if events {
						recs, _ := csv.NewReader(bytes.NewReader(data["events.csv"])).ReadAll()
						if len(recs) != len(f.entries)+1 {
							t.Errorf("events.csv has %d records, want %d", len(recs), len(f.entries)+1)
						}
					}
				}
				if format == pack.FormatPDF {
					pages, err := pack.CheckPDF(data["report.pdf"])
					if err != nil || pages < 1 {
						t.Errorf("report.pdf: %d pages, %v", pages, err)
					}
				}
			})
		}
	}
}

// A pack of the same input is the same bytes.
func TestExportBuildIsDeterministic(t *testing.T) {
	f := newFixture(t, 30)
	for _, format := range []pack.Format{pack.FormatJSON, pack.FormatCSV, pack.FormatPDF} {
		a, _ := f.build(t, format, true)
		b, _ := f.build(t, format, true)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two builds differ", format)
		}
	}
}

// The report lists at most MaxReportRows decisions and stays small.
func TestExportReportIsBounded(t *testing.T) {
	f := newFixture(t, pack.MaxReportRows+300)
	bundle, res := f.build(t, pack.FormatPDF, true)
	_, data := files(t, bundle)
	pages, err := pack.CheckPDF(data["report.pdf"])
	if err != nil {
		t.Fatal(err)
	}
	if pages < 2 || pages > 20 {
		t.Errorf("report.pdf has %d pages for %d decisions", pages, res.Manifest.Counts.Decisions)
	}
	if n := len(data["report.pdf"]); n > 1<<20 {
		t.Errorf("report.pdf is %d bytes", n)
	}
}

// Tampering with a pack is found, with the reason.
func TestExportTamperedPacksFailWithTheReason(t *testing.T) {
	f := newFixture(t, 12)
	type edit func(t *testing.T, bundle []byte) []byte
	for _, c := range []struct {
		name    string
		format  pack.Format
		noOpts  bool // verify with no recorded hashes or keys: only what the pack proves itself
		edit    edit
		reasons []string // each must be reported
	}{
		{name: "a flipped byte", format: pack.FormatCSV, edit: func(t *testing.T, b []byte) []byte {
			b[len(b)/2] ^= 0x01
			return b
		}, reasons: []string{pack.ReasonBundleHash, pack.ReasonSignature}},
		{name: "a flipped byte in a JSON pack", format: pack.FormatJSON, edit: func(t *testing.T, b []byte) []byte {
			i := bytes.Index(b, []byte(`"outcome":"ALLOW"`))
			copy(b[i:], `"outcome":"BLOCK"`)
			return b
		}, reasons: []string{pack.ReasonBundleHash, pack.ReasonSignature, pack.ReasonFileHash, pack.ReasonCount, pack.ReasonWorkflows}},
		{name: "the manifest edited", format: pack.FormatJSON, edit: func(t *testing.T, b []byte) []byte {
			return bytes.Replace(b, []byte(`"include_events": true`), []byte(`"include_events": false`), 1)
		}, reasons: []string{pack.ReasonBundleHash, pack.ReasonSignature, pack.ReasonManifestHash, pack.ReasonManifestInvalid}},
		{name: "the manifest's decision count edited", format: pack.FormatCSV, edit: func(t *testing.T, b []byte) []byte {
			names, data := files(t, b)
			data["manifest.json"] = bytes.Replace(data["manifest.json"], []byte(`"decisions": 12,`), []byte(`"decisions": 11,`), 1)
			return repack(t, b, names, data, false)
		}, reasons: []string{pack.ReasonBundleHash, pack.ReasonSignature, pack.ReasonManifestHash, pack.ReasonCount}},
		{name: "a decision row removed, hashes recomputed", format: pack.FormatCSV, noOpts: true, edit: func(t *testing.T, b []byte) []byte {
			names, data := files(t, b)
			lines := strings.SplitAfter(string(data["decisions.csv"]), "\n")
			data["decisions.csv"] = []byte(strings.Join(append(lines[:3:3], lines[4:]...), ""))
			return repack(t, b, names, data, true)
		}, reasons: []string{pack.ReasonCount, pack.ReasonDecisionMissing}},
		{name: "a decision's outcome changed, hashes recomputed", format: pack.FormatJSON, noOpts: true, edit: func(t *testing.T, b []byte) []byte {
			names, data := files(t, b)
			data["decisions"] = bytes.Replace(data["decisions"], []byte(`"outcome":"BLOCK"`), []byte(`"outcome":"ALLOW"`), 1)
			return repack(t, b, names, data, true)
		}, reasons: []string{pack.ReasonCount, pack.ReasonWorkflows}},
		{name: "a decision's digest changed, hashes recomputed", format: pack.FormatCSV, noOpts: true, edit: func(t *testing.T, b []byte) []byte {
			names, data := files(t, b)
			data["decisions.csv"] = bytes.Replace(data["decisions.csv"], []byte(f.decisions[5].DossierDigest), []byte(f.decisions[6].DossierDigest), 1)
			return repack(t, b, names, data, true)
		}, reasons: []string{pack.ReasonDecisionLedger}},
		{name: "an event rewritten, hashes recomputed", format: pack.FormatCSV, noOpts: true, edit: func(t *testing.T, b []byte) []byte {
			names, data := files(t, b)
			data["events.csv"] = bytes.Replace(data["events.csv"], []byte("dossier-before"), []byte("dossier-hidden"), 1)
			return repack(t, b, names, data, true)
		}, reasons: []string{pack.ReasonChainBroken}},
		{name: "the last events cut, hashes recomputed", format: pack.FormatJSON, noOpts: true, edit: func(t *testing.T, b []byte) []byte {
			names, data := files(t, b)
			var evs []ledger.Entry
			if err := json.Unmarshal(data["events"], &evs); err != nil {
				t.Fatal(err)
			}
			raw, _ := json.Marshal(evs[:len(evs)-2])
			data["events"] = raw
			return repack(t, b, names, data, true)
		}, reasons: []string{pack.ReasonLedgerIncomplete, pack.ReasonCount}},
		{name: "a file removed", format: pack.FormatCSV, edit: func(t *testing.T, b []byte) []byte {
			names, data := files(t, b)
			return repack(t, b, slices.DeleteFunc(names, func(n string) bool { return n == "grants.csv" }), data, false)
		}, reasons: []string{pack.ReasonFileMissing}},
		{name: "a file added", format: pack.FormatPDF, edit: func(t *testing.T, b []byte) []byte {
			names, data := files(t, b)
			data["notes.txt"] = []byte("trust me")
			return repack(t, b, append(names, "notes.txt"), data, false)
		}, reasons: []string{pack.ReasonFileUnexpected}},
		{name: "the manifest removed", format: pack.FormatCSV, edit: func(t *testing.T, b []byte) []byte {
			names, data := files(t, b)
			return repack(t, b, slices.DeleteFunc(names, func(n string) bool { return n == "manifest.json" }), data, false)
		}, reasons: []string{pack.ReasonManifestMissing}},
		{name: "report.pdf truncated, hashes recomputed", format: pack.FormatPDF, noOpts: true, edit: func(t *testing.T, b []byte) []byte {
			names, data := files(t, b)
			data["report.pdf"] = data["report.pdf"][:len(data["report.pdf"])-200]
			return repack(t, b, names, data, true)
		}, reasons: []string{pack.ReasonPDF}},
		{name: "not a pack", format: pack.FormatJSON, edit: func(t *testing.T, b []byte) []byte { return []byte("hello") },
			reasons: []string{pack.ReasonContainer}},
	} {
		t.Run(c.name, func(t *testing.T) {
			bundle, res := f.build(t, c.format, true)
			opts := f.opts(bundle, res)
			if c.noOpts {
				opts = pack.VerifyOptions{LedgerVerifierKey: f.key.VerifierKey()}
			}
			tampered := c.edit(t, bytes.Clone(bundle))
			rep, err := pack.Verify(tampered, opts)
			var ve *pack.VerifyError
			if rep.Valid || !errors.As(err, &ve) || !errors.Is(err, pack.ErrInvalidPack) {
				t.Fatalf("the tampered pack verifies: %v %+v", err, rep)
			}
			var got []string
			for _, p := range rep.Problems {
				got = append(got, p.Reason)
				if p.Detail == "" {
					t.Errorf("problem %s without detail", p.Reason)
				}
			}
			for _, r := range c.reasons {
				if !slices.Contains(got, r) {
					t.Errorf("want reason %s among %v", r, rep.Problems)
				}
			}
			if ve.Reason() != rep.Problems[0].Reason || !strings.Contains(err.Error(), rep.Problems[0].Reason) {
				t.Errorf("error %q does not carry the first reason", err)
			}
		})
	}
}

// A checkpoint signed by another key, or of another org's log, is refused;
// without the verifier key the signature is reported as not checked.
func TestExportCheckpointIsChecked(t *testing.T) {
	f := newFixture(t, 5)
	bundle, res := f.build(t, pack.FormatJSON, true)
	opts := f.opts(bundle, res)

	other := opts
	other.LedgerVerifierKey = ledgerKey(t, 9).VerifierKey()
	if rep, _ := pack.Verify(bundle, other); rep.Valid || rep.Problems[0].Reason != pack.ReasonCheckpointInvalid {
		t.Errorf("another ledger key: %+v", rep.Problems)
	}

	f.anchor = f.sign(t, f.key, ledger.Origin("clearance", "another-org"))
	foreign, res2 := f.build(t, pack.FormatJSON, true)
	if rep, _ := pack.Verify(foreign, f.opts(foreign, res2)); rep.Valid || rep.Problems[0].Reason != pack.ReasonCheckpointInvalid {
		t.Errorf("another org's checkpoint: %+v", rep.Problems)
	}

	none := opts
	none.LedgerVerifierKey = ""
	rep, err := pack.Verify(bundle, none)
	if err != nil || !slices.ContainsFunc(rep.Skipped, func(s string) bool { return strings.HasPrefix(s, "checkpoint signature") }) {
		t.Errorf("without the verifier key: %v, skipped %v", err, rep.Skipped)
	}
}

// An unsigned anchor (no ledger key) gets the root the builder computed,
// which the events then verify against.
func TestExportUnsignedAnchor(t *testing.T) {
	f := newFixture(t, 5)
	f.anchor = pack.Ledger{Origin: ledger.Origin("clearance", orgID), Size: uint64(len(f.entries)), UnsignedReason: "LEDGER_KEY_NOT_CONFIGURED"}
	bundle, res := f.build(t, pack.FormatCSV, true)
	if res.Manifest.Ledger.RootHash == "" || res.Manifest.Ledger.HeadEntryHash != f.entries[len(f.entries)-1].EntryHash {
		t.Fatalf("anchor %+v", res.Manifest.Ledger)
	}
	rep, err := pack.Verify(bundle, pack.VerifyOptions{})
	if err != nil || !slices.ContainsFunc(rep.Skipped, func(s string) bool { return strings.Contains(s, "not signed") }) {
		t.Errorf("unsigned pack: %v, skipped %v", err, rep.Skipped)
	}
}

// The builder refuses what would make a pack lie.
func TestExportBuilderRefuses(t *testing.T) {
	f := newFixture(t, 4)
	start := func(events bool) *pack.Builder {
		b, err := pack.NewBuilder(&bytes.Buffer{}, f.header(pack.FormatCSV, events))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	feed := func(b *pack.Builder) {
		for _, e := range f.entries {
			if err := b.AddEntry(e); err != nil {
				t.Fatal(err)
			}
		}
	}
	b := start(true)
	if err := b.AddEntry(f.entries[1]); !errors.Is(err, pack.ErrLedger) {
		t.Errorf("entry 2 first: %v", err)
	}
	b = start(true)
	feed(b)
	if err := b.AddDecision(f.decisions[1]); err != nil {
		t.Fatal(err)
	}
	if err := b.AddDecision(f.decisions[0]); !errors.Is(err, pack.ErrInput) {
		t.Errorf("decisions out of seq order: %v", err)
	}
	b = start(true)
	feed(b)
	d := f.decisions[0]
	d.CreatedAt = t0.Add(-time.Second).Format(time.RFC3339Nano)
	if err := b.AddDecision(d); !errors.Is(err, pack.ErrInput) {
		t.Errorf("a decision outside the window: %v", err)
	}
	b = start(true)
	feed(b)
	if err := b.AddGrant(f.grants[0]); err != nil {
		t.Fatal(err)
	}
	if err := b.AddDecision(f.decisions[0]); !errors.Is(err, pack.ErrOrder) {
		t.Errorf("a decision after grants: %v", err)
	}
	b = start(false)
	feed(b)
	if err := b.AddGrant(f.grants[0]); !errors.Is(err, pack.ErrInput) {
		t.Errorf("a grant without include_events: %v", err)
	}
	b = start(true)
	for _, e := range f.entries[:len(f.entries)-1] {
		if err := b.AddEntry(e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Close(); !errors.Is(err, pack.ErrLedger) {
		t.Errorf("fewer entries than the checkpoint: %v", err)
	}
	f.anchor.RootHash = strings.Repeat("A", 43) + "="
	b = start(true)
	feed(b)
	if _, err := b.Close(); !errors.Is(err, pack.ErrLedger) {
		t.Errorf("entries that do not hash to the signed root: %v", err)
	}
}

func TestExportOrgKeysDiffer(t *testing.T) {
	a, b := pack.OrgKey(secret, "org-a"), pack.OrgKey(secret, "org-b")
	if bytes.Equal(a, b) || len(a) != 32 {
		t.Fatalf("org keys %x %x", a, b)
	}
	if pack.Sign(a, []byte("x")) == pack.Sign(b, []byte("x")) {
		t.Fatal("one org's key signs like another's")
	}
}

// Verify never panics, whatever the bytes; seeded with real packs.
func FuzzExportVerify(f *testing.F) {
	fx := newFixture(f, 3)
	for _, format := range []pack.Format{pack.FormatJSON, pack.FormatCSV, pack.FormatPDF} {
		b, _ := fx.build(f, format, true)
		f.Add(b)
	}
	f.Add([]byte(`{"manifest":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rep, err := pack.Verify(b, pack.VerifyOptions{})
		if rep.Valid != (err == nil) {
			t.Fatalf("valid %v with error %v", rep.Valid, err)
		}
	})
}
