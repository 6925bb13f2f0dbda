package main

import (
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestServeShareLinksSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	if !s.hasLog("created share-link secret") {
		t.Errorf("first start should log the share secret's creation: %v", s.logLines())
	}
	path := filepath.Join(dir, shareSecretFile)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s has mode %v, want 0600", path, fi.Mode().Perm())
	}
	before, _ := os.ReadFile(path)

	plat := platformKey(t, dir)
	o := mustCall(t, "POST", s.url+"/v1/platform/orgs", plat, `{"name":"Share"}`, http.StatusCreated)
	key := str(o.json, "api_key")
	d := mustCall(t, "POST", s.url+"/v1/protocol/evaluate-decision", key, `{"amount":5}`, http.StatusOK)
	l := mustCall(t, "POST", s.url+"/v1/protocol/dossiers/"+str(d.json, "dossier_id")+"/share-links", key, `{}`, http.StatusCreated)
	url := s.url + str(l.json, "url")
	if v := mustCall(t, "GET", url, "", "", http.StatusOK); v.json["verified"] != true {
		t.Fatalf("verification: %s", v.raw)
	}
	if code := s.signal(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d", code)
	}

	// The same secret after a restart: the link still verifies.
	s = startServer(t, dir)
	if s.hasLog("created share-link secret") {
		t.Error("a restart made a new share secret")
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatal("the share secret changed across a restart")
	}
	url = s.url + str(l.json, "url")
	mustCall(t, "GET", url, "", "", http.StatusOK)
	mustCall(t, "GET", strings.Replace(url, "sig=", "sig=x", 1), "", "", http.StatusNotFound)
}

func TestShareSecretFile(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	own := filepath.Join(dir, "own.secret")
	if err := os.WriteFile(own, []byte(strings.Repeat("k", 40)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := loadShareSecret(log, t.TempDir(), own)
	if err != nil || string(got) != strings.Repeat("k", 40) {
		t.Fatalf("operator file: %q %v", got, err)
	}
	// An operator file must exist and be private; it is never created.
	if _, err := loadShareSecret(log, dir, filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing --share-secret-file was accepted")
	}
	if err := os.Chmod(own, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadShareSecret(log, dir, own); err == nil {
		t.Fatal("a world-readable share secret was accepted")
	}
	// The data dir's secret is made once, 32 random bytes as base64url.
	data := t.TempDir()
	first, err := loadShareSecret(log, data, "")
	if err != nil || len(first) != 43 {
		t.Fatalf("created secret %q: %v", first, err)
	}
	again, err := loadShareSecret(log, data, "")
	if err != nil || string(again) != string(first) {
		t.Fatalf("second load %q, first %q: %v", again, first, err)
	}
}
