package onboarding_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
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

func (h *harness) startSignIn(email string) (onboarding.Started, error) {
	return h.engine.Onboarding.StartSignIn(context.Background(), fmt.Appendf(nil, `{"email":%q}`, email))
}

func (h *harness) verifySignIn(email, code string) (onboarding.SignedIn, error) {
	return h.engine.Onboarding.VerifySignIn(context.Background(), fmt.Appendf(nil, `{"email":%q,"otp_code":%q}`, email, code))
}

// wrongFor is a code that is not code (the i-th of them).
func wrongFor(code string, i int) string {
	return fmt.Sprintf("%06d", (atoi(code)+1+i)%1_000_000)
}

// retryAfterOf is the RetryAfter of a refusal with code want.
func retryAfterOf(t *testing.T, what string, err error, want string) time.Duration {
	t.Helper()
	wantCode(t, what, err, want)
	var ce *core.Error
	errors.As(err, &ce)
	if ce.RetryAfter <= 0 {
		t.Fatalf("%s: no RetryAfter", what)
	}
	return ce.RetryAfter
}

// guesser is an attacker that asks for codes for its addresses and tries
// wrong ones as fast as the engine lets it; it counts the codes the
// engine checked (a guess while a code was pending and not burned), which
// is what a blind guess's chance of success is made of.
type guesser struct {
	h       *harness
	pending map[string]int // address -> tries left of its pending code
	checked map[string][]time.Time
	refused int // answers TOO_MANY_ATTEMPTS
}

// round asks each address for a code (sign-up and sign-in alternately)
// and guesses until the code is burned or the address is refused.
func (g *guesser) round(addrs []string, signIn bool) {
	t := g.h.t
	for _, addr := range addrs {
		var err error
		if signIn {
			_, err = g.h.startSignIn(addr)
		} else {
			_, err = g.h.start(addr)
		}
		var ce *core.Error
		switch {
		case err == nil:
			g.pending[addr] = onboarding.DefaultMaxAttempts
		case errors.As(err, &ce) && (ce.Code == onboarding.CodeTooManyCodes || ce.Code == onboarding.CodeTooManyAttempts):
		default:
			t.Fatalf("start %s: %v", addr, err)
		}
		code := g.h.lastCode(addr)
		for i := range onboarding.DefaultMaxAttempts {
			if signIn {
				_, err = g.h.verifySignIn(addr, wrongFor(code, i))
			} else {
				_, err = g.h.verify(addr, wrongFor(code, i))
			}
			switch {
			case errors.As(err, &ce) && ce.Code == onboarding.CodeOTPInvalid:
				if g.pending[addr] > 0 {
					g.pending[addr]--
					g.checked[addr] = append(g.checked[addr], g.h.now)
				}
			case errors.As(err, &ce) && ce.Code == onboarding.CodeTooManyAttempts:
				g.refused++
			default:
				t.Fatalf("wrong code for %s accepted or refused otherwise: %v", addr, err)
			}
		}
	}
}

// maxInWindow is the most times of at that fall in one window of length w.
func maxInWindow(at []time.Time, w time.Duration) int {
	best := 0
	for i := range at {
		n := 0
		for j := i; j < len(at) && at[j].Sub(at[i]) < w; j++ {
			n++
		}
		best = max(best, n)
	}
	return best
}

