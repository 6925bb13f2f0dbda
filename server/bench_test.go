package server_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/server"
)

// BenchmarkHTTPEvaluateDecision measures evaluate-decision end to end: about
// 32 concurrent HTTP clients, one org, the starter policy, every decision
// durably recorded in a real store (Pebble: synced WAL, group commit; or
// PostgreSQL with CLEARANCE_E2E_STORE=postgres).
func BenchmarkHTTPEvaluateDecision(b *testing.B) {
	e := newEnv(b, server.Options{RateLimit: -1})
	o := e.createOrg("Bench")
	const clients = 32
	client := &http.Client{Transport: &http.Transport{
		MaxIdleConns:        2 * clients,
		MaxIdleConnsPerHost: 2 * clients,
	}}
	b.Cleanup(client.CloseIdleConnections)
	url := e.srv.URL + pathEvaluate
	body := []byte(`{"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":2500}`)

	b.ReportAllocs()
	b.SetParallelism((clients + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	postDecisions(b, client, url, body, func() string { return o.Key })
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// BenchmarkHTTPEvaluateDecisionCallback is BenchmarkHTTPEvaluateDecision
// with the engine's workers, without a callback destination ("none") and
// with a WEBHOOK integration on a loopback receiver in this process:
//
//   - "webhook": the delivery worker runs during the measurement, on the
//     same CPUs: decisions/s shows what the machine does when it both
//     decides and delivers, callbacks/decision how far delivery kept up.
//   - "webhook-deferred": the worker starts only after the measurement, so
//     decisions/s is the request path's own cost with a destination (the
//     event written with the decision, nothing delivered on the path: it
//     must stay within 5% of "none"); then every callback is delivered and
//     callbacks/s is the worker's rate alone.
func BenchmarkHTTPEvaluateDecisionCallback(b *testing.B) {
	for _, variant := range []string{"none", "webhook", "webhook-deferred"} {
		b.Run(variant, func(b *testing.B) {
			e := &env{t: b, dbDir: filepath.Join(b.TempDir(), "db"), opts: server.Options{RateLimit: -1},
				engineOpts: clearance.Options{SecretsKey: testSecretsKey, AllowPrivateDestinations: true}}
			e.start()
			secret, err := e.engine.Admin.NewPlatformSecret()
			if err != nil {
				b.Fatal(err)
			}
			if err := e.engine.Admin.EnsurePlatformKey(context.Background(), secret); err != nil {
				b.Fatal(err)
			}
			e.platform = secret
			b.Cleanup(e.stop)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			started := false
			run := func() { started = true; go func() { e.engine.Run(ctx); close(done) }() }
			b.Cleanup(func() {
				cancel()
				if started {
					<-done
				}
			})
			o := e.createOrg("Bench")
			var received, want atomic.Int64
			all := make(chan struct{})
			if variant != "none" {
				rv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body)
					if n := received.Add(1); n == want.Load() {
						close(all)
					}
					w.WriteHeader(http.StatusNoContent)
				}))
				b.Cleanup(rv.Close)
				e.do("POST", "/v1/orgs/"+o.ID+"/integrations/WEBHOOK/connect", o.Key,
					connectBody(rv.URL, hookSecret, ""), nil).want(b, http.StatusCreated)
			}
			if variant != "webhook-deferred" {
				run()
			}
			const clients = 32
			client := &http.Client{Transport: &http.Transport{MaxIdleConns: 2 * clients, MaxIdleConnsPerHost: 2 * clients}}
			b.Cleanup(client.CloseIdleConnections)
			body := []byte(`{"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":2500}`)
			b.ReportAllocs()
			b.SetParallelism((clients + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ResetTimer()
			postDecisions(b, client, e.srv.URL+pathEvaluate, body, func() string { return o.Key })
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
			b.ReportMetric(float64(received.Load())/float64(b.N), "callbacks/decision")
			if variant != "webhook-deferred" {
				return
			}
			// Every decision's callback is delivered once the worker runs.
			want.Store(int64(b.N))
			start := time.Now()
			run()
			if received.Load() < int64(b.N) {
				select {
				case <-all:
				case <-time.After(5 * time.Minute):
					b.Fatalf("%d of %d callbacks delivered after 5 minutes", received.Load(), b.N)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "callbacks/s")
		})
	}
}

// BenchmarkHTTPEvaluateOrgs is BenchmarkHTTPEvaluateDecision with every
// client on a key of its own, over one org and over 32 (client i decides
// for org i mod orgs): more orgs must not be slower than one.
func BenchmarkHTTPEvaluateOrgs(b *testing.B) {
	const clients = 32
	for _, n := range []int{1, clients} {
		b.Run(fmt.Sprintf("orgs=%d", n), func(b *testing.B) {
			e := newEnv(b, server.Options{RateLimit: -1})
			orgs := make([]org, n)
			for i := range orgs {
				orgs[i] = e.createOrg(fmt.Sprintf("Bench %d", i))
			}
			keys := make([]string, clients)
			for i := range keys {
				keys[i] = e.createKey(orgs[i%n], "decision:write")
			}
			client := &http.Client{Transport: &http.Transport{MaxIdleConns: 2 * clients, MaxIdleConnsPerHost: 2 * clients}}
			b.Cleanup(client.CloseIdleConnections)
			url := e.srv.URL + pathEvaluate
			body := []byte(`{"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":2500}`)
			var next atomic.Int64
			b.ReportAllocs()
			b.SetParallelism((clients + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ResetTimer()
			postDecisions(b, client, url, body, func() string { return keys[int(next.Add(1))%clients] })
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}

// postDecisions posts body to url from parallel clients until b.N
// decisions are answered 200; each client sends the key keyOf gives it.
func postDecisions(b *testing.B, client *http.Client, url string, body []byte, keyOf func() string) {
	b.RunParallel(func(pb *testing.PB) {
		key := keyOf()
		for pb.Next() {
			req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			res, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
			if res.StatusCode != http.StatusOK {
				b.Errorf("status %d", res.StatusCode)
				return
			}
		}
	})
}
