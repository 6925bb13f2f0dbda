package keyfile

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/clearancehq/clearance/internal/privatefile"
)

const (
	dirMode = 0o700
	// maxFileSize bounds what is read from a key or secret file.
	maxFileSize = 1 << 20
)

// checkDir refuses a key directory that group or others can write to, since
// they could replace our files.
func checkDir(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", ErrInsecurePermissions, path)
	}
	if runtime.GOOS == "windows" {
		return nil
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%w: directory %s has mode %#o, want 0700 (chmod 700 %s)", ErrInsecurePermissions, path, perm, path)
	}
	return nil
}

// readPrivate reads a key or secret file after checking, on the open
// descriptor, that only its owner can access it.
func readPrivate(path string) ([]byte, error) {
	data, err := privatefile.Read(path, maxFileSize)
	switch {
	case errors.Is(err, privatefile.ErrInsecure):
		return nil, fmt.Errorf("%w: %v", ErrInsecurePermissions, err)
	case errors.Is(err, privatefile.ErrTooLarge):
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return data, err
}

// writeAtomic writes data to path, 0600, whole or not at all (see
// privatefile.Write).
func writeAtomic(path string, data []byte, replace bool) error {
	return privatefile.Write(path, data, replace)
}
