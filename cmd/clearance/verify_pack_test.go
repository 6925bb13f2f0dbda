package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/pack"
)

// TestVerifyPack checks a validation pack with `clearance verify pack`
// against its record, and sees a flipped byte and a wrong export key refused.
func TestVerifyPack(t *testing.T) {
	const org = "0190a000-0000-7000-8000-000000000001"
	at := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	lk, err := ledger.NewKey("clearance-ledger", bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	var head ledger.Head
	var entries []ledger.Entry
	for i, r := range []ledger.Record{
		{Kind: ledger.KindOrgCreated, SubjectID: org, PayloadDigest: canon.Digest([]byte("org"))},
		{Kind: ledger.KindDecision, SubjectID: "dossier-1", PayloadDigest: canon.Digest([]byte("dossier"))},
	} {
		e, err := ledger.Next(head, org, r, at.Add(time.Duration(i)*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		head = ledger.Head{Seq: e.Seq, EntryHash: e.EntryHash}
		entries = append(entries, e)
	}
	var buf bytes.Buffer
	b, err := pack.NewBuilder(&buf, pack.Header{
		OrgID: org, ExportID: "export-1", Format: pack.FormatCSV, IncludeEvents: true,
		Window: pack.Window{From: at, To: at.Add(time.Hour)}, GeneratedAt: at.Add(2 * time.Hour),
		Ledger: pack.Ledger{Origin: ledger.Origin("clearance", org), Size: 2, UnsignedReason: "LEDGER_KEY_NOT_CONFIGURED"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := b.AddEntry(e); err != nil {
			t.Fatal(err)
		}
	}
	d := entries[1]
	if err := b.AddDecision(pack.Decision{LedgerSeq: d.Seq, CreatedAt: d.RecordedAt, DossierID: d.SubjectID,
		DecisionID: "decision-1", Outcome: "ALLOW", Mode: "SHADOW", WorkflowKey: "w", DecisionType: "T",
		DossierDigest: d.PayloadDigest, EntryHash: d.EntryHash}); err != nil {
		t.Fatal(err)
	}
	res, err := b.Close()
	if err != nil {
		t.Fatal(err)
	}
	packed := buf.Bytes()
	key := pack.OrgKey([]byte("the service's export secret"), org)
	record, _ := json.Marshal(map[string]string{"manifest_sha256": res.ManifestSHA256, "bundle_sha256": pack.Digest(packed),
		"bundle_signature_hmac_sha256": pack.Sign(key, packed)})
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	packPath, recPath := write("pack.zip", packed), write("record.json", record)
	flipped := bytes.Clone(packed)
	flipped[len(flipped)/2] ^= 1
	tampered := write("tampered.zip", flipped)
	for _, c := range []struct {
		name string
		args []string
		want int
	}{
		{"pack", []string{"--ledger-key", lk.VerifierKey(), "--record", recPath, packPath}, 0},
		{"pack with its HMAC", []string{"--ledger-key", lk.VerifierKey(), "--record", recPath, "--export-key", hex.EncodeToString(key), packPath}, 0},
		{"another export key", []string{"--ledger-key", lk.VerifierKey(), "--record", recPath, "--export-key", "00ff", packPath}, 1},
		{"flipped byte", []string{"--ledger-key", lk.VerifierKey(), "--record", recPath, tampered}, 1},
		{"no record", []string{"--ledger-key", lk.VerifierKey(), packPath}, 2},
	} {
		var out bytes.Buffer
		if code := run(context.Background(), append([]string{"verify", "pack"}, c.args...), &out, &out); code != c.want {
			t.Errorf("%s: exit %d, want %d: %s", c.name, code, c.want, out.String())
		}
	}
}
