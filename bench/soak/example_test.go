package soak_test

import (
	"fmt"
	"time"

	"github.com/clearancehq/clearance/bench/soak"
)

// A server whose goroutines grow by two a minute, sampled every minute for
// an hour, is judged not flat; everything else about it is steady.
func ExampleJudge() {
	var samples []soak.Sample
	for i := range 61 {
		samples = append(samples, soak.Sample{Elapsed: time.Duration(i) * time.Minute,
			RSS: 150 << 20, HeapInuse: 30 << 20, Goroutines: 40 + 2*int64(i), FDs: 32,
			Requests: 15000, P50: time.Millisecond, P99: 12 * time.Millisecond})
	}
	v := soak.Judge(samples, soak.DefaultRule)
	fmt.Print(v)
	// Output:
	// warm-up 7m30s, 53 samples judged (second quarter against the last)
	//   rss_but_store_cache  second    150.0 MiB  last    150.0 MiB  limit    187.5 MiB  ok
	//   heap_inuse_bytes     second     30.0 MiB  last     30.0 MiB  limit     37.5 MiB  ok
	//   goroutines           second         94.0  last        147.0  limit        113.4  GREW
	//   open_fds_but_sst     second         32.0  last         32.0  limit         45.2  ok
	//   p99_ms               second     12.00 ms  last     12.00 ms  limit     18.00 ms  ok
	// 5xx 0, failed operations 0
	// verdict: NOT FLAT: fail
	//   - goroutines grew: last quarter 147.0, limit 113.4 (second quarter 94.0)
}
