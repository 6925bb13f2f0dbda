package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExportSecretFile(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	// The data dir's secret is made once (0600) and read back after.
	data := t.TempDir()
	first, err := loadExportSecret(log, data, "", false)
	if err != nil || len(first) != 43 {
		t.Fatalf("created secret %q: %v", first, err)
	}
	fi, err := os.Stat(filepath.Join(data, exportSecretFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v", exportSecretFile, fi, err)
	}
	again, err := loadExportSecret(log, data, "", false)
	if err != nil || string(again) != string(first) {
		t.Fatalf("a second start made another secret: %q %v", again, err)
	}
	// An operator file must exist and be private; it is never created.
	dir := t.TempDir()
	own := filepath.Join(dir, "own.secret")
	if err := os.WriteFile(own, []byte(strings.Repeat("e", 40)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := loadExportSecret(log, t.TempDir(), own, true); err != nil || string(got) != strings.Repeat("e", 40) {
		t.Fatalf("operator file: %q %v", got, err)
	}
	if _, err := loadExportSecret(log, dir, filepath.Join(dir, "missing"), false); err == nil {
		t.Fatal("a missing --export-secret-file was accepted")
	}
	if err := os.Chmod(own, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadExportSecret(log, dir, own, false); err == nil {
		t.Fatal("a world-readable export secret was accepted")
	}
}
