package core

import (
	"context"
	"log/slog"
	"time"

	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/secretbox"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
)

// Deps is what every feature's New receives: the kernel's services, shared
// by all features of one engine. A feature's own settings come beside it.
type Deps struct {
	Store  Store // org-guarded: writes to an unknown org are refused
	Clock  Clock
	IDs    IDs
	Logger *slog.Logger
	Keys   *Keys  // grant signing keys in use
	Issuer string // iss of every token and origin of every ledger
	// LedgerKey signs checkpoints; nil: checkpoints and proofs answer 503.
	LedgerKey *ledger.Key
	// MaxClockSkew is how far ahead of Clock a presented timestamp may be.
	MaxClockSkew time.Duration
	// Secrets seals secrets kept for use again; nil when the engine has no
	// secrets key (features that need one answer 503).
	Secrets *secretbox.Box
	// JSON are the strict-decoding options of request JSON (unknown members
	// refused, members and elements bounded).
	JSON strictjson.Options
	// Tracer starts the spans of policy evaluation and signing; the zero
	// Tracer makes none.
	Tracer Tracer
}

// Now is Clock.Now.
func (d Deps) Now() time.Time { return d.Clock.Now() }

// AppendRecord ledgers a change whose stored form is v: the entry's
// payload digest is SHA-256 of v's canonical JSON.
func AppendRecord(ctx context.Context, tx store.Tx, kind, subject string, v any, at time.Time) error {
	d, err := canon.DigestValue(v)
	if err != nil {
		return err
	}
	_, err = ledger.Append(ctx, tx, tx.OrgID(), ledger.Record{Kind: kind, SubjectID: subject, PayloadDigest: d}, at)
	return err
}
