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
