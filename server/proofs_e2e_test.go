package server_test

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/capsule"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/proof"
	"github.com/clearancehq/clearance/server"
)

const pathLedgerKey = "/.well-known/clearance-ledger-key"

// TestLedgerCheckpointsAndProofs checks the ledger tree routes the way an
// auditor would: with the published verifier key and ledger package's
// offline verifiers only.
func TestLedgerCheckpointsAndProofs(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	o := x.o
	vkey := strings.TrimSpace(string(x.req(t, "GET", pathLedgerKey, "", nil, nil).want(t, http.StatusOK).Raw))
	if vkey != testLedgerKey(t).VerifierKey() {
		t.Fatalf("published ledger key %q, want the server's", vkey)
	}
	origin := ledger.Origin("clearance", o.ID)
	// checkpoint seals, then reads the latest checkpoint: the same answer.
	checkpoint := func() (ledger.Checkpoint, string) {
		t.Helper()
		sealed := x.req(t, "POST", pathSeal, o.Key, `{}`, nil).want(t, http.StatusOK)
		r := x.req(t, "GET", pathCheckpoint, o.Key, nil, nil).want(t, http.StatusOK)
		if string(r.Raw) != string(sealed.Raw) {
			t.Fatalf("the latest checkpoint %s is not the one just sealed %s", r, sealed)
		}
		c, err := ledger.VerifyCheckpoint(vkey, []byte(r.str("checkpoint")))
		if err != nil || c.Origin != origin || r.str("verifier_key") != vkey || uint64(r.num("tree_size")) != c.Size {
			t.Fatalf("checkpoint %s: %v", r, err)
		}
		return c, r.str("checkpoint")
	}
	x.req(t, "GET", pathCheckpoint, o.Key, nil, nil).wantProblem(t, http.StatusNotFound, clearance.CodeCheckpointNotFound)
	for i := range 5 {
		x.req(t, "POST", pathEvaluate, o.Key, `{"amount":`+strconv.Itoa(i+1)+`}`, nil).want(t, http.StatusOK)
	}
	old, oldNote := checkpoint()
	if head := x.head(o.Key); old.Size != uint64(head) {
		t.Fatalf("the checkpoint covers %d entries, the ledger has %d", old.Size, head)
	}
	for i := range 7 {
		x.req(t, "POST", pathEvaluate, o.Key, `{"amount":`+strconv.Itoa(i+10)+`}`, nil).want(t, http.StatusOK)
	}
	cur, _ := checkpoint()
	if cur.Size != old.Size+7 {
		t.Fatalf("new checkpoint size %d, want %d", cur.Size, old.Size+7)
	}

	// Every entry is in the latest tree, and the first ones in the old one.
	var entries struct{ Entries []ledger.Entry }
	if err := json.Unmarshal(x.req(t, "GET", pathLedger+"?limit=1000", o.Key, nil, nil).want(t, http.StatusOK).Raw, &entries); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries.Entries {
		for _, c := range []ledger.Checkpoint{old, cur} {
			if e.Seq > c.Size {
				continue
			}
			var p struct {
				LeafHash   tlog.Hash        `json:"leaf_hash"`
				Proof      tlog.RecordProof `json:"proof"`
				Checkpoint string           `json:"checkpoint"`
			}
			r := x.req(t, "GET", pathLedger+"/proofs/inclusion?seq="+strconv.FormatUint(e.Seq, 10)+"&tree_size="+strconv.FormatUint(c.Size, 10),
				o.Key, nil, nil).want(t, http.StatusOK)
			if err := json.Unmarshal(r.Raw, &p); err != nil {
				t.Fatal(err)
			}
			leaf, _ := e.LeafHash()
			if p.LeafHash != leaf || ledger.VerifyInclusion(c, leaf, e.Seq, p.Proof) != nil {
				t.Fatalf("inclusion of seq %d in %d does not verify: %s", e.Seq, c.Size, r)
			}
		}
	}
	// The new tree extends the old one.
	var cp struct {
		Proof         tlog.TreeProof `json:"proof"`
		OldCheckpoint string         `json:"old_checkpoint"`
	}
	r := x.req(t, "GET", pathLedger+"/proofs/consistency?old_size="+strconv.FormatUint(old.Size, 10), o.Key, nil, nil).want(t, http.StatusOK)
	if err := json.Unmarshal(r.Raw, &cp); err != nil {
		t.Fatal(err)
	}
	if cp.OldCheckpoint != oldNote || ledger.VerifyConsistency(old, cur, cp.Proof) != nil {
		t.Fatalf("consistency %d -> %d does not verify: %s", old.Size, cur.Size, r)
	}
	// Out of range and unknown sizes are refused.
	x.req(t, "GET", pathLedger+"/proofs/inclusion?seq="+strconv.FormatUint(cur.Size+1, 10), o.Key, nil, nil).
		wantProblem(t, http.StatusBadRequest, "PROOF_OUT_OF_RANGE")
	x.req(t, "GET", pathLedger+"/checkpoints/"+strconv.FormatUint(old.Size+1, 10), o.Key, nil, nil).
		wantProblem(t, http.StatusNotFound, "CHECKPOINT_NOT_FOUND")

	// The auditor's old checkpoint verifies now; once the tail before it is
	// cut and the head rewritten, it no longer does.
	q := "?checkpoint=" + base64.RawURLEncoding.EncodeToString([]byte(oldNote))
	if v := x.req(t, "GET", pathVerify+q, o.Key, nil, nil).want(t, http.StatusOK); v.JSON["valid"] != true {
		t.Fatalf("verify with the auditor's checkpoint: %s", v)
	}
	x.req(t, "GET", pathVerify+"?checkpoint=bm90IGEgbm90ZQ", o.Key, nil, nil).want(t, http.StatusOK)
	x.truncateLedger(t, o.ID, old.Size-1)
	v := x.req(t, "GET", pathVerify+q, o.Key, nil, nil).want(t, http.StatusOK)
	if v.JSON["valid"] != false || v.str("reason") != ledger.ReasonTruncated {
		t.Fatalf("a ledger cut before the auditor's checkpoint: %s", v)
	}
}

