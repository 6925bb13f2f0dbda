package proof_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/proof"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
)

const org = "0190a000-0000-7000-8000-000000000001"

// packet builds a proof packet as the engine does: a dossier, its ledger
// entry, a sealed checkpoint and the anchor, signed by the ledger key.
func packet(key *ledger.Key) ([]byte, error) {
	ctx := context.Background()
	st, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	snapshot := json.RawMessage(`{"bundle_digest":"sha256:` + fmt.Sprintf("%064x", 1) + `","bundle_id":"b","evaluator":"e","policy_version":"v1"}`)
	dossier, err := canon.Marshal(map[string]any{"dossier_id": "dossier-1", "decision_id": "decision-1", "org_id": org,
		"ledger_seq": 1, "outcome": "ALLOW", "policy_snapshot": snapshot})
	if err != nil {
		return nil, err
	}
	at := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	var entry ledger.Entry
	origin := ledger.Origin("clearance", org)
	err = st.Update(ctx, org, func(tx store.Tx) error {
		if entry, err = ledger.Append(ctx, tx, org, ledger.Record{Kind: ledger.KindDecision, SubjectID: "dossier-1",
			PayloadDigest: canon.Digest(dossier)}, at); err != nil {
			return err
		}
		_, err = ledger.Seal(ctx, tx, key, origin, ledger.SealOptions{})
		return err
	})
	if err != nil {
		return nil, err
	}
	anchor, err := ledger.NewAnchor(ctx, st, org, entry.Seq)
	if err != nil {
		return nil, err
	}
	p := proof.Packet{Version: proof.Version, OrgID: org, DossierID: "dossier-1", DecisionID: "decision-1",
		Dossier: dossier, DossierDigest: canon.Digest(dossier), PolicySnapshot: snapshot, LedgerEntry: entry,
		LedgerAnchor: anchor, LedgerOrigin: origin, LedgerVerifierKey: key.VerifierKey(), IssuedAt: at.Format(time.RFC3339)}
	if err := proof.Sign(&p, ed25519.NewKeyFromSeed(key.Seed())); err != nil {
		return nil, err
	}
	return json.Marshal(p)
}

// A third party verifies a packet with the ledger key it trusts; a changed
// dossier is reported by the check it breaks.
func ExampleVerify() {
	key, err := ledger.NewKey("clearance-ledger", bytes.Repeat([]byte{1}, 32))
	if err != nil {
		panic(err)
	}
	raw, err := packet(key)
	if err != nil {
		panic(err)
	}
	fmt.Println("valid:", proof.Verify(raw, key.VerifierKey()).Valid)
	fmt.Println("without a pinned key:", proof.Verify(raw, "").Valid)

	tampered := bytes.Replace(raw, []byte(`"outcome":"ALLOW"`), []byte(`"outcome":"BLOCK"`), 1)
	for _, c := range proof.Verify(tampered, key.VerifierKey()).Checks {
		if !c.OK {
			fmt.Println("failed:", c.Name)
		}
	}
	// Output:
	// valid: true
	// without a pinned key: false
	// failed: dossier_digest
}
