package main

import (
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clearancehq/clearance/internal/acktest"
)

var (
	crashRounds = flag.Int("crash.rounds", 3, "SIGKILL/restart rounds of TestSIGKILLLosesNothingAcknowledged")
	crashSeed   = flag.Uint64("crash.seed", 0, "seed of the kill points; 0 picks one (logged, to replay a failure)")
)

const (
	crashClients = 8   // concurrent load clients, split over the orgs
	crashOrgs    = 2   // orgs under load
	crashKillMin = 20  // acknowledgements before the kill, drawn per round
	crashKillMax = 160 // in [crashKillMin, crashKillMax]
)

// TestSIGKILLLosesNothingAcknowledged runs the real binary under a mix of
// decisions and full agent cycles (enforce-and-bind, two racing claims,
// finalize) from concurrent clients of two orgs, SIGKILLs it after a random
// number of acknowledgements while requests are in flight, and restarts it
// on the same data directory, -crash.rounds times. After every restart each
// acknowledged decision, grant, claim and finalization is there unchanged,
// no grant has two winning claims, and both ledgers verify and record them.
func TestSIGKILLLosesNothingAcknowledged(t *testing.T) {
	seed := *crashSeed
	if seed == 0 {
		seed = mrand.Uint64()
	}
	t.Logf("seed %d (replay with -crash.seed=%d)", seed, seed)
	rng := mrand.New(mrand.NewPCG(seed, seed))
	start := time.Now()

	dir := t.TempDir()
	// Long grant and lease lifetimes: a grant acknowledged before a kill can
	// still be claimed, and a claim finalized, after the restart.
	flags := []string{"--rate-limit", "-1", "--grant-ttl", "1h", "--claim-lease", "1h"}
	p := startServer(t, dir, flags...)
	httpc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2 * crashClients}}
	defer httpc.CloseIdleConnections()
	orgs := acktest.Setup(t, httpc, p.url, platformKey(t, dir), crashOrgs)

	book := acktest.NewBook()
	for round := range *crashRounds {
		if round > 0 {
			p = startServer(t, dir, flags...)
			acktest.Check(t, httpc, p.url, orgs, book)
		}
		killAt := crashKillMin + rng.IntN(crashKillMax-crashKillMin+1)
		var (
			mu     sync.Mutex // orders the kill and the failures
			killed bool
			failed int
		)
		load := &acktest.Load{T: t, URL: p.url, Client: httpc, Orgs: orgs, Book: book, Tag: fmt.Sprintf("r%d", round),
			// Kill the server at the round's kill point, while the other
			// clients' requests are in flight.
			OnAck: func(acks int) {
				if acks != killAt {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				killed = true
				if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Errorf("SIGKILL: %v", err)
				}
			},
			// After the kill every request fails and its client stops;
			// before it none may.
			OnFailure: func(c int, op string, rep *acktest.Reply, err error) bool {
				mu.Lock()
				defer mu.Unlock()
				failed++
				if !killed {
					t.Errorf("round %d client %d: %s failed before the kill: %s", round, c, op, acktest.Describe(rep, err))
				}
				return false
			},
		}
		acks := load.Run(crashClients)
		if code := p.wait(); code != -1 {
			t.Fatalf("round %d: the server exited with %d, want death by SIGKILL", round, code)
		}
		if acks < killAt {
			t.Fatalf("round %d: only %d acknowledgements before the kill at %d", round, acks, killAt)
		}
		t.Logf("round %d: killed at %d acknowledgements, %d acknowledged in all, %d in flight or refused", round, killAt, acks, failed)
	}
	p = startServer(t, dir, flags...)
	acktest.Check(t, httpc, p.url, orgs, book)

	t.Logf("%d rounds in %v: acknowledged %d decisions, %d grants, %d claims (%d after a restart), %d finalizations (%d after a restart); "+
		"0 lost, 0 double claims, %d replayed claims and finalizations refused",
		*crashRounds, time.Since(start).Round(time.Millisecond), len(book.Decisions), len(book.Grants),
		book.Claims, book.LateClaims, book.Finals, book.LateFinals, book.Refused)
}
