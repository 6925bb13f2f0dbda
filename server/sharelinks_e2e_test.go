package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/server"
)

// testShareSecret is the share-link secret of the test servers.
var testShareSecret = bytes.Repeat([]byte{0x53}, clearance.MinShareSecretLen)

const (
	pathShareRevoke = "/v1/protocol/share-links"
	pathPublicDoss  = "/v1/public/decision-dossiers/"
)

func pathShareLinks(dossierID string) string { return pathDossiers + dossierID + "/share-links" }

// shareDecision is a decision whose every identifying string is distinctive,
// so that a public answer can be scanned for them.
const shareDecision = `{"amount":50,"decision_type":"PAYOUT_SECRET_TYPE","workflow_key":"wf-secret-payables",` +
	`"actor":{"id":"agent-secret-7","type":"agent"},"action":{"type":"refund","amount":50,"currency":"EUR","target":"order-secret-1"}}`

// share creates a share link of dossierID with key and returns its answer.
func (x *execEnv) share(t *testing.T, key, dossierID string, body string) *result {
	t.Helper()
	return x.req(t, "POST", pathShareLinks(dossierID), key, body, nil)
}

// public GETs a public path without a credential, with headers.
func (x *execEnv) public(t *testing.T, path string, headers map[string]string) *result {
	t.Helper()
	r, err := x.send("GET", path, "", nil, headers)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// wantNoLeak fails if the body holds anything of the org's artifact beyond
// what verification needs.
func wantNoLeak(t *testing.T, raw []byte, o org, dec *result) {
	t.Helper()
	body := string(raw)
	leaks := []string{o.ID, o.KeyID, "clr_", dec.str("decision_id"), dec.str("evaluation_id"),
		"intent", "actor", "reason", "policy", "bundle", "org_id", "org", "workflow", "agent-secret-7",
		"PAYOUT_SECRET_TYPE", "wf-secret-payables", "order-secret-1", "EUR", "matched_rules", "credential", "idempotency"}
	leaks = append(leaks, dec.strs("reason_codes")...)
	for _, leak := range leaks {
		if leak != "" && strings.Contains(strings.ToLower(body), strings.ToLower(leak)) {
			t.Errorf("the public answer holds %q:\n%s", leak, body)
		}
	}
}

func TestShareLinkVerifyJSONAndHTML(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, "")
	dec := x.req(t, "POST", pathEvaluate, x.o.Key, shareDecision, nil).want(t, http.StatusOK)
	id := dec.str("dossier_id")
	sharer := x.createKey(x.o, "audit:write")

	l := x.share(t, sharer, id, `{"expires_in_seconds":3600}`).want(t, http.StatusCreated)
	wantExp := execStart.Add(time.Hour).Format(time.RFC3339)
	if l.str("dossier_id") != id || l.str("expires_at") != wantExp || l.str("sig") == "" ||
		l.str("url") != pathPublicDoss+id+"/verify?sig="+l.str("sig") {
		t.Fatalf("share link: %s", l)
	}
	if d := x.share(t, sharer, id, `{}`).want(t, http.StatusCreated); d.str("expires_at") != execStart.Add(7*24*time.Hour).Format(time.RFC3339) {
		t.Fatalf("default lifetime: %s", d)
	}

	// JSON, without any credential.
	v := x.public(t, l.str("url"), nil).want(t, http.StatusOK)
	for _, h := range [][2]string{{"Cache-Control", "no-store"}, {"Referrer-Policy", "no-referrer"}, {"Vary", "Accept"},
		{"X-Content-Type-Options", "nosniff"}} {
		if got := v.Header.Get(h[0]); got != h[1] {
			t.Errorf("%s: %q, want %q", h[0], got, h[1])
		}
	}
	if !strings.HasPrefix(v.Header.Get("Content-Type"), "application/json") {
		t.Errorf("Content-Type %q", v.Header.Get("Content-Type"))
	}
	if v.str("dossier_id") != id || v.str("outcome") != dec.str("outcome") || v.str("mode") != dec.str("mode") ||
		v.str("dossier_digest") != dec.str("dossier_digest") || lookup(v.JSON, "recomputed_digest_matches") != true ||
		v.num("ledger.seq") != dec.num("ledger_seq") || lookup(v.JSON, "ledger.entry_hash_valid") != true ||
		lookup(v.JSON, "ledger.chain_valid") != true || lookup(v.JSON, "verified") != true ||
		v.str("link_expires_at") != wantExp || v.str("verified_at") != execStart.Format(time.RFC3339) {
		t.Fatalf("verification: %s", v)
	}
	// Exactly these members: nothing else is revealed.
	var members []string
	for k := range v.JSON {
		members = append(members, k)
	}
	slices.Sort(members)
	want := []string{"dossier_digest", "dossier_id", "ledger", "link_expires_at", "mode", "outcome", "recomputed_digest_matches", "verified", "verified_at"}
	if !slices.Equal(members, want) {
		t.Errorf("members %v, want %v", members, want)
	}
	wantNoLeak(t, v.Raw, x.o, dec)

	// Once the ledger is sealed, the signed checkpoint anchors the entry.
	if _, err := x.engine.Audit.SealLedger(context.Background(), x.o.ID); err != nil {
		t.Fatal(err)
	}
	v = x.public(t, l.str("url"), nil).want(t, http.StatusOK)
	if lookup(v.JSON, "ledger.anchored_checkpoint_valid") != true || lookup(v.JSON, "verified") != true {
		t.Fatalf("after sealing: %s", v)
	}
	wantNoLeak(t, v.Raw, x.o, dec)

	// A browser gets a page with the same facts, and nothing to load.
	browser := map[string]string{"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
	h := x.public(t, l.str("url"), browser).want(t, http.StatusOK)
	page := string(h.Raw)
	if !strings.HasPrefix(h.Header.Get("Content-Type"), "text/html") || h.Header.Get("Cache-Control") != "no-store" ||
		!strings.HasPrefix(h.Header.Get("Content-Security-Policy"), "default-src 'none'") || h.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("page headers: %v", h.Header)
	}
	for _, s := range []string{"<!doctype html>", id, dec.str("outcome"), dec.str("dossier_digest"), "Verified:", "Included in a signed checkpoint</th><td>yes"} {
		if !strings.Contains(page, s) {
			t.Errorf("the page lacks %q:\n%s", s, page)
		}
	}
	for _, s := range []string{"<script", "src=", "href=", "http:", "https:", "@import", "url("} {
		if strings.Contains(page, s) {
			t.Errorf("the page loads or links something (%q):\n%s", s, page)
		}
	}
	wantNoLeak(t, h.Raw, x.o, dec)
	// The policy admits the page's one style element by its hash.
	_, css, _ := strings.Cut(page, "<style>")
	css, _, _ = strings.Cut(css, "</style>")
	sum := sha256.Sum256([]byte(css))
	if csp := h.Header.Get("Content-Security-Policy"); css == "" || !strings.Contains(csp, "style-src 'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'") {
		t.Errorf("the policy %q does not admit the style element", csp)
	}

	// JSON clients, curl and ties get JSON.
	for _, accept := range []string{"application/json", "*/*", "application/json, text/html", "text/html;q=0.5, application/json", "text/html;q=0"} {
		r := x.public(t, l.str("url"), map[string]string{"Accept": accept}).want(t, http.StatusOK)
		if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			t.Errorf("Accept %q: Content-Type %q", accept, r.Header.Get("Content-Type"))
		}
	}
	for _, accept := range []string{"text/html", "text/*", "text/html, application/json;q=0.9"} {
		r := x.public(t, l.str("url"), map[string]string{"Accept": accept}).want(t, http.StatusOK)
		if !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
			t.Errorf("Accept %q: Content-Type %q", accept, r.Header.Get("Content-Type"))
		}
	}

	// A refused link in a browser is a page too, with the same status.
	bad := x.public(t, pathPublicDoss+id+"/verify?sig=x", browser).want(t, http.StatusNotFound)
	if !strings.HasPrefix(bad.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(bad.Raw), "SHARE_LINK_INVALID") ||
		bad.Header.Get("Content-Security-Policy") == "" {
		t.Fatalf("refusal page: %s %v", bad, bad.Header)
	}
}

