package soak

import (
	"math"
	"strings"
	"testing"
	"time"
)

// series makes n samples a minute apart of a steady server (with a little
// jitter of the kind GC and connections give), then lets mut change each.
func series(n int, mut func(i int, s *Sample)) []Sample {
	out := make([]Sample, n)
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for i := range out {
		j := int64(i%3) - 1 // -1, 0, 1
		s := Sample{Elapsed: time.Duration(i) * time.Minute, At: t0.Add(time.Duration(i) * time.Minute),
			RSS: 120<<20 + j*(2<<20), HeapInuse: 24<<20 + j*(3<<20), GoSys: 60 << 20, Goroutines: 40 + j, FDs: 30 + j, TableFDs: 8,
			Requests: 12000, P50: time.Millisecond, P99: time.Duration(10+2*j) * time.Millisecond}
		if mut != nil {
			mut(i, &s)
		}
		out[i] = s
	}
	return out
}

func check(v Verdict, name string) Check {
	for _, c := range v.Checks {
		if c.Name == name {
			return c
		}
	}
	return Check{Name: "missing " + name}
}

func TestJudgeFlat(t *testing.T) {
	v := Judge(series(60, nil), DefaultRule)
	if !v.Flat || !v.Pass || len(v.Reasons) != 0 || len(v.Checks) != 5 {
		t.Fatalf("a steady run: %s", v)
	}
	// An eighth of the 59 minutes is the warm-up: samples 8 to 59 are judged.
	if v.Warmup != 59*time.Minute/8 || v.Judged != 52 {
		t.Fatalf("warm-up %v, %d judged", v.Warmup, v.Judged)
	}
	for _, c := range v.Checks {
		if !c.OK || c.Last > c.Limit {
			t.Errorf("%+v", c)
		}
	}
}

// Each leak, alone, makes the run not flat, and names the series.
func TestJudgeLeaks(t *testing.T) {
	for name, tc := range map[string]struct {
		col string
		mut func(i int, s *Sample)
	}{
		// 1 MiB a minute on 24 MiB: the heap doubles within the hour.
		"heap": {ColHeap, func(i int, s *Sample) { s.HeapInuse += int64(i) << 20 }},
		// 2 MiB a minute on 120 MiB, off the Go heap (cgo, a cache without a bound).
		"rss": {CheckRSS, func(i int, s *Sample) { s.RSS += int64(i) << 21 }},
		// A goroutine per minute that never returns: +1 each sample.
		"goroutines": {ColGoroutines, func(i int, s *Sample) { s.Goroutines += int64(i) }},
		// An unclosed response body every minute.
		"fds": {CheckFDs, func(i int, s *Sample) { s.FDs += int64(i) }},
		// p99 climbing 2 ms a minute (a scan that grows with the store).
		"p99": {ColP99, func(i int, s *Sample) { s.P99 += time.Duration(i) * 2 * time.Millisecond }},
	} {
		t.Run(name, func(t *testing.T) {
			v := Judge(series(60, tc.mut), DefaultRule)
			if v.Flat || v.Pass {
				t.Fatalf("a leak judged flat: %s", v)
			}
			for _, c := range v.Checks {
				if c.OK == (c.Name == tc.col) {
					t.Errorf("%s: %+v", tc.col, c)
				}
			}
			if len(v.Reasons) != 1 || !strings.HasPrefix(v.Reasons[0], tc.col+" grew") {
				t.Fatalf("reasons %q", v.Reasons)
			}
		})
	}
}

// The store's table files grow with its data: FDs that grow by table files
// alone are flat.
func TestJudgeTableFilesAreNotLeaks(t *testing.T) {
	v := Judge(series(60, func(i int, s *Sample) { s.FDs += int64(i); s.TableFDs += int64(i) }), DefaultRule)
	if c := check(v, CheckFDs); !v.Flat || !c.OK || c.Last > c.Second+1 {
		t.Fatalf("%+v: %s", c, v)
	}
}

