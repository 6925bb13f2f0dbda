package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// enforcedRefunds allows refunds below 1,000 and blocks the rest.
const enforcedRefunds = `{"bundle_id":"refunds","version":"v1","mode":"ENFORCEMENT",
 "rules":[{"id":"large","match":[{"field":"amount","op":"ge","value":1000}],"outcome":"BLOCK","reason_codes":["TOO_LARGE"]}],
 "default":{"outcome":"ALLOW","reason_codes":["WITHIN_LIMIT"]}}`

// refundIntentJSON is an intent file the agent commands take.
func refundIntentJSON(t *testing.T, dir, scope string, amount int) string {
	t.Helper()
	path := filepath.Join(dir, scope+".json")
	body := `{"actor":{"id":"agent-7","type":"agent"},"action":{"type":"refund","amount":` + itoa(amount) +
		`,"currency":"EUR","target":"order-1"},"workflow_key":"refunds","decision_type":"REFUND","concurrency_scope":"` + scope + `"}`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// The agent's CLI against a real server: an org by the admin commands, an
// agent key registered, an intent signed and bound, guarded cycles.
func TestAgentCommands(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	work := t.TempDir()
	base := []string{"CLEARANCE_SERVER=" + s.url, "CLEARANCE_DATA=" + dir}

	code, out, errOut := runCLI(t, base, "admin", "org", "create", "--name", "Acme", "--format", "env")
	if code != 0 || !strings.HasPrefix(out, "export CLEARANCE_API_KEY='clr_org_") || !strings.Contains(out, "export CLEARANCE_ORG_ID='") {
		t.Fatalf("org create --format env: exit %d, %q, %q", code, out, errOut)
	}
	envOf := func(name string) string {
		for _, line := range strings.Split(out, "\n") {
			if v, ok := strings.CutPrefix(line, "export "+name+"='"); ok {
				return strings.TrimSuffix(v, "'")
			}
		}
		t.Fatalf("%s not exported: %q", name, out)
		return ""
	}
	apiKey, orgID := envOf("CLEARANCE_API_KEY"), envOf("CLEARANCE_ORG_ID")
	agentEnv := append(base, "CLEARANCE_API_KEY="+apiKey, "CLEARANCE_ORG_ID="+orgID)
	mustCall(t, "POST", s.url+"/v1/protocol/policies/bundles", apiKey, enforcedRefunds, http.StatusCreated)

	keyFile := filepath.Join(work, "agent.key")
	code, out, errOut = runCLI(t, agentEnv, "keys", "agent", "new", "--out", keyFile, "--register")
	var made struct {
		KID        string `json:"kid"`
		Registered bool   `json:"registered"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &made) != nil || made.KID == "" || !made.Registered {
		t.Fatalf("keys agent new: exit %d, %q, %q", code, out, errOut)
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("agent key file: %v, %v", fi, err)
	}
	if code, _, errOut := runCLI(t, agentEnv, "keys", "agent", "new", "--out", keyFile); code != 1 || !strings.Contains(errOut, "exists") {
		t.Fatalf("an existing key file was replaced: exit %d, %q", code, errOut)
	}
	keys := mustCall(t, "GET", s.url+"/v1/execution/agent-keys", apiKey, "", http.StatusOK)
	if !strings.Contains(string(keys.raw), made.KID) {
		t.Fatalf("the agent key is not registered: %s", keys.raw)
	}

	// intent sign: the JWS enforce-and-bind takes.
	code, jws, errOut := runCLI(t, agentEnv, "intent", "sign", "--key-file", keyFile, refundIntentJSON(t, work, "sign", 120))
	if code != 0 || strings.Count(strings.TrimSpace(jws), ".") != 2 {
		t.Fatalf("intent sign: exit %d, %q, %q", code, jws, errOut)
	}
	bound := mustCall(t, "POST", s.url+"/v1/authority/enforce-and-bind", apiKey,
		`{"signed_intent":"`+strings.TrimSpace(jws)+`"}`, http.StatusOK)
	if str(bound.json, "outcome") != "ALLOW" || str(bound.json, "execution_token") == "" {
		t.Fatalf("the signed intent was not granted: %s", bound.raw)
	}

	// cycle: the command runs once under the claim, with its attestation.
	marker := filepath.Join(work, "refunded")
	code, out, errOut = runCLI(t, agentEnv, "cycle", "--key-file", keyFile, "--intent", refundIntentJSON(t, work, "commit", 120),
		"--", "sh", "-c", `printf '%s' "$CLEARANCE_GRANT_ID" > `+marker)
	var res cycleResult
	if code != 0 || json.Unmarshal([]byte(lastLine(out)), &res) != nil || !res.Ran || res.Finalized != "COMMITTED" || res.Outcome != "ALLOW" {
		t.Fatalf("cycle: exit %d, %q, %q", code, out, errOut)
	}
	if got, err := os.ReadFile(marker); err != nil || string(got) != res.GrantID {
		t.Fatalf("the command saw grant %q (%v), the cycle %q", got, err, res.GrantID)
	}

	// Blocked: exit 3, the command never runs.
	blocked := filepath.Join(work, "blocked")
	code, out, _ = runCLI(t, agentEnv, "cycle", "--key-file", keyFile, "--intent", refundIntentJSON(t, work, "block", 5000),
		"--", "touch", blocked)
	if code != 3 || !strings.Contains(out, `"outcome":"BLOCK"`) || !strings.Contains(out, `"ran":false`) {
		t.Fatalf("blocked cycle: exit %d, %q", code, out)
	}
	if _, err := os.Stat(blocked); !os.IsNotExist(err) {
		t.Fatalf("the command ran without a grant: %v", err)
	}

	// The command fails: FAILED, its exit status.
	code, out, _ = runCLI(t, agentEnv, "cycle", "--key-file", keyFile, "--intent", refundIntentJSON(t, work, "fail", 120),
		"--", "sh", "-c", "exit 7")
	if code != 7 || !strings.Contains(out, `"finalized":"FAILED"`) {
		t.Fatalf("failing command: exit %d, %q", code, out)
	}
	// Killed by a signal part way: nobody knows what it did, INDETERMINATE.
	code, out, _ = runCLI(t, agentEnv, "cycle", "--key-file", keyFile, "--intent", refundIntentJSON(t, work, "killed", 120),
		"--", "sh", "-c", "kill -9 $$")
	if code != 5 || !strings.Contains(out, `"finalized":"INDETERMINATE"`) {
		t.Fatalf("killed command: exit %d, %q", code, out)
	}
	// Evidence the command writes is sent with COMMITTED.
	code, out, _ = runCLI(t, agentEnv, "cycle", "--key-file", keyFile, "--intent", refundIntentJSON(t, work, "evidence", 120),
		"--", "sh", "-c", `printf '{"kind":"psp.refund","status":"CONFIRMED","effect_digest":"sha256:%064d"}' 0 > "$CLEARANCE_EFFECT_EVIDENCE_FILE"`)
	if code != 0 || !strings.Contains(out, `"finalized":"COMMITTED"`) {
		t.Fatalf("cycle with evidence: exit %d, %q", code, out)
	}
}

// The operator's admin commands: keys created with scopes, listed, revoked.
func TestAdminKeyCommands(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	base := []string{"CLEARANCE_SERVER=" + s.url, "CLEARANCE_DATA=" + dir}
	code, out, _ := runCLI(t, base, "admin", "org", "create", "--name", "Acme")
	var org struct {
		OrgID string `json:"org_id"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &org) != nil {
		t.Fatalf("org create: %d %q", code, out)
	}
	code, out, _ = runCLI(t, base, "admin", "org", "list")
	if code != 0 || !strings.Contains(out, org.OrgID) {
		t.Fatalf("org list: %d %q", code, out)
	}
	code, out, _ = runCLI(t, base, "admin", "scopes")
	if code != 0 || !strings.Contains(out, `"scope":"audit:read"`) {
		t.Fatalf("scopes: %d %q", code, out)
	}
	code, out, errOut := runCLI(t, base, "admin", "key", "create", "--org", org.OrgID, "--scopes", "audit:read, decision:read")
	var key struct {
		APIKey string `json:"api_key"`
		KeyID  string `json:"key_id"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &key) != nil || key.KeyID == "" {
		t.Fatalf("key create: %d %q %q", code, out, errOut)
	}
	mustCall(t, "GET", s.url+"/v1/protocol/audit/ledger/verify", key.APIKey, "", http.StatusOK)
	code, out, _ = runCLI(t, base, "admin", "key", "list", "--org", org.OrgID)
	if code != 0 || strings.Count(out, `"key_id"`) != 2 || strings.Contains(out, "clr_org_") {
		t.Fatalf("key list: %d %q", code, out)
	}
	code, out, _ = runCLI(t, base, "admin", "key", "revoke", "--org", org.OrgID, "--key-id", key.KeyID)
	if code != 0 || !strings.Contains(out, `"active":false`) {
		t.Fatalf("key revoke: %d %q", code, out)
	}
	mustCall(t, "GET", s.url+"/v1/protocol/audit/ledger/verify", key.APIKey, "", http.StatusUnauthorized)
	// Refusals: a bad scope (the server's 400), a missing flag (usage).
	if code, _, errOut := runCLI(t, base, "admin", "key", "create", "--org", org.OrgID, "--scopes", "admin"); code != 1 || !strings.Contains(errOut, "400") {
		t.Fatalf("bad scope: %d %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, base, "admin", "key", "revoke", "--org", org.OrgID); code != 2 || !strings.Contains(errOut, "--key-id") {
		t.Fatalf("no --key-id: %d %q", code, errOut)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
