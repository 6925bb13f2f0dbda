package acktest_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/acktest"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/server"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// serve starts a healthy server on an in-memory Pebble store and returns
// its URL, a client and its platform key.
func serve(t *testing.T) (string, *http.Client, string) {
	t.Helper()
	st, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	gk, err := grant.NewKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	lk, err := ledger.NewKey("acktest-ledger", bytes.Repeat([]byte{0x4c}, 32))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := clearance.Open(st, clearance.Options{GrantKeys: grant.NewKeyRing(gk), LedgerKey: lk, GrantTTL: time.Hour, ClaimLease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	secret, err := eng.Admin.NewPlatformSecret()
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Admin.EnsurePlatformKey(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(server.New(eng, server.Options{RateLimit: -1, AuthRateLimit: -1}))
	t.Cleanup(srv.Close)
	return srv.URL, srv.Client(), secret
}

// TestCheckExact runs the load on a healthy server, stops it after 60
// acknowledgements and checks with Exact: nothing failed, so each ledger
// holds exactly the booked decisions and grants, and every cycle the stop
// left open is completed by Check.
func TestCheckExact(t *testing.T) {
	url, client, plat := serve(t)
	orgs := acktest.Setup(t, client, url, plat, 2)
	book := acktest.NewBook()
	book.Exact = true
	var load *acktest.Load
	load = &acktest.Load{T: t, URL: url, Client: client, Orgs: orgs, Book: book, Tag: "exact",
		OnAck: func(acks int) {
			if acks == 60 {
				go load.Stop() // OnAck runs under the load's lock
			}
		},
		OnFailure: func(c int, op string, rep *acktest.Reply, err error) bool {
			t.Errorf("client %d: %s on a healthy server: %s", c, op, acktest.Describe(rep, err))
			return false
		},
	}
	if acks := load.Run(4); acks < 60 {
		t.Fatalf("%d acknowledgements, want at least 60", acks)
	}
	acktest.Check(t, client, url, orgs, book)
	book.Lock()
	defer book.Unlock()
	if len(book.Decisions) == 0 || len(book.Grants) == 0 || book.Claims != len(book.Grants) || book.Finals != len(book.Grants) {
		t.Fatalf("after Check: %d decisions, %d grants, %d claims, %d finalizations; want every grant claimed and finalized once",
			len(book.Decisions), len(book.Grants), book.Claims, book.Finals)
	}
	t.Logf("%d decisions, %d grants (%d claimed, %d finalized by Check), %d replays refused",
		len(book.Decisions), len(book.Grants), book.LateClaims, book.LateFinals, book.Refused)
}

// TestCheckFindsLoss books a decision the server never made and requires
// Check to fail on it. Check fails through t.Fatalf, so the failing run is
// this test binary again, in a child process.
func TestCheckFindsLoss(t *testing.T) {
	if os.Getenv("ACKTEST_CHILD") == "lose" {
		url, client, plat := serve(t)
		orgs := acktest.Setup(t, client, url, plat, 1)
		book := acktest.NewBook()
		book.Decisions = append(book.Decisions, acktest.Decision{Org: 0, DossierID: "dos_never_made", Digest: "sha256:00", Seq: 1000})
		acktest.Check(t, client, url, orgs, book)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCheckFindsLoss$", "-test.count=1")
	cmd.Env = append(os.Environ(), "ACKTEST_CHILD=lose")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("Check passed with a decision that was never made:\n%s", out)
	}
	for _, want := range []string{"after recovery:", "dossier dos_never_made (seq 1000) lost", "org 0: seq 1000 is {kind: subject: digest:}"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("Check's failure lacks %q:\n%s", want, out)
		}
	}
}
