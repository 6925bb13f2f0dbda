package clearance_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The repository is licensed (Apache-2.0, LICENSE), and NOTICE names every
// other licence file in the tree: data copied from others keeps its terms.
func TestLicenseAndNotice(t *testing.T) {
	license, err := os.ReadFile("LICENSE")
	if err != nil || !strings.Contains(string(license), "Apache License") || !strings.Contains(string(license), "Version 2.0, January 2004") {
		t.Fatalf("LICENSE is not the Apache License 2.0: %v", err)
	}
	notice, err := os.ReadFile("NOTICE")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") && path != "." {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "LICENSE" && path != "LICENSE" && !strings.Contains(string(notice), filepath.ToSlash(path)) {
			t.Errorf("NOTICE does not name %s", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
