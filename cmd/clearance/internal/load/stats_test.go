package load

import (
	"testing"
	"time"
)

// Percentiles of a known distribution: 1..10,000 µs once each, plus one
// value beyond the histogram's range.
func TestHistogramPercentiles(t *testing.T) {
	h := newHist()
	for us := 1; us <= 10000; us++ {
		record(h, time.Duration(us)*time.Microsecond)
	}
	got := summarize(h)
	// 3 significant digits: each value within 0.1 % of the exact one.
	near := func(name string, v, want int64) {
		t.Helper()
		if d := float64(v-want) / float64(want); d < -0.001 || d > 0.001 {
			t.Errorf("%s = %d, want %d ± 0.1 %%", name, v, want)
		}
	}
	if got.Count != 10000 {
		t.Fatalf("count %d", got.Count)
	}
	near("p50", got.P50US, 5000)
	near("p90", got.P90US, 9000)
	near("p99", got.P99US, 9900)
	near("p99.9", got.P999US, 9990)
	near("max", got.MaxUS, 10000)
	if got.MeanUS < 4995 || got.MeanUS > 5006 {
		t.Errorf("mean %v", got.MeanUS)
	}

	// Out of range: below 1 µs counts as 1 µs, beyond 60 s as 60 s.
	h = newHist()
	record(h, 10*time.Nanosecond)
	record(h, 2*time.Minute)
	got = summarize(h)
	if got.Count != 2 || got.P50US != 1 {
		t.Fatalf("clamped %+v", got)
	}
	if d := float64(got.MaxUS-histMax) / float64(histMax); d < -0.001 || d > 0.001 {
		t.Fatalf("max %d, want about %d", got.MaxUS, histMax)
	}
	if (summarize(newHist()) != Latency{}) {
		t.Fatal("empty histogram is not zero")
	}
}

// Mixed interleaves exactly floor(n·share) cycles in the first n operations.
func TestMixedInterleave(t *testing.T) {
	for _, share := range []float64{0, 0.1, 0.2, 0.25, 1.0 / 3, 0.5, 0.9, 1} {
		r := &runner{share: share}
		var cycles int64
		for n := int64(1); n <= 1000; n++ {
			if r.kindOf(n) == kindCycle {
				cycles++
			}
			if want := int64(float64(n) * share); cycles != want && share < 1 {
				t.Fatalf("share %v: %d cycles in %d ops, want %d", share, cycles, n, want)
			}
		}
		if share == 1 && cycles != 1000 {
			t.Fatalf("share 1: %d", cycles)
		}
	}
}
