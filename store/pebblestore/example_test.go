package pebblestore_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// Record a dossier and its ledger entry in one durable Update, then read
// them back. (A real deployment passes a directory and no FS.)
func Example() {
	s, err := pebblestore.Open("clearance-data", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	ctx := context.Background()
	const org = "org_acme"
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	body := []byte(`{"decision_id":"dec_1","dossier_id":"dos_1","outcome":"ALLOW"}`)

	err = s.Update(ctx, org, func(tx store.Tx) error {
		err := tx.PutDossier(ctx, dossier.Stored{
			OrgID: org, DossierID: "dos_1", DecisionID: "dec_1",
			CreatedAt: now, Outcome: "ALLOW", Mode: "ENFORCE", Body: body,
		})
		if err != nil {
			return err
		}
		_, err = ledger.Append(ctx, tx, org, ledger.Record{
			Kind:          ledger.KindDecision,
			SubjectID:     "dos_1",
			PayloadDigest: fmt.Sprintf("sha256:%x", sha256.Sum256(body)),
		}, now)
		return err // nil commits both, durably; an error writes neither
	})
	if err != nil {
		log.Fatal(err)
	}

	rec, err := s.DossierByDecision(ctx, org, "dec_1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rec.DossierID, rec.Outcome, string(rec.Body))

	rep, err := ledger.Verify(ctx, s, org)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ledger valid:", rep.Valid, "head seq:", rep.HeadSeq)
	// Output:
	// dos_1 ALLOW {"decision_id":"dec_1","dossier_id":"dos_1","outcome":"ALLOW"}
	// ledger valid: true head seq: 1
}

// Observe the store's commits: how long each took to become durable and how
// many commits shared its WAL sync.
func ExampleStore_ObserveCommits() {
	s, err := pebblestore.Open("clearance-data", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	s.ObserveCommits(func(_ context.Context, c store.Commit) {
		fmt.Println(c.Backend, "commit, batch", c.Batch, "durable after a positive time:", c.End.After(c.Start))
	})
	ctx := context.Background()
	err = s.Update(ctx, "org_acme", func(tx store.Tx) error {
		_, err := ledger.Append(ctx, tx, "org_acme", ledger.Record{Kind: ledger.KindDecision, SubjectID: "dos_1"}, time.Now())
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: pebble commit, batch 1 durable after a positive time: true
}
