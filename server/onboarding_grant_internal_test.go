package server

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
	"github.com/clearancehq/clearance/tenant"
)

// TestOnboardingGrantRefusedOnEveryRoute: an onboarding grant of an org,
// valid and unexpired, opens no route of the table that takes a
// credential (403 INSUFFICIENT_SCOPE, before any body is read) but the
// onboarding routes, which take it past authentication.
func TestOnboardingGrantRefusedOnEveryRoute(t *testing.T) {
	ctx := context.Background()
	st, err := pebblestore.Open(t.TempDir(), pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng, err := clearance.Open(st, clearance.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o, err := eng.Admin.CreateOrg(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	secret, hash, err := tenant.NewSecret(rand.Reader, tenant.PrefixOnboarding)
	if err != nil {
		t.Fatal(err)
	}
	grant := tenant.APIKey{ID: "onb_1", OrgID: o.Org.ID, Kind: tenant.KindOnboarding, Hash: hash,
		CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
	if err := st.Update(ctx, o.Org.ID, func(tx store.Tx) error { return tx.PutAPIKey(ctx, grant) }); err != nil {
		t.Fatal(err)
	}
	if p, err := eng.Admin.Authenticate(ctx, secret); err != nil || p.Kind != tenant.KindOnboarding {
		t.Fatalf("the grant does not authenticate: %+v, %v", p, err)
	}
	s := New(eng, Options{})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)

	param := regexp.MustCompile(`\{[^}]*\}`)
	checked := 0
	for _, rt := range s.routes() {
		if rt.auth == authPublic || rt.auth == authAccount { // no bearer credential there
			continue
		}
		onboardingRoute := rt.auth == authOnboarding
		method, path, _ := strings.Cut(rt.pattern, " ")
		path = param.ReplaceAllString(path, o.Org.ID)
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var p struct{ Code string }
		_ = json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if onboardingRoute {
			if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
				t.Errorf("%s with an onboarding grant = %d %s, want it past authentication", rt.pattern, resp.StatusCode, p.Code)
			}
			continue
		}
		if resp.StatusCode != http.StatusForbidden || p.Code != "INSUFFICIENT_SCOPE" {
			t.Errorf("%s with an onboarding grant = %d %s, want 403 INSUFFICIENT_SCOPE", rt.pattern, resp.StatusCode, p.Code)
		}
		checked++
	}
	if checked < 40 {
		t.Fatalf("only %d routes checked", checked)
	}
}
