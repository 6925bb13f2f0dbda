package soak

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Rule is what flat means: how much the last quarter of a run may exceed
// its second quarter. Only growth counts; a series that falls is flat. The
// series judged are RSS but the store's caches, heap in use, goroutines,
// the open file descriptors other than the store's table files, and p99.
type Rule struct {
	// Warmup is left out of the judgement (caches filling, connections
	// opening); 0 means an eighth of the run.
	Warmup time.Duration
	// Memory is the relative growth allowed to the means of RSS and heap
	// in use (0.25: the last quarter's mean may be 25 % above the second's).
	Memory float64
	// Count is the relative growth allowed to the means of goroutines and
	// open file descriptors (but table files), and CountSlack an absolute
	// allowance on top:
	// a handful of connections and files come and go with the load.
	Count, CountSlack float64
	// P99 is the factor allowed between the last and the second quarter's
	// median p99 latency.
	P99 float64
}

// DefaultRule are the tolerances Run judges with.
//
// Memory is sampled at any point of the garbage collector's cycle (at
// GOGC=200 the heap in use swings between the live heap and up to three
// times it), so a quarter's mean moves by some percent between quarters of
// a flat run. p99 moves with other work on the machine. The tolerances are
// what those swings need and no more: in an hour sampled every minute, the
// quarters compared are about 30 minutes apart, so a series growing
// linearly fails when it grows by more than about 1.3 % (memory) or 4 %
// (p99) of its level a minute, and any leak without a bound fails a run
// long enough.
var DefaultRule = Rule{Memory: 0.25, Count: 0.10, CountSlack: 10, P99: 1.5}

// CheckFDs names the check of the open file descriptors other than the
// store's table files (open_fds − sst_fds).
const CheckFDs = "open_fds_but_sst"

// CheckRSS names the check of the resident memory other than the store's
// caches (rss_bytes − store_cache_bytes). Pebble fills its block cache as
// the data grows, up to the cache size it was given (256 MiB by default),
// and keeps up to three memtables: memory that grows for most of an hour
// and then stays, by design. Anything else that grows is a leak.
const CheckRSS = "rss_but_store_cache"

// Check is the judgement of one series.
type Check struct {
	// Name is the series' CSV column, or CheckFDs.
	Name string
	// Second and Last are the second and last quarters' means (medians for
	// p99, in seconds); Limit is the most Last may be.
	Second, Last, Limit float64
	OK                  bool
}

// Verdict is the judgement of a run.
type Verdict struct {
	// Flat: every check passed.
	Flat bool
	// Pass: flat, no 5xx and no failed operation.
	Pass bool
	// Warmup is the warm-up that was applied; Judged the samples after it.
	Warmup time.Duration
	Judged int
	Checks []Check
	// Errors5xx and Failures total the samples (warm-up included).
	Errors5xx, Failures int64
	// Reasons say why the run did not pass.
	Reasons []string
}

// Fail marks the verdict failed for a reason found outside the samples (the
// load tool's result, the server's exit).
func (v *Verdict) Fail(reason string) {
	v.Pass = false
	v.Reasons = append(v.Reasons, reason)
}

// minJudged is how many samples after the warm-up a verdict needs: one per
// quarter.
const minJudged = 4

