package connector_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/mail"
	"github.com/clearancehq/clearance/onboarding"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// harness is an engine over an in-memory Pebble with a mailbox in a temp
// dir and a clock the test moves.
type harness struct {
	t       *testing.T
	engine  *clearance.Engine
	backend *pebblestore.Store
	mailbox string
	mu      sync.Mutex
	now     time.Time
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, now: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC), mailbox: filepath.Join(t.TempDir(), "mailbox")}
	clock := func() time.Time { h.mu.Lock(); defer h.mu.Unlock(); return h.now }
	backend, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem(), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { backend.Close() })
	h.backend = backend
	mb, err := mail.NewMailbox(h.mailbox, "clearance@example.com", nil)
	if err != nil {
		t.Fatal(err)
	}
	h.engine, err = clearance.Open(backend, clearance.Options{Now: clock, Mailer: mb, AllowPrivateDestinations: true,
		SecretsKey: []byte("onboarding-unit-test-secrets-key-32!")})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) advance(d time.Duration) { h.mu.Lock(); h.now = h.now.Add(d); h.mu.Unlock() }

var codeIn = regexp.MustCompile(`code is ([0-9]{6})\.`)

// lastCode is the code of the newest message to addr in the mailbox.
func (h *harness) lastCode(addr string) string {
	h.t.Helper()
	msgs, err := mail.ReadMailbox(h.mailbox)
	if err != nil {
		h.t.Fatal(err)
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].To == addr {
			if m := codeIn.FindStringSubmatch(msgs[i].Text); m != nil {
				return m[1]
			}
		}
	}
	h.t.Fatalf("no code mailed to %s", addr)
	return ""
}

func (h *harness) start(email string) (onboarding.Started, error) {
	return h.engine.Onboarding.Start(context.Background(),
		fmt.Appendf(nil, `{"owner_email":%q,"owner_name":"Ada Lovelace","org_name":"Analytical Engines"}`, email))
}

func (h *harness) verify(email, code string) (onboarding.Verified, error) {
	return h.engine.Onboarding.Verify(context.Background(), fmt.Appendf(nil, `{"owner_email":%q,"otp_code":%q}`, email, code))
}

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	var ce *core.Error
	if !errors.As(err, &ce) || ce.Code != code {
		t.Fatalf("%s: %v, want %s", what, err, code)
	}
}

// signUp runs register/start and register/verify for addr.
func (h *harness) signUp(addr string) onboarding.Verified {
	h.t.Helper()
	if _, err := h.start(addr); err != nil {
		h.t.Fatal(err)
	}
	v, err := h.verify(addr, h.lastCode(addr))
	if err != nil {
		h.t.Fatal(err)
	}
	return v
}

// signIn runs login/start and login/verify for addr.
func (h *harness) signIn(addr string) (onboarding.SignedIn, error) {
	ctx := context.Background()
	if _, err := h.engine.Onboarding.StartSignIn(ctx, fmt.Appendf(nil, `{"email":%q}`, addr)); err != nil {
		return onboarding.SignedIn{}, err
	}
	return h.engine.Onboarding.VerifySignIn(ctx, fmt.Appendf(nil, `{"email":%q,"otp_code":%q}`, addr, h.lastCode(strings.ToLower(addr))))
}
