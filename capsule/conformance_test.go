package capsule_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clearancehq/clearance/capsule"
)

const (
	class1Dir   = "testdata/test-vectors"
	envelopeDir = "testdata/producer-envelope"
)

type vectorIndex struct {
	Spec  string `json:"spec"`
	Count int    `json:"count"`
	Cases []struct {
		Name string `json:"name"`
		Kind string `json:"kind"`
	} `json:"cases"`
}

type expectedFinding struct {
	Check    *int   `json:"check"`
	Severity string `json:"severity"`
	Code     string `json:"code"`
}

type expectedResult struct {
	OK         bool              `json:"ok"`
	Findings   []expectedFinding `json:"findings"`
	Derived    capsule.Derived   `json:"derived"`
	CapsuleID  *string           `json:"capsule_id_recomputed"`
	Kind       string            `json:"kind"`
	Results    []expectedResult  `json:"results"` // store cases
	Descriptor string            `json:"description"`
}

func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestClass1Vectors runs every Class 1 vector of draft -04 and requires
// agreement on ok, the (check, severity) findings, the derived modes and
// the recomputed Capsule ID — the conformance criteria — and, beyond them,
// on the reference implementation's finding codes.
func TestClass1Vectors(t *testing.T) {
	var idx vectorIndex
	readJSON(t, filepath.Join(class1Dir, "vectors.json"), &idx)
	if idx.Spec != capsule.SpecVersion || idx.Count != 45 || len(idx.Cases) != 45 {
		t.Fatalf("vector index: spec %q, count %d, %d cases", idx.Spec, idx.Count, len(idx.Cases))
	}
	for _, c := range idx.Cases {
		t.Run(c.Name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(class1Dir, c.Name, "input.json"))
			if err != nil {
				t.Fatal(err)
			}
			var want expectedResult
			readJSON(t, filepath.Join(class1Dir, c.Name, "expected.json"), &want)
			if want.Kind != c.Kind {
				t.Fatalf("kind %q in expected.json, %q in the index", want.Kind, c.Kind)
			}
			var ledger struct {
				Ledger []json.RawMessage `json:"ledger"`
			}
			if c.Kind == "store" {
				readJSON(t, filepath.Join(class1Dir, c.Name, "input.json"), &ledger)
				caps := make([][]byte, len(ledger.Ledger))
				for i, m := range ledger.Ledger {
					caps[i] = m
				}
				got := capsule.VerifyLedger(caps)
				if len(got) != len(want.Results) {
					t.Fatalf("%d results, want %d", len(got), len(want.Results))
				}
				for i := range got {
					compareResult(t, got[i], want.Results[i])
				}
				return
			}
			compareResult(t, capsule.Verify(raw), want)
			switch c.Kind {
			case "positive", "overclaim", "honesty":
				if !want.OK {
					t.Errorf("a %s vector expects ok=false", c.Kind)
				}
			case "negative":
				if want.OK {
					t.Errorf("a negative vector expects ok=true")
				}
			}
		})
	}
}

type checkSeverity struct {
	Check    int
	Severity string
}

type checkCode struct {
	Check    int
	Severity string
	Code     string
}

