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

// revokedEntry is a revoked key of a ring file: its kid only, the seed is
// gone.
type revokedEntry struct {
	KID       string `json:"kid"`
	RevokedAt string `json:"revoked_at"`
}

// ringFile is the on-disk ring. "revoked" is left out while empty, so a file
// without revocations stays readable by earlier releases (which refuse one
// with revocations rather than accept the revoked keys).
type ringFile struct {
	Version  int            `json:"version"`
	Active   activeEntry    `json:"active"`
	Previous []retiredEntry `json:"previous"`
	Revoked  []revokedEntry `json:"revoked,omitempty"`
}

// anyFile is every JSON form LoadFile accepts: a ring file, or a bare
// activeEntry.
type anyFile struct {
	Version   *int           `json:"version"`
	Active    *activeEntry   `json:"active"`
	Previous  []retiredEntry `json:"previous"`
	Revoked   []revokedEntry `json:"revoked"`
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
// a fresh key from crypto/rand, as RotateFile does, after checking the keys
// directory. A missing file is an error wrapping fs.ErrNotExist.
func Rotate(dir, name string, now time.Time, drain time.Duration) (*grant.KeyRing, error) {
	path, err := ringPath(dir, name)
	if err != nil {
		return nil, err
	}
	if err := checkDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	return RotateFile(path, now, drain)
}

// RingPath is where the data dir dir keeps the ring file of the key name:
// <dir>/keys/<name>.json.
func RingPath(dir, name string) (string, error) { return ringPath(dir, name) }

// Create writes a new ring file at path holding one fresh key from
// crypto/rand, creating a missing parent directory (0700). It never
// replaces a file: if path exists, the error wraps fs.ErrExist.
func Create(path string) (grant.Key, error) {
	if err := os.MkdirAll(filepath.Dir(path), dirMode); err != nil {
		return grant.Key{}, err
	}
	key, err := grant.NewKey(rand.Reader)
	if err != nil {
		return grant.Key{}, err
	}
	data, err := encodeRing(grant.NewKeyRing(key), map[string]time.Time{key.KID(): time.Now()})
	if err != nil {
		return grant.Key{}, err
	}
	if err := writeAtomic(path, data, false); err != nil {
		return grant.Key{}, err
	}
	return key, nil
}

// ReadRing reads the key ring at path: a ring file with its previous keys
// (whatever their keep_until: KeyRing.Lookup and JWKS apply it) and its
// revocations, or a single key in any form LoadFile accepts as a ring of
// one. The file must be 0600 or stricter.
func ReadRing(path string) (*grant.KeyRing, error) {
	data, err := readPrivate(path)
	if err != nil {
		return nil, err
	}
	if !isRingFile(data) {
		key, err := parseKeyFile(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return grant.NewKeyRing(key), nil
	}
	st, err := parseRing(bytes.TrimSpace(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return st.ring, nil
}

// RotateFile replaces the active key of the ring file at path with a fresh
// key from crypto/rand. The old active key is kept, retired at now, until
// now + drain (the longest grant lifetime plus the longest claim lease);
// previous keys past their keep_until are dropped and revocations kept. The
// file is rewritten atomically and the new ring returned. A file holding a
// single key is refused with ErrNotRing; a missing one is an error wrapping
// fs.ErrNotExist.
func RotateFile(path string, now time.Time, drain time.Duration) (*grant.KeyRing, error) {
	st, err := readRingFile(path)
	if err != nil {
		return nil, err
	}
	next, err := grant.NewKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	st.created[next.KID()] = now
	return st.write(path, st.ring.Prune(now).Rotate(next, now, drain))
}

// RevokeFile revokes the key kid in the ring file at path at now: it is
// dropped from the file (seed included) and its kid recorded as revoked, so
// a server that reloads the file neither publishes nor accepts it. If kid is
// the active key, a fresh key from crypto/rand becomes active first and the
// old one is not kept. Revoking a revoked kid changes nothing; a kid the
// ring never held is refused with ErrUnknownKID. The file is rewritten
// atomically and the new ring returned.
func RevokeFile(path, kid string, now time.Time) (*grant.KeyRing, error) {
	st, err := readRingFile(path)
	if err != nil {
		return nil, err
	}
	ring := st.ring
	for _, r := range ring.Revoked() {
		if r.KID == kid {
			return ring, nil
		}
	}
	if _, held := st.created[kid]; !held {
		return nil, fmt.Errorf("%w: %s is not in %s", ErrUnknownKID, kid, path)
	}
	if ring.Active().KID() == kid {
		next, err := grant.NewKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		st.created[next.KID()] = now
		ring = ring.Rotate(next, now, 0)
	}
	if ring, err = ring.Revoke(kid, now); err != nil {
		return nil, err
	}
	return st.write(path, ring.Prune(now))
}

// readRingFile reads the ring file at path, refusing a single-key file.
func readRingFile(path string) (stored, error) {
	data, err := readPrivate(path)
	if err != nil {
		return stored{}, err
	}
	if !isRingFile(data) {
		if _, err := parseKeyFile(data); err != nil {
			return stored{}, fmt.Errorf("%s: %w", path, err)
		}
		return stored{}, fmt.Errorf("%w: %s holds a single key; rotation and revocation need a ring file (clearance keys init)", ErrNotRing, path)
	}
	st, err := parseRing(bytes.TrimSpace(data))
	if err != nil {
		return stored{}, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

// write replaces the ring file at path with ring, keeping the created_at of
// every key st knows.
func (st stored) write(path string, ring *grant.KeyRing) (*grant.KeyRing, error) {
	data, err := encodeRing(ring, st.created)
	if err != nil {
		return nil, err
	}
	if err := writeAtomic(path, data, true); err != nil {
		return nil, err
	}
	return ring, nil
}

// isRingFile reports whether data is a JSON ring file rather than a single
// key: an object with a "version" member. What it is not is left to the
// parsers to say.
func isRingFile(data []byte) bool {
	var probe struct {
		Version json.RawMessage `json:"version"`
	}
	trimmed := bytes.TrimSpace(data)
	return bytes.HasPrefix(trimmed, []byte("{")) && json.Unmarshal(trimmed, &probe) == nil && probe.Version != nil
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
	if f.Active != nil || f.Version != nil || f.Previous != nil || f.Revoked != nil {
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
	for i, e := range f.Revoked {
		at, err := parseTime("revoked_at", e.RevokedAt)
		if err != nil {
			return stored{}, fmt.Errorf("revoked[%d]: %w", i, err)
		}
		if e.KID == "" {
			return stored{}, fmt.Errorf("%w: revoked[%d]: missing kid", ErrCorrupt, i)
		}
		if e.KID == active.KID() {
			return stored{}, fmt.Errorf("%w: the active key %s is revoked", ErrCorrupt, e.KID)
		}
		// A previous key also listed as revoked is dropped: revocation wins.
		if st.ring, err = st.ring.Revoke(e.KID, at); err != nil {
			return stored{}, fmt.Errorf("%w: revoked[%d]: %v", ErrCorrupt, i, err)
		}
		delete(st.created, e.KID)
	}
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
	for _, r := range r.Revoked() {
		f.Revoked = append(f.Revoked, revokedEntry{KID: r.KID, RevokedAt: formatTime(r.RevokedAt)})
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}
