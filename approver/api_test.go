package approver

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestAuthentication(t *testing.T) {
	h := newHarness(t)
	r := h.open(orgA, credA, "esc-1")
	paths := []struct{ method, path string }{
		{http.MethodPost, "/v1/approval-requests"},
		{http.MethodGet, "/v1/approval-requests/" + r.RequestID},
		{http.MethodDelete, "/v1/approval-requests/" + r.RequestID},
		{http.MethodPost, "/v1/approval-requests/" + r.RequestID + "/revoke"},
		{http.MethodPost, "/v1/approvers"},
	}
	for _, p := range paths {
		for _, auth := range []string{"", "Bearer", "Bearer ", "Bearer cred-org-a-0123456789abcdeX", "Basic " + credA, "Bearer " + credA + "x", credA} {
			req := serveAuth(h, p.method, p.path, auth)
			if req.Status != http.StatusUnauthorized || req.code(t) != CodeUnauthorized || req.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s with %q: %d %s", p.method, p.path, auth, req.Status, req.Body)
			}
		}
	}
	// The scheme is case-insensitive.
	if res := serveAuth(h, http.MethodGet, "/v1/approval-requests/"+r.RequestID, "bearer "+credA); res.Status != http.StatusOK {
		t.Errorf("lower-case scheme: %d", res.Status)
	}
	if got := h.get(credA, r.RequestID); got.Status != StatusPending {
		t.Errorf("unauthenticated calls changed the request: %+v", got)
	}
}

