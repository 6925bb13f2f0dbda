// Command embed shows Clearance embedded in a Go program: open the store,
// create an org, decide, read the dossier back and verify the ledger.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/store/pebblestore"
)

func main() {
	dir, err := os.MkdirTemp("", "clearance-embed-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := run(context.Background(), dir, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, dir string, out io.Writer) error {
	// README:begin
	backend, err := pebblestore.Open(dir, pebblestore.Options{})
	if err != nil {
		return err
	}
	defer backend.Close()
	engine, err := clearance.Open(backend, clearance.Options{})
	if err != nil {
		return err
	}
	org, err := engine.Admin.CreateOrg(ctx, "Acme")
	if err != nil {
		return err
	}

	body := []byte(`{"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":2500}`)
	// The engine decodes the body strictly: duplicates, unknown members and
	// bad amounts are refused with a coded error, and nothing is recorded.
	d, err := engine.Evaluate(ctx, clearance.EvaluateRequest{
		OrgID: org.Org.ID, Route: clearance.RouteEvaluateDecision,
		Body: body, IdempotencyKey: "invoice-4711",
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, d.Outcome, d.Mode, d.ReasonCodes)

	dossier, err := engine.Evidence.Dossier(ctx, org.Org.ID, d.DossierID)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "dossier digest matches the ledger:", dossier.Digest == d.DossierDigest)

	report, err := engine.Audit.VerifyLedger(ctx, org.Org.ID)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "ledger valid:", report.Valid, "entries:", report.EntriesChecked)
	// README:end
	return nil
}