// TestProofPacket fetches a packet, verifies it as a third party would and
// shows that tampering with any part of it is reported.
func TestProofPacket(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	o := x.o
	other := x.createOrg("Other")
	vkey := testLedgerKey(t).VerifierKey()
	d := x.req(t, "POST", pathEvaluate, o.Key, `{"amount":1500}`, nil).want(t, http.StatusOK)
	for range 3 {
		x.req(t, "POST", pathEvaluate, o.Key, `{"amount":5}`, nil).want(t, http.StatusOK)
	}
	path := pathDossiers + d.str("dossier_id") + "/proof-packet"
	x.req(t, "POST", pathSeal, o.Key, `{}`, nil).want(t, http.StatusOK)
	r := x.req(t, "GET", path+"?org_id="+o.ID, o.Key, nil, nil).want(t, http.StatusOK)
	if v, _ := r.JSON["verification"].(map[string]any); v["valid"] != true {
		t.Fatalf("the server's own verification: %s", r)
	}
	if res := proof.Verify(r.Raw, vkey); !res.Valid {
		t.Fatalf("a third party's verification failed: %+v", res.Checks)
	}
	if res := proof.Verify(r.Raw, ""); res.Valid {
		t.Fatal("a packet verified without a pinned key")
	}
	if res := proof.Verify(r.Raw, x.otherLedgerKey(t)); res.Valid {
		t.Fatal("a packet verified with another ledger key")
	}
	var p map[string]json.RawMessage
	if err := json.Unmarshal(r.Raw, &p); err != nil {
		t.Fatal(err)
	}
	tamper := func(name, field string, change func(json.RawMessage) json.RawMessage, failing string) {
		t.Helper()
		q := map[string]json.RawMessage{}
		for k, v := range p {
			q[k] = v
		}
		q[field] = change(p[field])
		raw, _ := json.Marshal(q)
		res := proof.Verify(raw, vkey)
		if res.Valid {
			t.Errorf("%s: the packet still verifies", name)
			return
		}
		for _, c := range res.Checks {
			if c.Name == failing && !c.OK && c.Detail != "" {
				return
			}
		}
		t.Errorf("%s: check %s did not fail with a reason: %+v", name, failing, res.Checks)
	}
	replace := func(old, new string) func(json.RawMessage) json.RawMessage {
		return func(v json.RawMessage) json.RawMessage {
			return json.RawMessage(strings.Replace(string(v), old, new, 1))
		}
	}
	tamper("outcome changed in the dossier", "dossier", replace(`"ESCALATE"`, `"ALLOW"`), proof.CheckDossierDigest)
	tamper("another digest", "dossier_digest", replace("sha256:", "sha256:0"), proof.CheckDossierDigest)
	tamper("entry rewritten", "ledger_entry", replace(`"decision.recorded"`, `"policy.published"`), proof.CheckLedgerEntry)
	tamper("anchor moved", "ledger_anchor", replace(`"seq":`, `"seq":1`), proof.CheckLedgerAnchor)
	tamper("policy snapshot swapped", "policy_snapshot", replace(`"v1"`, `"v2"`), proof.CheckDossierFields)
	tamper("bundle signature flipped", "proof_bundle", func(v json.RawMessage) json.RawMessage {
		var b proof.Bundle
		_ = json.Unmarshal(v, &b)
		sig, _ := base64.RawURLEncoding.DecodeString(b.Signature)
		sig[0] ^= 1
		b.Signature = base64.RawURLEncoding.EncodeToString(sig)
		out, _ := json.Marshal(b)
		return out
	}, proof.CheckBundle)
	// A checkpoint of a later tree, validly signed, does not hold the old anchor's proof.
	later := x.req(t, "GET", pathCheckpoint, o.Key, nil, nil).want(t, http.StatusOK).str("checkpoint")
	x.req(t, "POST", pathEvaluate, o.Key, `{"amount":5}`, nil).want(t, http.StatusOK)
	newer := x.req(t, "POST", pathSeal, o.Key, `{}`, nil).want(t, http.StatusOK).str("checkpoint")
	if later == newer {
		t.Fatal("the checkpoint did not move")
	}
	tamper("checkpoint swapped", "ledger_anchor", func(v json.RawMessage) json.RawMessage {
		var a map[string]any
		_ = json.Unmarshal(v, &a)
		a["checkpoint"] = newer
		out, _ := json.Marshal(a)
		return out
	}, proof.CheckLedgerAnchor)

	// Required org_id, other orgs, unknown dossiers.
	x.req(t, "GET", path, o.Key, nil, nil).wantProblem(t, http.StatusBadRequest, "ORG_ID_REQUIRED")
	x.req(t, "GET", path+"?org_id="+other.ID, o.Key, nil, nil).wantProblem(t, http.StatusForbidden, "ORG_MISMATCH")
	x.req(t, "GET", path+"?org_id="+other.ID, other.Key, nil, nil).wantProblem(t, http.StatusNotFound, "DOSSIER_NOT_FOUND")
}

