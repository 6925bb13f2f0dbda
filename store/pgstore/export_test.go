package pgstore

import "github.com/jackc/pgx/v5"

// SetCommitHooks installs test hooks around every write COMMIT: before runs
// just before it is sent (on the transaction's connection), after sees the
// round trip's error and returns the one Update acts on. Nil removes a hook.
// Call it before the store is used concurrently.
func SetCommitHooks(s *Store, before func(orgID string, conn *pgx.Conn), after func(orgID string, err error) error) {
	s.beforeCommit, s.afterCommit = before, after
}

// Waiting returns how many Updates of orgID wait in s's queue for a group.
func Waiting(s *Store, orgID string) int {
	q := s.queue(orgID)
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting)
}