// flipAt changes the character at i of a base64url string to another
// base64url character.
func flipAt(s string, i int) string {
	c := byte('A')
	if s[i] == 'A' {
		c = 'B'
	}
	return s[:i] + string(c) + s[i+1:]
}

func TestShareLinkTamperedOrForeignIsOne404(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, "")
	dec := x.req(t, "POST", pathEvaluate, x.o.Key, shareDecision, nil).want(t, http.StatusOK)
	id := dec.str("dossier_id")
	dec2 := x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":5}`, nil).want(t, http.StatusOK)
	b := x.createOrg("Other")
	decB := x.req(t, "POST", pathEvaluate, b.Key, `{"amount":5}`, nil).want(t, http.StatusOK)

	sig := x.share(t, x.o.Key, id, `{}`).want(t, http.StatusCreated).str("sig")
	sigB := x.share(t, b.Key, decB.str("dossier_id"), `{}`).want(t, http.StatusCreated).str("sig")
	payload, mac, _ := strings.Cut(sig, ".")
	payloadB, macB, _ := strings.Cut(sigB, ".")

	// Another org cannot share this org's dossier.
	x.share(t, b.Key, id, `{}`).wantProblem(t, http.StatusNotFound, "DOSSIER_NOT_FOUND")

	cases := map[string]string{ // name -> path and query
		"no sig":                               pathPublicDoss + id + "/verify",
		"empty sig":                            pathPublicDoss + id + "/verify?sig=",
		"payload tampered (version)":           pathPublicDoss + id + "/verify?sig=" + flipAt(payload, 0) + "." + mac,
		"payload tampered (expiry)":            pathPublicDoss + id + "/verify?sig=" + flipAt(payload, 10) + "." + mac,
		"payload tampered (epoch)":             pathPublicDoss + id + "/verify?sig=" + flipAt(payload, 20) + "." + mac,
		"payload tampered (org)":               pathPublicDoss + id + "/verify?sig=" + flipAt(payload, len(payload)-3) + "." + mac,
		"mac tampered":                         pathPublicDoss + id + "/verify?sig=" + payload + "." + flipAt(mac, 5),
		"mac truncated":                        pathPublicDoss + id + "/verify?sig=" + payload + "." + mac[:len(mac)-2],
		"no mac":                               pathPublicDoss + id + "/verify?sig=" + payload,
		"other dossier of the org":             pathPublicDoss + dec2.str("dossier_id") + "/verify?sig=" + sig,
		"other org's link on this dossier":     pathPublicDoss + id + "/verify?sig=" + sigB,
		"this link on the other org's dossier": pathPublicDoss + decB.str("dossier_id") + "/verify?sig=" + sig,
		"other org's payload, this mac":        pathPublicDoss + id + "/verify?sig=" + payloadB + "." + mac,
		"this payload, other org's mac":        pathPublicDoss + id + "/verify?sig=" + payload + "." + macB,
		"unknown dossier":                      pathPublicDoss + unknownID + "/verify?sig=" + sig,
		"uppercase dossier":                    pathPublicDoss + strings.ToUpper(id) + "/verify?sig=" + sig,
		"not a dossier id":                     pathPublicDoss + "x/verify?sig=" + sig,
		"sig in another parameter":             pathPublicDoss + id + "/verify?signature=" + sig,
		"overlong sig":                         pathPublicDoss + id + "/verify?sig=" + sig + strings.Repeat("A", 600),
	}
	var detail string
	for name, p := range cases {
		r := x.public(t, p, nil).wantProblem(t, http.StatusNotFound, clearance.CodeShareLinkInvalid)
		if detail == "" {
			detail = r.str("detail")
		}
		if r.str("detail") != detail || r.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: the refusal differs from the others (%q): %s", name, detail, r)
		}
		if strings.Contains(string(r.Raw), x.o.ID) || strings.Contains(string(r.Raw), b.ID) {
			t.Errorf("%s: the refusal names an org: %s", name, r)
		}
	}
	// A sig given twice is a malformed query, like everywhere else.
	x.public(t, pathPublicDoss+id+"/verify?sig="+sig+"&sig="+sig, nil).wantProblem(t, http.StatusBadRequest, "INVALID_QUERY")
	// The genuine links still verify, each for its own org's dossier.
	x.public(t, pathPublicDoss+id+"/verify?sig="+sig, nil).want(t, http.StatusOK)
	x.public(t, pathPublicDoss+decB.str("dossier_id")+"/verify?sig="+sigB, nil).want(t, http.StatusOK)
}

