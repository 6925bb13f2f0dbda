package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestVerifyOffline fetches evidence from a running server, then checks it
// with `clearance verify` and nothing but the published ledger key, and
// shows that a changed byte or a wrong key is refused.
func TestVerifyOffline(t *testing.T) {
	dir := t.TempDir()
	p := startServer(t, dir)
	plat := platformKey(t, dir)
	org := mustCall(t, "POST", p.url+"/v1/platform/orgs", plat, `{"name":"Audited"}`, http.StatusCreated)
	key, orgID := str(org.json, "api_key"), str(org.json, "org_id")
	d := mustCall(t, "POST", p.url+"/v1/protocol/evaluate-decision", key, `{"amount":7}`, http.StatusOK)
	dossier := p.url + "/v1/protocol/dossiers/" + str(d.json, "dossier_id")
	// Reads never seal: seal explicitly rather than wait for the sealer.
	seal := p.url + "/v1/protocol/audit/ledger/checkpoints"
	first := mustCall(t, "POST", seal, key, `{}`, http.StatusOK)
	mustCall(t, "POST", p.url+"/v1/protocol/evaluate-decision", key, `{"amount":8}`, http.StatusOK)
	mustCall(t, "POST", seal, key, `{}`, http.StatusOK)
	ledgerKey := strings.TrimSpace(string(mustCall(t, "GET", p.url+"/.well-known/clearance-ledger-key", "", "", http.StatusOK).raw))
	mustCall(t, "PUT", p.url+"/v1/orgs/"+orgID+"/data-protection", key, `{"subject":"/actor/id"}`, http.StatusOK)
	mustCall(t, "POST", p.url+"/v1/protocol/evaluate-decision", key, `{"amount":9,"actor":{"id":"cust-9","type":"customer"}}`, http.StatusOK)
	receipt := mustCall(t, "POST", p.url+"/v1/orgs/"+orgID+"/erasures", key, `{"subject_id":"cust-9"}`, http.StatusCreated).raw

	files := map[string][]byte{
		"packet.json":    mustCall(t, "GET", dossier+"/proof-packet?org_id="+orgID, key, "", http.StatusOK).raw,
		"capsule.json":   mustCall(t, "GET", dossier+"/agent-action-capsule?org_id="+orgID, key, "", http.StatusOK).raw,
		"envelopes.json": mustCall(t, "GET", dossier+"/agent-action-capsule/producer-envelopes?org_id="+orgID, key, "", http.StatusOK).raw,
		"consistency.json": mustCall(t, "GET", p.url+"/v1/protocol/audit/ledger/proofs/consistency?old_size="+
			jsonNumber(first.json["tree_size"]), key, "", http.StatusOK).raw,
		"receipt.json": receipt,
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := func(name string) string { return filepath.Join(dir, name) }
	verifyExit := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"verify"}, args...), &out, &errb)
		return code, out.String() + errb.String()
	}
	for _, c := range []struct {
		name string
		args []string
		want int
	}{
		{"packet", []string{"packet", "--ledger-key", ledgerKey, path("packet.json")}, 0},
		{"capsule and envelopes", []string{"capsule", "--envelopes", path("envelopes.json"), path("capsule.json")}, 0},
		{"ledger consistency", []string{"ledger", "--ledger-key", ledgerKey, path("consistency.json")}, 0},
		{"packet without a pinned key", []string{"packet", path("packet.json")}, 2},
		{"packet with another key", []string{"packet", "--ledger-key", "other+01020304+AZJzCPU9Z2VQPStkwQOrWqRyBqs5UCz+j5hEL9tUMQC3", path("packet.json")}, 1},
		{"consistency with another key", []string{"ledger", "--ledger-key", "other+01020304+AZJzCPU9Z2VQPStkwQOrWqRyBqs5UCz+j5hEL9tUMQC3", path("consistency.json")}, 1},
		{"erasure receipt", []string{"receipt", "--ledger-key", ledgerKey, path("receipt.json")}, 0},
		{"receipt without a pinned key", []string{"receipt", path("receipt.json")}, 2},
		{"receipt with another key", []string{"receipt", "--ledger-key", "other+01020304+AZJzCPU9Z2VQPStkwQOrWqRyBqs5UCz+j5hEL9tUMQC3", path("receipt.json")}, 1},
		{"not a receipt", []string{"receipt", "--ledger-key", ledgerKey, path("packet.json")}, 1},
		{"unknown artifact", []string{"bogus", path("packet.json")}, 2},
		{"missing file", []string{"capsule", path("nope.json")}, 2},
	} {
		if code, out := verifyExit(c.args...); code != c.want {
			t.Errorf("%s: exit %d, want %d: %s", c.name, code, c.want, out)
		}
	}
	// One changed byte of each artifact is caught.
	for _, c := range []struct{ file, old, new string }{
		{"packet.json", `"amount":7`, `"amount":9`},
		{"capsule.json", `"accept"`, `"reject"`},
		{"envelopes.json", `"cose_sign1":"`, `"cose_sign1":"A`},
		{"consistency.json", `"proof":["`, `"proof":["A`},
		{"receipt.json", `"receipt":"eyJ`, `"receipt":"eyK`},
	} {
		b := files[c.file]
		if !bytes.Contains(b, []byte(c.old)) {
			t.Fatalf("%s has no %s: %s", c.file, c.old, b)
		}
		if err := os.WriteFile(path("t-"+c.file), bytes.Replace(b, []byte(c.old), []byte(c.new), 1), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"packet", "--ledger-key", ledgerKey, path("t-packet.json")},
		{"capsule", path("t-capsule.json")},
		{"capsule", "--envelopes", path("t-envelopes.json"), path("capsule.json")},
		{"ledger", "--ledger-key", ledgerKey, path("t-consistency.json")},
		{"receipt", "--ledger-key", ledgerKey, path("t-receipt.json")},
	} {
		if code, out := verifyExit(args...); code != 1 {
			t.Errorf("verify %v of a tampered file: exit %d, want 1: %s", args, code, out)
		}
	}
}

func jsonNumber(v any) string {
	f, _ := v.(float64)
	return strconv.FormatUint(uint64(f), 10)
}
