package server_test

import (
	"fmt"
	"net/http"
	"runtime"
	"testing"
)

// BenchmarkHTTPCycle measures enforce-and-bind → claim-token →
// finalize-token over HTTP, on the suite's store (Pebble with fsync, or
// PostgreSQL with CLEARANCE_E2E_STORE=postgres), with about 16 concurrent
// clients on one org; every iteration has its own intent, nonce and scope.
func BenchmarkHTTPCycle(b *testing.B) {
	x := newExecEnv(b, bandsBundle)
	b.ReportAllocs()
	b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := x.cycle(b); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
}

// cycle runs one enforce-and-bind, claim and finalize; safe on any goroutine.
func (x *execEnv) cycle(b *testing.B) error {
	jws, _ := x.intent(b, intentSpec{})
	r, err := x.send("POST", pathBind, x.o.Key, map[string]any{"signed_intent": jws}, nil)
	if err != nil {
		return err
	}
	token, hash := r.str("execution_token"), r.str("intent_hash")
	if r.Status != http.StatusOK || token == "" {
		return fmt.Errorf("bind: %s", r)
	}
	c, err := x.send("POST", pathClaim, x.o.Key, map[string]any{"execution_token": token, "intent_hash": hash}, nil)
	if err != nil {
		return err
	}
	if c.Status != http.StatusOK || lookup(c.JSON, "should_execute") != true {
		return fmt.Errorf("claim: %s", c)
	}
	f, err := x.send("POST", pathFinalize, x.o.Key, map[string]any{"execution_token": token,
		"claim_token": c.str("claim_token"), "outcome": "COMMITTED"}, nil)
	if err != nil {
		return err
	}
	if f.Status != http.StatusOK {
		return fmt.Errorf("finalize: %s", f)
	}
	return nil
}
