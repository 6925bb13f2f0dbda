package canon

import (
	"strings"
	"testing"
)

func TestTransformSortsAndNormalizes(t *testing.T) {
	got, err := Transform([]byte(`{ "b": 1.50, "a": [1e2, "\u00e9"], "c": {"z":true,"y":null} }`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":[100,"é"],"b":1.5,"c":{"y":null,"z":true}}`
	if string(got) != want {
		t.Fatalf("got %s want %s", got, want)
	}
}

func TestDigestIsStableAcrossWhitespace(t *testing.T) {
	a, err := DigestJSON([]byte(`{"a":1,"b":2}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := DigestJSON([]byte("{\n \"b\": 2, \"a\": 1}"))
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatalf("digests differ: %s vs %s", a, b)
	}
	if !strings.HasPrefix(a, "sha256:") || len(a) != 71 {
		t.Fatalf("bad digest form %q", a)
	}
	if _, err := ParseDigest(a); err != nil {
		t.Fatal(err)
	}
}

func TestParseDigestRejects(t *testing.T) {
	for _, s := range []string{"", "sha256:", "sha1:" + strings.Repeat("a", 64), "sha256:" + strings.Repeat("A", 64), "sha256:" + strings.Repeat("g", 64)} {
		if _, err := ParseDigest(s); err == nil {
			t.Errorf("ParseDigest(%q) accepted", s)
		}
	}
}

// TestTransformMatchesRFC8785 checks the cases where canonical JSON differs
// from naive re-encoding: escapes kept minimal (U+2028 and HTML characters
// stay literal), control characters in lowercase \u form, ES6 numbers, and
// member order by UTF-16 code units.
func TestTransformMatchesRFC8785(t *testing.T) {
	in := `{"\u20ac":1,"\ud83d\ude00":2,"a":"\u2028<>&\u001f\n","n":[1.0,-0,1e21,0.000001,1e-7,123456789012345678]}`
	want := "{\"a\":\"\u2028<>&\\u001f\\n\",\"n\":[1,0,1e+21,0.000001,1e-7,123456789012345680],\"\u20ac\":1,\"\U0001F600\":2}"
	got, err := Transform([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestTransformRejectsDuplicates(t *testing.T) {
	if _, err := Transform([]byte(`{"a":1,"a":2}`)); err == nil {
		t.Fatal("duplicate member names canonicalized")
	}
}

func BenchmarkTransform(b *testing.B) {
	doc := []byte(`{"dossier_id":"01a20132-1b02-76dd-ae65-eea6a5d24179","intent":{"amount":25000,"workflow_key":"x","context":{"approval_path":["a","b"]}},"reason_codes":["PROTOCOL_OUTCOME_BLOCK","POLICY_MATCHED"],"ledger_seq":4}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Transform(doc); err != nil {
			b.Fatal(err)
		}
	}
}
