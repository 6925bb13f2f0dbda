package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance/idempotency"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
)

type refund struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// A request is answered once: the answer is remembered in the transaction
// that makes the change, a retry of the same request (same digest) gets it
// back, and the key reused for another request is refused.
func ExampleReplay() {
	ctx := context.Background()
	backend, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		panic(err)
	}
	defer backend.Close()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	// handle replays key or, on a first request, answers fresh and remembers it.
	handle := func(key, digest string, fresh refund) (refund, bool, error) {
		var got refund
		var replayed bool
		err := backend.Update(ctx, "org_1", func(tx store.Tx) error {
			got = refund{}
			ok, err := idempotency.Replay(ctx, tx, "create-refund", key, digest, &got)
			if replayed = ok; err != nil || ok {
				return err
			}
			got = fresh // the change itself would be written here, in the same tx
			return idempotency.Remember(ctx, tx, "create-refund", key, digest, fresh, at)
		})
		return got, replayed, err
	}

	first, replayed, err := handle("key-1", "sha256:aaa", refund{ID: "rf_1", Amount: 500})
	fmt.Println(first.ID, first.Amount, replayed, err)

	retry, replayed, err := handle("key-1", "sha256:aaa", refund{ID: "rf_2", Amount: 500})
	fmt.Println(retry.ID, retry.Amount, replayed, err)

	_, _, err = handle("key-1", "sha256:bbb", refund{ID: "rf_3", Amount: 900})
	var coded interface{ Code() string } // a refusal carries its machine code
	if errors.As(err, &coded) {
		fmt.Println(coded.Code(), errors.Is(err, idempotency.ErrKeyReused))
	}
	// Output:
	// rf_1 500 false <nil>
	// rf_1 500 true <nil>
	// IDEMPOTENCY_KEY_REUSED true
}