// Judge judges samples (in time order) by rule.
func Judge(samples []Sample, rule Rule) Verdict {
	v := Verdict{Warmup: rule.Warmup}
	for _, s := range samples {
		v.Errors5xx += s.Errors5xx
		v.Failures += s.Failures
	}
	if v.Warmup == 0 && len(samples) > 0 {
		v.Warmup = samples[len(samples)-1].Elapsed / 8
	}
	var judged []Sample
	for _, s := range samples {
		if s.Elapsed >= v.Warmup {
			judged = append(judged, s)
		}
	}
	v.Judged = len(judged)
	v.Flat = true
	if len(judged) < minJudged {
		v.Flat = false
		v.Reasons = append(v.Reasons, fmt.Sprintf("%d samples after the warm-up of %v: at least %d are needed", len(judged), v.Warmup, minJudged))
	} else {
		q2, q4 := quarter(judged, 1), quarter(judged, 3)
		grow := func(name string, get func(Sample) float64, rel, slack float64) {
			c := Check{Name: name, Second: mean(q2, get), Last: mean(q4, get)}
			c.Limit = c.Second*(1+rel) + slack
			c.OK = c.Last <= c.Limit
			v.add(c)
		}
		grow(CheckRSS, func(s Sample) float64 { return float64(s.RSS - s.StoreCache) }, rule.Memory, 0)
		grow(ColHeap, func(s Sample) float64 { return float64(s.HeapInuse) }, rule.Memory, 0)
		grow(ColGoroutines, func(s Sample) float64 { return float64(s.Goroutines) }, rule.Count, rule.CountSlack)
		// The store's table files grow in number with its data, held by
		// Pebble's table cache (bounded): a leaked descriptor is any other.
		grow(CheckFDs, func(s Sample) float64 { return float64(s.FDs - s.TableFDs) }, rule.Count, rule.CountSlack)
		c := Check{Name: ColP99, Second: medianP99(q2), Last: medianP99(q4)}
		c.Limit = c.Second * rule.P99
		// A quarter without requests has no p99: nothing to judge it by.
		c.OK = !math.IsNaN(c.Second) && !math.IsNaN(c.Last) && c.Last <= c.Limit
		v.add(c)
	}
	v.Pass = v.Flat
	if v.Errors5xx > 0 {
		v.Fail(fmt.Sprintf("%d requests answered 5xx", v.Errors5xx))
	}
	if v.Failures > 0 {
		v.Fail(fmt.Sprintf("%d operations of the harness failed", v.Failures))
	}
	return v
}

func (v *Verdict) add(c Check) {
	v.Checks = append(v.Checks, c)
	if !c.OK {
		v.Flat = false
		v.Reasons = append(v.Reasons, fmt.Sprintf("%s grew: last quarter %s, limit %s (second quarter %s)",
			c.Name, c.format(c.Last), c.format(c.Limit), c.format(c.Second)))
	}
}

// quarter is the k-th (0-based) of four consecutive, nearly equal parts.
func quarter(s []Sample, k int) []Sample {
	return s[k*len(s)/4 : (k+1)*len(s)/4]
}

func mean(s []Sample, get func(Sample) float64) float64 {
	var sum float64
	for _, x := range s {
		sum += get(x)
	}
	return sum / float64(len(s))
}

// medianP99 is the median p99 in seconds of the samples that answered
// requests; NaN when none did.
func medianP99(s []Sample) float64 {
	var p []float64
	for _, x := range s {
		if x.P99 >= 0 && x.Requests > 0 {
			p = append(p, x.P99.Seconds())
		}
	}
	if len(p) == 0 {
		return math.NaN()
	}
	slices.Sort(p)
	if len(p)%2 == 1 {
		return p[len(p)/2]
	}
	return (p[len(p)/2-1] + p[len(p)/2]) / 2
}

// format shows a check's value in its unit.
func (c Check) format(x float64) string {
	switch c.Name {
	case CheckRSS, ColHeap:
		return fmt.Sprintf("%.1f MiB", x/(1<<20))
	case ColP99:
		return fmt.Sprintf("%.2f ms", x*1e3)
	}
	return fmt.Sprintf("%.1f", x)
}

// String is the verdict as verdict.txt holds it: a line per check, then
// the result and its reasons.
func (v Verdict) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "warm-up %v, %d samples judged (second quarter against the last)\n", v.Warmup, v.Judged)
	for _, c := range v.Checks {
		ok := "ok"
		if !c.OK {
			ok = "GREW"
		}
		fmt.Fprintf(&b, "  %-20s second %12s  last %12s  limit %12s  %s\n", c.Name, c.format(c.Second), c.format(c.Last), c.format(c.Limit), ok)
	}
	fmt.Fprintf(&b, "5xx %d, failed operations %d\n", v.Errors5xx, v.Failures)
	switch {
	case v.Pass:
		b.WriteString("verdict: FLAT, no errors: pass\n")
	case v.Flat:
		b.WriteString("verdict: flat, but FAIL\n")
	default:
		b.WriteString("verdict: NOT FLAT: fail\n")
	}
	for _, r := range v.Reasons {
		fmt.Fprintf(&b, "  - %s\n", r)
	}
	return b.String()
}
