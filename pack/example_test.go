package pack_test

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/pack"
)

// Build a pack of an org whose ledger holds two entries (the org, one
// decision), verify it as an auditor does, then see a flipped byte refused.
func Example() {
	const org = "0190a000-0000-7000-8000-000000000001"
	at := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	var head ledger.Head
	var entries []ledger.Entry
	for i, r := range []ledger.Record{
		{Kind: ledger.KindOrgCreated, SubjectID: org, PayloadDigest: canon.Digest([]byte("org"))},
		{Kind: ledger.KindDecision, SubjectID: "dossier-1", PayloadDigest: canon.Digest([]byte("dossier"))},
	} {
		e, err := ledger.Next(head, org, r, at.Add(time.Duration(i)*time.Minute))
		if err != nil {
			panic(err)
		}
		head = ledger.Head{Seq: e.Seq, EntryHash: e.EntryHash}
		entries = append(entries, e)
	}

	var buf bytes.Buffer
	b, err := pack.NewBuilder(&buf, pack.Header{
		OrgID: org, ExportID: "export-1", Format: pack.FormatCSV, IncludeEvents: true,
		Window:      pack.Window{From: at, To: at.Add(time.Hour)},
		GeneratedAt: at.Add(2 * time.Hour),
		// No ledger key here: the builder computes the root itself.
		Ledger: pack.Ledger{Origin: ledger.Origin("clearance", org), Size: 2, UnsignedReason: "LEDGER_KEY_NOT_CONFIGURED"},
	})
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		if err := b.AddEntry(e); err != nil {
			panic(err)
		}
	}
	d := entries[1]
	if err := b.AddDecision(pack.Decision{LedgerSeq: d.Seq, CreatedAt: d.RecordedAt, DossierID: d.SubjectID,
		DecisionID: "decision-1", Outcome: "ALLOW", Mode: "SHADOW", WorkflowKey: "refunds", DecisionType: "REFUND",
		DossierDigest: d.PayloadDigest, EntryHash: d.EntryHash}); err != nil {
		panic(err)
	}
	res, err := b.Close()
	if err != nil {
		panic(err)
	}
	packed := buf.Bytes()

	// What the service records, and what an auditor checks the pack against.
	key := pack.OrgKey([]byte("the service's export secret"), org)
	opts := pack.VerifyOptions{ManifestSHA256: res.ManifestSHA256, BundleSHA256: pack.Digest(packed),
		Key: key, Signature: pack.Sign(key, packed)}
	rep, err := pack.Verify(packed, opts)
	fmt.Println("valid:", rep.Valid, err)
	for _, f := range rep.Manifest.Files {
		fmt.Println(f.Name, f.Rows)
	}

	packed[len(packed)/2] ^= 1
	_, err = pack.Verify(packed, opts)
	var ve *pack.VerifyError
	fmt.Println(errors.As(err, &ve), ve.Reason())
	// Output:
	// valid: true <nil>
	// events.csv 2
	// decisions.csv 1
	// grants.csv 0
	// workflows.csv 1
	// true BUNDLE_SHA256_MISMATCH
}
