package client_test

// The tests of the client run it against a real Clearance server: the
// server package over an engine on a Pebble store in a temp dir, behind
// httptest, with every optional feature configured (grant and ledger
// keys, share and export secrets, a secrets key, a mailer the test reads,
// Git policy sources, a reporting key, a fake approval service).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/approval"
	"github.com/clearancehq/clearance/approval/approvaltest"
	"github.com/clearancehq/clearance/client"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/server"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// testServer is one Clearance server of a test.
type testServer struct {
	t        *testing.T
	URL      string
	platform string // the platform key's secret
	engine   *clearance.Engine
	// offset moves the clock of engine and store away from the wall clock.
	offset atomic.Int64
	mail   *mailbox
	// sourceRoot is where policy-source repositories may live.
	sourceRoot string
	approvals  *approvaltest.Service
	seq        atomic.Int64
}

// serverConfig adjusts a test server.
type serverConfig struct {
	// start is the clock's time when the server starts (zero: now).
	start time.Time
	// issuer is the deployment's issuer (zero: the default).
	issuer string
}

func newServer(t *testing.T) *testServer { return newServerWith(t, serverConfig{}) }

func newServerWith(t *testing.T, cfg serverConfig) *testServer {
	t.Helper()
	s := &testServer{t: t, mail: &mailbox{}, sourceRoot: t.TempDir()}
	if !cfg.start.IsZero() {
		s.offset.Store(int64(time.Until(cfg.start)))
	}
	s.approvals = approvaltest.New(t, approvaltest.Options{Now: s.now})
	st, err := pebblestore.Open(filepath.Join(t.TempDir(), "db"), pebblestore.Options{Now: s.now})
	if err != nil {
		t.Fatal(err)
	}
	ledgerKey, err := ledger.NewKey("clearance-client-test-ledger", bytes.Repeat([]byte{0x4c}, 32))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := clearance.Open(st, clearance.Options{
		Now:                      s.now,
		GrantKeys:                grant.NewKeyRing(seededKey(t, 1)),
		LedgerKey:                ledgerKey,
		ShareSecret:              bytes.Repeat([]byte{0x53}, clearance.MinShareSecretLen),
		ExportSecret:             bytes.Repeat([]byte{0x45}, 32),
		SecretsKey:               []byte("client-test-secrets-key-32-bytes!!"),
		Mailer:                   s.mail,
		PolicySourceRoots:        []string{s.sourceRoot},
		ReportingKey:             seededKey(t, 9),
		ApprovalServices:         approvalDirectory{s.approvals},
		AllowPrivateDestinations: true,
		Issuer:                   cfg.issuer,
	})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	s.engine = eng
	srv := httptest.NewServer(server.New(eng, server.Options{RateLimit: -1, AuthRateLimit: -1, AuthGlobalRateLimit: -1}))
	t.Cleanup(func() {
		srv.Close()
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	s.URL = srv.URL
	secret, err := eng.Admin.NewPlatformSecret()
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Admin.EnsurePlatformKey(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	s.platform = secret
	return s
}

func (s *testServer) now() time.Time { return time.Now().Add(time.Duration(s.offset.Load())).UTC() }

// advance moves the clock of engine and store.
func (s *testServer) advance(d time.Duration) { s.offset.Add(int64(d)) }

// client is a client of s with key.
func (s *testServer) client(key string, opts ...client.Option) *client.Client {
	s.t.Helper()
	c, err := client.New(s.URL, key, opts...)
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// org is an org of a test with its first key (org:*) and a registered
// agent key.
type org struct {
	ID    string
	UUID  client.UUID
	Key   string
	c     *client.Client
	agent grant.Key
}

// newOrg creates an org with the platform client and registers an agent
// key for it.
func (s *testServer) newOrg(name string) *org {
	s.t.Helper()
	ctx := s.t.Context()
	created, err := s.client(s.platform).CreateOrg(ctx, client.CreateOrgRequest{Name: name})
	if err != nil {
		s.t.Fatal(err)
	}
	if created.Name != name || created.ApiKey == "" || len(created.Scopes) != 1 || created.Scopes[0] != "org:*" {
		s.t.Fatalf("created org: %+v", created)
	}
	o := &org{ID: created.OrgId.String(), UUID: created.OrgId, Key: created.ApiKey, c: s.client(created.ApiKey),
		agent: seededKey(s.t, byte(10+s.seq.Add(1)))}
	if _, err := o.c.RegisterKey(ctx, client.AgentKeys, keyRegistration(s.t, o.agent, ""), client.WithRequestID("reg-"+name)); err != nil {
		s.t.Fatal(err)
	}
	return o
}

// publish publishes and activates a bundle given as JSON.
func (o *org) publish(t *testing.T, bundleJSON string) *client.BundleInfo {
	t.Helper()
	info, err := o.c.PublishBundle(t.Context(), bundleOf(t, bundleJSON))
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// decide evaluates a decision of amount with workflow key "refunds".
func (o *org) decide(t *testing.T, amount float64, opts ...client.CallOption) *client.Decision {
	t.Helper()
	d, err := o.c.EvaluateDecision(t.Context(), decisionRequest(t, amount), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// decisionRequest is a refund decision of amount.
func decisionRequest(t *testing.T, amount float64) client.DecisionRequest {
	t.Helper()
	var req client.DecisionRequest
	mustJSON(t, fmt.Sprintf(`{"workflow_key":"refunds","decision_type":"REFUND","amount":%v,
		"actor":{"id":"agent-7","type":"agent"},"action":{"type":"refund","target":"order-1","currency":"EUR"}}`, amount), &req)
	return req
}

// intent is a signed execution intent of o's agent.
type intent struct {
	amount  float64
	managed bool
}

// sign returns the signed intent's JWS.
func (s *testServer) sign(o *org, in intent) string {
	s.t.Helper()
	n := s.seq.Add(1)
	if in.amount == 0 {
		in.amount = 100
	}
	esc := "NONE"
	if in.managed {
		esc = "MANAGED"
	}
	m := map[string]any{
		"intent_id": fmt.Sprintf("intent-%d", n), "org_id": o.ID, "actor": map[string]any{"id": "agent-7", "type": "agent"},
		"action":       map[string]any{"type": "refund", "amount": in.amount, "currency": "EUR", "target": "order-1"},
		"workflow_key": "refunds", "decision_type": "REFUND", "nonce": fmt.Sprintf("nonce-%d", n),
		"concurrency_scope": fmt.Sprintf("scope-%d", n), "escalation": map[string]any{"mode": esc},
		"issued_at": s.now().Format(time.RFC3339),
	}
	payload, err := canon.Marshal(m)
	if err != nil {
		s.t.Fatal(err)
	}
	jws, err := grant.SignIntent(o.agent, payload)
	if err != nil {
		s.t.Fatal(err)
	}
	return jws
}

// bind binds a grant to a signed intent of amount and requires an ALLOW.
func (s *testServer) bind(o *org, amount float64) *client.ExecutionAuthorityDecision {
	s.t.Helper()
	d, err := o.c.EnforceAndBind(s.t.Context(), client.ExecutionAuthorityRequest{SignedIntent: s.sign(o, intent{amount: amount})})
	if err != nil {
		s.t.Fatal(err)
	}
	if d.Outcome != "ALLOW" || d.ExecutionToken == nil || d.IntentHash == "" {
		s.t.Fatalf("want a grant: %+v", d)
	}
	return d
}

// bandsBundle is ENFORCEMENT: below 1,000 ALLOW, from 1,000 ESCALATE,
// from 10,000 BLOCK; and a daily spend gate of 1,000,000 EUR on refunds.
const bandsBundle = `{"bundle_id":"bands","version":"v1","mode":"ENFORCEMENT",
 "spend_gates":[{"id":"refunds.daily","workflow_keys":["refunds"],"currency":"EUR","limit":"1000000","window":"DAY"}],
 "rules":[
 {"id":"esc","match":[{"field":"amount","op":"ge","value":1000}],"outcome":"ESCALATE","reason_codes":["MID"]},
 {"id":"blk","match":[{"field":"amount","op":"ge","value":10000}],"outcome":"BLOCK","reason_codes":["TOO_BIG"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`

// bundleOf decodes a bundle document.
func bundleOf(t *testing.T, doc string) client.PolicyBundle {
	t.Helper()
	var b client.PolicyBundle
	mustJSON(t, doc, &b)
	return b
}

func mustJSON(t *testing.T, doc string, into any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(doc)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		t.Fatalf("decode %s: %v", doc, err)
	}
}

// seededKey is a deterministic Ed25519 key.
func seededKey(t testing.TB, b byte) grant.Key {
	t.Helper()
	seed := make([]byte, 32)
	seed[0], seed[31] = b, 0x5a
	k, err := grant.KeyFromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// keyRegistration is the registration of k's public key.
func keyRegistration(t *testing.T, k grant.Key, iss string) client.KeyRegistrationRequest {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"kid": k.KID(), "public_jwk": k.PublicJWK()})
	if err != nil {
		t.Fatal(err)
	}
	var req client.KeyRegistrationRequest
	mustJSON(t, string(raw), &req)
	if iss != "" {
		req.Iss = &iss
	}
	return req
}

// wantCode fails unless err is a *client.Error of status and code.
func wantCode(t *testing.T, err error, status int, code string) *client.Error {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) {
		t.Fatalf("want %d %s, got %v", status, code, err)
	}
	if e.Status != status || e.Code != code || !client.IsCode(err, code) {
		t.Fatalf("want %d %s, got %d %s: %s", status, code, e.Status, e.Code, e.Body)
	}
	return e
}

// mailbox is the server's mailer: it keeps every message.
type mailbox struct {
	mu   sync.Mutex
	sent []clearance.MailMessage
}

func (m *mailbox) Send(_ context.Context, msg clearance.MailMessage) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent = append(m.sent, msg)
	return nil
}

var mailedCode = regexp.MustCompile(`\b([0-9]{6})\b`)

// code is the last code mailed to addr.
func (m *mailbox) code(t *testing.T, addr string) string {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(m.sent) - 1; i >= 0; i-- {
		if m.sent[i].To == addr {
			if c := mailedCode.FindStringSubmatch(m.sent[i].Text); c != nil {
				return c[1]
			}
		}
	}
	t.Fatalf("no code was mailed to %s", addr)
	return ""
}

// approvalDirectory gives every org the fake approval service.
type approvalDirectory struct{ fake *approvaltest.Service }

func (d approvalDirectory) Endpoint(_ context.Context, orgID string) (approval.Endpoint, error) {
	cred := "cred-" + orgID
	d.fake.AddCredential(cred, orgID)
	return approval.Endpoint{BaseURL: d.fake.URL, Credential: cred, Issuer: d.fake.Issuer()}, nil
}

// ptr is a pointer to v.
func ptr[T any](v T) *T { return &v }