// An attacker guessing codes for one address gets at most MaxFailures
// codes checked per FailureWindow, across sign-up and sign-in codes, however
// many codes it has sent; for K addresses, at most K×MaxFailures. Before
// the failure count it was MaxSends×MaxAttempts an hour for each kind
// (600 a day per kind and address).
func TestAttemptsBoundGuessingPerAddress(t *testing.T) {
	h := newHarness(t)
	s := h.engine.Onboarding.Settings()
	if s.MaxFailures != onboarding.DefaultMaxFailures || s.FailureWindow != onboarding.DefaultFailureWindow ||
		onboarding.DefaultMaxFailures != 10 || onboarding.DefaultFailureWindow != 24*time.Hour {
		t.Fatalf("settings %+v are not the documented defaults (10 a day)", s)
	}
	const k = 4
	addrs := make([]string, k)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("victim%d@example.com", i)
	}
	g := &guesser{h: h, pending: map[string]int{}, checked: map[string][]time.Time{}}
	// Three days, a round every 10 minutes, alternating the kind of code:
	// 432 rounds of 5 guesses on each of 4 addresses.
	const days = 3
	start := h.now
	for i := 0; h.now.Sub(start) < days*onboarding.DefaultFailureWindow; i++ {
		g.round(addrs, i%2 == 1)
		h.advance(10 * time.Minute)
	}
	total := 0
	for _, addr := range addrs {
		at := g.checked[addr]
		total += len(at)
		if n := maxInWindow(at, s.FailureWindow); n > s.MaxFailures {
			t.Fatalf("%s: %d codes checked within %v, want at most %d", addr, n, s.FailureWindow, s.MaxFailures)
		}
		// The bound is reached (the attacker is not stopped by something
		// else first), each day.
		if len(at) != days*s.MaxFailures {
			t.Fatalf("%s: %d codes checked in %d days, want %d", addr, len(at), days, days*s.MaxFailures)
		}
	}
	if total > k*days*s.MaxFailures {
		t.Fatalf("%d codes checked over %d addresses in %d days, want at most %d", total, k, days, k*days*s.MaxFailures)
	}
	if g.refused == 0 {
		t.Fatal("no guess was refused TOO_MANY_ATTEMPTS")
	}
	perAddress := float64(total) / float64(k*days)
	t.Logf("measured over %d days and %d addresses: %d codes checked (%.1f per address per day, bound %d), %d guesses refused; "+
		"chance of a blind guess succeeding per address per day <= %.1f/1e6 = %.0e, for %d addresses <= %.0e "+
		"(was %d/1e6 per address per day and kind)",
		days, k, total, perAddress, s.MaxFailures, g.refused, perAddress, perAddress/1e6, k, float64(k)*perAddress/1e6,
		24*s.MaxSends*s.MaxAttempts)
}

