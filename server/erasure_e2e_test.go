package server_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/jackc/pgx/v5"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/capsule"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/privacy"
	"github.com/clearancehq/clearance/proof"
	"github.com/clearancehq/clearance/server"
	"github.com/clearancehq/clearance/store/pgstore/pgtest"
)

func pathDataProtection(org string) string { return "/v1/orgs/" + org + "/data-protection" }
func pathErasures(org string) string       { return "/v1/orgs/" + org + "/erasures" }
func pathPlatformErasures(org string) string {
	return "/v1/platform/orgs/" + org + "/erasures"
}

const erasureSetting = `{"subject":"/actor/id","personal":["/context/customer/email","/context/customer/name"]}`

// personalDecision is an evaluate-decision body with personal data of a
// customer acting as the decision's subject.
func personalDecision(subject, email, name string, amount int) string {
	b, _ := json.Marshal(map[string]any{"decision_type": "REFUND", "workflow_key": "refunds", "amount": amount,
		"actor":   map[string]any{"id": subject, "type": "customer"},
		"context": map[string]any{"customer": map[string]any{"email": email, "name": name, "tier": "gold"}}})
	return string(b)
}

// TestErasureKeepsEvidenceVerifiable is the proof the design owes: an org
// records decisions with personal data of two subjects, erases one, and
// then the ledger, every affected dossier's proof packet and capsule, and
// the signed receipt verify, the erased values show as erased and are
// nowhere in the raw store, reproduction says why it cannot run, and the
// other subject reads as before. Runs on Pebble and PostgreSQL.
func TestErasureKeepsEvidenceVerifiable(t *testing.T) {
	t.Parallel()
	x := newExecEnvWith(t, "", func(x *execEnv) { x.secretsKey = testSecretsKey })
	o := x.o
	vkey := testLedgerKey(t).VerifierKey()
	alice := []string{"cust-alice-7781", "alice.erasure@example.com", "Alice Erasure-Testperson"}
	bob := []string{"cust-bob-4410", "bob.kept@example.com", "Bob Kept-Testperson"}

	// Before the setting, a dossier keeps what it was sent (and hashes as
	// before); it is not the setting's to seal afterwards.
	before := x.req(t, "POST", pathEvaluate, o.Key, personalDecision("cust-early-1", "early@example.com", "Early Bird", 5), nil).want(t, http.StatusOK)
	if r := x.req(t, "GET", pathDossiers+before.str("dossier_id"), o.Key, nil, nil).want(t, http.StatusOK); r.Header.Get(server.HeaderPersonalData) != "" {
		t.Fatalf("a dossier recorded before the setting: %v", r.Header)
	}

	set := x.req(t, "PUT", pathDataProtection(o.ID), o.Key, erasureSetting, nil).want(t, http.StatusOK)
	if set.str("subject") != "/actor/id" || len(set.strs("personal")) != 2 {
		t.Fatalf("setting: %s", set)
	}
	x.req(t, "GET", pathDataProtection(o.ID), o.Key, nil, nil).want(t, http.StatusOK)

	var aliceDossiers []string
	for _, amount := range []int{5, 1500} {
		d := x.req(t, "POST", pathEvaluate, o.Key, personalDecision(alice[0], alice[1], alice[2], amount), nil).want(t, http.StatusOK)
		aliceDossiers = append(aliceDossiers, d.str("dossier_id"))
	}
	bobDossier := x.req(t, "POST", pathEvaluate, o.Key, personalDecision(bob[0], bob[1], bob[2], 7), nil).want(t, http.StatusOK).str("dossier_id")

	// Readable while the key exists; the stored form (what the proof
	// packet carries and the ledger hashes) holds ciphertext only.
	for _, id := range append(aliceDossiers, bobDossier) {
		r := x.req(t, "GET", pathDossiers+id, o.Key, nil, nil).want(t, http.StatusOK)
		if r.Header.Get(server.HeaderPersonalData) != privacy.StatusOpen || r.str("personal_data.status") != privacy.StatusOpen {
			t.Fatalf("dossier %s: %v %s", id, r.Header, r)
		}
		if id != bobDossier && (!bytes.Contains(r.Raw, []byte(alice[1])) || r.str("actor.id") != alice[0] || r.str("intent.context.customer.name") != alice[2]) {
			t.Fatalf("alice's dossier does not show her data: %s", r)
		}
		if r.str("intent.context.customer.tier") != "gold" {
			t.Fatalf("a member that is not personal was sealed: %s", r)
		}
	}
	x.req(t, "POST", pathSeal, o.Key, `{}`, nil).want(t, http.StatusOK)
	packet := x.req(t, "GET", pathDossiers+aliceDossiers[0]+"/proof-packet?org_id="+o.ID, o.Key, nil, nil).want(t, http.StatusOK)
	for _, v := range alice {
		if bytes.Contains(packet.Raw, []byte(v)) {
			t.Fatalf("the proof packet carries %q in the clear", v)
		}
	}
	if !strings.Contains(string(packet.Raw), `"ciphertext":"v1.`) {
		t.Fatalf("the proof packet's dossier carries no ciphertext: %s", packet)
	}

	// Another org cannot erase this org's subjects, with its own key or
	// this org's path.
	other := x.createOrg("Other")
	x.req(t, "POST", pathErasures(o.ID), other.Key, `{"subject_id":"`+alice[0]+`"}`, nil).wantProblem(t, http.StatusForbidden, clearance.CodeOrgMismatch)
	x.req(t, "GET", pathDataProtection(o.ID), other.Key, nil, nil).wantProblem(t, http.StatusForbidden, clearance.CodeOrgMismatch)
	x.req(t, "POST", pathPlatformErasures(o.ID), other.Key, `{}`, nil).want(t, http.StatusForbidden)
	if r := x.req(t, "POST", pathErasures(other.ID), other.Key, `{"subject_id":"`+alice[0]+`"}`, nil).want(t, http.StatusCreated); r.num("payload.dossiers_affected") != 0 {
		t.Fatalf("erasing in another org touched this one: %s", r)
	}
	if r := x.req(t, "GET", pathDossiers+aliceDossiers[0], o.Key, nil, nil).want(t, http.StatusOK); r.Header.Get(server.HeaderPersonalData) != privacy.StatusOpen {
		t.Fatalf("after another org's erasure: %v", r.Header)
	}

	// Erase alice.
	er := x.req(t, "POST", pathErasures(o.ID), o.Key, `{"subject_id":"`+alice[0]+`"}`, nil).want(t, http.StatusCreated)
	p, err := privacy.VerifyReceipt(er.str("receipt"), vkey)
	if err != nil {
		t.Fatalf("the receipt does not verify offline: %v (%s)", err, er)
	}
	if p.OrgID != o.ID || p.Scope != privacy.ScopeSubject || len(p.KeysDestroyed) != 1 || p.DossiersAffected != 2 ||
		p.RequestedBy.CredentialKind != "org" || p.LedgerVerifierKey != vkey {
		t.Fatalf("receipt payload %+v", p)
	}
	if _, err := privacy.VerifyReceipt(er.str("receipt"), x.otherLedgerKey(t)); err == nil {
		t.Fatal("the receipt verifies under another ledger key")
	}
	for _, v := range alice {
		if strings.Contains(string(er.Raw), v) {
			t.Fatalf("the receipt names %q", v)
		}
	}
	again := x.req(t, "POST", pathErasures(o.ID), o.Key, `{"subject_id":"`+alice[0]+`"}`, nil).want(t, http.StatusOK)
	if again.str("receipt") != er.str("receipt") || again.Header.Get(server.HeaderReplayed) != "true" {
		t.Fatalf("a repeated erasure: %s, want the first receipt", again)
	}

	// The ledger records it, and still verifies from its first entry.
	var erased map[string]any
	for _, en := range x.entries(o.Key) {
		if en["kind"] == ledger.KindSubjectErased {
			erased = en
		}
	}
	raw, _ := canon.Marshal(p)
	if erased == nil || erased["payload_digest"] != canon.Digest(raw) || uint64(erased["seq"].(float64)) != p.LedgerSeq ||
		erased["subject_id"] != p.ReceiptID {
		t.Fatalf("subject.erased entry %v for receipt %+v", erased, p)
	}
	x.req(t, "POST", pathSeal, o.Key, `{}`, nil).want(t, http.StatusOK)
	if v := x.verify(o.Key); v.JSON["valid"] != true {
		t.Fatalf("the ledger after erasure: %s", v)
	}

	// Every affected dossier's proof packet and capsule verify.
	for _, id := range append(aliceDossiers, bobDossier) {
		pk := x.req(t, "GET", pathDossiers+id+"/proof-packet?org_id="+o.ID, o.Key, nil, nil).want(t, http.StatusOK)
		if res := proof.Verify(pk.Raw, vkey); !res.Valid {
			t.Fatalf("proof packet of %s after erasure: %+v", id, res.Checks)
		}
		cp := x.req(t, "GET", pathDossiers+id+"/agent-action-capsule?org_id="+o.ID, o.Key, nil, nil).want(t, http.StatusOK)
		if res := capsule.Verify(cp.Raw); !res.OK {
			t.Fatalf("capsule of %s after erasure: %+v", id, res.Findings)
		}
	}

	// Alice's values are gone from every read; bob's are as before.
	for _, id := range aliceDossiers {
		r := x.req(t, "GET", pathDossiers+id, o.Key, nil, nil).want(t, http.StatusOK)
		if r.Header.Get(server.HeaderPersonalData) != privacy.StatusErased || r.str("actor.id") != "[erased]" ||
			r.str("intent.context.customer.email") != "[erased]" || r.str("intent_as_received") != "[erased]" {
			t.Fatalf("erased dossier: %v %s", r.Header, r)
		}
		x.req(t, "GET", pathDossiers+id+"/reproduce", o.Key, nil, nil).wantProblem(t, http.StatusConflict, "NOT_REPLAYABLE")
	}
	if r := x.req(t, "GET", pathDossiers+bobDossier, o.Key, nil, nil).want(t, http.StatusOK); r.str("intent.context.customer.email") != bob[1] {
		t.Fatalf("bob's dossier after alice's erasure: %s", r)
	}
	x.req(t, "GET", pathDossiers+bobDossier+"/reproduce", o.Key, nil, nil).want(t, http.StatusOK)

	// Turning the setting off applies to later decisions only: sealed
	// dossiers stay sealed, readable and erasable.
	if off := x.req(t, "DELETE", pathDataProtection(o.ID), o.Key, nil, nil).want(t, http.StatusOK); off.str("subject") != "" {
		t.Fatalf("turned off: %s", off)
	}
	x.req(t, "GET", pathDataProtection(o.ID), o.Key, nil, nil).wantProblem(t, http.StatusNotFound, privacy.CodeSettingNotFound)
	x.req(t, "DELETE", pathDataProtection(o.ID), o.Key, nil, nil).wantProblem(t, http.StatusNotFound, privacy.CodeSettingNotFound)
	late := x.req(t, "POST", pathEvaluate, o.Key, personalDecision("cust-late-1", "late@example.com", "Late Plain", 3), nil).want(t, http.StatusOK)
	if r := x.req(t, "GET", pathDossiers+late.str("dossier_id"), o.Key, nil, nil).want(t, http.StatusOK); r.Header.Get(server.HeaderPersonalData) != "" ||
		r.str("intent.context.customer.email") != "late@example.com" {
		t.Fatalf("a decision after the setting was turned off: %v %s", r.Header, r)
	}
	if r := x.req(t, "GET", pathDossiers+bobDossier, o.Key, nil, nil).want(t, http.StatusOK); r.Header.Get(server.HeaderPersonalData) != privacy.StatusOpen {
		t.Fatalf("bob's dossier after the setting was turned off: %v", r.Header)
	}

	// A marketplace's deletion notice for the whole org (platform key).
	org := x.req(t, "POST", pathPlatformErasures(o.ID), x.platform, `{}`, nil).want(t, http.StatusCreated)
	if op, err := privacy.VerifyReceipt(org.str("receipt"), vkey); err != nil || op.Scope != privacy.ScopeOrg ||
		len(op.KeysDestroyed) != 1 || op.DossiersAffected != 1 || op.RequestedBy.CredentialKind != "platform" {
		t.Fatalf("org erasure receipt %+v: %v", op, err)
	}
	if v := x.verify(o.Key); v.JSON["valid"] != true {
		t.Fatalf("the ledger after the org erasure: %s", v)
	}

	// Nothing personal that was sealed is anywhere in the store, and no
	// subject key is left.
	x.stop()
	needles := [][]byte{}
	for _, v := range append(alice, bob...) {
		needles = append(needles, []byte(v))
	}
	scanRawStore(t, x.dbDir, needles, []byte("privacy.subject_key"))
}

