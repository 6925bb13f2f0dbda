package jsonw_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/clearancehq/clearance/internal/jsonw"
)

// encode is what encoding/json writes for v with HTML escaping off.
func encode(t testing.TB, v any) []byte {
	t.Helper()
	b, err := jsonw.Reference(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var odd = []string{"", "plain", `quo"te`, `back\slash`, "nl\nand\ttab\x00nul\x1f\r\b\f\v", "<html> & ünïcödé \u2028\u2029 😀",
	"\x7f del", "\u2027\u202a\u20a8 near misses", "a\xffb", "\xe2\x80", "\xe2\x80\xa8\xe2"}

func TestStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range odd {
		if got, want := jsonw.String([]byte("x"), s), append([]byte("x"), encode(t, s)...); !bytes.Equal(got, want) {
			t.Errorf("%q:\n got %s\nwant %s", s, got, want)
		}
	}
}

func TestStringsMatchesEncodingJSON(t *testing.T) {
	for _, ss := range [][]string{nil, {}, {""}, odd} {
		if got, want := jsonw.Strings(nil, ss), encode(t, ss); !bytes.Equal(got, want) {
			t.Errorf("%q:\n got %s\nwant %s", ss, got, want)
		}
	}
}

type record struct {
	A string   `json:"a"`
	B []string `json:"b"`
	N uint64   `json:"n"`
	C string   `json:"c,omitempty"`
	D string   `json:"d"`
}

func (r record) append(b []byte) []byte {
	o := jsonw.Open(b)
	o.String("a", r.A)
	o.Strings("b", r.B)
	o.Uint("n", r.N)
	o.OmitEmpty("c", r.C)
	o.Member("d")
	o.B = jsonw.String(o.B, r.D)
	return o.Close()
}

func TestObjectMatchesEncodingJSON(t *testing.T) {
	for _, s := range odd {
		for _, r := range []record{{A: s, D: s}, {A: s, B: []string{s, s}, N: 1<<64 - 1, C: s, D: s}} {
			if got, want := r.append(nil), encode(t, r); !bytes.Equal(got, want) {
				t.Errorf("%+v:\n got %s\nwant %s", r, got, want)
			}
		}
	}
}

func FuzzString(f *testing.F) {
	for _, s := range odd {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := jsonw.String(nil, s)
		if !json.Valid(got) {
			t.Fatalf("invalid JSON: %q", got)
		}
		if want := encode(t, s); !bytes.Equal(got, want) {
			t.Fatalf("got %s\nwant %s", got, want)
		}
	})
}

func BenchmarkString(b *testing.B) {
	s := `{"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":2500} 01a21010-715a-7ac4-a27d-340e753a63fb`
	buf := make([]byte, 0, 256)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = jsonw.String(buf[:0], s)
	}
}
