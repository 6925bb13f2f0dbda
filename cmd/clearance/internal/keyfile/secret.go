package keyfile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// maxSecretSize bounds a secret's length.
const maxSecretSize = 4096

// WriteSecret atomically writes secret and a newline to path with mode 0600,
// creating the parent directory (0700) if needed and replacing any existing
// file. A secret is 1 to 4096 printable ASCII characters without spaces.
func WriteSecret(path, secret string) error {
	if err := validSecret(secret); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidSecret, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), dirMode); err != nil {
		return err
	}
	return writeAtomic(path, []byte(secret+"\n"), true)
}

// ReadSecret reads a secret written by WriteSecret (or by hand: a trailing
// newline is dropped). The file must be 0600 or stricter.
func ReadSecret(path string) (string, error) {
	data, err := readPrivate(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	if err := validSecret(s); err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	return s, nil
}

func validSecret(s string) error {
	if s == "" || len(s) > maxSecretSize {
		return fmt.Errorf("secret must be 1 to %d bytes, got %d", maxSecretSize, len(s))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("secret has a space, control or non-ASCII byte at offset %d", i)
		}
	}
	return nil
}