// TestLedgerReadsDoNotSeal: with a decision appended since the last seal,
// reading the checkpoint, proofs and the decision's proof packet changes no
// byte of the store; the packet waits (409 with Retry-After) until the seal
// route covers its entry, and then verifies. Only a key that may write the
// audit trail seals.
func TestLedgerReadsDoNotSeal(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	o := x.o
	other := x.createOrg("Other")
	vkey := testLedgerKey(t).VerifierKey()
	sealed := x.req(t, "POST", pathSeal, o.Key, `{}`, nil).want(t, http.StatusOK)
	size := strconv.FormatUint(uint64(sealed.num("tree_size")), 10)
	d := x.req(t, "POST", pathEvaluate, o.Key, `{"amount":5}`, nil).want(t, http.StatusOK)
	packet := pathDossiers + d.str("dossier_id") + "/proof-packet?org_id=" + o.ID

	before := x.fingerprint(t)
	if r := x.req(t, "GET", pathCheckpoint, o.Key, nil, nil).want(t, http.StatusOK); string(r.Raw) != string(sealed.Raw) {
		t.Fatalf("the latest checkpoint moved on a read: %s, sealed %s", r, sealed)
	}
	if r := x.req(t, "GET", pathLedger+"/proofs/inclusion?seq=1", o.Key, nil, nil).want(t, http.StatusOK); r.str("checkpoint") != sealed.str("checkpoint") {
		t.Fatalf("an inclusion proof against a newer checkpoint than the sealed one: %s", r)
	}
	if r := x.req(t, "GET", pathLedger+"/proofs/consistency?old_size="+size, o.Key, nil, nil).want(t, http.StatusOK); r.str("new_checkpoint") != sealed.str("checkpoint") {
		t.Fatalf("a consistency proof against a newer checkpoint than the sealed one: %s", r)
	}
	wait := x.req(t, "GET", packet, o.Key, nil, nil).wantProblem(t, http.StatusConflict, clearance.CodeEntryNotYetSealed)
	if ra := wait.Header.Get("Retry-After"); ra != "1" {
		t.Fatalf("Retry-After %q, want 1", ra)
	}
	if after := x.fingerprint(t); after != before {
		t.Fatalf("ledger reads changed the store: %s -> %s", before, after)
	}

	// A read-only key, or another org's, does not seal this org's ledger.
	readOnly := x.createKey(o, "audit:read")
	x.req(t, "POST", pathSeal, readOnly, `{}`, nil).wantProblem(t, http.StatusForbidden, clearance.CodeInsufficientScope)
	x.req(t, "POST", pathSeal+"?org_id="+o.ID, other.Key, `{}`, nil).wantProblem(t, http.StatusForbidden, clearance.CodeOrgMismatch)
	x.req(t, "POST", pathSeal, other.Key, `{}`, nil).want(t, http.StatusOK)
	x.req(t, "GET", packet, o.Key, nil, nil).wantProblem(t, http.StatusConflict, clearance.CodeEntryNotYetSealed)
	if after := x.fingerprint(t); after == before {
		t.Fatal("the other org's seal wrote nothing")
	}

	// The seal covers the entry; sealing again with nothing new answers
	// the same checkpoint.
	now := x.req(t, "POST", pathSeal, o.Key, `{}`, nil).want(t, http.StatusOK)
	if uint64(now.num("tree_size")) != x.head(o.Key) || now.str("org_id") != o.ID {
		t.Fatalf("seal covers %v entries of %d: %s", now.num("tree_size"), x.head(o.Key), now)
	}
	settled := x.fingerprint(t)
	if again := x.req(t, "POST", pathSeal, o.Key, `{}`, nil).want(t, http.StatusOK); string(again.Raw) != string(now.Raw) {
		t.Fatalf("a second seal with nothing new: %s, first %s", again, now)
	}
	if x.fingerprint(t) != settled {
		t.Fatal("a seal with nothing new changed the store")
	}
	p := x.req(t, "GET", packet, o.Key, nil, nil).want(t, http.StatusOK)
	if res := proof.Verify(p.Raw, vkey); !res.Valid {
		t.Fatalf("the packet after the seal: %+v", res.Checks)
	}
}

