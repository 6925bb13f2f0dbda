package keyfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

const (
	fileMode = 0o600
	dirMode  = 0o700
	// maxFileSize bounds what is read from a key or secret file.
	maxFileSize = 1 << 20
)

// checkPermissions reports whether fi, the stat of a key or secret file, is
// a regular file with no group or other permission bits.
func checkPermissions(path string, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is not a regular file", ErrInsecurePermissions, path)
	}
	if runtime.GOOS == "windows" {
		return nil
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%w: %s has mode %#o, want 0600 or stricter (chmod 600 %s)", ErrInsecurePermissions, path, perm, path)
	}
	return nil
}

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

// readPrivate reads a file after checking, on the open descriptor, that only
// its owner can access it.
func readPrivate(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkPermissions(path, fi); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrCorrupt, path, maxFileSize)
	}
	return data, nil
}

// writeAtomic writes data to path with mode 0600 through a temporary file in
// the same directory: write, fsync, then rename over path (replace) or
// hard-link to path (!replace, failing with an error wrapping fs.ErrExist if
// path exists), then fsync the directory.
func writeAtomic(path string, data []byte, replace bool) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if f != nil {
			_ = f.Close()
		}
		_ = os.Remove(tmp) // after a rename this is a harmless ENOENT
	}()
	if err := f.Chmod(fileMode); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	err = f.Close()
	f = nil
	if err != nil {
		return err
	}
	if replace {
		err = os.Rename(tmp, path)
	} else {
		err = os.Link(tmp, path)
	}
	if err != nil {
		var le *os.LinkError
		if errors.As(err, &le) && errors.Is(le.Err, fs.ErrExist) {
			return fmt.Errorf("keyfile: %s: %w", path, fs.ErrExist)
		}
		return err
	}
	return syncDir(dir)
}

// syncDir makes a rename or link in dir durable.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
