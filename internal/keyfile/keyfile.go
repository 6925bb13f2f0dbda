package keyfile

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/strictjson"
)

// formatVersion is the "version" of ring files written by this package.
const formatVersion = 1

// activeEntry is the active key of a ring file, and the single-key form
// LoadFile also accepts (where kid and created_at are optional).
type activeEntry struct {
	KID       string `json:"kid"`
	Seed      string `json:"seed"`
	CreatedAt string `json:"created_at,omitempty"`
}

// retiredEntry is a previous key of a ring file.
type retiredEntry struct {
	KID       string `json:"kid"`
	Seed      string `json:"seed"`
	CreatedAt string `json:"created_at"`
	RetiredAt string `json:"retired_at"`
	KeepUntil string `json:"keep_until"`
}

type ringFile struct {
	Version  int            `json:"version"`
	Active   activeEntry    `json:"active"`
	Previous []retiredEntry `json:"previous"`
}

// anyFile is every JSON form LoadFile accepts: a ring file, or a bare
// activeEntry.
type anyFile struct {
	Version   *int           `json:"version"`
	Active    *activeEntry   `json:"active"`
	Previous  []retiredEntry `json:"previous"`
	KID       string         `json:"kid"`
	Seed      string         `json:"seed"`
	CreatedAt string         `json:"created_at"`
}

// stored is a parsed ring file: the ring and each key's created_at.
type stored struct {
	ring    *grant.KeyRing
	created map[string]time.Time
}

// LoadOrCreate returns the active key of the ring file <dir>/keys/<name>.json,
// creating the directories (0700) and the file (0600) with a fresh key from
// crypto/rand when it does not exist; created reports whether it did. Two
// processes racing to create the same file end up with the same key.
func LoadOrCreate(dir, name string) (key grant.Key, created bool, err error) {
	path, err := ringPath(dir, name)
	if err != nil {
		return grant.Key{}, false, err
	}
	st, err := readRing(path)
	if err == nil {
		return st.ring.Active(), false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return grant.Key{}, false, err
	}
	keysDir := filepath.Dir(path)
	if err := os.MkdirAll(keysDir, dirMode); err != nil {
		return grant.Key{}, false, err
	}
	if err := checkDir(keysDir); err != nil {
		return grant.Key{}, false, err
	}
	key, err = grant.NewKey(rand.Reader)
	if err != nil {
		return grant.Key{}, false, err
	}
	now := time.Now()
	data, err := encodeRing(grant.NewKeyRing(key), map[string]time.Time{key.KID(): now})
	if err != nil {
		return grant.Key{}, false, err
	}
	err = writeAtomic(path, data, false)
	if errors.Is(err, fs.ErrExist) { // another process created it first: use theirs
		st, err := readRing(path)
		if err != nil {
			return grant.Key{}, false, err
		}
		return st.ring.Active(), false, nil
	}
	if err != nil {
		return grant.Key{}, false, err
	}
	return key, true, nil
}

// LoadRing reads the ring file <dir>/keys/<name>.json and returns its ring
// without the previous keys whose keep_until is not after now. The file is
// not rewritten. A missing file is an error wrapping fs.ErrNotExist.
func LoadRing(dir, name string, now time.Time) (*grant.KeyRing, error) {
	path, err := ringPath(dir, name)
	if err != nil {
		return nil, err
	}
	st, err := readRing(path)
	if err != nil {
		return nil, err
	}
	return st.ring.Prune(now), nil
}

// Rotate replaces the active key of the ring file <dir>/keys/<name>.json with
// a fresh key from crypto/rand. The old active key is kept, retired at now,
// until now + drain (the longest grant lifetime plus the longest claim
// lease); previous keys past their keep_until are dropped. The file is
// rewritten atomically and the new ring returned. A missing file is an error
// wrapping fs.ErrNotExist.
func Rotate(dir, name string, now time.Time, drain time.Duration) (*grant.KeyRing, error) {
	path, err := ringPath(dir, name)
	if err != nil {
		return nil, err
	}
	st, err := readRing(path)
	if err != nil {
		return nil, err
	}
	next, err := grant.NewKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	ring := st.ring.Prune(now).Rotate(next, now, drain)
	st.created[next.KID()] = now
	data, err := encodeRing(ring, st.created)
	if err != nil {
		return nil, err
	}
	if err := writeAtomic(path, data, true); err != nil {
		return nil, err
	}
	return ring, nil
}

