package keyfile

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance/grant"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	// RFC 8037 Appendix A key: seed and RFC 7638 thumbprint.
	rfcD   = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"
	rfcKID = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"

	// RFC 8410 §10.3 private key, whose public key is given in §10.1.
	rfc8410PEM = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEINTuctv5E1hK1bbY8fdp+K06/nwoy/HU++CXqI9EdVhC\n-----END PRIVATE KEY-----\n"
	rfc8410Pub = "19bf44096984cdfe8541bac167dc3b96c85086aa30b6b6cb0c5c38ad703166e1"
)

func skipPermsOnWindows(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("permission bits are not checked on Windows")
	}
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func writeFile(t *testing.T, path, data string, perm fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil { // beat the umask
		t.Fatal(err)
	}
}

func TestLoadOrCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "clearance-data")
	k1, created, err := LoadOrCreate(dir, "grant")
	if err != nil || !created || k1.IsZero() {
		t.Fatalf("first LoadOrCreate = %v, %v, %v", k1, created, err)
	}
	k2, created, err := LoadOrCreate(dir, "grant")
	if err != nil || created || !k2.Equal(k1) || k2.KID() != k1.KID() {
		t.Fatalf("second LoadOrCreate = %v, %v, %v; want %v, false", k2, created, err, k1)
	}

	path := filepath.Join(dir, "keys", "grant.json")
	if runtime.GOOS != "windows" {
		if m := mode(t, path); m != 0o600 {
			t.Errorf("key file mode %#o, want 0600", m)
		}
		if m := mode(t, filepath.Join(dir, "keys")); m != 0o700 {
			t.Errorf("keys dir mode %#o, want 0700", m)
		}
		if m := mode(t, dir); m&0o077 != 0 {
			t.Errorf("data dir mode %#o, want 0700", m)
		}
	}

	var f struct {
		Version int `json:"version"`
		Active  struct {
			KID, Seed string
			CreatedAt string `json:"created_at"`
		} `json:"active"`
		Previous []any `json:"previous"`
	}
	raw, _ := os.ReadFile(path)
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if f.Version != 1 || f.Active.KID != k1.KID() || f.Active.Seed != base64.RawURLEncoding.EncodeToString(k1.Seed()) || f.Previous == nil || len(f.Previous) != 0 {
		t.Fatalf("file = %s", raw)
	}
	if _, err := time.Parse(time.RFC3339Nano, f.Active.CreatedAt); err != nil {
		t.Fatalf("created_at: %v", err)
	}

	other, created, err := LoadOrCreate(dir, "ledger")
	if err != nil || !created || other.Equal(k1) {
		t.Fatalf("second name: %v, %v, %v", other, created, err)
	}
	assertOnlyFiles(t, filepath.Join(dir, "keys"), "grant.json", "ledger.json")
}

// assertOnlyFiles checks that no temporary files were left behind.
func assertOnlyFiles(t *testing.T, dir string, want ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s holds %v, want %v", dir, got, want)
	}
}

func TestLoadOrCreateConcurrent(t *testing.T) {
	dir := t.TempDir()
	const n = 16
	keys := make([]grant.Key, n)
	created := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { keys[i], created[i], errs[i] = LoadOrCreate(dir, "grant") })
	}
	wg.Wait()
	winners := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("goroutine %d: %v", i, errs[i])
		}
		if !keys[i].Equal(keys[0]) {
			t.Fatalf("goroutine %d got another key", i)
		}
		if created[i] {
			winners++
		}
	}
	if winners != 1 {
		t.Fatalf("%d creators, want exactly 1", winners)
	}
	assertOnlyFiles(t, filepath.Join(dir, "keys"), "grant.json")
}

