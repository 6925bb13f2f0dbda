package connector

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/clearancehq/clearance/admin"
	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/onboarding"
	"github.com/clearancehq/clearance/policies"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/webhook"
)

// Config is the features the connector orchestrates.
type Config struct {
	// Accounts resolves the owner's account session and its workspaces.
	Accounts *onboarding.Service
	// Admin issues and revokes the automation credentials.
	Admin *admin.Service
	// InstallStarter installs the starter policy (SHADOW) for an org with
	// no policy of its own, and does nothing otherwise.
	InstallStarter func(ctx context.Context, orgID string) (policies.InstalledStarter, error)
	// Webhooks delivers decision.resolved to the callback URLs.
	Webhooks *webhook.Service
}

// Service is the automation connector. Create it with New.
type Service struct {
	d   core.Deps
	cfg Config
}

// New returns the connector over d.
func New(d core.Deps, cfg Config) *Service { return &Service{d: d, cfg: cfg} }

// readRecord decodes the transaction org's record (kind, id) into v.
func readRecord(ctx context.Context, tx store.Tx, kind, id string, v any) error {
	r, err := tx.ArtifactInTx(ctx, kind, id)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(r.Body, v); err != nil {
		return fmt.Errorf("connector: %s %s does not decode: %w", kind, id, err)
	}
	return nil
}

// writeRecord stores v as the transaction org's record (kind, id).
func writeRecord(ctx context.Context, tx store.Tx, kind, id string, at time.Time, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return tx.PutArtifact(ctx, artifact.Record{OrgID: tx.OrgID(), Kind: kind, ID: id, CreatedAt: at, Body: body})
}

// readCommitted decodes the committed record (kind, id) of org into v.
func readCommitted(ctx context.Context, r artifact.Reader, org, kind, id string, v any) error {
	rec, err := r.Artifact(ctx, org, kind, id)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(rec.Body, v); err != nil {
		return fmt.Errorf("connector: %s %s does not decode: %w", kind, id, err)
	}
	return nil
}