func serveAuth(h *harness, method, path, auth string) response {
	req, _ := http.NewRequest(method, path, strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	h.svc.ServeHTTP(rec, req)
	return response{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
}

func TestTenantIsolation(t *testing.T) {
	h := newHarness(t)
	r := h.open(orgA, credA, "esc-1")
	// Opening for another org than the credential's.
	res := h.api(http.MethodPost, "/v1/approval-requests", credB, h.openBody(orgA, "esc-2"))
	if res.Status != http.StatusForbidden || res.code(t) != CodeOrgMismatch {
		t.Errorf("open for another org: %d %s", res.Status, res.Body)
	}
	// Another org's request is not found, whatever the verb.
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/v1/approval-requests/" + r.RequestID},
		{http.MethodDelete, "/v1/approval-requests/" + r.RequestID},
		{http.MethodPost, "/v1/approval-requests/" + r.RequestID + "/revoke"},
		{http.MethodGet, "/v1/approval-requests/apr_unknown"},
	} {
		res := h.api(c.method, c.path, credB, nil)
		if res.Status != http.StatusNotFound || res.code(t) != CodeNotFound {
			t.Errorf("%s %s by org B: %d %s", c.method, c.path, res.Status, res.Body)
		}
	}
	if got := h.get(credA, r.RequestID); got.Status != StatusPending {
		t.Errorf("org B changed org A's request: %+v", got)
	}
	// The same escalation id in another org is another request.
	rb := h.open(orgB, credB, "esc-1")
	if rb.RequestID == r.RequestID || rb.OrgID != orgB {
		t.Errorf("org B's request %+v", rb)
	}
}

func TestOpenIsIdempotent(t *testing.T) {
	h := newHarness(t)
	body := h.openBody(orgA, "esc-1")
	first := h.api(http.MethodPost, "/v1/approval-requests", credA, body)
	if first.Status != http.StatusCreated {
		t.Fatalf("open: %d %s", first.Status, first.Body)
	}
	var r ApprovalRequest
	first.json(t, &r)
	if r.Status != StatusPending || r.OrgID != orgA || r.EscalationID != "esc-1" || r.IntentHash != testIntent ||
		!r.CreatedAt.Equal(testStart) || !r.ExpiresAt.Equal(testStart.Add(time.Hour)) || r.DecidedAt != nil || r.Receipt != "" ||
		!strings.HasPrefix(r.RequestID, "apr_") {
		t.Errorf("opened %+v", r)
	}
	token, ok := strings.CutPrefix(r.ApprovalURL, testPublicURL+"/approve/")
	if !ok || len(token) < 43 || strings.ContainsAny(token, "/?#") {
		t.Errorf("approval_url %q", r.ApprovalURL)
	}
	h.clock.Advance(time.Minute)
	// The same body again, even with expires_at written another way.
	same := h.openBody(orgA, "esc-1")
	same["expires_at"] = testStart.Add(time.Hour).In(time.FixedZone("CET", 3600)).Format(time.RFC3339)
	again := h.api(http.MethodPost, "/v1/approval-requests", credA, same)
	if again.Status != http.StatusOK {
		t.Fatalf("replay: %d %s", again.Status, again.Body)
	}
	var r2 ApprovalRequest
	again.json(t, &r2)
	if r2.RequestID != r.RequestID || r2.ApprovalURL != r.ApprovalURL || !r2.CreatedAt.Equal(r.CreatedAt) {
		t.Errorf("replay answered %+v, want %+v", r2, r)
	}
	// Any difference is a conflict.
	for name, change := range map[string]func(map[string]any){
		"intent_hash": func(b map[string]any) { b["intent_hash"] = "sha256:" + strings.Repeat("f", 64) },
		"amount":      func(b map[string]any) { b["action"].(map[string]any)["amount"] = "1250.01" },
		"no amount":   func(b map[string]any) { delete(b["action"].(map[string]any), "amount") },
		"target":      func(b map[string]any) { b["action"].(map[string]any)["target"] = "acct:other" },
		"actor":       func(b map[string]any) { b["actor"].(map[string]any)["id"] = "agent-8" },
		"expires_at":  func(b map[string]any) { b["expires_at"] = testStart.Add(2 * time.Hour).Format(time.RFC3339) },
	} {
		b := h.openBody(orgA, "esc-1")
		b["expires_at"] = testStart.Add(time.Hour).Format(time.RFC3339)
		change(b)
		res := h.api(http.MethodPost, "/v1/approval-requests", credA, b)
		if res.Status != http.StatusConflict || res.code(t) != CodeEscalationConflict {
			t.Errorf("%s changed: %d %s", name, res.Status, res.Body)
		}
	}
	// A replay after the expiry answers the request as it stands.
	h.clock.Advance(2 * time.Hour)
	late := h.api(http.MethodPost, "/v1/approval-requests", credA, same)
	var r3 ApprovalRequest
	late.json(t, &r3)
	if late.Status != http.StatusOK || r3.RequestID != r.RequestID || r3.Status != StatusExpired {
		t.Errorf("late replay: %d %s", late.Status, late.Body)
	}
}

func TestOpenValidation(t *testing.T) {
	h := newHarness(t)
	valid := func() map[string]any { return h.openBody(orgA, "esc-v") }
	with := func(change func(map[string]any)) map[string]any { b := valid(); change(b); return b }
	action := func(b map[string]any) map[string]any { return b["action"].(map[string]any) }
	long := strings.Repeat("x", 201)
	cases := []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"empty", "", 400, "EMPTY_BODY"},
		{"not JSON", "{", 400, "MALFORMED_JSON"},
		{"array", "[]", 400, "WRONG_TYPE"},
		{"trailing data", `{"org_id":"org_a"} {}`, 400, "TRAILING_DATA"},
		{"duplicate member", `{"org_id":"org_a","org_id":"org_a"}`, 400, "DUPLICATE_MEMBER"},
		{"unknown member", with(func(b map[string]any) { b["mode"] = "x" }), 400, "UNKNOWN_MEMBER"},
		{"unknown nested member", with(func(b map[string]any) { action(b)["parameters"] = map[string]any{} }), 400, "UNKNOWN_MEMBER"},
		{"wrong type", with(func(b map[string]any) { action(b)["amount"] = 1250 }), 400, "WRONG_TYPE"},
		{"no org_id", with(func(b map[string]any) { delete(b, "org_id") }), 400, CodeMissingField},
		{"no escalation_id", with(func(b map[string]any) { delete(b, "escalation_id") }), 400, CodeMissingField},
		{"no actor", with(func(b map[string]any) { delete(b, "actor") }), 400, CodeMissingField},
		{"no action type", with(func(b map[string]any) { delete(action(b), "type") }), 400, CodeMissingField},
		{"no intent_hash", with(func(b map[string]any) { delete(b, "intent_hash") }), 400, CodeMissingField},
		{"no expires_at", with(func(b map[string]any) { delete(b, "expires_at") }), 400, CodeMissingField},
		{"upper-case hash", with(func(b map[string]any) { b["intent_hash"] = strings.ToUpper(testIntent) }), 400, CodeInvalidIntentHash},
		{"short hash", with(func(b map[string]any) { b["intent_hash"] = testIntent[:70] }), 400, CodeInvalidIntentHash},
		{"other digest", with(func(b map[string]any) { b["intent_hash"] = "sha512:" + testIntent[7:] }), 400, CodeInvalidIntentHash},
		{"amount exponent", with(func(b map[string]any) { action(b)["amount"] = "1e3" }), 400, CodeInvalidField},
		{"amount words", with(func(b map[string]any) { action(b)["amount"] = "ten" }), 400, CodeInvalidField},
		{"amount leading zero", with(func(b map[string]any) { action(b)["amount"] = "01.5" }), 400, CodeInvalidField},
		{"amount trailing dot", with(func(b map[string]any) { action(b)["amount"] = "1." }), 400, CodeInvalidField},
		{"control character", with(func(b map[string]any) { action(b)["target"] = "acct:1\u0007" }), 400, CodeInvalidField},
		{"bidi override", with(func(b map[string]any) { action(b)["target"] = "acct:\u202e1" }), 400, CodeInvalidField},
		{"too long", with(func(b map[string]any) { b["escalation_id"] = long }), 400, CodeInvalidField},
		{"padded", with(func(b map[string]any) { b["escalation_id"] = " esc" }), 400, CodeInvalidField},
		{"expires_at not RFC 3339", with(func(b map[string]any) { b["expires_at"] = "tomorrow" }), 400, CodeInvalidExpiresAt},
		{"expires_at without zone", with(func(b map[string]any) { b["expires_at"] = "2026-03-04T11:00:00" }), 400, CodeInvalidExpiresAt},
		{"expires_at now", with(func(b map[string]any) { b["expires_at"] = testStart.Format(time.RFC3339) }), 400, CodeExpiresAtPast},
		{"expires_at past", with(func(b map[string]any) { b["expires_at"] = testStart.Add(-time.Hour).Format(time.RFC3339) }), 400, CodeExpiresAtPast},
		{"expires_at too far", with(func(b map[string]any) {
			b["expires_at"] = testStart.Add(DefaultMaxLifetime + time.Second).Format(time.RFC3339)
		}), 400, CodeExpiresAtTooFar},
		{"too large", with(func(b map[string]any) { action(b)["target"] = strings.Repeat("a", DefaultMaxBodyBytes) }), 413, CodeBodyTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := h.api(http.MethodPost, "/v1/approval-requests", credA, c.body)
			if res.Status != c.status || res.code(t) != c.code {
				t.Errorf("got %d %s, want %d %s", res.Status, res.Body, c.status, c.code)
			}
		})
	}
	// None of them opened anything: the valid body still creates.
	if res := h.api(http.MethodPost, "/v1/approval-requests", credA, valid()); res.Status != http.StatusCreated {
		t.Errorf("the valid body after the refusals: %d %s", res.Status, res.Body)
	}
	// A replay is compared before the clock is looked at.
	for _, exp := range []time.Time{testStart.Add(-time.Hour), testStart.Add(DefaultMaxLifetime + time.Hour)} {
		b := valid()
		b["expires_at"] = exp.Format(time.RFC3339)
		if res := h.api(http.MethodPost, "/v1/approval-requests", credA, b); res.Status != http.StatusConflict {
			t.Errorf("replay with expires_at %v: %d %s", exp, res.Status, res.Body)
		}
	}
	// The longest lifetime is accepted, as are the optional members left out.
	b := h.openBody(orgA, "esc-max")
	b["expires_at"] = testStart.Add(DefaultMaxLifetime).Format(time.RFC3339)
	b["action"] = map[string]any{"type": "deploy"}
	if res := h.api(http.MethodPost, "/v1/approval-requests", credA, b); res.Status != http.StatusCreated {
		t.Errorf("minimal body at the longest lifetime: %d %s", res.Status, res.Body)
	}
}

