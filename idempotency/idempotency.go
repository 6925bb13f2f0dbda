// Package idempotency is the one rule of Idempotency-Keys: a key names one
// request within a scope of an org; the first answer is recorded in the
// same transaction as the change it answers, and a retry of the same
// request (same digest) gets that answer back, while the key reused for
// another request is refused.
//
// The rule is written once, as free functions over a Tx its consumer
// declares (every store.Tx is one). It reads no clock: the caller passes
// the time a record is made.
package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/clearancehq/clearance/internal/coded"
)

// Record remembers the answer given to one key.
type Record struct {
	OrgID         string    `json:"org_id"`
	Scope         string    `json:"scope"` // the operation the key was used for
	Key           string    `json:"key"`
	RequestDigest string    `json:"request_digest"`
	Response      []byte    `json:"response"`
	CreatedAt     time.Time `json:"created_at"`
}

// Tx is what the rule needs from a backend transaction of one org.
type Tx interface {
	OrgID() string
	// Idempotency returns the record of key in scope; when there is none
	// the error wraps ErrNotFound.
	Idempotency(ctx context.Context, scope, key string) (Record, error)
	PutIdempotency(ctx context.Context, r Record) error
}

// CodeKeyReused is the code of ErrKeyReused.
const CodeKeyReused = "IDEMPOTENCY_KEY_REUSED"

var (
	// ErrNotFound is what a backend's Idempotency lookup wraps (besides its
	// own not-found) when the key has no record: a storage signal.
	ErrNotFound = errors.New("idempotency: no record")
	// ErrKeyReused: the key already answered another request of the scope
	// (returned as a coded error, CodeKeyReused).
	ErrKeyReused = errors.New("Idempotency-Key was already used with a different request body")
)

// Replay looks key up in scope. The recorded answer to the same request
// (requestDigest) is decoded into *out and reported with true; a key that
// answered another request is refused (ErrKeyReused, CodeKeyReused). An empty key never replays.
func Replay(ctx context.Context, tx Tx, scope, key, requestDigest string, out any) (bool, error) {
	if key == "" {
		return false, nil
	}
	prev, err := tx.Idempotency(ctx, scope, key)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if prev.RequestDigest != requestDigest {
		return false, coded.Of(CodeKeyReused, ErrKeyReused)
	}
	if err := json.Unmarshal(prev.Response, out); err != nil {
		return false, err
	}
	return true, nil
}

// Remember records v (as JSON) as the answer to key in scope, made at at;
// nothing for an empty key. Call it in the transaction that makes the
// change v answers, so the answer and the change commit together.
func Remember(ctx context.Context, tx Tx, scope, key, requestDigest string, v any, at time.Time) error {
	if key == "" {
		return nil
	}
	resp, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return tx.PutIdempotency(ctx, Record{OrgID: tx.OrgID(), Scope: scope, Key: key,
		RequestDigest: requestDigest, Response: resp, CreatedAt: at})
}
