package export_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/export"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/pack"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// An org asks for a validation pack of its decisions; the worker builds it
// (here one pass of Process, in a server the worker Engine.Run starts), and
// the auditor checks the download against the record, the org's export key
// and the ledger key.
func ExampleService_Create() {
	ctx := context.Background()
	backend, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer backend.Close()
	ledgerKey, err := ledger.NewKey("clearance-ledger", bytes.Repeat([]byte{0x4c}, 32))
	if err != nil {
		fmt.Println(err)
		return
	}
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	engine, err := clearance.Open(backend, clearance.Options{LedgerKey: ledgerKey, ExportSecret: []byte("the operator's export secret"),
		Now: func() time.Time { now = now.Add(time.Millisecond); return now }})
	if err != nil {
		fmt.Println(err)
		return
	}
	org, err := engine.Admin.CreateOrg(ctx, "Acme")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, amount := range []string{"120", "12000"} {
		_, err := engine.Decide.Evaluate(ctx, decide.EvaluateRequest{OrgID: org.Org.ID, Route: decide.RouteActionGate,
			Body: []byte(`{"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":` + amount + `}`)})
		if err != nil {
			fmt.Println(err)
			return
		}
	}

	x, _, err := engine.Exports.Create(ctx, export.Request{OrgID: org.Org.ID, Format: "json", IncludeEvents: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("queued:", x.Status)
	if _, err := engine.Exports.Process(ctx, export.WorkerOptions{}); err != nil {
		fmt.Println(err)
		return
	}
	rec, body, err := engine.Exports.Open(ctx, org.Org.ID, x.ExportID)
	if err != nil {
		fmt.Println(err)
		return
	}
	packed, err := io.ReadAll(body)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("built:", rec.Status, rec.Counts.Decisions, "decisions", rec.Counts.Events, "ledger entries")

	rep, err := pack.Verify(packed, pack.VerifyOptions{ManifestSHA256: rec.ManifestSHA256, BundleSHA256: rec.BundleSHA256,
		Key: engine.Exports.Key(org.Org.ID), Signature: rec.BundleSignature, LedgerVerifierKey: engine.Audit.LedgerVerifierKey()})
	fmt.Println("verified:", rep.Valid, err)
	// Output:
	// queued: PENDING
	// built: SUCCEEDED 2 decisions 5 ledger entries
	// verified: true <nil>
}
