package soak

import (
	"bytes"
	"image/png"
	"math"
	"strings"
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	bounds := []float64{1, 2, 4}
	for _, tc := range []struct {
		q     float64
		cum   []int64
		total int64
		want  float64
	}{
		{0.5, []int64{10, 60, 100}, 100, 1.8},   // rank 50: 40 of the 50 in (1, 2]
		{0.99, []int64{10, 60, 100}, 100, 3.95}, // rank 99: 39 of the 40 in (2, 4]
		{0.05, []int64{10, 60, 100}, 100, 0.5},  // the first bucket starts at 0
		{0.5, []int64{0, 0, 10}, 10, 3},         // empty buckets are skipped
		{0.99, []int64{10, 60, 90}, 100, 4},     // beyond the last bound: that bound
	} {
		if got := quantile(tc.q, bounds, tc.cum, tc.total); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("q%v of %v/%d = %v, want %v", tc.q, tc.cum, tc.total, got, tc.want)
		}
	}
	if got := quantile(0.5, bounds, []int64{0, 0, 0}, 0); !math.IsNaN(got) {
		t.Errorf("empty: %v", got)
	}
}

// exposition is /metrics as the server writes it, trimmed: two routes and
// the scrapes' own route, which must be left out.
const exposition = `# TYPE go_goroutines gauge
go_goroutines 42
# TYPE go_memstats_heap_inuse_bytes gauge
go_memstats_heap_inuse_bytes 1.2582912e+07
# TYPE go_memstats_sys_bytes gauge
go_memstats_sys_bytes 4.194304e+07
# TYPE clearance_store_cache_bytes gauge
clearance_store_cache_bytes{cache="block_cache"} 3.145728e+06
clearance_store_cache_bytes{cache="memtables"} 1.048576e+06
# TYPE clearance_store_cache_limit_bytes gauge
clearance_store_cache_limit_bytes 2.68435456e+08
# TYPE clearance_http_requests_total counter
clearance_http_requests_total{code="200",method="POST",route="POST /v1/protocol/evaluate-decision"} 90
clearance_http_requests_total{code="503",method="POST",route="POST /v1/protocol/evaluate-decision"} 2
clearance_http_requests_total{code="409",method="POST",route="POST /v1/execution/claim-token"} 8
clearance_http_requests_total{code="200",method="GET",route="GET /metrics"} 500
clearance_http_requests_total{code="503",method="GET",route="GET /metrics"} 7
# TYPE clearance_http_request_duration_seconds histogram
clearance_http_request_duration_seconds_bucket{route="POST /v1/protocol/evaluate-decision",le="0.001"} 50
clearance_http_request_duration_seconds_bucket{route="POST /v1/protocol/evaluate-decision",le="0.01"} 90
clearance_http_request_duration_seconds_bucket{route="POST /v1/protocol/evaluate-decision",le="+Inf"} 92
clearance_http_request_duration_seconds_sum{route="POST /v1/protocol/evaluate-decision"} 0.5
clearance_http_request_duration_seconds_count{route="POST /v1/protocol/evaluate-decision"} 92
clearance_http_request_duration_seconds_bucket{route="POST /v1/execution/claim-token",le="0.001"} 0
clearance_http_request_duration_seconds_bucket{route="POST /v1/execution/claim-token",le="0.01"} 8
clearance_http_request_duration_seconds_bucket{route="POST /v1/execution/claim-token",le="+Inf"} 8
clearance_http_request_duration_seconds_sum{route="POST /v1/execution/claim-token"} 0.04
clearance_http_request_duration_seconds_count{route="POST /v1/execution/claim-token"} 8
clearance_http_request_duration_seconds_bucket{route="GET /metrics",le="0.001"} 0
clearance_http_request_duration_seconds_bucket{route="GET /metrics",le="0.01"} 0
clearance_http_request_duration_seconds_bucket{route="GET /metrics",le="+Inf"} 507
clearance_http_request_duration_seconds_sum{route="GET /metrics"} 900
clearance_http_request_duration_seconds_count{route="GET /metrics"} 507
`

