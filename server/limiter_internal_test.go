package server

import (
	"net/http/httptest"
	"strconv"
	"testing"
)

func limiterCount(s *Server) int {
	n := 0
	s.limiters.Range(func(_, _ any) bool { n++; return true })
	return n
}

// Keys a client makes up (connector ids, addresses) cannot grow the
// limiters without bound: full buckets are forgotten every sweepEvery new
// ones, with nothing changed for any client.
func TestLimitersStayBounded(t *testing.T) {
	// A bucket refills at once: each is full again before the next sweep.
	s := &Server{opts: Options{RateLimit: 1e12, RateBurst: 1}}
	for i := range 3 * sweepEvery {
		if err := s.allow(httptest.NewRecorder(), "signals-connector:made-up-"+strconv.Itoa(i)); err != nil {
			t.Fatalf("key %d refused: %v", i, err)
		}
	}
	if n := limiterCount(s); n > sweepEvery {
		t.Fatalf("%d limiters kept after %d made-up keys, want at most %d", n, 3*sweepEvery, sweepEvery)
	}

	// A bucket that is not full is kept: its client stays limited.
	s = &Server{opts: Options{RateLimit: 1e-9, RateBurst: 1}}
	if err := s.allow(httptest.NewRecorder(), "busy"); err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	if err := s.allow(w, "busy"); err != errRateLimited || w.Header().Get("Retry-After") == "" {
		t.Fatalf("second request = %v, want rate limited with Retry-After", err)
	}
	for i := range 2 * sweepEvery {
		_ = s.allow(httptest.NewRecorder(), "other-"+strconv.Itoa(i))
	}
	if err := s.allow(httptest.NewRecorder(), "busy"); err != errRateLimited {
		t.Fatalf("after sweeps the limited key = %v, want still rate limited", err)
	}
}
