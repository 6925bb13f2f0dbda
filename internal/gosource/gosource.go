// Package gosource lists the Go source files of one module, for the tests
// that guard the tree (internal/archtest, internal/apidoc). A module's files
// are those under its root, except nested modules (a directory with its own
// go.mod), testdata, vendor and directories whose name starts with "." or
// "_", as the go command sees it.
package gosource

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// File is one Go source file of a module.
type File struct {
	// Path is the file's path as walked (root joined with its relative path).
	Path string
	// Dir is its package directory relative to the root, slash-separated;
	// "" for the root package.
	Dir string
	// Test is true for a _test.go file.
	Test bool
}

// Files returns the Go files of the module rooted at root, in lexical
// walk order.
func Files(root string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == root {
				return nil
			}
			name := d.Name()
			if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(rel)
		if dir == "." {
			dir = ""
		}
		files = append(files, File{Path: path, Dir: dir, Test: strings.HasSuffix(path, "_test.go")})
		return nil
	})
	return files, err
}
