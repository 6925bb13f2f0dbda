package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ack is a decision the server acknowledged with 200.
type ack struct {
	dossierID, digest string
	seq               uint64
}

// TestAcknowledgedDecisionsSurviveSIGKILL runs the real binary, kills it
// with SIGKILL while decisions are in flight, restarts it on the same data
// directory, and checks that every acknowledged decision is there intact and
// the ledger verifies. Three kill/restart rounds accumulate acknowledgements.
func TestAcknowledgedDecisionsSurviveSIGKILL(t *testing.T) {
	const (
		rounds   = 3
		killAt   = 70 // acknowledgements per round before the kill
		clients  = 8
		orgLedge = 2 // org.created and api_key.created
	)
	dir := t.TempDir()
	p := startServer(t, dir)
	plat := platformKey(t, dir)
	org := mustCall(t, "POST", p.url+"/v1/platform/orgs", plat, `{"name":"Durable"}`, http.StatusCreated)
	key := str(org.json, "api_key")

	var acks []ack
	for round := range rounds {
		if round > 0 {
			p = startServer(t, dir)
			checkAcknowledged(t, p, key, acks, orgLedge)
		}
		got, failed := decideUntilKilled(t, p, key, clients, killAt, round)
		if code := p.wait(); code != -1 {
			t.Fatalf("round %d: the server exited with %d, want death by SIGKILL", round, code)
		}
		if len(got) < killAt {
			t.Fatalf("round %d: only %d acknowledgements before the kill", round, len(got))
		}
		t.Logf("round %d: %d acknowledged, %d in flight or refused when killed", round, len(got), failed)
		acks = append(acks, got...)
	}
	p = startServer(t, dir)
	checkAcknowledged(t, p, key, acks, orgLedge)
}

// decideUntilKilled runs clients concurrent decision loops against p and
// SIGKILLs the server as soon as killAt decisions were acknowledged, while
// the other clients' requests are still in flight. It returns every
// acknowledged decision (including answers that arrived after the signal)
// and how many requests failed.
func decideUntilKilled(t *testing.T, p *proc, key string, clients, killAt, round int) ([]ack, int) {
	t.Helper()
	httpc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	defer httpc.CloseIdleConnections()
	var (
		mu     sync.Mutex
		acks   []ack
		failed int
		killed bool
		wg     sync.WaitGroup
	)
	for c := range clients {
		wg.Go(func() {
			for i := 0; ; i++ {
				body := fmt.Sprintf(`{"decision_type":"PAYMENT","workflow_key":"round-%d","amount":%d,"context":{"client":%d,"i":%d}}`,
					round, (c*1000+i*37)%20000, c, i)
				r, err := call(httpc, "POST", p.url+"/v1/protocol/evaluate-decision", key, body, nil)
				mu.Lock()
				switch {
				case err != nil || r.status != http.StatusOK:
					failed++
					if !killed {
						if err != nil {
							t.Errorf("client %d: request failed before the kill: %v", c, err)
						} else {
							t.Errorf("client %d: status %d before the kill: %s", c, r.status, r.raw)
						}
					}
					mu.Unlock()
					return // after the kill every further request fails
				default:
					seq, _ := r.json["ledger_seq"].(float64)
					acks = append(acks, ack{dossierID: str(r.json, "dossier_id"), digest: str(r.json, "dossier_digest"), seq: uint64(seq)})
					if len(acks) == killAt && !killed {
						killed = true
						if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
							t.Errorf("SIGKILL: %v", err)
						}
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return acks, failed
}

// checkAcknowledged asserts that every acknowledged dossier is served with
// its digest, that the ledger verifies, and that it holds at least every
// acknowledged decision.
func checkAcknowledged(t *testing.T, p *proc, key string, acks []ack, base uint64) {
	t.Helper()
	seqs := map[uint64]bool{}
	for _, a := range acks {
		if seqs[a.seq] {
			t.Fatalf("two acknowledged decisions share ledger seq %d", a.seq)
		}
		seqs[a.seq] = true
		r := mustCall(t, "GET", p.url+"/v1/protocol/dossiers/"+a.dossierID, key, "", http.StatusOK)
		sum := sha256.Sum256(r.raw)
		if got := "sha256:" + hex.EncodeToString(sum[:]); got != a.digest || r.header.Get("X-Clearance-Dossier-Digest") != a.digest {
			t.Fatalf("dossier %s: digest %s (header %s), acknowledged %s", a.dossierID, got, r.header.Get("X-Clearance-Dossier-Digest"), a.digest)
		}
		if seq, _ := r.json["ledger_seq"].(float64); uint64(seq) != a.seq {
			t.Fatalf("dossier %s: ledger_seq %v, acknowledged %d", a.dossierID, seq, a.seq)
		}
	}
	v := mustCall(t, "GET", p.url+"/v1/protocol/audit/ledger/verify", key, "", http.StatusOK)
	head, _ := v.json["head_seq"].(float64)
	if v.json["valid"] != true {
		t.Fatalf("ledger does not verify after the crash: %s", v.raw)
	}
	if uint64(head) < uint64(len(acks))+base {
		t.Fatalf("ledger head %v < %d acknowledged decisions + %d", head, len(acks), base)
	}
}