// scanRawStore fails when any needle is in the stopped store of dir: every
// key and value of Pebble (and every byte of its files, where compression
// may hide a value, hence the key/value scan too), or every row of every
// table of the PostgreSQL schema (as text, bytea as hex too). keyKind is
// an artifact kind no record may be left of (nil: no such check).
func scanRawStore(t *testing.T, dir string, needles [][]byte, keyKind []byte) {
	t.Helper()
	check := func(where string, b []byte) {
		for _, n := range needles {
			if bytes.Contains(b, n) || bytes.Contains(b, []byte(hex.EncodeToString(n))) {
				t.Errorf("%q found in %s", n, where)
			}
		}
	}
	if !onPostgres(t) {
		db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
		if err != nil {
			t.Fatal(err)
		}
		it, err := db.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for it.First(); it.Valid(); it.Next() {
			n++
			check("a Pebble key", it.Key())
			check("the Pebble value of "+string(it.Key()), it.Value())
			if keyKind != nil && bytes.Contains(it.Key(), keyKind) {
				t.Errorf("a subject key is left: %q", it.Key())
			}
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatal("the scan saw no key")
		}
		err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			check("file "+filepath.Base(path), b)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	schema := pgSchemaOf(t, dir)
	ctx := context.Background()
	pool := pgtest.Admin(t)
	rows, err := pool.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1`, schema)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(tables) == 0 {
		t.Fatalf("tables of %s: %v %v", schema, tables, err)
	}
	for _, table := range tables {
		name := pgx.Identifier{schema, table}.Sanitize()
		rows, err := pool.Query(ctx, `SELECT t::text FROM `+name+` t`)
		if err != nil {
			t.Fatal(err)
		}
		all, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range all {
			check("table "+table, []byte(row))
			if keyKind != nil && table == "artifacts" && bytes.Contains([]byte(row), keyKind) {
				t.Errorf("a subject key is left: %s", row)
			}
		}
	}
}

// TestErasureConcurrentDecisions: decisions of one subject sent at once
// (on PostgreSQL, over several connections) share one key and are all
// counted by the erasure.
func TestErasureConcurrentDecisions(t *testing.T) {
	t.Parallel()
	x := newExecEnvWith(t, "", func(x *execEnv) { x.secretsKey = testSecretsKey })
	o := x.o
	x.req(t, "PUT", pathDataProtection(o.ID), o.Key, erasureSetting, nil).want(t, http.StatusOK)
	const n = 12
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			r, err := x.send("POST", pathEvaluate, o.Key, personalDecision("cust-many", "many@example.com", "Many Times", i+1), nil)
			if err == nil && r.Status != http.StatusOK {
				err = errors.New(r.String())
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	r := x.req(t, "POST", pathErasures(o.ID), o.Key, `{"subject_id":"cust-many"}`, nil).want(t, http.StatusCreated)
	if r.num("payload.dossiers_affected") != n || len(r.strs("payload.keys_destroyed")) != 1 {
		t.Fatalf("erasure after %d concurrent decisions: %s", n, r)
	}
}