// LoadFile reads an operator-provided signing key from path: a ring file (its
// active key), a single {"kid"?, "seed", "created_at"?} object, or a PEM
// "PRIVATE KEY" block holding an unencrypted PKCS#8 Ed25519 key. The file
// must be 0600 or stricter.
func LoadFile(path string) (grant.Key, error) {
	data, err := readPrivate(path)
	if err != nil {
		return grant.Key{}, err
	}
	key, err := parseKeyFile(data)
	if err != nil {
		return grant.Key{}, fmt.Errorf("%s: %w", path, err)
	}
	return key, nil
}

// parseKeyFile parses the contents of a file given to LoadFile.
func parseKeyFile(data []byte) (grant.Key, error) {
	trimmed := bytes.TrimSpace(data)
	if bytes.HasPrefix(trimmed, []byte("-----BEGIN")) {
		return parsePEM(trimmed)
	}
	var f anyFile
	if err := strictjson.Decode(trimmed, &f, strictjson.Options{RejectUnknown: true}); err != nil {
		return grant.Key{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if f.Active != nil || f.Version != nil || f.Previous != nil {
		if f.KID != "" || f.Seed != "" || f.CreatedAt != "" {
			return grant.Key{}, fmt.Errorf("%w: both a ring and a bare key", ErrCorrupt)
		}
		st, err := parseRing(trimmed)
		if err != nil {
			return grant.Key{}, err
		}
		return st.ring.Active(), nil
	}
	key, _, err := parseEntry(f.KID, f.Seed, f.CreatedAt, false)
	return key, err
}

func parsePEM(data []byte) (grant.Key, error) {
	block, rest := pem.Decode(data)
	if block == nil {
		return grant.Key{}, fmt.Errorf("%w: no PEM block", ErrCorrupt)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return grant.Key{}, fmt.Errorf("%w: data after the PEM block", ErrCorrupt)
	}
	switch block.Type {
	case "PRIVATE KEY":
	case "ENCRYPTED PRIVATE KEY":
		return grant.Key{}, fmt.Errorf("%w: encrypted PKCS#8 is not supported; decrypt it (openssl pkcs8 -in K -out K2)", ErrCorrupt)
	case "PUBLIC KEY":
		return grant.Key{}, fmt.Errorf("%w: a public key; a signing key file needs the private key", ErrCorrupt)
	default:
		return grant.Key{}, fmt.Errorf("%w: PEM block %q, want \"PRIVATE KEY\" (PKCS#8 Ed25519)", ErrCorrupt, block.Type)
	}
	if len(block.Headers) != 0 {
		return grant.Key{}, fmt.Errorf("%w: PEM headers are not supported", ErrCorrupt)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return grant.Key{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	priv, ok := parsed.(ed25519.PrivateKey)
	if !ok {
		return grant.Key{}, fmt.Errorf("%w: PKCS#8 key is %T, want Ed25519", ErrCorrupt, parsed)
	}
	return grant.KeyFromSeed(priv.Seed())
}

func ringPath(dir, name string) (string, error) {
	if !validName(name) {
		return "", fmt.Errorf("%w: %q", ErrInvalidName, name)
	}
	if dir == "" {
		return "", errors.New("keyfile: empty data dir")
	}
	return filepath.Join(dir, "keys", name+".json"), nil
}

func validName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i, c := range []byte(name) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '-' || c == '_') && i > 0:
		default:
			return false
		}
	}
	return true
}

