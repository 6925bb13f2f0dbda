package soak

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"
)

// The CSV columns, in order. Sizes are bytes, latencies milliseconds
// (empty when the interval answered no request), elapsed seconds.
const (
	ColElapsed    = "elapsed_s"
	ColTime       = "time"
	ColRSS        = "rss_bytes"
	ColHeap       = "heap_inuse_bytes"
	ColGoSys      = "go_sys_bytes"
	ColGoroutines = "goroutines"
	ColFDs        = "open_fds"
	ColTableFDs   = "sst_fds"
	ColRequests   = "requests"
	ColErrors     = "errors_5xx"
	ColRate       = "requests_per_s"
	ColP50        = "p50_ms"
	ColP99        = "p99_ms"
	ColOps        = "harness_ops"
	ColFailures   = "harness_failures"
	// ColStoreCache is the memory of the store's caches (Pebble's block
	// cache and memtables; 0 on PostgreSQL). Older CSVs lack it.
	ColStoreCache = "store_cache_bytes"
)

// Columns is the CSV header.
var Columns = []string{ColElapsed, ColTime, ColRSS, ColHeap, ColGoSys, ColGoroutines, ColFDs, ColTableFDs, ColRequests,
	ColErrors, ColRate, ColP50, ColP99, ColOps, ColFailures, ColStoreCache}

// WriteCSV writes the samples with a header line.
func WriteCSV(w io.Writer, samples []Sample) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(Columns); err != nil {
		return err
	}
	i64 := func(n int64) string { return strconv.FormatInt(n, 10) }
	ms := func(d time.Duration) string {
		if d < 0 {
			return ""
		}
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
	}
	for i, s := range samples {
		rate := 0.0
		if i > 0 {
			rate = s.Rate(samples[i-1])
		}
		rec := []string{strconv.FormatFloat(s.Elapsed.Seconds(), 'f', 3, 64), s.At.UTC().Format(time.RFC3339Nano),
			i64(s.RSS), i64(s.HeapInuse), i64(s.GoSys), i64(s.Goroutines), i64(s.FDs), i64(s.TableFDs), i64(s.Requests), i64(s.Errors5xx),
			strconv.FormatFloat(rate, 'f', 1, 64), ms(s.P50), ms(s.P99), i64(s.Ops), i64(s.Failures), i64(s.StoreCache)}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// ReadCSV reads what WriteCSV wrote (to judge or plot a run again). The
// rate column is derived and not read back.
func ReadCSV(r io.Reader) ([]Sample, error) {
	cr := csv.NewReader(r)
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("read the CSV header: %w", err)
	}
	// A CSV from before the store cache column reads with it 0.
	if !slices.Equal(head, Columns) && !slices.Equal(head, Columns[:len(Columns)-1]) {
		return nil, fmt.Errorf("unexpected CSV header %q", head)
	}
	var out []Sample
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		s, err := parseRecord(rec)
		if err != nil {
			return nil, fmt.Errorf("CSV line %d: %w", line, err)
		}
		out = append(out, s)
	}
}

func parseRecord(rec []string) (Sample, error) {
	var s Sample
	var err error
	num := func(i int) int64 {
		n, e := strconv.ParseInt(rec[i], 10, 64)
		if e != nil && err == nil {
			err = fmt.Errorf("%s: %w", Columns[i], e)
		}
		return n
	}
	dur := func(i int, unit time.Duration, empty time.Duration) time.Duration {
		if rec[i] == "" {
			return empty
		}
		f, e := strconv.ParseFloat(rec[i], 64)
		if (e != nil || math.IsNaN(f) || math.IsInf(f, 0)) && err == nil {
			err = fmt.Errorf("%s: bad number %q", Columns[i], rec[i])
		}
		return time.Duration(math.Round(f * float64(unit)))
	}
	s.Elapsed = dur(0, time.Second, 0)
	at, terr := time.Parse(time.RFC3339Nano, rec[1])
	if terr != nil && err == nil {
		err = fmt.Errorf("%s: %w", ColTime, terr)
	}
	s.At = at
	s.RSS, s.HeapInuse, s.GoSys, s.Goroutines, s.FDs, s.TableFDs = num(2), num(3), num(4), num(5), num(6), num(7)
	s.Requests, s.Errors5xx = num(8), num(9)
	s.P50, s.P99 = dur(11, time.Millisecond, -1), dur(12, time.Millisecond, -1)
	s.Ops, s.Failures = num(13), num(14)
	if len(rec) > 15 {
		s.StoreCache = num(15)
	}
	return s, err
}