func TestInvalidNames(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"", "Grant", "../grant", "a/b", `a\b`, ".grant", "-grant", "_g", "grant.json", "g rant", strings.Repeat("a", 65)} {
		if _, _, err := LoadOrCreate(dir, name); !errors.Is(err, ErrInvalidName) {
			t.Errorf("LoadOrCreate(%q) = %v, want ErrInvalidName", name, err)
		}
		if _, err := LoadRing(dir, name, t0); !errors.Is(err, ErrInvalidName) {
			t.Errorf("LoadRing(%q) = %v, want ErrInvalidName", name, err)
		}
		if _, err := Rotate(dir, name, t0, time.Minute); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Rotate(%q) = %v, want ErrInvalidName", name, err)
		}
	}
	for _, name := range []string{"grant", "ledger", "a", "ledger-2", "key_1"} {
		if !validName(name) {
			t.Errorf("validName(%q) = false", name)
		}
	}
}

func TestRefusesLoosePermissions(t *testing.T) {
	skipPermsOnWindows(t)
	dir := t.TempDir()
	if _, _, err := LoadOrCreate(dir, "grant"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "keys", "grant.json")
	before, _ := os.ReadFile(path)
	for _, m := range []fs.FileMode{0o640, 0o604, 0o644, 0o660, 0o666, 0o601} {
		if err := os.Chmod(path, m); err != nil {
			t.Fatal(err)
		}
		if _, _, err := LoadOrCreate(dir, "grant"); !errors.Is(err, ErrInsecurePermissions) {
			t.Errorf("mode %#o: LoadOrCreate err = %v, want ErrInsecurePermissions", m, err)
		}
		if _, err := LoadRing(dir, "grant", t0); !errors.Is(err, ErrInsecurePermissions) {
			t.Errorf("mode %#o: LoadRing err = %v", m, err)
		}
		if _, err := Rotate(dir, "grant", t0, time.Minute); !errors.Is(err, ErrInsecurePermissions) {
			t.Errorf("mode %#o: Rotate err = %v", m, err)
		}
		if _, err := LoadFile(path); !errors.Is(err, ErrInsecurePermissions) {
			t.Errorf("mode %#o: LoadFile err = %v", m, err)
		}
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("a refused file was rewritten")
	}
	// 0400 is fine.
	if err := os.Chmod(path, 0o400); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreate(dir, "grant"); err != nil {
		t.Fatalf("mode 0400: %v", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}

	// A keys directory others can write to is refused.
	keys := filepath.Join(dir, "keys")
	for _, m := range []fs.FileMode{0o720, 0o702, 0o777} {
		if err := os.Chmod(keys, m); err != nil {
			t.Fatal(err)
		}
		if _, _, err := LoadOrCreate(dir, "grant"); !errors.Is(err, ErrInsecurePermissions) {
			t.Errorf("keys dir %#o: err = %v, want ErrInsecurePermissions", m, err)
		}
		if _, _, err := LoadOrCreate(dir, "fresh"); !errors.Is(err, ErrInsecurePermissions) {
			t.Errorf("keys dir %#o, new key: err = %v, want ErrInsecurePermissions", m, err)
		}
	}
	if err := os.Chmod(keys, 0o700); err != nil {
		t.Fatal(err)
	}

	// Not a regular file.
	if err := os.Mkdir(filepath.Join(keys, "dir.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreate(dir, "dir"); !errors.Is(err, ErrInsecurePermissions) {
		t.Errorf("directory as key file: err = %v", err)
	}
}

func TestRotatePersists(t *testing.T) {
	dir := t.TempDir()
	const drain = 150 * time.Second
	k1, _, err := LoadOrCreate(dir, "grant")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "keys", "grant.json")
	created1 := createdAt(t, path, k1.KID())

	r, err := Rotate(dir, "grant", t0, drain)
	if err != nil {
		t.Fatal(err)
	}
	k2 := r.Active()
	if k2.Equal(k1) {
		t.Fatal("Rotate kept the active key")
	}
	if runtime.GOOS != "windows" && mode(t, path) != 0o600 {
		t.Fatalf("mode after Rotate %#o", mode(t, path))
	}
	assertOnlyFiles(t, filepath.Join(dir, "keys"), "grant.json")

	// Reloaded: same ring.
	loaded, err := LoadRing(dir, "grant", t0)
	if err != nil {
		t.Fatal(err)
	}
	if !loaded.Active().Equal(k2) {
		t.Fatal("LoadRing active is not the rotated key")
	}
	prev := loaded.Previous()
	if len(prev) != 1 || !prev[0].Key.Equal(k1) || !prev[0].RetiredAt.Equal(t0) || !prev[0].KeepUntil.Equal(t0.Add(drain)) {
		t.Fatalf("previous = %+v", prev)
	}
	if got := createdAt(t, path, k1.KID()); !got.Equal(created1) {
		t.Fatalf("created_at of the old key changed: %v -> %v", created1, got)
	}
	if got := createdAt(t, path, k2.KID()); !got.Equal(t0) {
		t.Fatalf("created_at of the new key = %v, want %v", got, t0)
	}
	if k, created, err := LoadOrCreate(dir, "grant"); err != nil || created || !k.Equal(k2) {
		t.Fatalf("LoadOrCreate after Rotate = %v, %v, %v", k, created, err)
	}
	if n := len(loaded.JWKS(t0).Keys); n != 2 {
		t.Fatalf("JWKS has %d keys, want 2", n)
	}

	// After the drain LoadRing leaves the old key out but does not rewrite.
	late, err := LoadRing(dir, "grant", t0.Add(drain))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := late.Lookup(k1.KID(), t0); ok || len(late.Previous()) != 0 {
		t.Fatal("LoadRing after KeepUntil kept the old key")
	}
	if createdAt(t, path, k1.KID()).IsZero() {
		t.Fatal("LoadRing rewrote the file")
	}

	// The next rotation drops it from the file.
	r3, err := Rotate(dir, "grant", t0.Add(drain+time.Second), drain)
	if err != nil {
		t.Fatal(err)
	}
	again, err := LoadRing(dir, "grant", t0.Add(drain+time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := again.Lookup(k1.KID(), t0); ok {
		t.Fatal("pruned key still in the file")
	}
	if _, ok := again.Lookup(k2.KID(), t0); !ok || !again.Active().Equal(r3.Active()) {
		t.Fatal("second rotation lost keys")
	}
	if !createdAt(t, path, k1.KID()).IsZero() {
		t.Fatal("file still holds the pruned key")
	}
}

// createdAt returns the created_at stored for kid, or the zero time.
func createdAt(t *testing.T, path, kid string) time.Time {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f ringFile
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	var s string
	if f.Active.KID == kid {
		s = f.Active.CreatedAt
	}
	for _, p := range f.Previous {
		if p.KID == kid {
			s = p.CreatedAt
		}
	}
	if s == "" {
		return time.Time{}
	}
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func TestMissingFiles(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadRing(dir, "grant", t0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadRing of a missing ring: %v", err)
	}
	if _, err := Rotate(dir, "grant", t0, time.Minute); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Rotate of a missing ring: %v", err)
	}
	if _, err := LoadFile(filepath.Join(dir, "nope.pem")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadFile of a missing file: %v", err)
	}
	if _, err := ReadSecret(filepath.Join(dir, "nope")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadSecret of a missing file: %v", err)
	}
}

func TestLoadFileFormats(t *testing.T) {
	dir := t.TempDir()
	rfcKey, err := grant.KeyFromSeed(mustB64(rfcD))
	if err != nil {
		t.Fatal(err)
	}

	// The ring file LoadOrCreate writes.
	k, _, err := LoadOrCreate(dir, "grant")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := LoadFile(filepath.Join(dir, "keys", "grant.json")); err != nil || !got.Equal(k) {
		t.Fatalf("LoadFile(ring) = %v, %v", got, err)
	}
	// Rotated: the active key.
	r, err := Rotate(dir, "grant", t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := LoadFile(filepath.Join(dir, "keys", "grant.json")); err != nil || !got.Equal(r.Active()) {
		t.Fatalf("LoadFile(rotated ring) = %v, %v", got, err)
	}

	// PKCS#8 from Go.
	der, err := x509.MarshalPKCS8PrivateKey(ed25519.NewKeyFromSeed(rfcKey.Seed()))
	if err != nil {
		t.Fatal(err)
	}
	goPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))

	for name, tc := range map[string]struct {
		data string
		kid  string
		pub  string
	}{
		"bare seed":         {data: `{"seed":"` + rfcD + `"}`, kid: rfcKID},
		"bare kid":          {data: `{"kid":"` + rfcKID + `","seed":"` + rfcD + `","created_at":"2026-01-01T00:00:00Z"}`, kid: rfcKID},
		"ring":              {data: `{"version":1,"active":{"kid":"` + rfcKID + `","seed":"` + rfcD + `","created_at":"2026-01-01T00:00:00Z"},"previous":[]}`, kid: rfcKID},
		"pem from Go":       {data: goPEM, kid: rfcKID},
		"pem CRLF":          {data: strings.ReplaceAll(goPEM, "\n", "\r\n"), kid: rfcKID},
		"pem RFC 8410 10.3": {data: rfc8410PEM, pub: rfc8410Pub},
		"pem leading space": {data: "\n  " + rfc8410PEM + "\n\n", pub: rfc8410Pub},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		writeFile(t, path, tc.data, 0o600)
		got, err := LoadFile(path)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if tc.kid != "" && got.KID() != tc.kid {
			t.Errorf("%s: kid %s, want %s", name, got.KID(), tc.kid)
		}
		if tc.pub != "" && hex.EncodeToString(got.Public()) != tc.pub {
			t.Errorf("%s: public %x, want %s", name, got.Public(), tc.pub)
		}
	}
}

func TestLoadFileOpenSSL(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl not installed")
	}
	path := filepath.Join(t.TempDir(), "k.pem")
	if out, err := exec.Command(openssl, "genpkey", "-algorithm", "ed25519", "-out", path).CombinedOutput(); err != nil {
		t.Skipf("openssl genpkey: %v: %s", err, out)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(openssl, "pkey", "-in", path, "-pubout", "-outform", "DER").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(out, k.Public()) {
		t.Fatalf("openssl public key %x does not end with %x", out, k.Public())
	}
}

func TestLoadFileRejects(t *testing.T) {
	dir := t.TempDir()
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), onesReader{})
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ecKey)
	pubDER, _ := x509.MarshalPKIXPublicKey(ed25519.NewKeyFromSeed(make([]byte, 32)).Public())
	edDER, _ := x509.MarshalPKCS8PrivateKey(ed25519.NewKeyFromSeed(make([]byte, 32)))
	pemOf := func(typ string, der []byte, headers map[string]string) string {
		return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der, Headers: headers}))
	}
	for name, data := range map[string]string{
		"empty":           "",
		"garbage":         "hello",
		"json array":      "[]",
		"bare wrong kid":  `{"kid":"abc","seed":"` + rfcD + `"}`,
		"bare short seed": `{"seed":"` + rfcD[:40] + `"}`,
		"bare padded":     `{"seed":"` + rfcD + `="}`,
		"bare std b64":    `{"seed":"` + base64.StdEncoding.EncodeToString(mustB64(rfcD)) + `"}`,
		"bare no seed":    `{"kid":"` + rfcKID + `"}`,
		"bare extra":      `{"seed":"` + rfcD + `","d":"x"}`,
		"ring and bare":   `{"version":1,"seed":"` + rfcD + `","active":{"kid":"` + rfcKID + `","seed":"` + rfcD + `","created_at":"2026-01-01T00:00:00Z"}}`,
		"jwk":             `{"kty":"OKP","crv":"Ed25519","d":"` + rfcD + `","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}`,
		"pem ec":          pemOf("PRIVATE KEY", ecDER, nil),
		"pem public":      pemOf("PUBLIC KEY", pubDER, nil),
		"pem encrypted":   pemOf("ENCRYPTED PRIVATE KEY", edDER, nil),
		"pem openssh":     pemOf("OPENSSH PRIVATE KEY", edDER, nil),
		"pem headers":     pemOf("PRIVATE KEY", edDER, map[string]string{"Proc-Type": "4,ENCRYPTED"}),
		"pem two blocks":  pemOf("PRIVATE KEY", edDER, nil) + pemOf("PRIVATE KEY", edDER, nil),
		"pem trailing":    pemOf("PRIVATE KEY", edDER, nil) + "x",
		"pem bad der":     pemOf("PRIVATE KEY", edDER[:len(edDER)-1], nil),
		"pem truncated":   pemOf("PRIVATE KEY", edDER, nil)[:40],
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		writeFile(t, path, data, 0o600)
		if _, err := LoadFile(path); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		}
	}
}

