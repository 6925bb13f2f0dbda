package audit_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance/audit"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
	"github.com/clearancehq/clearance/tenant"
)

// An org records a decision; the auditor seals its ledger, takes the
// signed checkpoint, proves the decision is in it, and verifies the whole
// ledger against the checkpoint it kept.
func Example() {
	ctx := context.Background()
	backend, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer backend.Close()
	// A fixed key and clock, so that the output is the same on every run.
	key, _ := ledger.GenerateKey(bytes.NewReader(make([]byte, 32)), "clearance.example/ledger")
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	d := core.Deps{Store: core.NewStore(backend), Clock: func() time.Time { return at },
		Logger: slog.New(slog.DiscardHandler), Issuer: "clearance.example", LedgerKey: key}
	audits := audit.New(d)

	// Record something: an org, then a decision's dossier with the ledger
	// entry binding its digest, each in one transaction.
	org := "01941234-5678-7abc-8def-0123456789ab"
	dossierID := "01941234-5678-7abc-8def-00000000d001"
	body := []byte(`{"outcome":"ALLOW"}`)
	err = d.Store.UpdateNew(ctx, org, func(tx store.Tx) error {
		o := tenant.Org{ID: org, Name: "Acme", CreatedAt: at}
		if err := tx.PutOrg(ctx, o); err != nil {
			return err
		}
		if err := core.AppendRecord(ctx, tx, ledger.KindOrgCreated, org, o, at); err != nil {
			return err
		}
		if err := tx.PutDossier(ctx, dossier.Stored{OrgID: org, DossierID: dossierID, DecisionID: dossierID, CreatedAt: at, Body: body}); err != nil {
			return err
		}
		_, err := ledger.Append(ctx, tx, org, ledger.Record{Kind: ledger.KindDecision, SubjectID: dossierID, PayloadDigest: canon.Digest(body)}, at)
		return err
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	// Seal (RunSealer does this in the background), then read the checkpoint.
	if _, err := audits.SealLedger(ctx, org); err != nil {
		fmt.Println(err)
		return
	}
	cp, err := audits.LedgerCheckpoint(ctx, org)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("checkpoint of %d entries, origin %s\n", cp.Size, cp.Origin)

	// The auditor trusts the verifier key, not the store.
	kept, err := ledger.VerifyCheckpoint(audits.LedgerVerifierKey(), cp.Note)
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := audits.LedgerInclusionProof(ctx, org, 2, kept.Size)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("decision proved in it:", ledger.VerifyInclusion(kept, p.LeafHash, p.Seq, p.Proof) == nil)

	rep, err := audits.VerifyLedgerAgainst(ctx, org, kept.Note)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("ledger valid:", rep.Valid, "entries:", rep.EntriesChecked, "checkpoints:", rep.CheckpointsChecked)
	// Output:
	// checkpoint of 2 entries, origin clearance.example/ledger/01941234-5678-7abc-8def-0123456789ab
	// decision proved in it: true
	// ledger valid: true entries: 2 checkpoints: 2
}
