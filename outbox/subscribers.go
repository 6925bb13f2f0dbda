package outbox

import (
	"context"
	"fmt"
)

// SubscriberTx is what a backend transaction keeps of the org's
// subscribers: the destinations its events are owed to. Backends keep
// whether there is any where the org's transaction has it at hand (read
// with the org's lock, or kept in memory by the only process that writes),
// so that Emit on a decision's path costs no read.
type SubscriberTx interface {
	// OutboxSubscribed reports whether the org has at least one
	// subscriber, as of this transaction.
	OutboxSubscribed(ctx context.Context) (bool, error)
	// SetOutboxSubscriber adds (on) or removes name, a name ValidName
	// accepts, from the org's subscribers; setting what is set already
	// changes nothing.
	SetOutboxSubscriber(ctx context.Context, name string, on bool) error
}

// Subscribe makes name (e.g. "webhook") a subscriber of the org's events,
// in tx: the events of every change committed after tx are owed.
func Subscribe(ctx context.Context, tx SubscriberTx, name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	return tx.SetOutboxSubscriber(ctx, name, true)
}

// Unsubscribe removes name from the org's subscribers, in tx. Once the
// org has none, Emit writes nothing.
func Unsubscribe(ctx context.Context, tx SubscriberTx, name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	return tx.SetOutboxSubscriber(ctx, name, false)
}

// ValidName reports why s cannot name an event or a subscriber: 1 to
// MaxNameLen bytes of [a-z0-9_.:-].
func ValidName(s string) error {
	if s == "" || len(s) > MaxNameLen {
		return fmt.Errorf("%w: name of %d bytes, want 1 to %d", ErrInvalid, len(s), MaxNameLen)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-') {
			return fmt.Errorf("%w: name byte %#02x at %d is not one of [a-z0-9_.:-]", ErrInvalid, c, i)
		}
	}
	return nil
}