// readRing reads and parses a ring file after checking its directory and its
// permissions.
func readRing(path string) (stored, error) {
	if err := checkDir(filepath.Dir(path)); err != nil {
		return stored{}, err
	}
	data, err := readPrivate(path)
	if err != nil {
		return stored{}, err
	}
	st, err := parseRing(data)
	if err != nil {
		return stored{}, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

func parseRing(data []byte) (stored, error) {
	var f ringFile
	if err := strictjson.Decode(data, &f, strictjson.Options{RejectUnknown: true}); err != nil {
		return stored{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if f.Version != formatVersion {
		return stored{}, fmt.Errorf("%w: version %d, want %d", ErrCorrupt, f.Version, formatVersion)
	}
	active, created, err := parseEntry(f.Active.KID, f.Active.Seed, f.Active.CreatedAt, true)
	if err != nil {
		return stored{}, fmt.Errorf("active: %w", err)
	}
	st := stored{created: map[string]time.Time{active.KID(): created}}
	var previous []grant.RetiredKey
	for i, e := range f.Previous {
		key, created, err := parseEntry(e.KID, e.Seed, e.CreatedAt, true)
		if err != nil {
			return stored{}, fmt.Errorf("previous[%d]: %w", i, err)
		}
		if _, dup := st.created[key.KID()]; dup {
			return stored{}, fmt.Errorf("%w: previous[%d]: kid %s appears twice", ErrCorrupt, i, key.KID())
		}
		retired, err := parseTime("retired_at", e.RetiredAt)
		if err != nil {
			return stored{}, fmt.Errorf("previous[%d]: %w", i, err)
		}
		keep, err := parseTime("keep_until", e.KeepUntil)
		if err != nil {
			return stored{}, fmt.Errorf("previous[%d]: %w", i, err)
		}
		st.created[key.KID()] = created
		previous = append(previous, grant.RetiredKey{Key: key, RetiredAt: retired, KeepUntil: keep})
	}
	st.ring = grant.NewKeyRing(active, previous...)
	return st, nil
}

// parseEntry decodes a seed and checks the kid stored beside it. In ring
// files (strict) kid and created_at are required.
func parseEntry(kid, seed, createdAt string, strict bool) (grant.Key, time.Time, error) {
	raw, err := base64.RawURLEncoding.Strict().DecodeString(seed)
	if err != nil || base64.RawURLEncoding.EncodeToString(raw) != seed {
		return grant.Key{}, time.Time{}, fmt.Errorf("%w: seed is not unpadded base64url", ErrCorrupt)
	}
	key, err := grant.KeyFromSeed(raw)
	clear(raw)
	if err != nil {
		return grant.Key{}, time.Time{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if kid == "" && strict {
		return grant.Key{}, time.Time{}, fmt.Errorf("%w: missing kid", ErrCorrupt)
	}
	if kid != "" && kid != key.KID() {
		return grant.Key{}, time.Time{}, fmt.Errorf("%w: kid %s does not match the seed (thumbprint %s)", ErrCorrupt, kid, key.KID())
	}
	var created time.Time
	if createdAt != "" || strict {
		if created, err = parseTime("created_at", createdAt); err != nil {
			return grant.Key{}, time.Time{}, err
		}
	}
	return key, created, nil
}

func parseTime(member, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %s %q is not an RFC 3339 time", ErrCorrupt, member, s)
	}
	return t, nil
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func encodeRing(r *grant.KeyRing, created map[string]time.Time) ([]byte, error) {
	a := r.Active()
	f := ringFile{
		Version: formatVersion,
		Active: activeEntry{
			KID:       a.KID(),
			Seed:      base64.RawURLEncoding.EncodeToString(a.Seed()),
			CreatedAt: formatTime(created[a.KID()]),
		},
		Previous: []retiredEntry{},
	}
	for _, p := range r.Previous() {
		f.Previous = append(f.Previous, retiredEntry{
			KID:       p.Key.KID(),
			Seed:      base64.RawURLEncoding.EncodeToString(p.Key.Seed()),
			CreatedAt: formatTime(created[p.Key.KID()]),
			RetiredAt: formatTime(p.RetiredAt),
			KeepUntil: formatTime(p.KeepUntil),
		})
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}
