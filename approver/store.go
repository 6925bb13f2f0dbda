package approver

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/privatefile"
)

// Store keeps the service's durable state as one snapshot that is replaced
// whole on every change. Save must be durable when it returns (a crash
// after it leaves the new snapshot or, if it failed, the old one, never a
// torn one); the service calls it with its lock held, one call at a time.
// Load returns nil and no error when nothing was saved yet.
type Store interface {
	Load() ([]byte, error)
	Save(snapshot []byte) error
}

// The files the service keeps in a data directory.
const (
	stateFile   = "state.json"
	lockFile    = "LOCK"
	keyFileName = "signing-key.json"
	fileMode    = 0o600
	dirMode     = 0o700
	maxFileSize = 256 << 20
)

// FileStore is a Store in a directory: the snapshot is state.json, written
// to a temporary file, fsynced, renamed over the old one, and the directory
// fsynced. The directory is locked while the store is open (on Unix), so two
// services never write one state.
type FileStore struct {
	dir  string
	lock *os.File
}

// OpenFileStore opens (and creates, 0700) the data directory dir and locks
// it. Close releases it.
func OpenFileStore(dir string) (*FileStore, error) {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return nil, fmt.Errorf("approver: data directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, fileMode)
	if err != nil {
		return nil, fmt.Errorf("approver: data directory lock: %w", err)
	}
	if err := lockExclusive(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("approver: data directory %s is in use by another process: %w", dir, err)
	}
	return &FileStore{dir: dir, lock: f}, nil
}

// Dir is the store's directory.
func (s *FileStore) Dir() string { return s.dir }

// Load reads state.json; nil when there is none yet.
func (s *FileStore) Load() ([]byte, error) {
	data, err := readPrivate(filepath.Join(s.dir, stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, err
}

// Save replaces state.json atomically and durably.
func (s *FileStore) Save(snapshot []byte) error {
	return writeAtomic(filepath.Join(s.dir, stateFile), snapshot, true)
}

// Close releases the directory lock.
func (s *FileStore) Close() error {
	if s.lock == nil {
		return nil
	}
	err := s.lock.Close() // closing the descriptor releases the lock
	s.lock = nil
	return err
}

// keyFile is the signing key on disk: the single-key form that Clearance's
// key files also accept ({"kid", "seed", "created_at"}, seed the 32-byte
// Ed25519 seed in unpadded base64url).
type keyFile struct {
	KID       string `json:"kid"`
	Seed      string `json:"seed"`
	CreatedAt string `json:"created_at"`
}

// LoadOrCreateKey returns the receipt signing key kept in dir
// (signing-key.json, 0600), creating it from crypto/rand on first use;
// created reports whether it did. A key file that group or others can read
// or write is refused, as is one whose kid does not match its seed.
func LoadOrCreateKey(dir string) (key grant.Key, created bool, err error) {
	path := filepath.Join(dir, keyFileName)
	key, err = readKey(path)
	if err == nil {
		return key, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return grant.Key{}, false, err
	}
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return grant.Key{}, false, err
	}
	key, err = grant.NewKey(rand.Reader)
	if err != nil {
		return grant.Key{}, false, err
	}
	data, err := json.Marshal(keyFile{KID: key.KID(), Seed: base64.RawURLEncoding.EncodeToString(key.Seed()),
		CreatedAt: time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		return grant.Key{}, false, err
	}
	if err := writeAtomic(path, data, false); errors.Is(err, fs.ErrExist) {
		key, err = readKey(path) // another process created it first: use theirs
		return key, false, err
	} else if err != nil {
		return grant.Key{}, false, err
	}
	return key, true, nil
}

func readKey(path string) (grant.Key, error) {
	data, err := readPrivate(path)
	if err != nil {
		return grant.Key{}, err
	}
	var kf keyFile
	if err := json.Unmarshal(data, &kf); err != nil {
		return grant.Key{}, fmt.Errorf("approver: key file %s: %w", path, err)
	}
	seed, err := base64.RawURLEncoding.DecodeString(kf.Seed)
	if err != nil {
		return grant.Key{}, fmt.Errorf("approver: key file %s: seed: %w", path, err)
	}
	key, err := grant.KeyFromSeed(seed)
	if err != nil {
		return grant.Key{}, fmt.Errorf("approver: key file %s: %w", path, err)
	}
	if kf.KID != key.KID() {
		return grant.Key{}, fmt.Errorf("approver: key file %s: kid %q does not match its seed", path, kf.KID)
	}
	return key, nil
}

// readPrivate reads a file only its owner may access (privatefile.Read).
func readPrivate(path string) ([]byte, error) {
	data, err := privatefile.Read(path, maxFileSize)
	if errors.Is(err, privatefile.ErrInsecure) || errors.Is(err, privatefile.ErrTooLarge) {
		return nil, fmt.Errorf("approver: %w", err)
	}
	return data, err
}

// writeAtomic writes data to path, 0600, whole or not at all
// (privatefile.Write; !replace refuses an existing path with fs.ErrExist).
func writeAtomic(path string, data []byte, replace bool) error {
	return privatefile.Write(path, data, replace)
}
