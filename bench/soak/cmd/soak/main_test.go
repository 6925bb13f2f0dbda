package main

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clearancehq/clearance/bench/soak"
)

// -judge judges a CSV again: exit 0 for a steady run, 1 for a leak, with the
// PNG written beside the CSV; the tolerance flags apply.
func TestJudgeCSV(t *testing.T) {
	write := func(name string, leak int64) string {
		var s []soak.Sample
		for i := range 41 {
			s = append(s, soak.Sample{Elapsed: time.Duration(i) * time.Minute, At: time.Unix(int64(60*i), 0),
				RSS: 200 << 20, HeapInuse: 30<<20 + int64(i)*leak, GoSys: 60 << 20, Goroutines: 50, FDs: 40,
				Requests: 9000, P50: time.Millisecond, P99: 20 * time.Millisecond})
		}
		var buf bytes.Buffer
		if err := soak.WriteCSV(&buf, s); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), name+".csv")
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		leak int64
		args []string
		code int
	}{
		{"steady", 0, nil, 0},
		{"leak", 1 << 20, nil, 1},
		{"tolerated", 1 << 20, []string{"-memory", "2"}, 0},
	} {
		csv := write(tc.name, tc.leak)
		var out, errb bytes.Buffer
		code := run(append(tc.args, "-judge", csv), &out, &errb)
		if code != tc.code {
			t.Errorf("%s: exit %d, want %d\n%s%s", tc.name, code, tc.code, out.String(), errb.String())
		}
		f, err := os.Open(strings.TrimSuffix(csv, ".csv") + ".png")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := png.Decode(f); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		f.Close()
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"-duration", "x"}, {"extra"}, {"-judge", filepath.Join(t.TempDir(), "none.csv")}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 || errb.Len() == 0 {
			t.Errorf("%q: exit %d, %q", args, code, errb.String())
		}
	}
}
