package onboarding

import (
	"context"
	"time"

	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/store"
)

// Failed tries of an address, across its codes and across sign-up and
// sign-in: each code already burns after Config.MaxAttempts wrong tries
// and an address is sent Config.MaxSends codes per Config.SendWindow, but
// that alone lets a guesser try MaxSends×MaxAttempts codes per window, all
// day. The address's wrong codes are counted in one record of
// AccountsOrgID (so every server sharing the store counts them together),
// and at Config.MaxFailures within Config.FailureWindow the address is
// locked: every verify and every send for it is refused 429
// TOO_MANY_ATTEMPTS with Retry-After until the oldest of those failures
// leaves the window. A blind guesser thus checks at most MaxFailures codes
// per address per window, whatever it does: with the defaults, 10 in 10^6
// a day.

// Defaults of Config.MaxFailures and Config.FailureWindow.
const (
	DefaultMaxFailures   = 10
	DefaultFailureWindow = 24 * time.Hour
)

// CodeTooManyAttempts refuses a verify (or a send) for an address with
// Config.MaxFailures wrong codes within Config.FailureWindow.
const CodeTooManyAttempts = "TOO_MANY_ATTEMPTS"

// kindFailures is an address's recent wrong codes, in AccountsOrgID; id:
// addressKey (the same for sign-up and sign-in).
const kindFailures = "onboarding.failures"

// failures is the record of kindFailures.
type failures struct {
	// At are the times of the address's wrong codes within the failure
	// window, oldest first; at most MaxFailures are kept (once that many
	// are in the window, no code is checked, so no more are added).
	At []time.Time `json:"at"`
}

// recentFailures reads the address's failures in tx, without those that
// left the window by now.
func (s *Service) recentFailures(ctx context.Context, tx store.Tx, key string, now time.Time) (failures, error) {
	var f failures
	if err := core.ReadRecord(ctx, tx, kindFailures, key, &f); err != nil && !core.IsNotFound(err) {
		return failures{}, err
	}
	recent := []time.Time{}
	for _, at := range f.At {
		if now.Sub(at) < s.cfg.FailureWindow {
			recent = append(recent, at)
		}
	}
	return failures{At: recent}, nil
}

// lockedFor is how long the address of f stays locked from now: 0 when
// it is not.
func (s *Service) lockedFor(f failures, now time.Time) time.Duration {
	if len(f.At) < s.cfg.MaxFailures {
		return 0
	}
	// The window holds MaxFailures or more: it unlocks when all but
	// MaxFailures-1 of them have left it.
	return max(time.Second, f.At[len(f.At)-s.cfg.MaxFailures].Add(s.cfg.FailureWindow).Sub(now))
}

// checkLocked is errTooManyAttempts when the address key is locked, in tx.
func (s *Service) checkLocked(ctx context.Context, tx store.Tx, key string, now time.Time) error {
	f, err := s.recentFailures(ctx, tx, key, now)
	if err != nil {
		return err
	}
	if wait := s.lockedFor(f, now); wait > 0 {
		return errTooManyAttempts(wait)
	}
	return nil
}

// noteFailure counts a wrong code of the address key at now, in tx.
func (s *Service) noteFailure(ctx context.Context, tx store.Tx, key string, now time.Time) error {
	f, err := s.recentFailures(ctx, tx, key, now)
	if err != nil {
		return err
	}
	f.At = append(f.At, now)
	if n := len(f.At); n > s.cfg.MaxFailures {
		f.At = f.At[n-s.cfg.MaxFailures:]
	}
	return core.WriteRecord(ctx, tx, kindFailures, key, now, f)
}

// errTooManyAttempts is the refusal of a locked address: the same for
// every address, whether or not it has an account or a pending code.
func errTooManyAttempts(wait time.Duration) error {
	return &core.Error{Kind: core.ErrTooManyRequests, Code: CodeTooManyAttempts,
		Detail:     "too many wrong codes for this address; retry after the Retry-After delay",
		RetryAfter: wait}
}