// Wrong codes of sign-up and sign-in count together; at MaxFailures the
// right code fails too (and no code is sent) until the oldest failure
// leaves the window; then a code is sent and works. Other addresses are
// untouched throughout.
func TestAttemptsLockRefusesRightCodeUntilWindowEnds(t *testing.T) {
	h := newHarness(t)
	const addr, other = "locked@example.com", "bystander@example.com"
	limit := onboarding.DefaultMaxFailures

	// A sign-up code: 4 wrong tries, still good.
	if _, err := h.start(addr); err != nil {
		t.Fatal(err)
	}
	signUpCode := h.lastCode(addr)
	failures := 0
	for i := range onboarding.DefaultMaxAttempts - 1 {
		_, err := h.verify(addr, wrongFor(signUpCode, i))
		wantCode(t, "a wrong sign-up code", err, onboarding.CodeOTPInvalid)
		failures++
	}
	first := h.now
	h.advance(time.Minute)
	// Sign-in codes take the rest, up to one short of the limit.
	for failures < limit-1 {
		if _, err := h.startSignIn(addr); err != nil {
			t.Fatal(err)
		}
		code := h.lastCode(addr)
		for i := 0; i < onboarding.DefaultMaxAttempts-1 && failures < limit-1; i++ {
			_, err := h.verifySignIn(addr, wrongFor(code, i))
			wantCode(t, "a wrong sign-in code", err, onboarding.CodeOTPInvalid)
			failures++
		}
	}
	// One short of the limit, a right code still works.
	if _, err := h.startSignIn(addr); err != nil {
		t.Fatal(err)
	}
	if _, err := h.verifySignIn(addr, h.lastCode(addr)); err != nil {
		t.Fatalf("the right sign-in code after %d failures: %v", failures, err)
	}
	// The limit: one more wrong sign-in code.
	if _, err := h.startSignIn(addr); err != nil {
		t.Fatal(err)
	}
	signInCode := h.lastCode(addr)
	_, err := h.verifySignIn(addr, wrongFor(signInCode, 0))
	wantCode(t, "the failure that reaches the limit", err, onboarding.CodeOTPInvalid)

	// Locked: the right codes of both kinds fail, and nothing is sent.
	_, err = h.verify(addr, signUpCode)
	wait := retryAfterOf(t, "the right sign-up code when locked", err, onboarding.CodeTooManyAttempts)
	if want := first.Add(onboarding.DefaultFailureWindow).Sub(h.now); wait != want {
		t.Fatalf("RetryAfter %v, want %v (when the first failure leaves the window)", wait, want)
	}
	_, err = h.verifySignIn(addr, signInCode)
	retryAfterOf(t, "the right sign-in code when locked", err, onboarding.CodeTooManyAttempts)
	_, err = h.start(addr)
	retryAfterOf(t, "a sign-up code for a locked address", err, onboarding.CodeTooManyAttempts)
	_, err = h.startSignIn(addr)
	retryAfterOf(t, "a sign-in code for a locked address", err, onboarding.CodeTooManyAttempts)
	_, err = h.verify(strings.ToUpper(addr), signUpCode)
	retryAfterOf(t, "the address in capitals", err, onboarding.CodeTooManyAttempts)

	// Another address is not locked.
	if _, err := h.start(other); err != nil {
		t.Fatalf("another address: %v", err)
	}
	if _, err := h.verify(other, h.lastCode(other)); err != nil {
		t.Fatalf("another address's right code: %v", err)
	}

	// Still locked a second before the window ends.
	h.advance(wait - time.Second)
	_, err = h.verify(addr, signUpCode)
	retryAfterOf(t, "a second before the window ends", err, onboarding.CodeTooManyAttempts)
	h.advance(time.Second)
	// The first failures left the window: a code is sent and works.
	if _, err := h.start(addr); err != nil {
		t.Fatalf("a code after the window: %v", err)
	}
	if _, err := h.verify(addr, h.lastCode(addr)); err != nil {
		t.Fatalf("the right code after the window: %v", err)
	}
}

// Only a code that could have been right counts: tries for an address
// with no pending code (never asked, expired, used or burned) are the
// usual OTP_INVALID and lock nothing, so nobody locks an address without
// having its owner sent a code first.
func TestAttemptsWithoutPendingCodeCountNothing(t *testing.T) {
	h := newHarness(t)
	const addr = "quiet@example.com"
	for i := range 3 * onboarding.DefaultMaxFailures {
		_, err := h.verify(addr, fmt.Sprintf("%06d", i))
		wantCode(t, "a try without a code", err, onboarding.CodeOTPInvalid)
		_, err = h.verifySignIn(addr, fmt.Sprintf("%06d", i))
		wantCode(t, "a sign-in try without a code", err, onboarding.CodeOTPInvalid)
	}
	// An expired code.
	if _, err := h.start(addr); err != nil {
		t.Fatal(err)
	}
	code := h.lastCode(addr)
	h.advance(onboarding.DefaultCodeTTL)
	for i := range 2 * onboarding.DefaultMaxFailures {
		_, err := h.verify(addr, wrongFor(code, i))
		wantCode(t, "a try of an expired code", err, onboarding.CodeOTPInvalid)
	}
	if _, err := h.start(addr); err != nil {
		t.Fatal(err)
	}
	if _, err := h.verify(addr, h.lastCode(addr)); err != nil {
		t.Fatalf("the right code after tries without a pending one: %v", err)
	}
}

