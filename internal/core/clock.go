package core

import (
	"context"
	"time"
)

// TimeFormat is how Clearance writes timestamps: RFC 3339, UTC, nanoseconds.
const TimeFormat = time.RFC3339Nano

// Clock is the one clock of an engine (Options.Now); Now reads it in UTC.
// Leases of shared work are judged by the store's clock instead (jobs).
type Clock func() time.Time

// Now returns the current time in UTC.
func (c Clock) Now() time.Time { return c().UTC() }

// Format returns t in TimeFormat, in UTC.
func Format(t time.Time) string { return t.UTC().Format(TimeFormat) }

// EveryTick runs fn every interval until ctx ends: the one loop of the
// engine's workers.
func EveryTick(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fn()
	}
}
