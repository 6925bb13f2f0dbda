package sharelink_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/sharelink"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// shared is an org with one gate decision to share: a 12,000 payment,
// which the starter policy BLOCKs in SHADOW.
type shared struct {
	engine    *clearance.Engine
	links     *sharelink.Service
	orgID     string
	dossierID string
	// now is the engine's clock; an example moves it.
	now   time.Time
	close func()
}

// newShared opens an engine over an in-memory Pebble store with a fixed
// share secret and a clock the example controls, and records the decision.
func newShared(ctx context.Context) (*shared, error) {
	backend, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		return nil, err
	}
	x := &shared{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC), close: func() { _ = backend.Close() }}
	if err := x.record(ctx, backend); err != nil {
		x.close()
		return nil, err
	}
	return x, nil
}

func (x *shared) record(ctx context.Context, backend *pebblestore.Store) error {
	lk, err := ledger.NewKey("example-ledger", bytes.Repeat([]byte{9}, 32))
	if err != nil {
		return err
	}
	engine, err := clearance.Open(backend, clearance.Options{
		Now:         func() time.Time { return x.now },
		ShareSecret: bytes.Repeat([]byte{7}, sharelink.MinShareSecretLen),
		LedgerKey:   lk,
	})
	if err != nil {
		return err
	}
	x.engine, x.links = engine, engine.ShareLinks
	org, err := engine.Admin.CreateOrg(ctx, "Acme")
	if err != nil {
		return err
	}
	x.orgID = org.Org.ID
	d, err := engine.Decide.Evaluate(ctx, decide.EvaluateRequest{OrgID: x.orgID, Route: decide.RouteActionGate,
		Body: []byte(`{"decision_type":"PAYMENT","workflow_key":"ap.invoice","amount":12000}`)})
	x.dossierID = d.DossierID
	return err
}

// check opens a link as the public verify route does and verifies its
// dossier; a refused link is its error code.
func (x *shared) check(ctx context.Context, l sharelink.ShareLink) string {
	opened, err := x.links.OpenShareLink(ctx, l.DossierID, l.Sig)
	if err != nil {
		var refused *clearance.Error
		if errors.As(err, &refused) {
			return refused.Code
		}
		return err.Error()
	}
	v, err := x.links.VerifySharedDossier(ctx, opened)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%s %s verified: %t (ledger entry %d)", v.Outcome, v.Mode, v.Verified, v.Ledger.Seq)
}

// proofBundle opens a link and asks for its proof packet; a refused link
// is its error code.
func (x *shared) proofBundle(ctx context.Context, l sharelink.ShareLink) string {
	opened, err := x.links.OpenShareLink(ctx, l.DossierID, l.Sig)
	if err == nil {
		_, err = x.links.SharedProofPacket(ctx, opened)
	}
	var refused *clearance.Error
	if errors.As(err, &refused) {
		return refused.Code
	}
	if err != nil {
		return err.Error()
	}
	return "served"
}
