package clearance

import (
	"context"
	"sync"

	"github.com/clearancehq/clearance/store"
)

// engineBackend is the backend as the Engine writes through it. Update
// refuses an org that was never created (ORG_NOT_FOUND, nothing written),
// so no entry point can start a ledger for an arbitrary org id, and marks
// the org as grown after each commit, so the sealer sees every writer.
type engineBackend struct {
	store.Backend
	grown *grownOrgs
	known *knownOrgs
}

// Update runs fn in orgID's transaction once the org is known to exist.
func (b engineBackend) Update(ctx context.Context, orgID string, fn func(tx store.Tx) error) error {
	if err := b.known.require(ctx, b.Backend, orgID); err != nil {
		return err
	}
	return b.updateNew(ctx, orgID, fn)
}

// updateNew is Update without the existence check: only for CreateOrg,
// whose transaction is the one that creates the org.
func (b engineBackend) updateNew(ctx context.Context, orgID string, fn func(tx store.Tx) error) error {
	err := b.Backend.Update(ctx, orgID, fn)
	if err == nil {
		b.grown.mark(orgID)
	}
	return err
}

// knownOrgs remembers the orgs known to exist. Orgs are never deleted, so a
// positive answer holds for good and the hot path reads the store once per
// org; a negative one is never kept, since another server on the same
// database may create the org a moment later.
type knownOrgs struct{ m sync.Map }

func (k *knownOrgs) add(orgID string) { k.m.Store(orgID, struct{}{}) }

// require returns nil when orgID names an existing org, else the coded
// error of Engine.Org (ORG_NOT_FOUND, or STORE_UNAVAILABLE).
func (k *knownOrgs) require(ctx context.Context, r store.Reader, orgID string) error {
	if _, ok := k.m.Load(orgID); ok {
		return nil
	}
	if _, err := readOrg(ctx, r, orgID); err != nil {
		return err
	}
	k.add(orgID)
	return nil
}
