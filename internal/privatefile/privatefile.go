// Package privatefile reads and writes files only their owner may access
// (keys, secrets, state): Read checks the permissions on the open
// descriptor (no swap between the check and the read) and bounds the size;
// Write makes the file appear whole or not at all, durably: a temporary
// file in the same directory, 0600, written and synced, then renamed over
// the target (or linked to it, never replacing one), then the directory
// synced. Standard library only.
package privatefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// Mode is the permission of every file Write makes.
const Mode = 0o600

var (
	// ErrInsecure: the file is not a regular file, or group or others may
	// access it.
	ErrInsecure = errors.New("privatefile: not a private regular file")
	// ErrTooLarge: the file is larger than the caller's bound.
	ErrTooLarge = errors.New("privatefile: file too large")
)

// Read returns the contents of path, at most max bytes, after checking on
// the open file that it is a regular file only its owner can access (on
// Windows, only that it is regular).
func Read(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrInsecure, path)
	}
	if perm := fi.Mode().Perm(); runtime.GOOS != "windows" && perm&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %#o, want 0600 or stricter (chmod 600 %s)", ErrInsecure, path, perm, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrTooLarge, path, max)
	}
	return data, nil
}

// Write writes data to path (Mode) through a temporary file in the same
// directory: write, fsync, then rename over path (replace) or hard-link to
// path (!replace: an error wrapping fs.ErrExist when path exists), then
// fsync the directory.
func Write(path string, data []byte, replace bool) (err error) {
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
	if err := f.Chmod(Mode); err != nil {
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
			return fmt.Errorf("%s: %w", path, fs.ErrExist)
		}
		return err
	}
	return SyncDir(dir)
}

// SyncDir makes a rename or link in dir durable (a no-op on Windows).
func SyncDir(dir string) error {
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
