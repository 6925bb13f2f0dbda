package artifact

import (
	"context"
	"encoding/json"
	"time"

	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/ledger"
)

// LedgeredTx is what recording a ledgered artifact needs from a backend
// transaction of one org.
type LedgeredTx interface {
	Tx
	ledger.Tx
	OrgID() string
}

// RecordLedgered stores v as the org's artifact (kind, id, ref) and ledgers
// it with an entry of ledgerKind whose payload digest is SHA-256 of the
// stored body. *seq is set to that entry's seq before v is canonicalized,
// so the stored body names its own entry and the entry carries the body's
// digest (as a dossier and its entry do). Nothing is written unless the
// transaction commits.
func RecordLedgered(ctx context.Context, tx LedgeredTx, kind, id, ref, ledgerKind string, at time.Time, seq *uint64, v any) error {
	head, err := tx.LedgerHead(ctx)
	if err != nil {
		return err
	}
	*seq = head.Seq + 1
	body, err := canon.Marshal(v)
	if err != nil {
		return err
	}
	if err := tx.PutArtifact(ctx, Record{OrgID: tx.OrgID(), Kind: kind, ID: id, Ref: ref, CreatedAt: at, Body: body}); err != nil {
		return err
	}
	_, err = ledger.Append(ctx, tx, tx.OrgID(), ledger.Record{Kind: ledgerKind, SubjectID: id, PayloadDigest: canon.Digest(body)}, at)
	return err
}

// List decodes the org's artifacts of kind under ref into *out (never nil),
// oldest first, at most max of them; it reports whether more exist.
func List[T any](ctx context.Context, r Reader, orgID, kind, ref string, max int, out *[]T) (bool, error) {
	recs, err := r.ArtifactsByRef(ctx, orgID, kind, ref, max+1)
	if err != nil {
		return false, err
	}
	truncated := len(recs) > max
	if truncated {
		recs = recs[:max]
	}
	*out = make([]T, len(recs))
	for i, rec := range recs {
		if err := json.Unmarshal(rec.Body, &(*out)[i]); err != nil {
			return false, err
		}
	}
	return truncated, nil
}
