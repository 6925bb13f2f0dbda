package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSharedProofBundleVerifiesOffline: a share link made with
// proof_bundle serves, without a credential, a packet that `clearance
// verify packet` accepts with nothing but the published ledger key; the
// same link reproduces the decision.
func TestSharedProofBundleVerifiesOffline(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	plat := platformKey(t, dir)
	o := mustCall(t, "POST", s.url+"/v1/platform/orgs", plat, `{"name":"Shared"}`, http.StatusCreated)
	key := str(o.json, "api_key")
	d := mustCall(t, "POST", s.url+"/v1/protocol/evaluate-decision", key, `{"amount":7}`, http.StatusOK)
	mustCall(t, "POST", s.url+"/v1/protocol/audit/ledger/checkpoints", key, `{}`, http.StatusOK)
	l := mustCall(t, "POST", s.url+"/v1/protocol/dossiers/"+str(d.json, "dossier_id")+"/share-links", key,
		`{"proof_bundle":true}`, http.StatusCreated)
	urls, _ := l.json["urls"].(map[string]any)
	bundle, _ := urls["proof_bundle"].(map[string]any)
	reproduce, _ := urls["reproduce"].(map[string]any)
	bundleURL, _ := bundle["url"].(string)
	reproduceURL, _ := reproduce["url"].(string)
	if bundleURL == "" || reproduceURL == "" {
		t.Fatalf("the link lists no proof bundle or reproduction: %s", l.raw)
	}

	packet := mustCall(t, "GET", s.url+bundleURL, "", "", http.StatusOK).raw
	if r := mustCall(t, "GET", s.url+reproduceURL, "", "", http.StatusOK); r.json["matches"] != true {
		t.Fatalf("reproduction: %s", r.raw)
	}
	ledgerKey := strings.TrimSpace(string(mustCall(t, "GET", s.url+"/.well-known/clearance-ledger-key", "", "", http.StatusOK).raw))
	path := filepath.Join(dir, "shared-packet.json")
	if err := os.WriteFile(path, packet, 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code := run(context.Background(), []string{"verify", "packet", "--ledger-key", ledgerKey, path}, &out, &out); code != 0 {
		t.Fatalf("verify packet: exit %d: %s", code, out.String())
	}
	// Revoked, the link opens nothing.
	mustCall(t, "DELETE", s.url+"/v1/protocol/share-links", key, "", http.StatusOK)
	mustCall(t, "GET", s.url+bundleURL, "", "", http.StatusNotFound)
	mustCall(t, "GET", s.url+reproduceURL, "", "", http.StatusNotFound)
}
