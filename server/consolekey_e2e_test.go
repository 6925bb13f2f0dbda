package server_test

// The operator console's key for a signed-in owner, end to end over
// Pebble or PostgreSQL (see openBackend): the account session is traded
// for a short-lived org key with the console's scopes, which signing out
// revokes.

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func consoleKeyPath(orgID string) string {
	return "/v1/public/auth/workspaces/" + orgID + "/console-key"
}

// consoleKeyScopes are the documented scopes of a console key.
var consoleKeyScopes = []string{"decision:read", "policy:read", "audit:read", "escalation:write"}

// issueConsoleKey trades session for a console key of orgID and checks
// the answer's shape.
func (x *signinEnv) issueConsoleKey(session, orgID string) (secret, keyID string, expires time.Time) {
	x.t.Helper()
	r := x.as(session, true, "POST", consoleKeyPath(orgID), nil).want(x.t, http.StatusCreated)
	signinWantMembers(x.t, r, "key_id", "org_id", "api_key", "scopes", "expires_at")
	if !strings.HasPrefix(r.str("api_key"), "clr_org_") || r.str("org_id") != orgID || r.str("key_id") == "" ||
		!slices.Equal(r.strs("scopes"), consoleKeyScopes) {
		x.t.Fatalf("console key: %s", r)
	}
	at, err := time.Parse(time.RFC3339Nano, r.str("expires_at"))
	if err != nil {
		x.t.Fatalf("console key expires_at: %v", err)
	}
	return r.str("api_key"), r.str("key_id"), at
}

