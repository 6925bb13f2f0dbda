package dossier_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// Record writes a decision's dossier, its ledger entry and its chain member
// in one transaction; the entry's payload digest is the digest of the
// stored body, so the ledger commits to exactly what was recorded.
func ExampleRecord() {
	ctx := context.Background()
	backend, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		panic(err)
	}
	defer backend.Close()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	b := dossier.Body{DossierID: "dos_1", DecisionID: "dec_1", EvaluationID: "eval_1", OrgID: "org_1",
		Route: "evaluate-decision", Intent: []byte(`{"amount":500}`), Outcome: policy.OutcomeAllow,
		Mode: policy.ModeShadow, ReasonCodes: []string{}, MatchedRules: []string{},
		CreatedAt: at.Format(time.RFC3339Nano), ChainID: "chain_1"}
	var digest string
	err = backend.Update(ctx, "org_1", func(tx store.Tx) error {
		d := b // Update may run fn again: Record sets LedgerSeq on its own copy
		var err error
		digest, err = dossier.Record(ctx, tx, &d, dossier.Index{WorkflowKey: "payments.refund"}, at)
		return err
	})
	if err != nil {
		panic(err)
	}

	stored, _ := backend.Dossier(ctx, "org_1", "dos_1")
	back, _ := dossier.Decode(stored.Body)
	fmt.Println(back.DecisionID, back.Outcome, back.LedgerSeq, back.ChainID, stored.WorkflowKey)

	entries, _ := backend.LedgerEntries(ctx, "org_1", 0, 10)
	e := entries[0]
	fmt.Println(len(entries), e.Seq, e.Kind, e.SubjectID)
	fmt.Println(e.PayloadDigest == digest, digest == fmt.Sprintf("sha256:%x", sha256.Sum256(stored.Body)))

	member, _ := backend.Artifact(ctx, "org_1", dossier.KindChainMember, "eval_1")
	fmt.Println(member.Ref)
	// Output:
	// dec_1 ALLOW 1 chain_1 payments.refund
	// 1 1 decision.recorded dos_1
	// true true
	// chain_1
}
