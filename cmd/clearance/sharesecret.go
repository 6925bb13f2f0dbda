package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/clearancehq/clearance/cmd/clearance/internal/keyfile"
)

// shareSecretFile is where serve keeps the share-link secret inside the
// data dir.
const shareSecretFile = "share-link.secret"

// loadShareSecret returns the secret that keys dossier share links: the
// operator's file (which must exist), or the one in the data dir, created
// on first start (0600, 32 random bytes as base64url).
func loadShareSecret(log *slog.Logger, dataDir, file string) ([]byte, error) {
	return loadOrCreateSecret(log, dataDir, shareSecretFile, file, "share-link secret")
}

// loadOrCreateSecret reads an operator's secret file (which must exist), or
// the named one in the data dir, created on first start (0600, 32 random
// bytes as base64url).
func loadOrCreateSecret(log *slog.Logger, dataDir, name, file, what string) ([]byte, error) {
	if file != "" {
		s, err := keyfile.ReadSecret(file)
		if err != nil {
			return nil, fmt.Errorf("%s file: %w", what, err)
		}
		return []byte(s), nil
	}
	path := filepath.Join(dataDir, name)
	s, err := keyfile.ReadSecret(path)
	if errors.Is(err, os.ErrNotExist) {
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		s = base64.RawURLEncoding.EncodeToString(b[:])
		if err := keyfile.WriteSecret(path, s); err != nil {
			return nil, fmt.Errorf("write %s: %w", what, err)
		}
		log.Info("created "+what, "file", path)
		return []byte(s), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	return []byte(s), nil
}