// TestConsoleKeyFromAccountSession: the owner's session issues a console
// key for its workspace (CSRF header required, another account's
// workspace 404), the key reads what the console shows and nothing it
// has no scope for, lives an hour and never past the session, is
// ledgered with its expiry, and signing out revokes every console key of
// the session while another session's keys live on.
func TestConsoleKeyFromAccountSession(t *testing.T) {
	x := newSigninEnv(t)
	const owner, other = "grace@console.example", "alan@console.example"
	ws := x.signUpNamed(owner, "Console Co")
	theirs := x.signUpNamed(other, "Other Co")
	sess := x.signIn(owner).secret
	otherSess := x.signIn(other).secret

	// Refusals change nothing: no CSRF header, no session, a foreign org.
	x.as(sess, false, "POST", consoleKeyPath(ws.orgID), nil).wantProblem(t, http.StatusForbidden, "CSRF_HEADER_REQUIRED")
	x.as("", true, "POST", consoleKeyPath(ws.orgID), nil).wantProblem(t, http.StatusUnauthorized, "SIGN_IN_REQUIRED")
	x.as(otherSess, true, "POST", consoleKeyPath(ws.orgID), nil).wantProblem(t, http.StatusNotFound, "WORKSPACE_NOT_FOUND")
	x.as(sess, true, "POST", consoleKeyPath(theirs.orgID), nil).wantProblem(t, http.StatusNotFound, "WORKSPACE_NOT_FOUND")
	x.as(sess, true, "POST", consoleKeyPath(ws.orgID), map[string]any{"scopes": []string{"org:*"}}).
		wantProblem(t, http.StatusBadRequest, "UNKNOWN_MEMBER")
	admin, _ := x.platformKey(ws.orgID, "org:*")
	before := len(x.ledgerOf(admin, ws.orgID))

	key, keyID, expires := x.issueConsoleKey(sess, ws.orgID)
	if want := x.clock().Add(time.Hour); !expires.Equal(want) {
		t.Fatalf("console key expires at %s, want an hour from now, %s", expires, want)
	}
	entries := x.ledgerOf(admin, ws.orgID)
	if last := entries[len(entries)-1]; len(entries) != before+1 || last["kind"] != "api_key.created" || last["subject_id"] != keyID {
		t.Fatalf("the ledger after issuing console key %s: %d entries (was %d), last %v", keyID, len(entries), before, last)
	}

	// What the console reads it reads; what it may not, it may not.
	for _, path := range []string{"/v1/console/decisions", "/v1/console/activity", "/v1/console/escalations", "/v1/policies",
		"/v1/protocol/audit/ledger?limit=1"} {
		if r := x.do("GET", path, key, nil, nil); r.Status != http.StatusOK {
			t.Fatalf("GET %s with the console key: %s", path, r)
		}
	}
	x.do("POST", "/v1/policies", key, map[string]any{}, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	// It cannot decide (nor claim or finalize): escalation:write only cancels.
	x.do("POST", signinPathDecide, key, signinDecision, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	x.do("GET", "/v1/console/decisions", key, nil, nil).want(t, http.StatusOK)
	// Another org's data stays out of reach: the key is of ws only.
	theirKey, _ := x.platformKey(theirs.orgID, "decision:write")
	x.do("POST", signinPathDecide, theirKey, signinDecision, nil).want(t, http.StatusOK)
	if r := x.do("GET", "/v1/console/decisions", key, nil, nil).want(t, http.StatusOK); len(lookup(r.JSON, "decisions").([]any)) != 0 {
		t.Fatalf("the console key of one workspace lists another's decisions: %s", r)
	}

	// An hour later the key is dead; a new one lives an hour again.
	x.advance(time.Hour)
	x.do("GET", "/v1/console/decisions", key, nil, nil).want(t, http.StatusUnauthorized)
	key2, _, _ := x.issueConsoleKey(sess, ws.orgID)
	// Near the session's end, the key ends with it.
	x.advance(signinSessionTTL - time.Hour - 10*time.Minute)
	key3, _, exp3 := x.issueConsoleKey(sess, ws.orgID)
	if d := exp3.Sub(x.clock()); d != 10*time.Minute {
		t.Fatalf("a console key issued 10 minutes before the session ends lives %s", d)
	}
	otherKey, _, _ := x.issueConsoleKey(otherSess, theirs.orgID)

	// Signing out revokes the session's console keys, ledgered; another
	// account's live on.
	before = len(x.ledgerOf(admin, ws.orgID))
	x.as(sess, true, "DELETE", signinPathSession, nil).want(t, http.StatusNoContent)
	for _, k := range []string{key, key2, key3} {
		x.do("GET", "/v1/console/decisions", k, nil, nil).want(t, http.StatusUnauthorized)
	}
	x.do("GET", "/v1/console/decisions", otherKey, nil, nil).want(t, http.StatusOK)
	revoked := 0
	for _, en := range x.ledgerOf(admin, ws.orgID)[before:] {
		if en["kind"] == "credentials.revoked" {
			revoked++
		}
	}
	if revoked != 3 {
		t.Fatalf("sign-out ledgered %d revocations, want 3 (every console key of the session, the expired one too)", revoked)
	}
	x.as(sess, true, "POST", consoleKeyPath(ws.orgID), nil).wantProblem(t, http.StatusUnauthorized, "SIGN_IN_REQUIRED")
}

// TestConsoleKeyLimitAndRevocation: a session is issued at most 48
// console keys (then 409, nothing issued), and the owner's org-wide
// revocation revokes console keys like every other credential.
func TestConsoleKeyLimitAndRevocation(t *testing.T) {
	x := newSigninEnv(t)
	const owner = "kay@console.example"
	ws := x.signUpNamed(owner, "Limits Co")
	sess := x.signIn(owner).secret
	keys := make([]string, 0, 48)
	for range 48 {
		k, _, _ := x.issueConsoleKey(sess, ws.orgID)
		keys = append(keys, k)
	}
	admin, _ := x.platformKey(ws.orgID, "audit:read")
	before := len(x.ledgerOf(admin, ws.orgID))
	x.as(sess, true, "POST", consoleKeyPath(ws.orgID), nil).wantProblem(t, http.StatusConflict, "CONSOLE_KEY_LIMIT_REACHED")
	if n := len(x.ledgerOf(admin, ws.orgID)); n != before {
		t.Fatalf("a refused console key changed the ledger: %d entries, was %d", n, before)
	}
	// A fresh session may have its own.
	sess2 := x.signIn(owner).secret
	fresh, _, _ := x.issueConsoleKey(sess2, ws.orgID)

	r := x.as(sess2, true, "POST", signinRevokePath(ws.orgID), nil).want(t, http.StatusOK)
	ids := r.strs("revoked_key_ids")
	if len(ids) < 49 {
		t.Fatalf("the org-wide revocation revoked %d credentials, want at least the 49 console keys: %s", len(ids), r)
	}
	for _, k := range []string{keys[0], keys[47], fresh} {
		x.do("GET", "/v1/console/decisions", k, nil, nil).want(t, http.StatusUnauthorized)
	}
	// A session signed in before the revocation mints nothing more (the
	// owner's answer to a leaked session is to revoke and sign in again).
	x.as(sess2, true, "POST", consoleKeyPath(ws.orgID), nil).wantProblem(t, http.StatusUnauthorized, "SIGN_IN_REQUIRED")
	x.advance(time.Second)
	sess3 := x.signIn(owner).secret
	x.issueConsoleKey(sess3, ws.orgID)
}

// TestConsoleKeySignOutRace: issuers keep asking for console keys while
// the session signs out; every key issued (201) is dead once sign-out has
// answered, whenever it was issued: none outlives the session. The sign-out
// starts only once keys are being issued. Run under -race.
func TestConsoleKeySignOutRace(t *testing.T) {
	x := newSigninEnv(t)
	const owner = "ida@console.example"
	ws := x.signUpNamed(owner, "Race Co")
	total := 0
	for round := range 4 {
		sess := x.signIn(owner).secret
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			issued []string
		)
		first := make(chan struct{})
		var once sync.Once
		for range 4 {
			wg.Go(func() {
				// Issue until the session refuses (at most its 48 keys).
				for range 12 {
					r := x.as(sess, true, "POST", consoleKeyPath(ws.orgID), nil)
					if r.Status != http.StatusCreated {
						if r.Status != http.StatusUnauthorized {
							t.Errorf("round %d: a console key while signing out: %s", round, r)
						}
						once.Do(func() { close(first) })
						return
					}
					mu.Lock()
					issued = append(issued, r.str("api_key"))
					mu.Unlock()
					once.Do(func() { close(first) })
				}
			})
		}
		<-first
		out := x.as(sess, true, "DELETE", signinPathSession, nil)
		wg.Wait()
		if out.Status != http.StatusNoContent {
			t.Fatalf("round %d: sign-out: %s", round, out)
		}
		for _, k := range issued {
			x.do("GET", "/v1/console/decisions", k, nil, nil).want(t, http.StatusUnauthorized)
		}
		total += len(issued)
		t.Logf("round %d: %d console keys issued around the sign-out, all revoked", round, len(issued))
	}
	if total == 0 {
		t.Fatal("no console key was issued around a sign-out: the race was not run")
	}
}