type onesReader struct{}

func (onesReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 1
	}
	return len(p), nil
}

// ringJSON builds a ring file with the RFC key active and edits applied.
func ringJSON(active, previous string) string {
	return `{"version":1,"active":` + active + `,"previous":[` + previous + `]}`
}

func TestCorruptRingFile(t *testing.T) {
	seed2 := base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{2}, 32))
	k2, _ := grant.KeyFromSeed(bytes.Repeat([]byte{2}, 32))
	good := `{"kid":"` + rfcKID + `","seed":"` + rfcD + `","created_at":"2026-01-01T00:00:00Z"}`
	prev := func(kid, seed, created, retired, keep string) string {
		return `{"kid":"` + kid + `","seed":"` + seed + `","created_at":"` + created + `","retired_at":"` + retired + `","keep_until":"` + keep + `"}`
	}
	okPrev := prev(k2.KID(), seed2, "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z", "2026-02-01T00:02:30Z")
	cases := map[string]string{
		"empty":             "",
		"truncated":         ringJSON(good, okPrev)[:50],
		"null":              "null",
		"array":             "[]",
		"no version":        `{"active":` + good + `,"previous":[]}`,
		"version 2":         `{"version":2,"active":` + good + `,"previous":[]}`,
		"no active":         `{"version":1,"previous":[]}`,
		"unknown member":    `{"version":1,"active":` + good + `,"previous":[],"extra":1}`,
		"duplicate member":  `{"version":1,"version":1,"active":` + good + `,"previous":[]}`,
		"trailing data":     ringJSON(good, "") + "{}",
		"wrong kid":         ringJSON(`{"kid":"`+k2.KID()+`","seed":"`+rfcD+`","created_at":"2026-01-01T00:00:00Z"}`, ""),
		"missing kid":       ringJSON(`{"seed":"`+rfcD+`","created_at":"2026-01-01T00:00:00Z"}`, ""),
		"short seed":        ringJSON(`{"kid":"`+rfcKID+`","seed":"`+rfcD[:42]+`","created_at":"2026-01-01T00:00:00Z"}`, ""),
		"padded seed":       ringJSON(`{"kid":"`+rfcKID+`","seed":"`+rfcD+`=","created_at":"2026-01-01T00:00:00Z"}`, ""),
		"missing created":   ringJSON(`{"kid":"`+rfcKID+`","seed":"`+rfcD+`"}`, ""),
		"bad created":       ringJSON(`{"kid":"`+rfcKID+`","seed":"`+rfcD+`","created_at":"yesterday"}`, ""),
		"active retired_at": ringJSON(`{"kid":"`+rfcKID+`","seed":"`+rfcD+`","created_at":"2026-01-01T00:00:00Z","retired_at":"2026-01-01T00:00:00Z"}`, ""),
		"prev no keep":      ringJSON(good, prev(k2.KID(), seed2, "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z", "")),
		"prev bad retired":  ringJSON(good, prev(k2.KID(), seed2, "2026-01-01T00:00:00Z", "x", "2026-02-01T00:00:00Z")),
		"prev wrong kid":    ringJSON(good, prev(rfcKID, seed2, "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z", "2026-02-01T00:02:30Z")),
		"prev is active":    ringJSON(good, prev(rfcKID, rfcD, "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z", "2026-02-01T00:02:30Z")),
		"prev twice":        ringJSON(good, okPrev+","+okPrev),
		"active revoked":    `{"version":1,"active":` + good + `,"previous":[],"revoked":[{"kid":"` + rfcKID + `","revoked_at":"2026-02-01T00:00:00Z"}]}`,
		"revoked no kid":    `{"version":1,"active":` + good + `,"previous":[],"revoked":[{"kid":"","revoked_at":"2026-02-01T00:00:00Z"}]}`,
		"revoked bad time":  `{"version":1,"active":` + good + `,"previous":[],"revoked":[{"kid":"x","revoked_at":"soon"}]}`,
		"revoked unknown":   `{"version":1,"active":` + good + `,"previous":[],"revoked":[{"kid":"x","revoked_at":"2026-02-01T00:00:00Z","seed":"` + rfcD + `"}]}`,
		"invalid utf-8":     ringJSON(`{"kid":"`+rfcKID+"\xff"+`","seed":"`+rfcD+`","created_at":"2026-01-01T00:00:00Z"}`, ""),
	}
	// Sanity: the uncorrupted file loads.
	okDir := t.TempDir()
	writeFile(t, filepath.Join(okDir, "keys", "grant.json"), ringJSON(good, okPrev), 0o600)
	r, err := LoadRing(okDir, "grant", t0.Add(-365*24*time.Hour))
	if err != nil || r.Active().KID() != rfcKID || len(r.Previous()) != 1 {
		t.Fatalf("good ring: %v, %v", r, err)
	}

	for name, data := range cases {
		dir := t.TempDir()
		path := filepath.Join(dir, "keys", "grant.json")
		writeFile(t, path, data, 0o600)
		if _, _, err := LoadOrCreate(dir, "grant"); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: LoadOrCreate err = %v, want ErrCorrupt", name, err)
		}
		if _, err := LoadRing(dir, "grant", t0); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: LoadRing err = %v, want ErrCorrupt", name, err)
		}
		if _, err := Rotate(dir, "grant", t0, time.Minute); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Rotate err = %v, want ErrCorrupt", name, err)
		}
		if after, _ := os.ReadFile(path); string(after) != data {
			t.Errorf("%s: a corrupt file was overwritten", name)
		}
	}
}