func TestCancel(t *testing.T) {
	h := newHarness(t)
	a := h.enroll(orgA, credA, "alice")
	cancel := func(id string) ApprovalRequest {
		t.Helper()
		res := h.api(http.MethodDelete, "/v1/approval-requests/"+id, credA, nil)
		if res.Status != http.StatusOK {
			t.Fatalf("cancel: %d %s", res.Status, res.Body)
		}
		var r ApprovalRequest
		res.json(t, &r)
		return r
	}
	pending := h.open(orgA, credA, "esc-1")
	opts := h.begin(pending, StatusApproved)
	if got := cancel(pending.RequestID); got.Status != StatusCancelled || got.DecidedAt != nil {
		t.Fatalf("cancelled: %+v", got)
	}
	if got := cancel(pending.RequestID); got.Status != StatusCancelled {
		t.Fatalf("cancelled twice: %+v", got)
	}
	// A ceremony begun before the cancellation cannot decide it.
	res := h.finish(pending, StatusApproved, a.assert(t, opts))
	if res.Status != http.StatusConflict || res.code(t) != CodeRequestCancelled {
		t.Fatalf("finish after cancel: %d %s", res.Status, res.Body)
	}
	res = h.pagePost(h.path(pending.ApprovalURL)+"/begin", map[string]any{"decision": "APPROVED"})
	if res.Status != http.StatusConflict || res.code(t) != CodeRequestCancelled {
		t.Fatalf("begin after cancel: %d %s", res.Status, res.Body)
	}
	// A decided request stands.
	decided := h.open(orgA, credA, "esc-2")
	h.decide(decided, StatusDenied, a)
	if got := cancel(decided.RequestID); got.Status != StatusDenied || got.Receipt == "" {
		t.Fatalf("cancel of a denied request: %+v", got)
	}
	// An expired request stands.
	expired := h.open(orgA, credA, "esc-3")
	h.clock.Advance(time.Hour)
	if got := cancel(expired.RequestID); got.Status != StatusExpired {
		t.Fatalf("cancel of an expired request: %+v", got)
	}
}

