package privatefile_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/clearancehq/clearance/internal/privatefile"
)

func TestWriteThenRead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secret")
	if err := privatefile.Write(path, []byte("one"), false); err != nil {
		t.Fatal(err)
	}
	if err := privatefile.Write(path, []byte("two"), false); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("a second create: %v, want fs.ErrExist", err)
	}
	if err := privatefile.Write(path, []byte("three"), true); err != nil {
		t.Fatal(err)
	}
	got, err := privatefile.Read(path, 16)
	if err != nil || !bytes.Equal(got, []byte("three")) {
		t.Fatalf("Read = %q, %v", got, err)
	}
	if fi, _ := os.Stat(path); runtime.GOOS != "windows" && fi.Mode().Perm() != privatefile.Mode {
		t.Fatalf("mode %#o", fi.Mode().Perm())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
	if _, err := privatefile.Read(path, 4); !errors.Is(err, privatefile.ErrTooLarge) {
		t.Fatalf("over the bound: %v", err)
	}
}

func TestReadRefusesWhatOthersMayAccess(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no POSIX permissions")
	}
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	if err := os.WriteFile(open, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := privatefile.Read(open, 16); !errors.Is(err, privatefile.ErrInsecure) {
		t.Fatalf("a 0644 file: %v", err)
	}
	if _, err := privatefile.Read(dir, 16); !errors.Is(err, privatefile.ErrInsecure) {
		t.Fatalf("a directory: %v", err)
	}
	if _, err := privatefile.Read(filepath.Join(dir, "missing"), 16); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
}