func TestShareLinkExpiresOnTheTestClock(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, "")
	id := x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":5}`, nil).want(t, http.StatusOK).str("dossier_id")
	url := x.share(t, x.o.Key, id, `{"expires_in_seconds":60}`).want(t, http.StatusCreated).str("url")

	x.advance(59 * time.Second)
	x.public(t, url, nil).want(t, http.StatusOK)
	x.advance(time.Second)
	x.public(t, url, nil).wantProblem(t, http.StatusNotFound, clearance.CodeShareLinkInvalid)

	// Lifetimes out of range are refused.
	for _, body := range []string{`{"expires_in_seconds":0}`, `{"expires_in_seconds":2592001}`, `{"expires_in_seconds":-1}`,
		`{"expires_in_seconds":1.5}`, `{"expires_in_seconds":1e3}`, `{"expires_in_seconds":null}`, `{"expires_in_seconds":"60"}`,
		`{"expires_in_seconds":9999999999}`} {
		x.share(t, x.o.Key, id, body).wantProblem(t, http.StatusBadRequest, clearance.CodeShareLinkExpiry)
	}
	x.share(t, x.o.Key, id, `{"expires_in_seconds":2592000}`).want(t, http.StatusCreated)
}

func TestShareLinksRevokeAll(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, "")
	id := x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":5}`, nil).want(t, http.StatusOK).str("dossier_id")
	b := x.createOrg("Other")
	idB := x.req(t, "POST", pathEvaluate, b.Key, `{"amount":5}`, nil).want(t, http.StatusOK).str("dossier_id")
	old := x.share(t, x.o.Key, id, `{}`).want(t, http.StatusCreated).str("url")
	oldB := x.share(t, b.Key, idB, `{}`).want(t, http.StatusCreated).str("url")
	x.public(t, old, nil).want(t, http.StatusOK)

	// Scopes: only audit:write makes and revokes links; read-only keys do neither.
	reader := x.createKey(x.o, "decision:read")
	auditor := x.createKey(x.o, "audit:read")
	writer := x.createKey(x.o, "audit:write")
	x.share(t, writer, id, `{}`).want(t, http.StatusCreated)
	for _, k := range []string{reader, auditor, x.createKey(x.o, "decision:write")} {
		x.share(t, k, id, `{}`).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	}
	x.req(t, "DELETE", pathShareRevoke, reader, nil, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")
	x.public(t, old, nil).want(t, http.StatusOK)

	headBefore := x.head(x.o.Key)
	rev := x.req(t, "DELETE", pathShareRevoke, writer, nil, nil).want(t, http.StatusOK)
	if rev.num("epoch") != 1 || rev.str("revoked_at") != execStart.Format(time.RFC3339) {
		t.Fatalf("revocation: %s", rev)
	}
	if h := x.head(x.o.Key); h != headBefore+1 {
		t.Fatalf("the revocation is not ledgered: head %d, was %d", h, headBefore)
	}
	x.verify(x.o.Key).want(t, http.StatusOK)
	if lookup(x.verify(x.o.Key).JSON, "valid") != true {
		t.Fatal("the ledger does not verify after a revocation")
	}

	x.public(t, old, nil).wantProblem(t, http.StatusNotFound, clearance.CodeShareLinkInvalid)
	fresh := x.share(t, writer, id, `{}`).want(t, http.StatusCreated).str("url")
	x.public(t, fresh, nil).want(t, http.StatusOK)
	// The other org's links are untouched.
	x.public(t, oldB, nil).want(t, http.StatusOK)

	// The platform key revokes for a named org.
	x.req(t, "DELETE", pathShareRevoke+"?org_id="+x.o.ID, x.platform, nil, nil).want(t, http.StatusOK)
	x.public(t, fresh, nil).wantProblem(t, http.StatusNotFound, clearance.CodeShareLinkInvalid)
	x.public(t, oldB, nil).want(t, http.StatusOK)
}

