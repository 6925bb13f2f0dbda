package store

import (
	"context"
	"time"
)

// Backend names in Commit.Backend.
const (
	BackendPebble     = "pebble"
	BackendPostgreSQL = "postgresql"
)

// Commit is one durable commit of an Update's writes, as a backend reports
// it for metrics and traces.
type Commit struct {
	Backend string // BackendPebble or BackendPostgreSQL
	// Start and End bound the commit: from handing the writes over (Pebble:
	// applying the batch; PostgreSQL: sending COMMIT) to their being
	// durable. The time fn ran and waited for the org's lock is not in it.
	Start, End time.Time
	// Batch is how many Updates the commit made durable together (group
	// commit), this one included. PostgreSQL: the Updates whose functions
	// shared the transaction. Pebble: the commits waiting for a sync of the
	// write-ahead log when this one joined them, one fsync covering them.
	Batch int
	// Lead is true for exactly one of the Updates a commit carried: count
	// commits by it (every Update of a batch reports the same commit).
	Lead bool
}

// CommitObserver hears of each successful commit that wrote something, once
// for each Update it carried, in that Update's goroutine and with its
// context, before Update returns. It runs on the write path: it must be
// quick and must not call the backend.
type CommitObserver func(ctx context.Context, c Commit)

// Observable is a Backend that reports its commits. ObserveCommits replaces
// the observer (nil: none); call it before the backend is shared.
type Observable interface {
	ObserveCommits(o CommitObserver)
}