func TestRevoke(t *testing.T) {
	h := newHarness(t)
	a := h.enroll(orgA, credA, "alice")
	revoke := func(id string, body any) ApprovalRequest {
		t.Helper()
		res := h.api(http.MethodPost, "/v1/approval-requests/"+id+"/revoke", credA, body)
		if res.Status != http.StatusOK {
			t.Fatalf("revoke: %d %s", res.Status, res.Body)
		}
		var r ApprovalRequest
		res.json(t, &r)
		return r
	}
	approved := h.open(orgA, credA, "esc-1")
	h.decide(approved, StatusApproved, a)
	before := h.get(credA, approved.RequestID)
	got := revoke(approved.RequestID, nil)
	if got.Status != StatusRevoked || got.Receipt != before.Receipt || got.Approver != "alice" || !got.DecidedAt.Equal(*before.DecidedAt) {
		t.Fatalf("revoked: %+v", got)
	}
	if got := revoke(approved.RequestID, map[string]any{}); got.Status != StatusRevoked {
		t.Fatalf("revoked twice: %+v", got)
	}
	if got := h.get(credA, approved.RequestID); got.Status != StatusRevoked {
		t.Fatalf("read after revocation: %+v", got)
	}
	// Anything else stands.
	pending := h.open(orgA, credA, "esc-2")
	if got := revoke(pending.RequestID, nil); got.Status != StatusPending {
		t.Fatalf("revoke of a pending request: %+v", got)
	}
	denied := h.open(orgA, credA, "esc-3")
	h.decide(denied, StatusDenied, a)
	if got := revoke(denied.RequestID, nil); got.Status != StatusDenied {
		t.Fatalf("revoke of a denied request: %+v", got)
	}
	// The body, if any, is an empty object.
	res := h.api(http.MethodPost, "/v1/approval-requests/"+pending.RequestID+"/revoke", credA, map[string]any{"reason": "x"})
	if res.Status != http.StatusBadRequest || res.code(t) != "UNKNOWN_MEMBER" {
		t.Fatalf("revoke with a body: %d %s", res.Status, res.Body)
	}
}

