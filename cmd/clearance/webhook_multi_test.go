package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clearancehq/clearance/cmd/clearance/internal/keyfile"
	"github.com/clearancehq/clearance/store/pgstore/pgtest"
)

// TestMultiServerDeliversEachEventOnce runs two `clearance serve` processes
// on one PostgreSQL schema, both delivering webhooks, and makes decisions
// through both: every decision's event reaches the receiver exactly once
// (one delivery id each, no id twice, none missing), signed with the secret
// one server stored and the other opens.
func TestMultiServerDeliversEachEventOnce(t *testing.T) {
	pgtest.Admin(t)
	schema := pgtest.NewSchema(t, "clearance_hooks_") // dropped after the servers stop
	storeURL := pgtest.SchemaURL(t, schema)

	// Shared keys: grants, ledger checkpoints and the secrets key, without
	// which B cannot open the signing secret A sealed.
	keysDir := t.TempDir()
	if _, _, err := keyfile.LoadOrCreate(keysDir, "grant"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := keyfile.LoadOrCreate(keysDir, "ledger"); err != nil {
		t.Fatal(err)
	}
	secretsFile := filepath.Join(keysDir, "secrets.key")
	if err := os.WriteFile(secretsFile, []byte("shared-secrets-key-of-the-webhook-test-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	type hit struct {
		evalID string
		signed bool
		event  string
	}
	var (
		mu   sync.Mutex
		hits = map[string][]hit{} // delivery id -> requests
	)
	rv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h := hit{evalID: hookEvaluationID(body), signed: hookSignatureValid(r.Header.Get("X-Clearance-Signature"), body, hookSecret),
			event: r.Header.Get("X-Clearance-Event")}
		mu.Lock()
		id := r.Header.Get("X-Clearance-Delivery-Id")
		hits[id] = append(hits[id], h)
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rv.Close)

	common := []string{"--store", storeURL, "--grant-key-file", filepath.Join(keysDir, "keys", "grant.json"),
		"--ledger-key-file", filepath.Join(keysDir, "keys", "ledger.json"), "--secrets-key-file", secretsFile,
		"--rate-limit", "-1", "--allow-private-destinations", "--webhook-lease", "3s", "--webhook-poll", "50ms",
		"--webhook-retries", "1s,2s"}
	pa := startServer(t, t.TempDir(), common...)
	pb := startServer(t, t.TempDir(), common...)
	httpc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer httpc.CloseIdleConnections()
	A, B, orgID, _ := mpOrg(t, pa, pb, httpc, "MultiServerHooks")
	// Connected through B: A must open the secret B sealed, and B A's.
	hookConnect(t, pb.url, orgID, B.key, rv.URL+"/hook")

	const decisions, workers = 60, 8
	servers := []mpClient{A, B}
	answers := make([]*reply, decisions)
	jobs := make(chan int)
	var (
		wg   sync.WaitGroup
		errs []string
	)
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				s := servers[i%2]
				body := fmt.Sprintf(`{"decision_type":"PAYMENT","workflow_key":"hooks","amount":%d,"context":{"i":%d}}`, 100+i*300, i)
				r, err := s.try("POST", "/v1/protocol/evaluate-decision", body)
				if err == nil && (r.status != http.StatusOK || str(r.json, "evaluation_id") == "") {
					err = fmt.Errorf("status %d: %s", r.status, r.raw)
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Sprintf("decision %d on %s: %v", i, s.name, err))
				} else {
					answers[i] = r
				}
				mu.Unlock()
			}
		})
	}
	for i := range decisions {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d decisions failed, first: %s", len(errs), errs[0])
	}
	want := map[string]bool{}
	days := map[string]bool{} // UTC days of the events: the log is read by day
	for _, r := range answers {
		id := str(r.json, "evaluation_id")
		if want[id] {
			t.Fatalf("two decisions answered evaluation_id %s", id)
		}
		want[id] = true
		days[hookDay(t, r)] = true
	}

	// Drained: the receiver has every event and the delivery log (read
	// through A) has each one delivered, so no attempt is still owed.
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		seen := map[string]bool{}
		for _, hs := range hits {
			for _, h := range hs {
				seen[h.evalID] = true
			}
		}
		mu.Unlock()
		if len(seen) >= decisions {
			n := 0
			for day := range days {
				_, log := hookDeliveryLog(t, A.url, orgID, A.key, day, "delivered")
				n += len(log)
			}
			if n >= decisions {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not drained within 60s: the receiver has %d of %d events", len(seen), decisions)
		}
		<-time.After(50 * time.Millisecond) // poll interval
	}

	mu.Lock()
	defer mu.Unlock()
	var bad []string
	delivered := map[string]string{} // evaluation id -> delivery id
	for id, hs := range hits {
		if id == "" {
			bad = append(bad, fmt.Sprintf("%d requests without a delivery id", len(hs)))
			continue
		}
		if len(hs) != 1 {
			bad = append(bad, fmt.Sprintf("delivery %s (evaluation %s) received %d times", id, hs[0].evalID, len(hs)))
		}
		for _, h := range hs {
			switch {
			case !want[h.evalID]:
				bad = append(bad, fmt.Sprintf("delivery %s carries evaluation %q, not one of the decisions", id, h.evalID))
			case !h.signed:
				bad = append(bad, fmt.Sprintf("delivery %s: the signature does not verify", id))
			case h.event != "decision.resolved":
				bad = append(bad, fmt.Sprintf("delivery %s: event %q", id, h.event))
			}
			if other, ok := delivered[h.evalID]; ok && other != id {
				bad = append(bad, fmt.Sprintf("evaluation %s delivered under two delivery ids, %s and %s", h.evalID, other, id))
			}
			delivered[h.evalID] = id
		}
	}
	for id := range want {
		if _, ok := delivered[id]; !ok {
			bad = append(bad, "evaluation "+id+" never delivered")
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Fatalf("%d problems:\n%s", len(bad), strings.Join(bad, "\n"))
	}

	httpc.CloseIdleConnections()
	for _, p := range []*proc{pa, pb} {
		if code := p.signal(syscall.SIGTERM); code != 0 {
			t.Fatalf("SIGTERM: exit %d (%v), stderr %s", code, p.waitErr, p.stderr.String())
		}
	}
}