func TestSecret(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "platform.key")
	secret := "clr_plat_" + strings.Repeat("A1_-", 8)
	if err := WriteSecret(path, secret); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" {
		if m := mode(t, path); m != 0o600 {
			t.Fatalf("secret mode %#o", m)
		}
		if m := mode(t, filepath.Dir(path)); m != 0o700 {
			t.Fatalf("secret dir mode %#o", m)
		}
	}
	if got, err := ReadSecret(path); err != nil || got != secret {
		t.Fatalf("ReadSecret = %q, %v", got, err)
	}
	if err := WriteSecret(path, "clr_plat_second"); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadSecret(path); err != nil || got != "clr_plat_second" {
		t.Fatalf("after overwrite ReadSecret = %q, %v", got, err)
	}
	assertOnlyFiles(t, filepath.Dir(path), "platform.key")

	for _, bad := range []string{"", "a b", "a\nb", "tab\t", "é", strings.Repeat("a", 4097), "x\x00"} {
		if err := WriteSecret(path, bad); !errors.Is(err, ErrInvalidSecret) {
			t.Errorf("WriteSecret(%q) = %v, want ErrInvalidSecret", bad, err)
		}
	}
	if got, _ := ReadSecret(path); got != "clr_plat_second" {
		t.Fatal("a refused WriteSecret changed the file")
	}

	hand := filepath.Join(dir, "hand")
	for data, want := range map[string]string{"abc": "abc", "abc\n": "abc", "abc\r\n": "abc"} {
		writeFile(t, hand, data, 0o600)
		if got, err := ReadSecret(hand); err != nil || got != want {
			t.Errorf("ReadSecret(%q) = %q, %v", data, got, err)
		}
	}
	for _, data := range []string{"", "\n", "abc\n\n", "a b\n", " abc"} {
		writeFile(t, hand, data, 0o600)
		if _, err := ReadSecret(hand); !errors.Is(err, ErrCorrupt) {
			t.Errorf("ReadSecret(%q) err = %v, want ErrCorrupt", data, err)
		}
	}
	if runtime.GOOS != "windows" {
		writeFile(t, hand, "abc", 0o644)
		if _, err := ReadSecret(hand); !errors.Is(err, ErrInsecurePermissions) {
			t.Errorf("ReadSecret of a 0644 file: %v", err)
		}
	}
}

