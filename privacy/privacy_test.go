package privacy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/policies"
	"github.com/clearancehq/clearance/privacy"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
)

type fixture struct {
	t   *testing.T
	ctx context.Context
	b   *pebblestore.Store
	e   *clearance.Engine
	org string
	key *ledger.Key
}

func newFixture(t *testing.T, secrets bool) *fixture {
	t.Helper()
	b, err := pebblestore.Open(t.TempDir(), pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	key, err := ledger.NewKey("privacy-test", bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	opts := clearance.Options{LedgerKey: key}
	if secrets {
		opts.SecretsKey = []byte("privacy-test-secrets-key-32-bytes!!")
	}
	e, err := clearance.Open(b, opts)
	if err != nil {
		t.Fatal(err)
	}
	o, err := e.Admin.CreateOrg(context.Background(), "Acme")
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, ctx: context.Background(), b: b, e: e, org: o.Org.ID, key: key}
}

func (f *fixture) decide(body string) string {
	f.t.Helper()
	d, err := f.e.Evaluate(f.ctx, clearance.EvaluateRequest{OrgID: f.org, Route: clearance.RouteEvaluateDecision, Body: []byte(body)})
	if err != nil {
		f.t.Fatal(err)
	}
	return d.DossierID
}

func (f *fixture) stored(dossierID string) []byte {
	f.t.Helper()
	r, err := f.e.Evidence.Dossier(f.ctx, f.org, dossierID)
	if err != nil {
		f.t.Fatal(err)
	}
	return r.Body
}

func (f *fixture) view(dossierID string) (map[string]any, string) {
	f.t.Helper()
	v, err := f.e.Privacy.Open(f.ctx, f.org, f.stored(dossierID))
	if err != nil {
		f.t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(v.Body, &m); err != nil {
		f.t.Fatal(err)
	}
	return m, v.Status
}

func code(err error) string {
	var ce *clearance.Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return ""
}

// Members inside other sealed members, array elements and numbers come
// back exactly; what the setting does not name is left alone.
func TestSealOpenNestedMembers(t *testing.T) {
	f := newFixture(t, true)
	if _, err := f.e.Privacy.PutSetting(f.ctx, f.org, []byte(`{"subject":"/context/customer/id",
		"personal":["/context/customer/contact/email","/context/customer/contact","/context/accounts/1","/context/missing"]}`)); err != nil {
		t.Fatal(err)
	}
	body := `{"amount":5,"actor":{"id":"agent-7","type":"agent"},"context":{"customer":{"id":9007199254740991,
		"contact":{"email":"e@example.com","phone":"+1 555"}},"accounts":["ACC-1","ACC-2"],"kept":"yes"}}`
	id := f.decide(body)
	stored := f.stored(id)
	for _, v := range []string{"e@example.com", "+1 555", "ACC-2", "9007199254740991"} {
		if bytes.Contains(stored, []byte(v)) {
			t.Fatalf("%q stored in the clear: %s", v, stored)
		}
	}
	if !bytes.Contains(stored, []byte(`"ACC-1"`)) || !bytes.Contains(stored, []byte(`"agent-7"`)) {
		t.Fatalf("a member the setting does not name was sealed: %s", stored)
	}
	m, status := f.view(id)
	if status != privacy.StatusOpen {
		t.Fatalf("status %q", status)
	}
	ctx := m["intent"].(map[string]any)["context"].(map[string]any)
	got, _ := json.Marshal(ctx)
	want := `{"accounts":["ACC-1","ACC-2"],"customer":{"contact":{"email":"e@example.com","phone":"+1 555"},"id":9007199254740991},"kept":"yes"}`
	if string(got) != want {
		t.Fatalf("restored context\n got %s\nwant %s", got, want)
	}
	if m["intent_as_received"] != body || m["actor"].(map[string]any)["id"] != "agent-7" {
		t.Fatalf("restored: %v", m)
	}
}

// Without a setting nothing changes; an intent without any named member
// is stored as it is; a setting without a secrets key is refused, and so
// is a decision that would need one.
func TestSettingScope(t *testing.T) {
	f := newFixture(t, true)
	plain := f.decide(`{"amount":5,"actor":{"id":"c-1","type":"customer"}}`)
	if bytes.Contains(f.stored(plain), []byte("personal_data")) {
		t.Fatal("sealed without a setting")
	}
	if _, err := f.e.Privacy.Setting(f.ctx, f.org); code(err) != privacy.CodeSettingNotFound {
		t.Fatalf("Setting before one: %v", err)
	}
	if _, err := f.e.Privacy.PutSetting(f.ctx, f.org, []byte(`{"subject":"/actor/id"}`)); err != nil {
		t.Fatal(err)
	}
	if got, err := f.e.Privacy.Setting(f.ctx, f.org); err != nil || got.Subject != "/actor/id" || len(got.Personal) != 0 {
		t.Fatalf("Setting: %+v %v", got, err)
	}
	none := f.decide(`{"amount":5}`)
	if bytes.Contains(f.stored(none), []byte("personal_data")) {
		t.Fatal("an intent without the subject was sealed")
	}
	if _, status := f.view(plain); status != "" {
		t.Fatalf("a dossier recorded before the setting: status %q", status)
	}

	g := newFixture(t, false)
	if _, err := g.e.Privacy.PutSetting(g.ctx, g.org, []byte(`{"subject":"/actor/id"}`)); code(err) != privacy.CodeSecretsNotConfigured {
		t.Fatalf("setting without a secrets key: %v", err)
	}
}

// Replays skip erased dossiers with their reason; reproduce refuses them;
// the other subject's dossiers replay.
func TestReplayAfterErasure(t *testing.T) {
	f := newFixture(t, true)
	if _, err := f.e.Privacy.PutSetting(f.ctx, f.org, []byte(`{"subject":"/actor/id"}`)); err != nil {
		t.Fatal(err)
	}
	from := time.Now().Add(-time.Hour).UTC()
	gone := f.decide(`{"workflow_key":"ap","amount":5,"actor":{"id":"c-gone","type":"customer"}}`)
	f.decide(`{"workflow_key":"ap","amount":900,"actor":{"id":"c-kept","type":"customer"}}`)
	if _, err := f.e.Privacy.Erase(f.ctx, privacy.ErasureRequest{OrgID: f.org, Body: []byte(`{"subject_id":"c-gone"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.e.Policies.PublishBundle(f.ctx, f.org, []byte(`{"bundle_id":"pay","version":"v1","mode":"SHADOW","rules":[
		{"id":"big","match":[{"field":"amount","op":"ge","value":500}],"outcome":"BLOCK","reason_codes":["BIG"]}],
		"default":{"outcome":"ALLOW","reason_codes":["OK"]}}`)); err != nil {
		t.Fatal(err)
	}
	rp, _, err := f.e.Policies.StartReplay(f.ctx, f.org, []byte(`{"version":"v1","from":"`+from.Format(time.RFC3339)+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	if r := rp.Result; r == nil || r.Total != 2 || r.Replayed != 1 || r.SkippedBy["SUBJECT_ERASED"] != 1 {
		t.Fatalf("replay: %+v", rp.Result)
	}
	if _, err := f.e.Policies.Reproduce(f.ctx, f.org, gone); code(err) != policies.CodeNotReplayable ||
		!strings.Contains(err.Error(), "SUBJECT_ERASED") {
		t.Fatalf("reproduce an erased dossier: %v", err)
	}
}

// A receipt altered or presented with another key does not verify; an
// erasure repeated answers the same receipt; another org's erasure of the
// same subject id touches nothing of this org.
func TestReceipts(t *testing.T) {
	f := newFixture(t, true)
	if _, err := f.e.Privacy.PutSetting(f.ctx, f.org, []byte(`{"subject":"/actor/id"}`)); err != nil {
		t.Fatal(err)
	}
	id := f.decide(`{"amount":5,"actor":{"id":"c-1","type":"customer"}}`)
	r, err := f.e.Privacy.Erase(f.ctx, privacy.ErasureRequest{OrgID: f.org, Body: []byte(`{"subject_id":"c-1"}`)})
	if err != nil || r.Replayed {
		t.Fatalf("Erase: %+v %v", r, err)
	}
	again, err := f.e.Privacy.Erase(f.ctx, privacy.ErasureRequest{OrgID: f.org, Body: []byte(`{"subject_id":"c-1"}`)})
	if err != nil || !again.Replayed || again.Receipt != r.Receipt {
		t.Fatalf("a repeated erasure: %+v %v", again, err)
	}
	parts := strings.Split(r.Receipt, ".")
	forged := parts[0] + "." + strings.TrimSuffix(parts[1], "Q") + "R." + parts[2]
	if _, err := privacy.VerifyReceipt(forged, f.key.VerifierKey()); err == nil {
		t.Fatal("an altered receipt verifies")
	}
	other, _ := ledger.NewKey("privacy-test", bytes.Repeat([]byte{8}, 32))
	if _, err := privacy.VerifyReceipt(r.Receipt, other.VerifierKey()); err == nil {
		t.Fatal("a receipt verifies under another key")
	}
	if _, err := privacy.VerifyReceipt(r.Receipt, f.key.VerifierKey()); err != nil {
		t.Fatal(err)
	}
	if _, status := f.view(id); status != privacy.StatusErased {
		t.Fatalf("status after erasure %q", status)
	}
	// The subject comes back: a new key, readable, erasable again.
	id2 := f.decide(`{"amount":6,"actor":{"id":"c-1","type":"customer"}}`)
	if _, status := f.view(id2); status != privacy.StatusOpen {
		t.Fatalf("a new decision of an erased subject: %q", status)
	}
	if _, status := f.view(id); status != privacy.StatusErased {
		t.Fatalf("the erased dossier after the subject's new key: %q", status)
	}
	third, err := f.e.Privacy.Erase(f.ctx, privacy.ErasureRequest{OrgID: f.org, Body: []byte(`{"subject_id":"c-1"}`)})
	if err != nil || third.Replayed || third.Payload.DossiersAffected != 1 {
		t.Fatalf("erasing the returned subject: %+v %v", third, err)
	}
}

// Concurrent decisions of one subject share one key and are all counted
// (the key is read, made and counted in each decision's transaction);
// an erasure racing them destroys what was committed before it, and a
// decision after it gets a key of its own.
func TestConcurrentDecisionsOneKey(t *testing.T) {
	f := newFixture(t, true)
	if _, err := f.e.Privacy.PutSetting(f.ctx, f.org, []byte(`{"subject":"/actor/id"}`)); err != nil {
		t.Fatal(err)
	}
	const n = 16
	var wg sync.WaitGroup
	ids := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			d, err := f.e.Evaluate(f.ctx, clearance.EvaluateRequest{OrgID: f.org, Route: clearance.RouteEvaluateDecision,
				Body: []byte(`{"amount":5,"actor":{"id":"c-many","type":"customer"}}`)})
			ids[i], errs[i] = d.DossierID, err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	keys := map[string]bool{}
	for _, id := range ids {
		var d struct {
			PersonalData struct {
				KeyID string `json:"key_id"`
			} `json:"personal_data"`
		}
		if err := json.Unmarshal(f.stored(id), &d); err != nil {
			t.Fatal(err)
		}
		keys[d.PersonalData.KeyID] = true
	}
	if len(keys) != 1 {
		t.Fatalf("%d keys for one subject: %v", len(keys), keys)
	}
	r, err := f.e.Privacy.Erase(f.ctx, privacy.ErasureRequest{OrgID: f.org, Body: []byte(`{"subject_id":"c-many"}`)})
	if err != nil || r.Payload.DossiersAffected != n || len(r.Payload.KeysDestroyed) != 1 || !keys[r.Payload.KeysDestroyed[0]] {
		t.Fatalf("erasure: %+v %v", r.Payload, err)
	}
	for _, id := range ids {
		if _, status := f.view(id); status != privacy.StatusErased {
			t.Fatalf("dossier %s: %q", id, status)
		}
	}
}

// A server started without the secrets key of an org with a setting
// refuses the decisions it would have to seal (never records them in the
// clear) and records the others.
func TestSealingFailsClosedWithoutSecrets(t *testing.T) {
	dir := t.TempDir()
	key, _ := ledger.NewKey("privacy-test", bytes.Repeat([]byte{7}, 32))
	open := func(secrets []byte) (*clearance.Engine, func()) {
		b, err := pebblestore.Open(dir, pebblestore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		e, err := clearance.Open(b, clearance.Options{LedgerKey: key, SecretsKey: secrets})
		if err != nil {
			t.Fatal(err)
		}
		return e, func() { b.Close() }
	}
	ctx := context.Background()
	e, closeStore := open([]byte("privacy-test-secrets-key-32-bytes!!"))
	o, err := e.Admin.CreateOrg(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Privacy.PutSetting(ctx, o.Org.ID, []byte(`{"subject":"/actor/id"}`)); err != nil {
		t.Fatal(err)
	}
	closeStore()
	e, closeStore = open(nil)
	defer closeStore()
	req := func(body string) error {
		_, err := e.Evaluate(ctx, clearance.EvaluateRequest{OrgID: o.Org.ID, Route: clearance.RouteEvaluateDecision, Body: []byte(body)})
		return err
	}
	if err := req(`{"amount":5,"actor":{"id":"c-1","type":"customer"}}`); code(err) != privacy.CodeSecretsNotConfigured {
		t.Fatalf("a decision to seal without the secrets key: %v", err)
	}
	if err := req(`{"amount":5}`); err != nil {
		t.Fatalf("a decision with nothing to seal: %v", err)
	}
}

// A decision's other records (grant, answer, escalation) are sealed under
// its subject's key, each for its own record: they open only there, and
// not at all once the subject is erased. An org without a setting gets no
// sealer.
func TestSealedRecordsOpenForTheirRecordUntilErased(t *testing.T) {
	f := newFixture(t, true)
	body := dossier.Body{OrgID: f.org, DossierID: "0190a1b2-0000-7000-8000-000000000001"}
	body.SetCanonicalIntent([]byte(`{"actor":{"id":"cust-1","type":"agent"},"amount":5}`))
	seal := func() (*dossier.Body, dossier.Sealer) {
		t.Helper()
		var out *dossier.Body
		var sealer dossier.Sealer
		err := f.b.Update(f.ctx, f.org, func(tx store.Tx) error {
			var err error
			out, sealer, err = f.e.Privacy.Seal(f.ctx, tx, &body)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out, sealer
	}
	if out, sealer := seal(); out != nil || sealer != nil {
		t.Fatalf("an org without a setting: %v %v", out, sealer)
	}
	if _, err := f.e.Privacy.PutSetting(f.ctx, f.org, []byte(`{"subject":"/actor/id","personal":[]}`)); err != nil {
		t.Fatal(err)
	}
	out, sealer := seal()
	if out == nil || sealer == nil {
		t.Fatal("no sealer for a sealed dossier")
	}
	sealed, err := sealer.Seal([]byte("grant token of cust-1"), "grant/"+f.org+"/g-1")
	if err != nil || sealed.KeyID != out.PersonalData.KeyID || strings.Contains(sealed.Ciphertext, "cust-1") {
		t.Fatalf("sealed %+v: %v", sealed, err)
	}
	plain, erased, err := f.e.Privacy.OpenSealed(f.ctx, f.org, sealed, "grant/"+f.org+"/g-1")
	if err != nil || erased || string(plain) != "grant token of cust-1" {
		t.Fatalf("open: %q %v %v", plain, erased, err)
	}
	for _, where := range []string{"grant/" + f.org + "/g-2", "dossier/" + f.org + "/" + body.DossierID} {
		if _, _, err := f.e.Privacy.OpenSealed(f.ctx, f.org, sealed, where); code(err) != privacy.CodePersonalDataUnreadable {
			t.Fatalf("opened for %s: %v", where, err)
		}
	}
	// Another org has no such key: nothing opens there.
	if plain, erased, err := f.e.Privacy.OpenSealed(f.ctx, "other-org", sealed, "grant/"+f.org+"/g-1"); plain != nil || (!erased && err == nil) {
		t.Fatalf("opened in another org: %q %v %v", plain, erased, err)
	}
	if _, err := f.e.Privacy.Erase(f.ctx, privacy.ErasureRequest{OrgID: f.org, Body: []byte(`{"subject_id":"cust-1"}`)}); err != nil {
		t.Fatal(err)
	}
	plain, erased, err = f.e.Privacy.OpenSealed(f.ctx, f.org, sealed, "grant/"+f.org+"/g-1")
	if err != nil || !erased || plain != nil {
		t.Fatalf("after erasure: %q %v %v", plain, erased, err)
	}
}

// A member that holds the actor id (here /actor) seals the dossier's own
// copy of it too; personal data without a subject gets a key of its
// dossier's own, never one key shared by every subject-less dossier.
func TestSealingCoversCopiesAndSubjectlessData(t *testing.T) {
	f := newFixture(t, true)
	if _, err := f.e.Privacy.PutSetting(f.ctx, f.org, []byte(`{"subject":"/context/customer/id","personal":["/actor","/context/customer/email"]}`)); err != nil {
		t.Fatal(err)
	}
	id := f.decide(`{"amount":5,"actor":{"id":"actor-secret-8841","type":"agent"},"context":{"customer":{"id":"c-1"}}}`)
	if stored := f.stored(id); bytes.Contains(stored, []byte("actor-secret-8841")) {
		t.Fatalf("the actor id is stored in the clear: %s", stored)
	}
	if m, _ := f.view(id); m["actor"].(map[string]any)["id"] != "actor-secret-8841" {
		t.Fatalf("the actor id does not open: %v", m["actor"])
	}
	keyOf := func(dossierID string) string {
		var b struct {
			PersonalData dossier.PersonalData `json:"personal_data"`
		}
		if err := json.Unmarshal(f.stored(dossierID), &b); err != nil || b.PersonalData.KeyID == "" {
			t.Fatalf("no personal data: %v", err)
		}
		return b.PersonalData.KeyID
	}
	a := f.decide(`{"amount":5,"context":{"customer":{"email":"a@example.com"}}}`)
	b := f.decide(`{"amount":5,"context":{"customer":{"id":{"x":1},"email":"b@example.com"}}}`)
	if keyOf(a) == keyOf(b) {
		t.Fatal("two dossiers without a subject share one key")
	}
	if keyOf(a) == keyOf(id) {
		t.Fatal("a dossier without a subject shares a subject's key")
	}
}
