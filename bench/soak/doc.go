// Package soak runs the real `clearance serve` under a steady mixed load for
// as long as asked and judges whether it leaks: memory, goroutines, file
// descriptors or latency that keep growing while the load does not.
//
// It is its own module, beside the root one, so that the plotting library
// (gonum.org/v1/plot) never becomes a dependency of Clearance itself.
//
// # The run
//
// [Run] starts the given binary (`clearance serve` on a fresh data
// directory, 127.0.0.1 on a free port, embedded Pebble unless Config.Store
// names a PostgreSQL URL), creates an org, and for Config.Duration drives
// three loads at once:
//   - `clearance loadtest --scenario mixed` at Config.Rate operations per
//     second (evaluate-decision, and full agent cycles: enforce-and-bind,
//     claim, finalize), as a process of its own, which runs a little past
//     the last sample and then stops by itself;
//   - every Config.FeatureEvery, one round of the other features: a
//     decision of workflow "soak" (whose decision.resolved callbacks a
//     local receiver takes and checks), the console's reads (decisions,
//     activity, open escalations), the decision's proof packet, a share link
//     opened through the public routes (verify, proof bundle), a ledger
//     checkpoint sealed with a consistency proof from the previous one and
//     an inclusion proof of the decision, a policy dry run; every tenth
//     round, every share link is revoked and an old link must then be
//     refused;
//   - every Config.ExportEvery, a validation-pack export of the window since
//     the previous one, polled until built, downloaded, and its bytes
//     checked against the SHA-256 the export record names.
//
// # What is recorded
//
// A [Sample] every Config.Interval (the first when the load starts): the
// server's resident memory (VmRSS of /proc/PID/status), Go heap in use
// (go_memstats_heap_inuse_bytes), goroutines (go_goroutines) and what
// the store's caches hold (clearance_store_cache_bytes: Pebble's block
// cache and memtables) from its /metrics, its open file descriptors (the entries of /proc/PID/fd), and
// for the interval since the previous sample the requests it answered,
// how many were 5xx, and their p50 and p99 latency, from the cumulative
// buckets of clearance_http_request_duration_seconds differenced between
// scrapes and interpolated within a bucket as Prometheus'
// histogram_quantile does (the scrapes themselves, GET /metrics, are left
// out). Linux only (/proc).
//
// # The verdict
//
// [Judge] drops the samples of the warm-up and cuts the rest into four
// quarters. The run is flat when, for RSS but the store's caches (which
// fill up to the cache size Pebble was given, by design), heap in use,
// goroutines and the
// open FDs other than the store's table files (which grow in number with
// its data, held by Pebble's bounded table cache), the last quarter's mean
// is at most the second quarter's times (1 + tolerance) (plus an absolute
// slack for the two counts), and the last quarter's median p99 is at most
// Rule.P99 times the second quarter's. It
// passes when it is flat, no request was answered 5xx, and no operation of
// the harness or of the load tool failed, every decision the harness made
// was called back, and the server stopped cleanly on SIGTERM. The
// tolerances are [DefaultRule]. At the end the harness stops between
// operations, never abandoning a request (the server would count it as a
// 503).
//
// # Output
//
// In Config.Dir: soak.csv (the samples, [WriteCSV]), soak.png (the curves,
// [Plot]), verdict.txt, loadtest.json (the load tool's result), server.log
// and loadtest.log.
package soak