func mustB64(s string) []byte {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func FuzzParseKeyFile(f *testing.F) {
	f.Add([]byte(`{"seed":"` + rfcD + `"}`))
	f.Add([]byte(ringJSON(`{"kid":"`+rfcKID+`","seed":"`+rfcD+`","created_at":"2026-01-01T00:00:00Z"}`, "")))
	f.Add([]byte(rfc8410PEM))
	f.Add([]byte("-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := parseKeyFile(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, grant.ErrInvalidKey) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		if k.IsZero() || len(k.Seed()) != 32 {
			t.Fatalf("accepted an empty key from %q", data)
		}
	})
}

func TestCreateRefusesAnExistingFile(t *testing.T) {
	skipPermsOnWindows(t)
	path := filepath.Join(t.TempDir(), "etc", "grant.json")
	k, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if m := mode(t, path); m != 0o600 {
		t.Fatalf("mode %v, want 0600", m)
	}
	if m := mode(t, filepath.Dir(path)); m != 0o700 {
		t.Fatalf("created directory mode %v, want 0700", m)
	}
	before, _ := os.ReadFile(path)
	if _, err := Create(path); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Create over an existing file: %v, want fs.ErrExist", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("Create changed an existing file")
	}
	ring, err := ReadRing(path)
	if err != nil || !ring.Active().Equal(k) || len(ring.Previous()) != 0 {
		t.Fatalf("ReadRing = %v, %v", ring, err)
	}
	if lf, err := LoadFile(path); err != nil || !lf.Equal(k) {
		t.Fatalf("LoadFile of a created file = %v, %v", lf, err)
	}
	if strings.Contains(string(before), `"revoked"`) {
		t.Fatalf("a ring without revocations names them (older releases refuse the member): %s", before)
	}
}