func TestSharedVerificationReportsATamperedDossier(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, "")
	dec := x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":5}`, nil).want(t, http.StatusOK)
	id := dec.str("dossier_id")
	url := x.share(t, x.o.Key, id, `{}`).want(t, http.StatusCreated).str("url")

	x.stop()
	withRawDB(t, x.dbDir, func(db rawDB) {
		body := db.dossierBody(x.o.ID, id)
		db.putDossierBody(x.o.ID, id, bytes.Replace(body, []byte(`"outcome":"ALLOW"`), []byte(`"outcome":"BLOCK"`), 1))
	})
	x.open(x.ring)

	v := x.public(t, url, nil).want(t, http.StatusOK)
	if lookup(v.JSON, "recomputed_digest_matches") != false || lookup(v.JSON, "verified") != false ||
		v.str("dossier_digest") != dec.str("dossier_digest") || lookup(v.JSON, "ledger.entry_hash_valid") != true {
		t.Fatalf("a tampered dossier: %s", v)
	}
	page := x.public(t, url, map[string]string{"Accept": "text/html"}).want(t, http.StatusOK)
	if !strings.Contains(string(page.Raw), "Not verified") {
		t.Fatalf("the page does not say so:\n%s", page.Raw)
	}

	// A tampered ledger entry breaks the entry and the chain from there.
	x.stop()
	withRawDB(t, x.dbDir, func(db rawDB) {
		seq := uint64(dec.num("ledger_seq"))
		en := db.entry(x.o.ID, seq)
		en.RecordedAt = "2020-01-01T00:00:00Z"
		db.putEntry(x.o.ID, seq, en)
	})
	x.open(x.ring)
	v = x.public(t, url, nil).want(t, http.StatusOK)
	if lookup(v.JSON, "ledger.entry_hash_valid") != false || lookup(v.JSON, "ledger.chain_valid") != false || lookup(v.JSON, "verified") != false {
		t.Fatalf("a tampered entry: %s", v)
	}
}

