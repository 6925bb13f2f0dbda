package approval_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance/approval"
	"github.com/clearancehq/clearance/approval/approvaltest"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/outbound"
)

const (
	cred1 = "cred-org-1"
	cred2 = "cred-org-2"
)

var (
	intentA = canon.Digest([]byte("intent A"))
	intentB = canon.Digest([]byte("intent B"))
	t0      = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
)

// clock is a settable clock shared by the fake and the client.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type env struct {
	fake  *approvaltest.Service
	svc   *approval.HTTP
	ep    approval.Endpoint
	clock *clock
	key   grant.Key
}

func seedKey(t testing.TB, b byte) grant.Key {
	t.Helper()
	k, err := grant.KeyFromSeed([]byte(strings.Repeat(string(rune(b)), 32)))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func setup(t testing.TB) *env {
	t.Helper()
	e := &env{clock: &clock{t: t0}, key: seedKey(t, 'k')}
	e.fake = approvaltest.New(t, approvaltest.Options{Key: e.key, Now: e.clock.Now})
	e.svc = approval.NewHTTP(outbound.New(outbound.Options{AllowPrivate: true}), approval.HTTPOptions{Now: e.clock.Now})
	e.ep = approval.Endpoint{BaseURL: e.fake.URL, Credential: cred1, Issuer: e.fake.Issuer()}
	return e
}

func openReq(escalation, intent string) approval.OpenRequest {
	return approval.OpenRequest{OrgID: "org-1", EscalationID: escalation, IntentHash: intent,
		Actor:     approval.Actor{ID: "agent-7", Type: "agent"},
		Action:    approval.Action{Type: "PAYMENT", Amount: "1250.00", Currency: "EUR", Target: "vendor-42", WorkflowKey: "ap.invoice"},
		ExpiresAt: t0.Add(time.Hour)}
}

// open opens a request for org-1 and intent.
func (e *env) open(t testing.TB, escalation, intent string) approval.Request {
	t.Helper()
	r, err := e.svc.Open(context.Background(), e.ep, openReq(escalation, intent))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func wantErr(t testing.TB, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want %v", err, want)
	}
}

// codeOf is the code of the package's error in err.
func codeOf(err error) string {
	var e *approval.Error
	if errors.As(err, &e) {
		return e.Code()
	}
	return ""
}

// otherKid signs with key under kid: a forgery that names a real kid.
type otherKid struct {
	kid string
	key grant.Key
}

func (o otherKid) KeyID() string                   { return o.kid }
func (o otherKid) Sign(msg []byte) ([]byte, error) { return o.key.Sign(msg) }
