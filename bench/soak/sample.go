package soak

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Sample is one observation of the server. The gauges are read at At; the
// counts and latencies cover the interval since the previous sample (the
// first sample's are zero).
type Sample struct {
	// Elapsed is the time since the load started.
	Elapsed time.Duration
	At      time.Time
	// RSS is the server's resident memory in bytes (VmRSS).
	RSS int64
	// HeapInuse is the Go heap in use in bytes (go_memstats_heap_inuse_bytes).
	HeapInuse int64
	// GoSys is what the Go runtime holds from the OS in bytes
	// (go_memstats_sys_bytes): RSS beyond it is native memory, chiefly
	// Pebble's block cache and memtables (bounded by the store's cache
	// size) and the binary's own pages.
	GoSys int64
	// StoreCache is what the store's caches hold in bytes
	// (clearance_store_cache_bytes summed: Pebble's block cache and
	// memtables, bounded by its cache size; 0 when the server does not
	// report it). Built with cgo, Pebble allocates them with malloc: they
	// count in RSS, not in GoSys.
	StoreCache int64
	// Goroutines is go_goroutines.
	Goroutines int64
	// FDs is how many file descriptors the server holds open; TableFDs how
	// many of them are the store's table files (*.sst), which Pebble's
	// table cache holds and which grow in number with the store.
	FDs, TableFDs int64
	// Requests is how many requests the server answered in the interval,
	// every route but GET /metrics; Errors5xx how many of them were 5xx.
	Requests, Errors5xx int64
	// P50 and P99 are the interval's request latencies; negative when it
	// answered none.
	P50, P99 time.Duration
	// Ops and Failures count the harness's own operations (feature rounds
	// and exports) that ended in the interval, and the failed ones.
	Ops, Failures int64
}

// Rate is the interval's requests per second (0 for the first sample).
func (s Sample) Rate(prev Sample) float64 {
	d := (s.Elapsed - prev.Elapsed).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(s.Requests) / d
}

// Metric names read from the server's /metrics.
const (
	metricHeapInuse  = "go_memstats_heap_inuse_bytes"
	metricGoSys      = "go_memstats_sys_bytes"
	metricGoroutines = "go_goroutines"
	metricStoreCache = "clearance_store_cache_bytes"
	metricRequests   = "clearance_http_requests_total"
	metricLatency    = "clearance_http_request_duration_seconds"
	// scrapeRoute is the route of the scrapes themselves, left out of the
	// request counts and latencies.
	scrapeRoute = "GET /metrics"
)

// scrape is what one read of /metrics gives: gauges, and cumulative
// counts since the server started.
type scrape struct {
	heapInuse, goSys, goroutines int64
	storeCache                   int64 // summed over the caches; 0 when absent
	requests, errors5xx          int64
	// bounds are the latency histogram's upper bounds (seconds, ascending,
	// +Inf excluded); cum the cumulative counts at each, summed over the
	// routes; total the count of every observation (+Inf).
	bounds []float64
	cum    []int64
	total  int64
}