// A wrong try whose transaction is rolled back and run again counts once.
func TestAttemptsRetriedTransactionCountsOnce(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	h := &harness{t: t, now: now, mailbox: filepath.Join(t.TempDir(), "mailbox")}
	clock := func() time.Time { h.mu.Lock(); defer h.mu.Unlock(); return h.now }
	inner, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem(), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inner.Close() })
	mb, err := mail.NewMailbox(h.mailbox, "clearance@example.com", nil)
	if err != nil {
		t.Fatal(err)
	}
	backend := &retrying{Backend: inner, between: func() {}}
	h.engine, err = clearance.Open(backend, clearance.Options{Now: clock, Mailer: mb,
		SecretsKey: []byte("onboarding-unit-test-secrets-key-32!")})
	if err != nil {
		t.Fatal(err)
	}
	const addr = "retried@example.com"
	failures := 0
	// Every wrong try runs twice (the first run rolled back).
	for failures < onboarding.DefaultMaxFailures-1 {
		if _, err := h.start(addr); err != nil {
			t.Fatal(err)
		}
		code := h.lastCode(addr)
		for i := 0; i < onboarding.DefaultMaxAttempts-1 && failures < onboarding.DefaultMaxFailures-1; i++ {
			backend.mu.Lock()
			backend.armed = true
			backend.mu.Unlock()
			_, err := h.verify(addr, wrongFor(code, i))
			wantCode(t, "a retried wrong try", err, onboarding.CodeOTPInvalid)
			failures++
		}
		h.advance(time.Minute)
	}
	// MaxFailures-1 counted, not twice that: the right code works.
	if _, err := h.start(addr); err != nil {
		t.Fatal(err)
	}
	if _, err := h.verify(addr, h.lastCode(addr)); err != nil {
		t.Fatalf("the right code after %d retried wrong tries: %v", failures, err)
	}
}

// Concurrent wrong tries of both kinds of code for one address count
// together, in the store: however they interleave, at most MaxFailures
// are checked.
func TestAttemptsConcurrentCountTogether(t *testing.T) {
	const maxFailures = 3
	h := &harness{t: t, now: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC), mailbox: filepath.Join(t.TempDir(), "mailbox")}
	clock := func() time.Time { h.mu.Lock(); defer h.mu.Unlock(); return h.now }
	backend, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem(), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { backend.Close() })
	mb, err := mail.NewMailbox(h.mailbox, "clearance@example.com", nil)
	if err != nil {
		t.Fatal(err)
	}
	h.engine, err = clearance.Open(backend, clearance.Options{Now: clock, Mailer: mb,
		SecretsKey: []byte("onboarding-unit-test-secrets-key-32!"), Onboarding: clearance.OnboardingOptions{MaxFailures: maxFailures}})
	if err != nil {
		t.Fatal(err)
	}
	const addr = "concurrent@example.com"
	if _, err := h.start(addr); err != nil {
		t.Fatal(err)
	}
	signUpCode := h.lastCode(addr)
	if _, err := h.startSignIn(addr); err != nil {
		t.Fatal(err)
	}
	signInCode := h.lastCode(addr)
	n := onboarding.DefaultMaxAttempts - 1 // each code stays live on its own
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Add(2)
		go func() { defer wg.Done(); _, err := h.verify(addr, wrongFor(signUpCode, i)); errs <- err }()
		go func() { defer wg.Done(); _, err := h.verifySignIn(addr, wrongFor(signInCode, i)); errs <- err }()
	}
	wg.Wait()
	close(errs)
	checked, refused := 0, 0
	for err := range errs {
		var ce *core.Error
		switch {
		case errors.As(err, &ce) && ce.Code == onboarding.CodeOTPInvalid:
			checked++
		case errors.As(err, &ce) && ce.Code == onboarding.CodeTooManyAttempts:
			refused++
		default:
			t.Fatalf("a wrong try: %v", err)
		}
	}
	if checked != maxFailures || refused != 2*n-maxFailures {
		t.Fatalf("%d checked, %d refused of %d concurrent wrong tries; want %d checked", checked, refused, 2*n, maxFailures)
	}
	_, err = h.verify(addr, signUpCode)
	wantCode(t, "the right sign-up code after the concurrent tries", err, onboarding.CodeTooManyAttempts)
}