func TestParseMetrics(t *testing.T) {
	s, err := parseMetrics(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	if s.goroutines != 42 || s.heapInuse != 12<<20 || s.goSys != 40<<20 || s.storeCache != 4<<20 || s.requests != 100 || s.errors5xx != 2 || s.total != 100 {
		t.Fatalf("%+v", s)
	}
	if len(s.bounds) != 2 || s.bounds[0] != 0.001 || s.bounds[1] != 0.01 || s.cum[0] != 50 || s.cum[1] != 98 {
		t.Fatalf("histogram %v %v", s.bounds, s.cum)
	}
	// Differenced against an earlier scrape: 40 more below 1 ms, 8 more below 10 ms, 2 beyond.
	prev := scrape{bounds: []float64{0.001, 0.01}, cum: []int64{10, 50}, total: 50}
	cum, total := s.since(prev)
	if total != 50 || cum[0] != 40 || cum[1] != 48 {
		t.Fatalf("since: %v %d", cum, total)
	}
	// p50 is rank 25 of 40 in (0, 1 ms]; p99 falls beyond the last bound.
	if p50 := quantile(0.5, s.bounds, cum, total); math.Abs(p50-0.000625) > 1e-12 {
		t.Errorf("p50 %v", p50)
	}
	if p99 := quantile(0.99, s.bounds, cum, total); p99 != 0.01 {
		t.Errorf("p99 %v", p99)
	}

	for name, text := range map[string]string{
		"no heap":       "# TYPE go_goroutines gauge\ngo_goroutines 1\n# TYPE go_memstats_sys_bytes gauge\ngo_memstats_sys_bytes 1\n",
		"no go sys":     "# TYPE go_goroutines gauge\ngo_goroutines 1\n# TYPE go_memstats_heap_inuse_bytes gauge\ngo_memstats_heap_inuse_bytes 1\n",
		"no goroutines": "# TYPE go_memstats_heap_inuse_bytes gauge\ngo_memstats_heap_inuse_bytes 1\n# TYPE go_memstats_sys_bytes gauge\ngo_memstats_sys_bytes 1\n",
		"not metrics":   "<html>",
	} {
		if _, err := parseMetrics(strings.NewReader(text)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestProcRSS(t *testing.T) {
	rss, err := procRSS([]byte("Name:\tclearance\nVmPeak:\t  900 kB\nVmRSS:\t  123456 kB\nThreads:\t9\n"))
	if err != nil || rss != 123456*1024 {
		t.Fatalf("%d, %v", rss, err)
	}
	for _, bad := range []string{"Name:\tx\n", "VmRSS:\t12 MB\n", "VmRSS:\tmany kB\n"} {
		if _, err := procRSS([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestCSVRoundTrip(t *testing.T) {
	in := series(5, func(i int, s *Sample) {
		s.Elapsed += 1234 * time.Millisecond
		s.Errors5xx, s.Ops, s.Failures = int64(i), int64(10*i), int64(i%2)
		s.P99 = 12345 * time.Microsecond
		s.StoreCache = int64(i) << 20
	})
	in[0].Requests, in[0].P50, in[0].P99 = 0, -1, -1 // the first sample ends no interval
	var buf bytes.Buffer
	if err := WriteCSV(&buf, in); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 6 || lines[0] != strings.Join(Columns, ",") {
		t.Fatalf("%q", lines)
	}
	// The second row: 1.234 s, 12000 requests in 60 s.
	if f := strings.Split(lines[2], ","); f[0] != "61.234" || f[10] != "200.0" || f[12] != "12.345" {
		t.Fatalf("row %q", f)
	}
	out, err := ReadCSV(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("%d rows back", len(out))
	}
	for i := range in {
		a, b := in[i], out[i]
		if !a.At.Equal(b.At) {
			t.Errorf("row %d: time %v, want %v", i, b.At, a.At)
		}
		a.At, b.At = time.Time{}, time.Time{}
		if a != b {
			t.Errorf("row %d: %+v, want %+v", i, b, a)
		}
	}
	// A CSV written before the store cache column reads with it 0.
	var old bytes.Buffer
	for _, l := range lines {
		old.WriteString(l[:strings.LastIndexByte(l, ',')] + "\n")
	}
	if back, err := ReadCSV(&old); err != nil || len(back) != len(in) || back[3].StoreCache != 0 || back[3].RSS != in[3].RSS {
		t.Errorf("an older CSV: %v", err)
	}
	if _, err := ReadCSV(strings.NewReader("elapsed_s,time\n")); err == nil {
		t.Error("a foreign header accepted")
	}
	bad := strings.Replace(strings.Join(lines, "\n"), "61.234", "x", 1)
	if _, err := ReadCSV(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("a bad number: %v", err)
	}
}

func TestPlot(t *testing.T) {
	for name, s := range map[string][]Sample{
		"an hour":   series(61, nil),
		"a leak":    series(61, func(i int, s *Sample) { s.HeapInuse += int64(i) << 20 }),
		"seconds":   series(3, func(i int, s *Sample) { s.Elapsed = time.Duration(i) * 2 * time.Second }),
		"one point": series(1, nil),
	} {
		var buf bytes.Buffer
		if err := Plot(&buf, s, Judge(s, DefaultRule)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		img, err := png.Decode(&buf)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b := img.Bounds(); b.Dx() != PlotWidth || b.Dy() != PlotHeight {
			t.Fatalf("%s: %v", name, b)
		}
	}
	if err := Plot(&bytes.Buffer{}, nil, Verdict{}); err == nil {
		t.Fatal("no samples plotted")
	}
}
