package privacy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/privacy"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// An org says which members of its intents are personal; a customer's
// e-mail is then stored sealed, readable while the customer's key exists
// and erased once the key is destroyed, and the erasure's receipt verifies
// with the published ledger key alone.
func ExampleService_Erase() {
	ctx := context.Background()
	now := func() time.Time { return time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC) }
	backend, _ := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem(), Now: now})
	defer backend.Close()
	ledgerKey, _ := ledger.NewKey("example-ledger", bytes.Repeat([]byte{1}, 32))
	engine, _ := clearance.Open(backend, clearance.Options{Now: now, LedgerKey: ledgerKey,
		SecretsKey: []byte("example-secrets-key-of-32-bytes!!")})
	org, _ := engine.Admin.CreateOrg(ctx, "Acme")

	_, err := engine.Privacy.PutSetting(ctx, org.Org.ID,
		[]byte(`{"subject":"/actor/id","personal":["/context/customer/email"]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	d, _ := engine.Evaluate(ctx, clearance.EvaluateRequest{OrgID: org.Org.ID, Route: clearance.RouteEvaluateDecision,
		Body: []byte(`{"amount":5,"actor":{"id":"cust-42","type":"customer"},"context":{"customer":{"email":"ana@example.com"}}}`)})
	show := func() {
		rec, _ := engine.Evidence.Dossier(ctx, org.Org.ID, d.DossierID)
		v, _ := engine.Privacy.Open(ctx, org.Org.ID, rec.Body)
		var body struct {
			Intent struct {
				Context struct {
					Customer struct{ Email string }
				}
			}
		}
		_ = json.Unmarshal(v.Body, &body)
		fmt.Println(v.Status, body.Intent.Context.Customer.Email, bytes.Contains(rec.Body, []byte("ana@example.com")))
	}
	show()

	r, err := engine.Privacy.Erase(ctx, privacy.ErasureRequest{OrgID: org.Org.ID, Body: []byte(`{"subject_id":"cust-42"}`),
		Requester: privacy.Requester{CredentialID: "key_1", CredentialKind: "org"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := clearance.VerifyErasureReceipt(r.Receipt, ledgerKey.VerifierKey())
	fmt.Println(p.Scope, len(p.KeysDestroyed), p.DossiersAffected, err)
	show()
	// Output:
	// OPEN ana@example.com false
	// SUBJECT 1 1 <nil>
	// ERASED [erased] false
}
