package reader_test

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
	"github.com/clearancehq/clearance/reader"
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

// An auditor's file is checked against the ledger key the reader trusts
// (here the server's); a changed byte of the dossier fails the check it
// breaks, with a stable reason; another deployment's key is reported.
func ExampleVerify() {
	key, err := ledger.NewKey("clearance-ledger", bytes.Repeat([]byte{1}, 32))
	if err != nil {
		panic(err)
	}
	raw, err := packet(key)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	opts := reader.Options{ServerLedgerKey: key.VerifierKey()}
	rep, err := reader.Verify(ctx, reader.Input{Artifact: raw}, opts) // the kind is detected
	if err != nil {
		panic(err)
	}
	fmt.Println(rep.Kind, "valid:", rep.Valid, "-", rep.Key.Statement)

	tampered := bytes.Replace(raw, []byte(`"outcome":"ALLOW"`), []byte(`"outcome":"BLOCK"`), 1)
	rep, _ = reader.Verify(ctx, reader.Input{Artifact: tampered}, opts)
	for _, c := range rep.Checks {
		if !c.OK {
			fmt.Println("failed:", c.Name, c.Reason)
		}
	}

	other, _ := ledger.NewKey("other-ledger", bytes.Repeat([]byte{2}, 32))
	rep, _ = reader.Verify(ctx, reader.Input{Artifact: raw, LedgerKey: other.VerifierKey()}, opts)
	fmt.Println("with another key:", rep.Valid, "-", rep.Key.Statement)
	// Output:
	// packet valid: true - checked against this server's ledger key
	// failed: dossier_digest DOSSIER_DIGEST_MISMATCH
	// with another key: false - checked against the ledger key you supplied
}
