package pebblestore

import (
	"context"
	"fmt"

	"github.com/clearancehq/clearance/outbox"
)

// Outbox subscribers live under "o <org> w <name>" (empty values). How
// many an org has is kept in memory (org.subscribers) once an Update has
// counted them: this process is the database's only writer, so the count
// stays exact, and a decision learns whether it owes an event without a
// read.

func subscriberKey(orgID, name string) []byte {
	return append(orgPrefix(orgID, subSubscriber, len(name)), name...)
}

// OutboxSubscribed implements store.Tx.
func (t *tx) OutboxSubscribed(ctx context.Context) (bool, error) {
	if err := t.lock(ctx); err != nil {
		return false, err
	}
	defer t.mu.Unlock()
	n, err := t.subscriberCount()
	return n > 0, err
}

// SetOutboxSubscriber implements store.Tx.
func (t *tx) SetOutboxSubscriber(ctx context.Context, name string, on bool) error {
	if err := outbox.ValidName(name); err != nil {
		return err
	}
	if err := t.lock(ctx); err != nil {
		return err
	}
	defer t.mu.Unlock()
	n, err := t.subscriberCount()
	if err != nil {
		return err
	}
	key := subscriberKey(t.org, name)
	set, err := has(t.b, key)
	switch {
	case err != nil:
		return err
	case on && !set:
		err, n = t.b.Set(key, nil, nil), n+1
	case !on && set:
		err, n = t.b.Delete(key, nil), n-1
	default:
		return nil
	}
	if err != nil {
		return fmt.Errorf("pebblestore: write: %w", err)
	}
	t.subscribers, t.subscribersSet = n, true
	return nil
}

// subscriberCount returns how many subscribers the org has as of t,
// counting them the first time; the caller holds t.mu.
func (t *tx) subscriberCount() (int, error) {
	if t.subscribersSet {
		return t.subscribers, nil
	}
	o := t.state
	if !o.subscribersKnown {
		prefix := orgPrefix(t.org, subSubscriber, 0)
		n := 0
		if err := scan(t.b, prefix, upperBound(prefix), func(_, _ []byte) (bool, error) { n++; return true, nil }); err != nil {
			return 0, err
		}
		// Read under the org's mutex: nothing else writes them meanwhile.
		o.subscribers, o.subscribersKnown = n, true
	}
	return o.subscribers, nil
}
