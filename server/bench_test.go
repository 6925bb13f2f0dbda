package server_test

import (
	"bytes"
	"io"
	"net/http"
	"runtime"
	"testing"

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
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			req.Header.Set("Authorization", "Bearer "+o.Key)
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
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}