// Rotation and revocation by path keep the whole ring in the file, and
// ReadRing returns it all: retired keys with their keep_until, revocations.
func TestRotateAndRevokeFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "grant.json")
	k1, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	const drain = 150 * time.Second
	r2, err := RotateFile(path, t0, drain)
	if err != nil {
		t.Fatal(err)
	}
	r3, err := RotateFile(path, t0.Add(time.Second), drain)
	if err != nil {
		t.Fatal(err)
	}
	k2, k3 := r2.Active(), r3.Active()
	read, err := ReadRing(path)
	if err != nil {
		t.Fatal(err)
	}
	if !read.Active().Equal(k3) || len(read.Previous()) != 2 || !read.Previous()[1].Key.Equal(k1) ||
		!read.Previous()[1].KeepUntil.Equal(t0.Add(drain)) {
		t.Fatalf("ring after two rotations: active %s, previous %+v", read.Active().KID(), read.Previous())
	}
	// Revoking a previous key drops it (seed and all) and records its kid.
	after, err := RevokeFile(path, k1.KID(), t0.Add(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	read, err = ReadRing(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*grant.KeyRing{after, read} {
		if _, ok := r.Lookup(k1.KID(), t0.Add(2*time.Second)); ok || !r.Active().Equal(k3) {
			t.Fatal("the revoked key is still found")
		}
		if rv := r.Revoked(); len(rv) != 1 || rv[0].KID != k1.KID() || !rv[0].RevokedAt.Equal(t0.Add(2*time.Second)) {
			t.Fatalf("revoked = %+v", rv)
		}
	}
	raw, _ := os.ReadFile(path)
	if strings.Contains(string(raw), base64.RawURLEncoding.EncodeToString(k1.Seed())) {
		t.Fatal("the revoked key's seed is still in the file")
	}
	if again, err := RevokeFile(path, k1.KID(), t0.Add(time.Hour)); err != nil || len(again.Revoked()) != 1 {
		t.Fatalf("revoking again: %v, %+v", err, again.Revoked())
	}
	if _, err := RevokeFile(path, "no-such-kid", t0); !errors.Is(err, ErrUnknownKID) {
		t.Fatalf("revoking an unknown kid: %v, want ErrUnknownKID", err)
	}
	// Revoking the active key makes a fresh one active and keeps neither.
	leaked, err := RevokeFile(path, k3.KID(), t0.Add(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	fresh := leaked.Active()
	if fresh.Equal(k3) || fresh.Equal(k2) {
		t.Fatal("revoking the active key did not make a fresh key active")
	}
	read, err = ReadRing(path)
	if err != nil || !read.Active().Equal(fresh) {
		t.Fatalf("ring on disk after revoking the active key: %v", err)
	}
	if _, ok := read.Lookup(k3.KID(), t0.Add(3*time.Second)); ok {
		t.Fatal("the revoked former active key is still found")
	}
	if _, ok := read.Lookup(k2.KID(), t0.Add(3*time.Second)); !ok {
		t.Fatal("revoking the active key dropped an unrelated retired key")
	}
	// Rotation keeps the revocations.
	if r, err := RotateFile(path, t0.Add(4*time.Second), drain); err != nil || len(r.Revoked()) != 2 {
		t.Fatalf("rotation after revocations: %v, %+v", err, r.Revoked())
	}
	if r, err := ReadRing(path); err != nil || len(r.Revoked()) != 2 {
		t.Fatalf("revocations after rotation on disk: %v", err)
	}
	if _, err := LoadFile(path); err != nil {
		t.Fatalf("LoadFile of a ring with revocations: %v", err)
	}
}

func TestSingleKeyFilesReadAsARingOfOne(t *testing.T) {
	dir := t.TempDir()
	pemPath := filepath.Join(dir, "grant.pem")
	writeFile(t, pemPath, rfc8410PEM, 0o600)
	bare := filepath.Join(dir, "bare.json")
	writeFile(t, bare, `{"seed":"`+rfcD+`"}`, 0o600)
	for _, path := range []string{pemPath, bare} {
		r, err := ReadRing(path)
		if err != nil || r.Active().IsZero() || len(r.Previous()) != 0 {
			t.Fatalf("%s: ReadRing = %v, %v", path, r, err)
		}
		before, _ := os.ReadFile(path)
		if _, err := RotateFile(path, t0, time.Minute); !errors.Is(err, ErrNotRing) {
			t.Errorf("%s: RotateFile = %v, want ErrNotRing", path, err)
		}
		if _, err := RevokeFile(path, r.Active().KID(), t0); !errors.Is(err, ErrNotRing) {
			t.Errorf("%s: RevokeFile = %v, want ErrNotRing", path, err)
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
			t.Errorf("%s was rewritten", path)
		}
	}
	if _, err := ReadRing(filepath.Join(dir, "missing.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadRing of a missing file: %v", err)
	}
	if runtime.GOOS != "windows" {
		loose := filepath.Join(dir, "loose.json")
		writeFile(t, loose, `{"seed":"`+rfcD+`"}`, 0o644)
		if _, err := ReadRing(loose); !errors.Is(err, ErrInsecurePermissions) {
			t.Errorf("ReadRing of a 0644 file: %v", err)
		}
	}
}