func TestExpiry(t *testing.T) {
	h := newHarness(t)
	a := h.enroll(orgA, credA, "alice")
	r := h.open(orgA, credA, "esc-1")
	opts := h.begin(r, StatusApproved)
	h.clock.Advance(time.Hour - time.Nanosecond)
	if got := h.get(credA, r.RequestID); got.Status != StatusPending {
		t.Fatalf("just before expires_at: %s", got.Status)
	}
	h.clock.Advance(time.Nanosecond)
	if got := h.get(credA, r.RequestID); got.Status != StatusExpired || got.DecidedAt != nil || got.Receipt != "" {
		t.Fatalf("at expires_at: %+v", got)
	}
	res := h.finish(r, StatusApproved, a.assert(t, opts))
	if res.Status != http.StatusConflict || res.code(t) != CodeRequestExpired {
		t.Fatalf("finish after the expiry: %d %s", res.Status, res.Body)
	}
	res = h.pagePost(h.path(r.ApprovalURL)+"/begin", map[string]any{"decision": "APPROVED"})
	if res.Status != http.StatusConflict || res.code(t) != CodeRequestExpired {
		t.Fatalf("begin after the expiry: %d %s", res.Status, res.Body)
	}
	// Reads do not write: the clock going back (an operator's mistake)
	// shows the stored status again.
	h.clock.Advance(-time.Minute)
	if got := h.get(credA, r.RequestID); got.Status != StatusPending {
		t.Fatalf("expiry was stored: %s", got.Status)
	}
	if len(h.decided()) != 0 {
		t.Fatal("an expired request reached OnDecision")
	}
}

// TestRetention: a request is forgotten Retention after its expiry.
func TestRetention(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Retention = 24 * time.Hour })
	r := h.open(orgA, credA, "esc-1")
	h.clock.Advance(time.Hour + 24*time.Hour + time.Second)
	h.open(orgA, credA, "esc-2") // a write prunes
	if res := h.api(http.MethodGet, "/v1/approval-requests/"+r.RequestID, credA, nil); res.Status != http.StatusNotFound {
		t.Fatalf("kept past retention: %d", res.Status)
	}
}

func TestJWKS(t *testing.T) {
	h := newHarness(t)
	res := serve(h.svc, http.MethodGet, "/.well-known/jwks.json", "", nil, "")
	if res.Status != http.StatusOK || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("jwks: %d %v", res.Status, res.Header)
	}
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	res.json(t, &set)
	if len(set.Keys) != 1 {
		t.Fatalf("keys: %s", res.Body)
	}
	k := set.Keys[0]
	names := slices.Sorted(maps.Keys(k))
	if !slices.Equal(names, []string{"alg", "crv", "kid", "kty", "use", "x"}) {
		t.Errorf("members %v", names)
	}
	if k["kty"] != "OKP" || k["crv"] != "Ed25519" || k["alg"] != "EdDSA" || k["use"] != "sig" || k["kid"] != h.key.KID() {
		t.Errorf("key %v", k)
	}
	pub, err := jwksLookup(t, h.svc)(h.key.KID())
	if err != nil || !pub.Equal(h.key.Public()) {
		t.Errorf("lookup: %v", err)
	}
}

