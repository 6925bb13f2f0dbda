package dossiertest

import (
	"context"
	"errors"
	"testing"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/store"
)

// body returns decision n's dossier body in orgID, joining chainID.
func body(orgID, chainID string, n int) dossier.Body {
	r := newRecord(orgID, n)
	return dossier.Body{DossierID: r.DossierID, DecisionID: r.DecisionID, EvaluationID: r.EvaluationID, OrgID: orgID,
		Route: "evaluate-decision", Outcome: "ALLOW", Mode: "SHADOW", ReasonCodes: []string{}, MatchedRules: []string{},
		CreatedAt: r.CreatedAt.Format("2006-01-02T15:04:05.999999999Z07:00"), ChainID: chainID}
}

// testRecord: dossier.Record writes the dossier, its ledger entry and its
// chain member in the caller's transaction, binding them to each other.
func testRecord(t *testing.T, b store.Backend) {
	ctx := t.Context()
	if err := record(ctx, b, newRecord(orgA, 1)); err != nil { // the ledger already holds one entry
		t.Fatal(err)
	}
	d := body(orgA, "chain-1", 2)
	var digest string
	err := b.Update(ctx, orgA, func(tx store.Tx) error {
		var err error
		digest, err = dossier.Record(ctx, tx, &d, dossier.Index{WorkflowKey: "payments.refund", DecisionType: "refund"}, base)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if d.LedgerSeq != 2 {
		t.Fatalf("LedgerSeq = %d, want 2 (the entry after the head)", d.LedgerSeq)
	}
	got, err := b.Dossier(ctx, orgA, d.DossierID)
	if err != nil {
		t.Fatal(err)
	}
	if canon.Digest(got.Body) != digest || got.WorkflowKey != "payments.refund" || got.DecisionType != "refund" || got.Outcome != "ALLOW" {
		t.Fatalf("stored %+v with digest %s, want digest %s", got.Summary(), canon.Digest(got.Body), digest)
	}
	back, err := dossier.Decode(got.Body)
	if err != nil || back.LedgerSeq != 2 || back.ChainID != "chain-1" {
		t.Fatalf("Decode = %+v, %v", back, err)
	}
	entries, err := b.LedgerEntries(ctx, orgA, 1, 1)
	if err != nil || len(entries) != 1 || entries[0].PayloadDigest != digest || entries[0].SubjectID != d.DossierID {
		t.Fatalf("ledger entry 2 = %+v, %v; want the dossier's digest", entries, err)
	}
	m, err := b.Artifact(ctx, orgA, dossier.KindChainMember, d.EvaluationID)
	if err != nil || m.Ref != "chain-1" {
		t.Fatalf("chain member = %+v, %v", m, err)
	}
}

// testRecordAtomic: a transaction that fails after Record leaves none of
// the three.
func testRecordAtomic(t *testing.T, b store.Backend) {
	ctx := t.Context()
	d := body(orgA, "chain-1", 3)
	err := b.Update(ctx, orgA, func(tx store.Tx) error {
		if _, err := dossier.Record(ctx, tx, &d, dossier.Index{}, base); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Update = %v, want errBoom", err)
	}
	_, err = b.Dossier(ctx, orgA, d.DossierID)
	wantNotFound(t, "Dossier after a failed Update", err)
	_, err = b.Artifact(ctx, orgA, dossier.KindChainMember, d.EvaluationID)
	wantNotFound(t, "chain member after a failed Update", err)
	if entries, err := b.LedgerEntries(context.Background(), orgA, 0, 10); err != nil || len(entries) != 0 {
		t.Fatalf("ledger after a failed Update: %d entries, %v", len(entries), err)
	}
}
