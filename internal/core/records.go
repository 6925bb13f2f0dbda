package core

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/store"
)

// Features keep small records of their own as JSON artifacts of an org
// (sign-up codes, accounts, clients): these read and write them.

// ReadRecord decodes the transaction org's artifact (kind, id) into v; a
// missing one is the store's not-found error.
func ReadRecord(ctx context.Context, tx store.Tx, kind, id string, v any) error {
	r, err := tx.ArtifactInTx(ctx, kind, id)
	if err != nil {
		return err
	}
	return decodeRecord(r, v)
}

// WriteRecord stores v as the transaction org's artifact (kind, id).
func WriteRecord(ctx context.Context, tx store.Tx, kind, id string, at time.Time, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return tx.PutArtifact(ctx, artifact.Record{OrgID: tx.OrgID(), Kind: kind, ID: id, CreatedAt: at, Body: body})
}

// ReadCommitted decodes the committed artifact (kind, id) of org into v.
func ReadCommitted(ctx context.Context, r artifact.Reader, org, kind, id string, v any) error {
	rec, err := r.Artifact(ctx, org, kind, id)
	if err != nil {
		return err
	}
	return decodeRecord(rec, v)
}

func decodeRecord(r artifact.Record, v any) error {
	if err := json.Unmarshal(r.Body, v); err != nil {
		return fmt.Errorf("record %s %s does not decode: %w", r.Kind, r.ID, err)
	}
	return nil
}
