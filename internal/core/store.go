package core

import (
	"context"
	"sync"
	"time"

	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
)

// Store is the backend as features write through it. Update refuses an org
// that was never created (ORG_NOT_FOUND, nothing written), so no entry
// point can start a ledger for an arbitrary org id, and marks the org as
// grown after each commit, so the sealer sees every writer.
type Store struct {
	store.Backend
	grown   *growth
	changed *orgSet
	known   *orgSet
}

// NewStore guards b.
func NewStore(b store.Backend) Store {
	return Store{Backend: b, grown: &growth{}, changed: &orgSet{}, known: &orgSet{}}
}

// Update runs fn in orgID's transaction once the org is known to exist. fn
// may run more than once (see store.Backend.Update).
func (s Store) Update(ctx context.Context, orgID string, fn func(tx store.Tx) error) error {
	if err := s.RequireOrg(ctx, orgID); err != nil {
		return err
	}
	return s.UpdateNew(ctx, orgID, fn)
}

// UpdateNew is Update without the existence check: only for the
// transaction that creates the org.
func (s Store) UpdateNew(ctx context.Context, orgID string, fn func(tx store.Tx) error) error {
	err := s.Backend.Update(ctx, orgID, fn)
	if err == nil {
		s.grown.add(orgID)
		s.changed.add(orgID)
	}
	return err
}

// RequireOrg returns nil when orgID names an existing org, else
// ORG_NOT_FOUND or STORE_UNAVAILABLE. Orgs are never deleted, so a positive
// answer is kept for good; a negative one never is, since another server on
// the same database may create the org a moment later.
func (s Store) RequireOrg(ctx context.Context, orgID string) error {
	if s.known.has(orgID) {
		return nil
	}
	if _, err := ReadOrg(ctx, s.Backend, orgID); err != nil {
		return err
	}
	s.known.add(orgID)
	return nil
}

// KnowOrg records that orgID exists (its creation committed).
func (s Store) KnowOrg(orgID string) { s.known.add(orgID) }

// MarkGrown notes that orgID's ledger may have grown; for an org taken by
// TakeGrown, that its seal failed (it keeps the time it first grew).
func (s Store) MarkGrown(orgID string) { s.grown.putBack(orgID) }

// TakeGrown returns and forgets the orgs whose ledgers grew since the last
// call. They count as unsealed (OldestUnsealed) until Sealed or MarkGrown.
func (s Store) TakeGrown() []string { return s.grown.take() }

// Sealed notes that an org TakeGrown returned was sealed.
func (s Store) Sealed(orgID string) { s.grown.sealed(orgID) }

// OldestUnsealed returns when the longest-waiting org whose ledger grew
// through this Store first grew since its last seal; false when none waits.
func (s Store) OldestUnsealed() (time.Time, bool) { return s.grown.oldest() }

// TakeChanged returns and forgets the orgs written since the last call: a
// second set beside TakeGrown's, for the analytics rollups.
func (s Store) TakeChanged() []string { return s.changed.take() }

// MarkChanged puts orgID back among the changed orgs (a rollup that
// failed).
func (s Store) MarkChanged(orgID string) { s.changed.add(orgID) }

// ReadOrg reads an org: ORG_NOT_FOUND for an id that is not a UUID or not
// stored, STORE_UNAVAILABLE when the store fails.
func ReadOrg(ctx context.Context, r store.Reader, orgID string) (tenant.Org, error) {
	if !ValidID(orgID) {
		return tenant.Org{}, New(ErrNotFound, CodeOrgNotFound, "organization not found")
	}
	o, err := r.Org(ctx, orgID)
	if IsNotFound(err) {
		return tenant.Org{}, New(ErrNotFound, CodeOrgNotFound, "organization not found")
	}
	if err != nil {
		return tenant.Org{}, Unavailable("read org", err)
	}
	return o, nil
}

// growth is the set of orgs whose ledgers grew and are not sealed yet,
// with when each first grew, and those being sealed. Safe for concurrent
// use.
type growth struct {
	mu      sync.RWMutex
	grown   map[string]time.Time // org -> when it first grew since its seal
	sealing map[string]time.Time // taken by take, not yet sealed
}

// add is on every write's path: an org already in the set costs a read
// lock and no allocation.
func (g *growth) add(org string) {
	g.mu.RLock()
	_, ok := g.grown[org]
	g.mu.RUnlock()
	if ok {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.grown[org]; ok {
		return
	}
	if g.grown == nil {
		g.grown = map[string]time.Time{}
	}
	g.grown[org] = time.Now()
}

// take moves the grown orgs to the ones being sealed and returns them.
func (g *growth) take() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]string, 0, len(g.grown))
	for org, at := range g.grown {
		out = append(out, org)
		if g.sealing == nil {
			g.sealing = map[string]time.Time{}
		}
		if prev, ok := g.sealing[org]; !ok || at.Before(prev) {
			g.sealing[org] = at
		}
	}
	clear(g.grown)
	return out
}

// putBack returns an org to the grown ones with the earlier of the times
// it has: as taken (a seal that failed), or grown again since.
func (g *growth) putBack(org string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	at, ok := g.sealing[org]
	delete(g.sealing, org)
	if !ok {
		at = time.Now()
	}
	if g.grown == nil {
		g.grown = map[string]time.Time{}
	}
	if prev, ok := g.grown[org]; !ok || at.Before(prev) {
		g.grown[org] = at
	}
}

func (g *growth) sealed(org string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.sealing, org)
}

func (g *growth) oldest() (time.Time, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	var first time.Time
	for _, m := range []map[string]time.Time{g.grown, g.sealing} {
		for _, at := range m {
			if first.IsZero() || at.Before(first) {
				first = at
			}
		}
	}
	return first, !first.IsZero()
}

// orgSet is a set of org ids safe for concurrent use.
type orgSet struct {
	mu   sync.RWMutex
	orgs map[string]struct{}
}

// add is on every write's path: an org already in the set costs a read
// lock and no allocation.
func (s *orgSet) add(org string) {
	if s.has(org) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.orgs == nil {
		s.orgs = map[string]struct{}{}
	}
	s.orgs[org] = struct{}{}
}

func (s *orgSet) has(org string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.orgs[org]
	return ok
}

// take returns and forgets the orgs in the set.
func (s *orgSet) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.orgs))
	for org := range s.orgs {
		out = append(out, org)
	}
	clear(s.orgs)
	return out
}