// TestAgentActionCapsules checks capsules of every kind of decision: each
// passes the Class 1 checks, says so only then, and carries a producer
// envelope that verifies with the raw key in its kid.
func TestAgentActionCapsules(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	o := x.o
	other := x.createOrg("Other")
	dossierOf := func(r *result) string { return r.str("dossier_id") }
	committed := x.grantFor(t, intentSpec{})
	ct := x.claimed(t, committed).str("claim_token")
	x.finalize(t, committed.token, ct, "COMMITTED", nil).want(t, http.StatusOK)
	failed := x.grantFor(t, intentSpec{})
	x.finalize(t, failed.token, x.claimed(t, failed).str("claim_token"), "FAILED", nil).want(t, http.StatusOK)
	pending := x.grantFor(t, intentSpec{})
	cases := []struct {
		name, dossier string
		chain         int
		effect        string // effect.status of the newest capsule ("" for none)
	}{
		{"ALLOW", dossierOf(x.req(t, "POST", pathEvaluate, o.Key, `{"amount":5}`, nil).want(t, http.StatusOK)), 1, ""},
		{"ESCALATE", dossierOf(x.req(t, "POST", pathEvaluate, o.Key, `{"amount":1500}`, nil).want(t, http.StatusOK)), 1, ""},
		{"REVIEW_REQUIRED", dossierOf(x.req(t, "POST", pathEvaluate, o.Key, `{"amount":6000}`, nil).want(t, http.StatusOK)), 1, ""},
		{"BLOCK", dossierOf(x.req(t, "POST", pathEvaluate, o.Key, `{"amount":20000}`, nil).want(t, http.StatusOK)), 1, ""},
		{"SHADOW", dossierOf(x.req(t, "POST", pathEvaluate, o.Key, `{"amount":5,"mode":"SHADOW"}`, nil).want(t, http.StatusOK)), 1, ""},
		{"granted, not finalized", dossierOf(pending.bind), 1, ""},
		{"finalized COMMITTED", dossierOf(committed.bind), 2, "dispatched"},
		{"finalized FAILED", dossierOf(failed.bind), 2, "failed"},
	}
	for _, c := range cases {
		path := pathDossiers + c.dossier + "/agent-action-capsule"
		r := x.req(t, "GET", path+"?org_id="+o.ID, o.Key, nil, nil).want(t, http.StatusOK)
		if r.Header.Get("Content-Type") != capsule.MediaType || r.Header.Get(server.HeaderCapsuleProfile) != capsule.SpecVersion ||
			r.Header.Get(server.HeaderClass1Verified) != "true" {
			t.Fatalf("%s: headers %v", c.name, r.Header)
		}
		res := capsule.Verify(r.Raw)
		if !res.OK || res.IDRecomputed == nil {
			t.Fatalf("%s: Class 1 of the served capsule: %+v", c.name, res.Findings)
		}
		var body struct {
			CapsuleID string `json:"capsule_id"`
			Effect    *struct {
				Status string `json:"status"`
			} `json:"effect"`
			Chain *struct{} `json:"chain"`
		}
		if err := json.Unmarshal(r.Raw, &body); err != nil {
			t.Fatal(err)
		}
		gotEffect := ""
		if body.Effect != nil {
			gotEffect = body.Effect.Status
		}
		if gotEffect != c.effect || (body.Chain != nil) != (c.chain > 1) || body.CapsuleID != res.IDRecomputed.String() {
			t.Fatalf("%s: effect %q chained %v id %s: %s", c.name, gotEffect, body.Chain != nil, body.CapsuleID, r.Raw)
		}
		// The producer envelope signs exactly this capsule's id.
		e := x.req(t, "GET", path+"/producer-envelopes?org_id="+o.ID, o.Key, nil, nil).want(t, http.StatusOK)
		var envs struct {
			CapsuleID string `json:"capsule_id"`
			Envelopes []struct {
				COSESign1 []byte `json:"cose_sign1"`
				PublicKey string `json:"public_key"`
			} `json:"envelopes"`
		}
		if err := json.Unmarshal(e.Raw, &envs); err != nil || envs.CapsuleID != body.CapsuleID || len(envs.Envelopes) != 1 {
			t.Fatalf("%s: envelopes %s", c.name, e)
		}
		pub, err := capsule.VerifyEnvelope(envs.Envelopes[0].COSESign1, *res.IDRecomputed)
		if err != nil || hex.EncodeToString(pub) != envs.Envelopes[0].PublicKey {
			t.Fatalf("%s: envelope: key %x, %v", c.name, pub, err)
		}
		var otherID capsule.ID
		otherID[0] = 1
		if _, err := capsule.VerifyEnvelope(envs.Envelopes[0].COSESign1, otherID); err == nil {
			t.Fatalf("%s: the envelope verified for another capsule id", c.name)
		}
		// Another org never sees it.
		x.req(t, "GET", path+"?org_id="+other.ID, other.Key, nil, nil).wantProblem(t, http.StatusNotFound, "DOSSIER_NOT_FOUND")
		x.req(t, "GET", path+"/producer-envelopes?org_id="+other.ID, other.Key, nil, nil).wantProblem(t, http.StatusNotFound, "DOSSIER_NOT_FOUND")
	}
}

// truncateLedger cuts the org's ledger after entry keep and moves the
// stored head back to it, behind the server's back: the tampering a hash
// chain alone cannot see.
func (x *execEnv) truncateLedger(t *testing.T, orgID string, keep uint64) {
	t.Helper()
	head := x.head(x.o.Key)
	x.stop()
	withRawDB(t, x.dbDir, func(db rawDB) {
		for s := keep + 1; s <= head; s++ {
			db.deleteEntry(orgID, s)
		}
		en := db.entry(orgID, keep)
		db.putHead(orgID, ledger.Head{Seq: en.Seq, EntryHash: en.EntryHash})
	})
	x.open(x.ring)
}

// otherLedgerKey is the verifier key of a ledger key the server does not hold.
func (x *execEnv) otherLedgerKey(t *testing.T) string {
	t.Helper()
	k, err := ledger.NewKey("clearance-test-ledger", []byte(strings.Repeat("o", 32)))
	if err != nil {
		t.Fatal(err)
	}
	return k.VerifierKey()
}
