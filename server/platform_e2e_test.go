package server_test

import (
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/clearancehq/clearance/server"
)

// The platform's tenant routes: orgs listed, an org's API keys listed and
// revoked one by one, and none of it open to an org's own key.

func TestPlatformListsOrgsAndRevokesKeys(t *testing.T) {
	e := newEnv(t, server.Options{RateLimit: -1})
	a, b := e.createOrg("Alpha"), e.createOrg("Beta")
	reader := e.createKey(a, "audit:read")

	// Orgs, by id, in pages.
	var seen []string
	after := ""
	for range 4 {
		r := e.do("GET", "/v1/platform/orgs?limit=1&after="+after, e.platform, nil, nil).want(t, http.StatusOK)
		for _, o := range r.JSON["orgs"].([]any) {
			seen = append(seen, o.(map[string]any)["org_id"].(string))
		}
		next, _ := r.JSON["next_after"].(string)
		if next == "" {
			break
		}
		after = next
	}
	if !slices.Contains(seen, a.ID) || !slices.Contains(seen, b.ID) || !slices.IsSorted(seen) {
		t.Fatalf("orgs listed: %v", seen)
	}

	// Keys: both of Alpha's, never a secret or a hash.
	r := e.do("GET", "/v1/platform/orgs/"+a.ID+"/api-keys", e.platform, nil, nil).want(t, http.StatusOK)
	keys := r.JSON["api_keys"].([]any)
	var readerID string
	for _, k := range keys {
		m := k.(map[string]any)
		if m["api_key"] != nil || m["hash"] != nil || m["active"] != true {
			t.Fatalf("listed key %v", m)
		}
		if m["key_id"] != a.KeyID {
			readerID = m["key_id"].(string)
		}
	}
	if len(keys) != 2 || readerID == "" {
		t.Fatalf("keys of Alpha: %s", r)
	}
	e.do("GET", "/v1/protocol/audit/ledger/verify", reader, nil, nil).want(t, http.StatusOK)

	// Revoked: it stops working at once, stays listed, and the revocation is
	// ledgered; revoking again changes nothing.
	before := e.head(a.Key)
	r = e.do("DELETE", "/v1/platform/orgs/"+a.ID+"/api-keys/"+readerID, e.platform, nil, nil).want(t, http.StatusOK)
	if r.JSON["active"] != false || r.str("revoked_at") == "" {
		t.Fatalf("revoked: %s", r)
	}
	e.do("GET", "/v1/protocol/audit/ledger/verify", reader, nil, nil).want(t, http.StatusUnauthorized)
	if after := e.head(a.Key); after != before+1 {
		t.Fatalf("ledger head %d -> %d, want one credentials.revoked entry", before, after)
	}
	again := e.do("DELETE", "/v1/platform/orgs/"+a.ID+"/api-keys/"+readerID, e.platform, nil, nil).want(t, http.StatusOK)
	if again.str("revoked_at") != r.str("revoked_at") || e.head(a.Key) != before+1 {
		t.Fatalf("second revocation changed something: %s", again)
	}
	e.do("GET", "/v1/protocol/audit/ledger/verify", a.Key, nil, nil).want(t, http.StatusOK) // the other key lives on
}

func TestPlatformTenantRoutesIsolation(t *testing.T) {
	e := newEnv(t, server.Options{RateLimit: -1})
	a, b := e.createOrg("Alpha"), e.createOrg("Beta")
	// No org key reaches them, its own org's keys included.
	for _, key := range []string{a.Key, b.Key} {
		e.do("GET", "/v1/platform/orgs", key, nil, nil).want(t, http.StatusForbidden)
		e.do("GET", "/v1/platform/orgs/"+a.ID+"/api-keys", key, nil, nil).want(t, http.StatusForbidden)
		e.do("DELETE", "/v1/platform/orgs/"+a.ID+"/api-keys/"+a.KeyID, key, nil, nil).want(t, http.StatusForbidden)
	}
	// A key of one org is not found under another.
	r := e.do("DELETE", "/v1/platform/orgs/"+b.ID+"/api-keys/"+a.KeyID, e.platform, nil, nil).want(t, http.StatusNotFound)
	if r.str("code") != "API_KEY_NOT_FOUND" {
		t.Fatalf("foreign key: %s", r)
	}
	e.do("GET", "/v1/protocol/audit/ledger/verify", a.Key, nil, nil).want(t, http.StatusOK)
}

// Racing revocations of one key ledger it once: both answer 200 with the
// key revoked, and the org's ledger grows by one entry.
func TestPlatformRevocationRaceLedgersOnce(t *testing.T) {
	e := newEnv(t, server.Options{RateLimit: -1})
	a := e.createOrg("Alpha")
	e.createKey(a, "audit:read")
	r := e.do("GET", "/v1/platform/orgs/"+a.ID+"/api-keys", e.platform, nil, nil).want(t, http.StatusOK)
	var keyID string
	for _, k := range r.JSON["api_keys"].([]any) {
		if id := k.(map[string]any)["key_id"].(string); id != a.KeyID {
			keyID = id
		}
	}
	before := e.head(a.Key)
	const racers = 8
	results := make(chan *result, racers)
	errs := make(chan error, racers)
	var start sync.WaitGroup
	start.Add(1)
	for range racers {
		go func() {
			start.Wait()
			res, err := e.send("DELETE", "/v1/platform/orgs/"+a.ID+"/api-keys/"+keyID, e.platform, nil, nil)
			results <- res
			errs <- err
		}()
	}
	start.Done()
	for range racers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		if res := <-results; res.Status != http.StatusOK || res.JSON["active"] != false {
			t.Fatalf("racing revocation: %s", res)
		}
	}
	if after := e.head(a.Key); after != before+1 {
		t.Fatalf("ledger head %d -> %d: the revocation was ledgered %d times", before, after, after-before)
	}
}