// parseMetrics reads a Prometheus text exposition.
func parseMetrics(r io.Reader) (scrape, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return scrape{}, fmt.Errorf("parse /metrics: %w", err)
	}
	var s scrape
	gauge := func(name string) (int64, error) {
		f := fams[name]
		if f == nil || len(f.GetMetric()) == 0 {
			return 0, fmt.Errorf("/metrics has no %s", name)
		}
		switch m := f.GetMetric()[0]; {
		case m.GetGauge() != nil:
			return int64(m.GetGauge().GetValue()), nil
		case m.GetUntyped() != nil:
			return int64(m.GetUntyped().GetValue()), nil
		}
		return 0, fmt.Errorf("/metrics: %s is not a gauge", name)
	}
	if s.heapInuse, err = gauge(metricHeapInuse); err != nil {
		return scrape{}, err
	}
	if s.goSys, err = gauge(metricGoSys); err != nil {
		return scrape{}, err
	}
	if s.goroutines, err = gauge(metricGoroutines); err != nil {
		return scrape{}, err
	}
	if f := fams[metricStoreCache]; f != nil {
		for _, m := range f.GetMetric() {
			s.storeCache += int64(m.GetGauge().GetValue())
		}
	}
	if f := fams[metricRequests]; f != nil {
		for _, m := range f.GetMetric() {
			if label(m, "route") == scrapeRoute {
				continue
			}
			n := int64(m.GetCounter().GetValue())
			s.requests += n
			if strings.HasPrefix(label(m, "code"), "5") {
				s.errors5xx += n
			}
		}
	}
	if f := fams[metricLatency]; f != nil {
		sums := map[float64]int64{}
		for _, m := range f.GetMetric() {
			if label(m, "route") == scrapeRoute {
				continue
			}
			h := m.GetHistogram()
			s.total += int64(h.GetSampleCount())
			for _, b := range h.GetBucket() {
				if !math.IsInf(b.GetUpperBound(), 1) {
					sums[b.GetUpperBound()] += int64(b.GetCumulativeCount())
				}
			}
		}
		for b := range sums {
			s.bounds = append(s.bounds, b)
		}
		slices.Sort(s.bounds)
		for _, b := range s.bounds {
			s.cum = append(s.cum, sums[b])
		}
	}
	return s, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// since is the latency histogram of the requests between prev and s:
// both scrapes' cumulative counts differenced (a bucket the earlier scrape
// lacked counted from zero).
func (s scrape) since(prev scrape) (cum []int64, total int64) {
	old := make(map[float64]int64, len(prev.bounds))
	for i, b := range prev.bounds {
		old[b] = prev.cum[i]
	}
	cum = make([]int64, len(s.bounds))
	for i, b := range s.bounds {
		cum[i] = s.cum[i] - old[b]
	}
	return cum, s.total - prev.total
}

// quantile estimates the q-quantile (0 < q < 1) of a histogram given as
// ascending upper bounds with their cumulative counts and the total count
// (the +Inf bucket), as Prometheus' histogram_quantile does: linear
// interpolation within the bucket the rank falls in, the first bucket
// starting at 0, and a rank beyond the last finite bound answered with that
// bound. NaN when the histogram is empty.
func quantile(q float64, bounds []float64, cum []int64, total int64) float64 {
	if total <= 0 || len(bounds) == 0 {
		return math.NaN()
	}
	rank := q * float64(total)
	i, _ := slices.BinarySearchFunc(cum, rank, func(c int64, r float64) int {
		switch {
		case float64(c) < r:
			return -1
		case float64(c) > r:
			return 1
		}
		return 0
	})
	if i == len(bounds) {
		return bounds[len(bounds)-1]
	}
	lower, below := 0.0, int64(0)
	if i > 0 {
		lower, below = bounds[i-1], cum[i-1]
	}
	in := cum[i] - below
	if in <= 0 {
		return bounds[i]
	}
	return lower + (bounds[i]-lower)*(rank-float64(below))/float64(in)
}

// procRSS reads VmRSS (bytes) from a /proc/PID/status document.
func procRSS(status []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != "VmRSS" {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("VmRSS: unexpected %q", rest)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmRSS: %w", err)
		}
		return kb << 10, nil
	}
	return 0, errors.New("no VmRSS in the process status (has it exited?)")
}

// readProc reads the resident memory and the open file descriptors of
// pid, and how many of those are table files.
func readProc(pid int) (rss, fds, tables int64, err error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	if rss, err = procRSS(status); err != nil {
		return 0, 0, 0, err
	}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, 0, err
	}
	for _, e := range ents {
		// A descriptor closed since the listing has no link: not counted.
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasSuffix(target, ".sst") {
			tables++
		}
	}
	return rss, int64(len(ents)), tables, nil
}