// The limits are the rule's: a growth just within passes, just beyond fails.
func TestJudgeTolerances(t *testing.T) {
	// 16 samples, no warm-up: the quarters are 0-3, 4-7, 8-11, 12-15.
	step := func(col string, second, last float64) []Sample {
		return series(16, func(i int, s *Sample) {
			v := second
			if i >= 12 {
				v = last
			} else if i < 4 || i >= 8 {
				v = second
			}
			switch col {
			case ColHeap:
				s.HeapInuse = int64(v)
			case ColGoroutines:
				s.Goroutines = int64(v)
			case ColP99:
				s.P99 = time.Duration(v)
			}
		})
	}
	rule := DefaultRule
	rule.Warmup = time.Nanosecond // the first sample, at 0, is the only one left out
	for _, tc := range []struct {
		col          string
		second, last float64
		ok           bool
	}{
		{ColHeap, 100 << 20, 125 << 20, true}, // +25 %
		{ColHeap, 100 << 20, 126 << 20, false},
		{ColHeap, 100 << 20, 10 << 20, true}, // falling is flat
		{ColGoroutines, 100, 120, true},      // 100 × 1.1 + 10
		{ColGoroutines, 100, 121, false},
		{ColGoroutines, 3, 13, true}, // the slack covers small counts
		{ColP99, float64(10 * time.Millisecond), float64(15 * time.Millisecond), true},
		{ColP99, float64(10 * time.Millisecond), float64(16 * time.Millisecond), false},
	} {
		v := Judge(step(tc.col, tc.second, tc.last), rule)
		c := check(v, tc.col)
		if c.OK != tc.ok || v.Flat != tc.ok {
			t.Errorf("%s %v → %v: %+v (%s)", tc.col, tc.second, tc.last, c, v)
		}
	}
}

// The quarters are those of the samples after the warm-up; the warm-up's
// values count for nothing.
func TestJudgeWarmupAndQuarters(t *testing.T) {
	s := series(9, func(i int, s *Sample) {
		s.Goroutines = int64(1000 * (i + 1)) // 1000 … 9000
		if i == 0 {
			s.RSS = 1 << 40 // a start-up spike
		}
	})
	v := Judge(s, Rule{Warmup: time.Minute, Memory: 0.25, Count: 10, P99: 2})
	// Judged: samples 1 to 8 (2000 … 9000); quarters of two each.
	c := check(v, ColGoroutines)
	if v.Judged != 8 || c.Second != 4500 || c.Last != 8500 || !c.OK {
		t.Fatalf("judged %d, %+v", v.Judged, c)
	}
	if !check(v, CheckRSS).OK {
		t.Fatalf("the warm-up's spike was judged: %s", v)
	}
}

// Pebble's caches filling up to their size over the hour grow RSS by as
// much: that is not a leak. RSS growing beyond them is.
func TestJudgeStoreCachesFilling(t *testing.T) {
	filling := func(i int, s *Sample) {
		s.StoreCache = min(int64(i)<<22, 200<<20) // 4 MiB a minute up to 200 MiB
		s.RSS += s.StoreCache
	}
	if v := Judge(series(60, filling), DefaultRule); !v.Flat || !v.Pass {
		t.Fatalf("caches filling judged a leak: %s", v)
	}
	v := Judge(series(60, func(i int, s *Sample) {
		filling(i, s)
		s.RSS += int64(i) << 21 // and 2 MiB a minute besides
	}), DefaultRule)
	if c := check(v, CheckRSS); v.Flat || c.OK {
		t.Fatalf("a leak beside the caches judged flat: %s", v)
	}
}

func TestJudgeErrorsFailAFlatRun(t *testing.T) {
	v := Judge(series(60, func(i int, s *Sample) {
		if i == 3 { // during the warm-up: counted all the same
			s.Errors5xx = 2
		}
		if i == 40 {
			s.Failures = 1
		}
	}), DefaultRule)
	if !v.Flat || v.Pass || v.Errors5xx != 2 || v.Failures != 1 || len(v.Reasons) != 2 {
		t.Fatalf("%s", v)
	}
	v.Fail("the load tool's run failed")
	if v.Pass || len(v.Reasons) != 3 || !strings.Contains(v.String(), "the load tool's run failed") {
		t.Fatalf("%s", v)
	}
}

func TestJudgeTooFewSamples(t *testing.T) {
	for _, n := range []int{0, 1, 4} { // 4 samples: 3 after the default warm-up
		if v := Judge(series(n, nil), DefaultRule); v.Flat || v.Pass || len(v.Reasons) == 0 {
			t.Errorf("%d samples: %s", n, v)
		}
	}
	// A quarter that answered no request has no p99 to judge.
	v := Judge(series(16, func(i int, s *Sample) {
		if i >= 12 {
			s.Requests, s.P50, s.P99 = 0, -1, -1
		}
	}), DefaultRule)
	if c := check(v, ColP99); c.OK || !math.IsNaN(c.Last) || v.Flat {
		t.Fatalf("%+v", c)
	}
}
