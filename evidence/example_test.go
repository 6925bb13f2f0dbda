package evidence_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/clearancehq/clearance/proof"
)

// An auditor reads the dossier of a gate decision and takes its proof
// packet; a third party checks the packet offline with the ledger
// verifier key it trusts, and notices a dossier that was changed.
func ExampleService_ProofPacket() {
	ctx := context.Background()
	x, err := newDecided(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x.close()

	r, err := x.evidence.DossierByDecision(ctx, x.orgID, x.decision.DecisionID)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("dossier digest as ledgered:", r.Digest == x.decision.DossierDigest)

	p, err := x.evidence.ProofPacket(ctx, x.orgID, r.DossierID)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("packet of ledger entry", p.LedgerEntry.Seq, "issued at", p.IssuedAt, "self-checked:", p.Verification.Valid)

	// The third party trusts the verifier key it was handed, never the one
	// the packet carries.
	raw, err := json.Marshal(p)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("verified offline:", proof.Verify(raw, x.verifierKey).Valid)

	p.Dossier = bytes.Replace(p.Dossier, []byte(`"BLOCK"`), []byte(`"ALLOW"`), 1)
	raw, err = json.Marshal(p)
	if err != nil {
		fmt.Println(err)
		return
	}
	res := proof.Verify(raw, x.verifierKey)
	fmt.Println("changed dossier verifies:", res.Valid)
	for _, c := range res.Checks {
		if !c.OK {
			fmt.Println("failed check:", c.Name)
		}
	}
	// Output:
	// dossier digest as ledgered: true
	// packet of ledger entry 3 issued at 2026-11-01T12:00:00Z self-checked: true
	// verified offline: true
	// changed dossier verifies: false
	// failed check: dossier_digest
}

// The dossier projects into Agent Action Capsules, which anyone can check
// without Clearance (Class 1). A decision without a grant has one capsule,
// its verdict.
func ExampleService_Capsules() {
	ctx := context.Background()
	x, err := newDecided(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x.close()

	cs, err := x.evidence.Capsules(ctx, x.orgID, x.decision.DossierID)
	if err != nil {
		fmt.Println(err)
		return
	}
	c := cs.Latest().Capsule
	fmt.Println("capsules:", len(cs.Chain), "profile:", c.SpecVersion, "Class 1 verified:", cs.LatestVerified())
	fmt.Println("disposition:", c.Disposition.Decision, "by", c.Disposition.Approver, "at", c.Timestamp)
	// Output:
	// capsules: 1 profile: draft-mih-scitt-agent-action-capsule-04 Class 1 verified: true
	// disposition: reject by policy at 2026-11-01T12:00:00Z
}
