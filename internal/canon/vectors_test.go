package canon

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/number_vectors.json")

// numberVectorsFile pins how Transform writes doubles: each row is the
// big-endian bits of a float64 in hex and its canonical text. The SDKs in
// sdk/ check their own RFC 8785 number formatting against the same file.
const numberVectorsFile = "testdata/number_vectors.json"

// TestNumberVectors checks Transform against the committed vectors; -update
// rewrites them from the edge cases below and 1,000 doubles drawn from a
// fixed seed.
func TestNumberVectors(t *testing.T) {
	if *update {
		writeNumberVectors(t)
	}
	raw, err := os.ReadFile(numberVectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][2]string
	if err := json.Unmarshal(raw, &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) < 1000 {
		t.Fatalf("%d vectors, want at least 1000", len(rows))
	}
	for _, r := range rows {
		b, err := hex.DecodeString(r[0])
		if err != nil || len(b) != 8 {
			t.Fatalf("bad bits %q", r[0])
		}
		f := math.Float64frombits(binary.BigEndian.Uint64(b))
		got, err := Transform([]byte(strconv.FormatFloat(f, 'g', -1, 64)))
		if err != nil || string(got) != r[1] {
			t.Errorf("%s (%g): got %s, %v; want %s", r[0], f, got, err, r[1])
		}
	}
}

func writeNumberVectors(t *testing.T) {
	t.Helper()
	tenth := 0.1 // a variable: the constant 0.1 + 0.2 is exactly 0.3
	edge := []float64{0, math.Copysign(0, -1), 1, -1, tenth + 0.2, 1234567.89, 1e21, 1e-7, 1e-6, 9.999999999999997e-7,
		1e20, 123456789012345680000, 1.5e21, 1e23, 5e-324, math.MaxFloat64, 1 << 53, 333333333.33333329, 4.5, 0.002, 1e-27}
	rng := rand.New(rand.NewPCG(8785, 20))
	var rows [][2]string
	add := func(f float64) {
		out, err := Transform([]byte(strconv.FormatFloat(f, 'g', -1, 64)))
		if err != nil {
			t.Fatal(err)
		}
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], math.Float64bits(f))
		rows = append(rows, [2]string{hex.EncodeToString(b[:]), string(out)})
	}
	for _, f := range edge {
		add(f)
	}
	for len(rows) < len(edge)+1000 {
		if f := math.Float64frombits(rng.Uint64()); !math.IsNaN(f) && !math.IsInf(f, 0) {
			add(f)
		}
	}
	raw := []byte("[\n")
	for i, r := range rows {
		row, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, row...)
		if i < len(rows)-1 {
			raw = append(raw, ',')
		}
		raw = append(raw, '\n')
	}
	raw = append(raw, ']')
	if err := os.MkdirAll(filepath.Dir(numberVectorsFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(numberVectorsFile, append(raw, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
