package federation

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/outbound"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
	"github.com/clearancehq/clearance/tenant"
)

// A trust entry stored before orgs were required trusts no org: an
// envelope of its issuer, validly signed, is refused and says how to fix
// the entry; reads answer orgs: []. Put again with the org, it verifies.
func TestLegacyEntryTrustsNoOrg(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	b, err := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem(), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	d := core.Deps{Store: core.NewStore(b), Clock: func() time.Time { return now }, Logger: slog.New(slog.DiscardHandler),
		Issuer: "https://b.example"}
	s := New(d, Config{Client: outbound.New(outbound.Options{})})
	const orgB, orgA = "0190f4b2-0000-7000-8000-0000000000b1", "0190f4b2-0000-7000-8000-0000000000a1"
	k := key(t, 1)
	jwks, _ := json.Marshal(map[string]any{"keys": []any{k.PublicJWK()}})
	legacy, _ := json.Marshal(map[string]any{"issuers": []any{map[string]any{"issuer": "https://a.example", "jwks": json.RawMessage(jwks),
		"created_at": core.Format(now), "updated_at": core.Format(now)}}})
	err = d.Store.UpdateNew(ctx, orgB, func(tx store.Tx) error {
		o := tenant.Org{ID: orgB, Name: "B", CreatedAt: now}
		if err := tx.PutOrg(ctx, o); err != nil {
			return err
		}
		if err := core.AppendRecord(ctx, tx, ledger.KindOrgCreated, orgB, o, now); err != nil {
			return err
		}
		return tx.PutArtifact(ctx, artifact.Record{OrgID: orgB, Kind: trustKind, ID: trustID, CreatedAt: now, Body: legacy})
	})
	if err != nil {
		t.Fatal(err)
	}
	d.Store.KnowOrg(orgB)

	e, err := s.Issuer(ctx, orgB, "https://a.example")
	if err != nil || e.Orgs == nil || len(e.Orgs) != 0 {
		t.Fatalf("a legacy entry reads as %+v, %v; want orgs: []", e, err)
	}
	in, _ := policy.Intent{DecisionType: "PAYMENT", WorkflowKey: "payouts"}.Input(now)
	digest, err := IntentDigest(&in)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := grant.MintFederatedDecision(k, grant.FederatedDecision{Issuer: "https://a.example", Audience: s.Audience(orgB),
		OrgID: orgA, ID: "e1", IssuedAt: now.Unix(), Expiry: now.Add(time.Minute).Unix(), DecisionID: "d1", DossierID: "s1",
		DossierDigest: "sha256:" + strings.Repeat("a", 64), LedgerSeq: 3, DecidedAt: core.Format(now), Outcome: "ALLOW",
		Mode: "ENFORCEMENT", PolicyVersion: "v1", BundleDigest: "sha256:" + strings.Repeat("b", 64),
		IntentDigest: digest, IntentProfile: IntentProfile})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Verify(ctx, orgB, []string{jws}, in)
	var ce *core.Error
	if !errors.As(err, &ce) || ce.Code != CodeFederatedDecisionInvalid || !strings.Contains(ce.Detail, "names no issuing org") {
		t.Fatalf("an envelope under a legacy entry: %v", err)
	}

	if _, _, err := s.PutIssuer(ctx, orgB, "https://a.example", []byte(`{"orgs":["`+orgA+`"],"jwks":`+string(jwks)+`}`)); err != nil {
		t.Fatal(err)
	}
	seen, rec, err := s.Verify(ctx, orgB, []string{jws}, in)
	if err != nil || len(seen) != 1 || seen[0].Org != orgA || seen[0].BundleDigest != "sha256:"+strings.Repeat("b", 64) ||
		rec[0].Org != orgA || !seen[0].MatchesIntent {
		t.Fatalf("the entry put again with the org: %+v %+v %v", seen, rec, err)
	}
}