func TestSharedVerificationIsRateLimitedPerOrg(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, "")
	id := x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":5}`, nil).want(t, http.StatusOK).str("dossier_id")
	url := x.share(t, x.o.Key, id, `{}`).want(t, http.StatusCreated).str("url")
	x.opts.RateLimit, x.opts.RateBurst = 0.001, 1
	x.reopen(x.ring)

	x.public(t, url, nil).want(t, http.StatusOK)
	r := x.public(t, url, nil).wantProblem(t, http.StatusTooManyRequests, "RATE_LIMITED")
	if r.Header.Get("Retry-After") == "" {
		t.Fatalf("no Retry-After: %v", r.Header)
	}
	// Invalid links are refused before the limiter: they cost it nothing.
	x.public(t, pathPublicDoss+id+"/verify?sig=x", nil).wantProblem(t, http.StatusNotFound, clearance.CodeShareLinkInvalid)
}

func TestShareLinksNotConfigured(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Options{RateLimit: -1})
	o := e.createOrg("NoShare")
	id := e.decide(o.Key, `{"amount":5}`).str("dossier_id")
	e.do("POST", pathShareLinks(id), o.Key, `{}`, nil).wantProblem(t, http.StatusServiceUnavailable, clearance.CodeShareLinksNotConfigured)
	r, err := e.send("GET", pathPublicDoss+id+"/verify?sig=AQ.AQ", "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.wantProblem(t, http.StatusNotFound, clearance.CodeShareLinkInvalid)
	// Revocation needs no secret.
	rev := e.do("DELETE", pathShareRevoke, o.Key, nil, nil).want(t, http.StatusOK)
	var out clearance.ShareLinkRevocation
	if err := json.Unmarshal(rev.Raw, &out); err != nil || out.Epoch != 1 {
		t.Fatalf("revocation: %s", rev)
	}
}

// shareSpec describes the share-link routes to the bad-input suite (see
// badinput_test.go): which is "verify", "create" or "revoke" (reproduce and
// proof-bundle: shareTrioSpecs). The links it makes store nothing.
func (s *badSuite) shareSpec(a specArgs, which string) routeSpec {
	switch which {
	case "create":
		return routeSpec{org: orgQuery, params: map[string]string{"dossierId": a.dossierID}, paramCodes: []string{"DOSSIER_NOT_FOUND"},
			body: `{"expires_in_seconds":3600}`, numbers: []string{`{"expires_in_seconds":@@}`},
			extra: func(q req) []badCase {
				out := s.values(q, []string{`{"expires_in_seconds":0}`, `{"expires_in_seconds":-1}`, `{"expires_in_seconds":2592001}`,
					`{"expires_in_seconds":1.5}`, `{"expires_in_seconds":3600.0}`, `{"expires_in_seconds":1e3}`,
					`{"expires_in_seconds":"3600"}`, `{"expires_in_seconds":9999999999}`, `{"expires_in_seconds":99999999999999999999}`,
					`{"expires_in_seconds":null}`})
				for _, b := range []string{`{"proof_bundle":"true"}`, `{"proof_bundle":1}`, `{"proof_bundle":[true]}`, `{"proof_bundle":{}}`} {
					out = append(out, s.variant(q, catWrongType, shorten(b), b))
				}
				p := q
				p.path = pathShareLinks(a.dossierB)
				return append(out, s.variant(p, catForeign, "another org's dossier id", p.body, "DOSSIER_NOT_FOUND"))
			}}
	case "revoke":
		return routeSpec{org: orgQuery, phase: phaseRevokes}
	}
	return s.publicShareSpec(a.dossierID, a.dossierB, clearance.ShareRouteVerify)
}