func compareResult(t *testing.T, got capsule.Result, want expectedResult) {
	t.Helper()
	if got.OK != want.OK {
		t.Errorf("ok = %v, want %v; findings %+v", got.OK, want.OK, got.Findings)
	}
	var gotCS, wantCS []checkSeverity
	var gotCC, wantCC []checkCode
	for _, f := range got.Findings {
		gotCS = append(gotCS, checkSeverity{f.Check, string(f.Severity)})
		gotCC = append(gotCC, checkCode{f.Check, string(f.Severity), f.Code})
	}
	for _, f := range want.Findings {
		n := 0
		if f.Check != nil {
			n = *f.Check
		}
		wantCS = append(wantCS, checkSeverity{n, f.Severity})
		wantCC = append(wantCC, checkCode{n, f.Severity, f.Code})
	}
	sortBy := func(a, b checkCode) int { return strings.Compare(checkKey(a), checkKey(b)) }
	slices.SortFunc(gotCC, sortBy)
	slices.SortFunc(wantCC, sortBy)
	slices.SortFunc(gotCS, func(a, b checkSeverity) int {
		return strings.Compare(checkKey(checkCode{a.Check, a.Severity, ""}), checkKey(checkCode{b.Check, b.Severity, ""}))
	})
	slices.SortFunc(wantCS, func(a, b checkSeverity) int {
		return strings.Compare(checkKey(checkCode{a.Check, a.Severity, ""}), checkKey(checkCode{b.Check, b.Severity, ""}))
	})
	if d := cmp.Diff(wantCS, gotCS); d != "" {
		t.Errorf("(check, severity) findings differ (-want +got):\n%s\ngot findings: %+v", d, got.Findings)
	} else if d := cmp.Diff(wantCC, gotCC); d != "" {
		t.Errorf("finding codes differ from the reference labels (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want.Derived, got.Derived); d != "" {
		t.Errorf("derived differs (-want +got):\n%s", d)
	}
	var gotID *string
	if got.IDRecomputed != nil {
		s := got.IDRecomputed.String()
		gotID = &s
	}
	if d := cmp.Diff(want.CapsuleID, gotID); d != "" {
		t.Errorf("capsule_id_recomputed differs (-want +got):\n%s", d)
	}
}

func checkKey(c checkCode) string {
	return string(rune('0'+c.Check)) + "/" + c.Severity + "/" + c.Code
}

// TestClass1VectorsJSONShape: a Result encodes like the vectors'
// expected.json (null check for the honesty assert, null id when
// uncomputable), so the HTTP layer can return it as is.
func TestClass1VectorsJSONShape(t *testing.T) {
	for _, name := range []string{"honesty-dishonest-human-disposed", "neg-float-in-digest-field", "pos-cross-party-full-bilateral"} {
		raw, err := os.ReadFile(filepath.Join(class1Dir, name, "input.json"))
		if err != nil {
			t.Fatal(err)
		}
		out, err := json.Marshal(capsule.Verify(raw))
		if err != nil {
			t.Fatal(err)
		}
		var got, want map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		readJSON(t, filepath.Join(class1Dir, name, "expected.json"), &want)
		for _, k := range []string{"ok", "derived", "capsule_id_recomputed"} {
			if d := cmp.Diff(want[k], got[k]); d != "" {
				t.Errorf("%s: %s differs (-want +got):\n%s", name, k, d)
			}
		}
		wf, gf := want["findings"].([]any), got["findings"].([]any)
		if len(wf) != len(gf) {
			t.Fatalf("%s: %d findings, want %d", name, len(gf), len(wf))
		}
		for i := range wf {
			w, g := wf[i].(map[string]any), gf[i].(map[string]any)
			for _, k := range []string{"check", "severity", "code"} {
				if w[k] != g[k] {
					t.Errorf("%s: finding %d %s = %v, want %v", name, i, k, g[k], w[k])
				}
			}
		}
	}
}

type envelopeExpected struct {
	OK           bool     `json:"ok"`
	FindingCodes []string `json:"finding_codes"`
	PublicKeyHex *string  `json:"public_key_hex"`
}

// TestEnvelopeVectors runs every Producer Envelope vector: ok and the
// returned key must match, every negative must be rejected, with the
// reference finding code.
func TestEnvelopeVectors(t *testing.T) {
	var idx struct {
		Profile string `json:"profile"`
		Count   int    `json:"count"`
		Cases   []struct {
			Name string `json:"name"`
		} `json:"cases"`
	}
	readJSON(t, filepath.Join(envelopeDir, "vectors.json"), &idx)
	if idx.Count != 14 || len(idx.Cases) != 14 || idx.Profile != capsule.SpecVersion+"#producer-envelope" {
		t.Fatalf("envelope index: profile %q, count %d, %d cases", idx.Profile, idx.Count, len(idx.Cases))
	}
	for _, c := range idx.Cases {
		t.Run(c.Name, func(t *testing.T) {
			dir := filepath.Join(envelopeDir, c.Name)
			idText, err := os.ReadFile(filepath.Join(dir, "capsule_id.txt"))
			if err != nil {
				t.Fatal(err)
			}
			id, err := capsule.ParseID(strings.TrimSuffix(string(idText), "\n"))
			if err != nil {
				t.Fatal(err)
			}
			env, err := os.ReadFile(filepath.Join(dir, "envelope.cose"))
			if err != nil {
				t.Fatal(err)
			}
			var want envelopeExpected
			readJSON(t, filepath.Join(dir, "expected.json"), &want)
			pub, err := capsule.VerifyEnvelope(env, id)
			if want.OK {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				if want.PublicKeyHex == nil || hex.EncodeToString(pub) != *want.PublicKeyHex {
					t.Fatalf("public key %x, want %v", pub, *want.PublicKeyHex)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted a negative vector (key %x)", pub)
			}
			if pub != nil {
				t.Errorf("a rejection returned a key")
			}
			var ee *capsule.EnvelopeError
			if !errors.As(err, &ee) {
				t.Fatalf("error %T is not an *EnvelopeError: %v", err, err)
			}
			if len(want.FindingCodes) != 1 || ee.Code() != want.FindingCodes[0] {
				t.Errorf("code %q (%v), want %v", ee.Code(), err, want.FindingCodes)
			}
			if !errors.Is(err, ee.Err) {
				t.Errorf("errors.Is does not reach the sentinel")
			}
		})
	}
}

// TestVectorChecksums: the copied vectors are byte-exact (their own
// SHA256SUMS hold).
func TestVectorChecksums(t *testing.T) {
	for dir, want := range map[string]int{class1Dir: 90, envelopeDir: 44} {
		f, err := os.Open(filepath.Join(dir, "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			sum, name, ok := strings.Cut(sc.Text(), "  ")
			if !ok {
				t.Fatalf("%s: bad line %q", dir, sc.Text())
			}
			b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
			if err != nil {
				t.Fatal(err)
			}
			got := sha256.Sum256(b)
			if hex.EncodeToString(got[:]) != sum {
				t.Errorf("%s/%s: checksum mismatch", dir, name)
			}
			n++
		}
		f.Close()
		if n != want {
			t.Errorf("%s: %d checksums, want %d", dir, n, want)
		}
	}
}