// TestNothingSecretIsShown: the API's answers hold exactly their documented
// members; no credential, passkey, public key, assertion, challenge or
// enrollment token.
func TestNothingSecretIsShown(t *testing.T) {
	h := newHarness(t)
	a := h.enroll(orgA, credA, "alice")
	r := h.open(orgA, credA, "esc-1")
	h.decide(r, StatusApproved, a)
	res := h.api(http.MethodGet, "/v1/approval-requests/"+r.RequestID, credA, nil)
	var m map[string]any
	res.json(t, &m)
	want := []string{"approval_url", "approver", "created_at", "decided_at", "escalation_id", "expires_at", "intent_hash", "org_id", "receipt", "request_id", "status"}
	if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, want) {
		t.Errorf("members %v, want %v", got, want)
	}
	pending := h.api(http.MethodGet, "/v1/approval-requests/"+h.open(orgA, credA, "esc-2").RequestID, credA, nil)
	m = map[string]any{}
	pending.json(t, &m)
	want = []string{"approval_url", "created_at", "escalation_id", "expires_at", "intent_hash", "org_id", "request_id", "status"}
	if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, want) {
		t.Errorf("pending members %v, want %v", got, want)
	}
	en := h.api(http.MethodPost, "/v1/approvers", credA, map[string]any{"approver_id": "bob", "display_name": "Bob"})
	var e map[string]any
	en.json(t, &e)
	if got := slices.Sorted(maps.Keys(e)); en.Status != http.StatusCreated || !slices.Equal(got, []string{"approver_id", "enrollment_url"}) {
		t.Errorf("enrollment answer %d %v", en.Status, e)
	}
	for _, secret := range []string{b64.EncodeToString(a.credID), credA, "public_key", "sign_count", "handle"} {
		for _, body := range [][]byte{res.Body, pending.Body, en.Body} {
			if strings.Contains(string(body), secret) {
				t.Errorf("%q shown in %s", secret, body)
			}
		}
	}
}

func TestEnrollApproverValidation(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		body any
		code string
	}{
		{map[string]any{"display_name": "x"}, CodeMissingField},
		{map[string]any{"approver_id": strings.Repeat("a", 201)}, CodeInvalidField},
		{map[string]any{"approver_id": "a\nb"}, CodeInvalidField},
		{map[string]any{"approver_id": "a", "role": "admin"}, "UNKNOWN_MEMBER"},
	} {
		res := h.api(http.MethodPost, "/v1/approvers", credA, c.body)
		if res.Status != http.StatusBadRequest || res.code(t) != c.code {
			t.Errorf("%v: %d %s", c.body, res.Status, res.Body)
		}
	}
	// The display name defaults to the id, and a second call opens a second link.
	var links []string
	for range 2 {
		res := h.api(http.MethodPost, "/v1/approvers", credA, map[string]any{"approver_id": strings.Repeat("a", 200)})
		var e Enrollment
		res.json(t, &e)
		if res.Status != http.StatusCreated || !strings.HasPrefix(e.EnrollmentURL, testPublicURL+"/enroll/") {
			t.Fatalf("enroll: %d %s", res.Status, res.Body)
		}
		links = append(links, e.EnrollmentURL)
	}
	if links[0] == links[1] {
		t.Error("the same link twice")
	}
}

