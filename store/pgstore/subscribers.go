package pgstore

import (
	"context"
	"fmt"

	"github.com/clearancehq/clearance/outbox"
)

// selectSubscribed is read with the org's lock (lockOrg).
const selectSubscribed = `SELECT EXISTS (SELECT 1 FROM outbox_subscribers WHERE org_id = $1)`

// OutboxSubscribed implements store.Tx: as read with the org's lock and
// kept as the transaction subscribes and unsubscribes.
func (t *tx) OutboxSubscribed(ctx context.Context) (bool, error) {
	if err := t.lock(ctx); err != nil {
		return false, err
	}
	defer t.mu.Unlock()
	return t.orgNow.subscribed, nil
}

// SetOutboxSubscriber implements store.Tx.
func (t *tx) SetOutboxSubscriber(ctx context.Context, name string, on bool) error {
	if err := outbox.ValidName(name); err != nil {
		return err
	}
	if on {
		if err := t.queue(ctx, wrapped("add outbox subscriber"),
			`INSERT INTO outbox_subscribers (org_id, name) VALUES ($1, $2) ON CONFLICT DO NOTHING`, t.org, name); err != nil {
			return err
		}
		t.mu.Lock()
		t.orgNow.subscribed = true
		t.mu.Unlock()
		return nil
	}
	if err := t.queue(ctx, wrapped("remove outbox subscriber"),
		`DELETE FROM outbox_subscribers WHERE org_id = $1 AND name = $2`, t.org, name); err != nil {
		return err
	}
	if err := t.lock(ctx); err != nil { // sends the delete
		return err
	}
	defer t.mu.Unlock()
	var some bool
	if err := t.conn.QueryRow(t.ctx, selectSubscribed, t.org).Scan(&some); err != nil {
		return fmt.Errorf("pgstore: read outbox subscribers: %w", err)
	}
	t.orgNow.subscribed = some
	return nil
}