// TestPages: the approval page shows the request, with the buttons only
// while it is PENDING, under a strict CSP; unknown links are 404 pages.
func TestPages(t *testing.T) {
	h := newHarness(t)
	a := h.enroll(orgA, credA, "alice")
	r := h.open(orgA, credA, "esc-1")
	page := serve(h.svc, http.MethodGet, h.path(r.ApprovalURL), "", nil, "")
	if page.Status != http.StatusOK {
		t.Fatalf("page: %d", page.Status)
	}
	csp := page.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "unsafe") {
		t.Errorf("CSP %q", csp)
	}
	if page.Header.Get("Referrer-Policy") != "no-referrer" || page.Header.Get("X-Frame-Options") != "DENY" || page.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("headers %v", page.Header)
	}
	body := string(page.Body)
	for _, want := range []string{"payment.send", "1250.00 EUR", "acct:DE89370400440532013000", "vendor-payout", "agent-7 (agent)",
		testIntent, "2026-03-04T11:00:00Z", ">PENDING<", `data-decision="APPROVED">Approve</button>`, `data-decision="DENIED">Deny</button>`,
		`<script src="../assets/approver.js">`, `lang="en"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	for _, bad := range []string{"<script>", "http://", "https://", "style="} {
		if strings.Contains(body, bad) {
			t.Errorf("the page holds %q", bad)
		}
	}
	h.decide(r, StatusApproved, a)
	body = string(serve(h.svc, http.MethodGet, h.path(r.ApprovalURL), "", nil, "").Body)
	if strings.Contains(body, "<button") || !strings.Contains(body, "Decided APPROVED by alice") {
		t.Errorf("decided page: %s", body)
	}
	for _, p := range []string{"/approve/unknown-token", "/enroll/unknown-token"} {
		res := serve(h.svc, http.MethodGet, p, "", nil, "")
		if res.Status != http.StatusNotFound || !strings.Contains(string(res.Body), "not valid") {
			t.Errorf("%s: %d", p, res.Status)
		}
	}
	for _, p := range []string{"/approve/unknown-token/begin", "/enroll/unknown-token/begin"} {
		if res := h.pagePost(p, map[string]any{"decision": "APPROVED"}); res.Status != http.StatusNotFound && res.Status != http.StatusBadRequest {
			t.Errorf("%s: %d", p, res.Status)
		}
	}
	js := serve(h.svc, http.MethodGet, "/assets/approver.js", "", nil, "")
	if js.Status != http.StatusOK || !strings.HasPrefix(js.Header.Get("Content-Type"), "text/javascript") || !strings.Contains(string(js.Body), "navigator.credentials.get") {
		t.Errorf("script: %d %v", js.Status, js.Header)
	}
	if res := serve(h.svc, http.MethodGet, "/assets/other.js", "", nil, ""); res.Status != http.StatusNotFound {
		t.Errorf("unknown asset: %d", res.Status)
	}
	if res := serve(h.svc, http.MethodGet, "/nowhere", "", nil, ""); res.Status != http.StatusNotFound || res.code(t) != CodeNotFound {
		t.Errorf("unknown route: %d", res.Status)
	}
	for _, c := range []struct{ method, path, allow string }{
		{http.MethodGet, "/v1/approval-requests", "POST"},
		{http.MethodPut, "/v1/approval-requests/" + r.RequestID, "GET, DELETE"},
		{http.MethodGet, "/v1/approval-requests/" + r.RequestID + "/revoke", "POST"},
		{http.MethodDelete, "/.well-known/jwks.json", "GET, HEAD"},
		{http.MethodGet, h.path(r.ApprovalURL) + "/finish", "POST"},
		{http.MethodPost, h.path(r.ApprovalURL), "GET, HEAD"},
	} {
		res := serve(h.svc, c.method, c.path, credA, nil, "")
		if res.Status != http.StatusMethodNotAllowed || res.code(t) != CodeMethodNotAllowed || res.Header.Get("Allow") != c.allow {
			t.Errorf("%s %s: %d %v %s", c.method, c.path, res.Status, res.Header, res.Body)
		}
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	key := testKey(t)
	for name, o := range map[string]Options{
		"no key":           {PublicURL: testPublicURL},
		"no public URL":    {SigningKey: key},
		"relative URL":     {SigningKey: key, PublicURL: "/approvals"},
		"other scheme":     {SigningKey: key, PublicURL: "ftp://approvals.example"},
		"userinfo":         {SigningKey: key, PublicURL: "https://u:p@approvals.example"},
		"IP RP ID":         {SigningKey: key, PublicURL: "http://127.0.0.1:8090"},
		"short credential": {SigningKey: key, PublicURL: testPublicURL, Credentials: map[string]string{"short": orgA}},
		"empty org":        {SigningKey: key, PublicURL: testPublicURL, Credentials: map[string]string{credA: ""}},
		"credential twice": {SigningKey: key, PublicURL: testPublicURL, Credentials: map[string]string{credA: orgA},
			CredentialHashes: map[[32]byte]string{HashCredential(credA): orgB}},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	svc, err := New(Options{SigningKey: key, PublicURL: "http://localhost:8090", Credentials: map[string]string{credA: orgA},
		CredentialHashes: map[[32]byte]string{HashCredential(credB): orgB}})
	if err != nil {
		t.Fatal(err)
	}
	if res := serve(svc, http.MethodGet, "/v1/approval-requests/apr_x", credB, nil, ""); res.Status != http.StatusNotFound {
		t.Errorf("a credential given by its hash: %d %s", res.Status, res.Body)
	}
	if svc.Issuer() != "http://localhost:8090" || svc.KeyID() != key.KID() {
		t.Errorf("defaults: issuer %q kid %q", svc.Issuer(), svc.KeyID())
	}
}
