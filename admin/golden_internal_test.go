package admin

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/golden"
	"github.com/clearancehq/clearance/registry"
	"github.com/clearancehq/clearance/tenant"
)

var (
	goldenAt  = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	goldenOrg = "0190f4b2-0000-7000-8000-00000000000a"
)

func goldenKey(status registry.Status) registry.Key {
	return registry.Key{OrgID: goldenOrg, Kind: registry.KindAgent, KID: "agent-key-1", Issuer: "https://agents.example",
		PublicJWK: json.RawMessage(`{"crv":"Ed25519","kid":"agent-key-1","kty":"OKP","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}`),
		PublicKey: bytes.Repeat([]byte{7}, 32), Status: status, CreatedAt: goldenAt, UpdatedAt: goldenAt}
}

// goldenRecords is every record of this package whose canonical digest
// enters the ledger (the root's golden test lists them as pinned here).
var goldenRecords = []struct {
	name  string
	value func() any
}{
	{"org_created", func() any { return tenant.Org{ID: goldenOrg, Name: "Acme Payments", CreatedAt: goldenAt} }},
	{"api_key_created", func() any {
		return keyRecord{KeyID: "0190f4b2-0000-7000-8000-0000000000k1", OrgID: goldenOrg, Kind: tenant.KindOrg,
			Scopes: []tenant.Scope{tenant.ScopeOrgAll, tenant.ScopeDecisionRead}, CreatedAt: goldenAt.Format(core.TimeFormat)}
	}},
	{"api_key_created_onboarding", func() any {
		return keyRecord{KeyID: "0190f4b2-0000-7000-8000-0000000000k2", OrgID: goldenOrg, Kind: tenant.KindOnboarding,
			Scopes: []tenant.Scope{}, CreatedAt: goldenAt.Format(core.TimeFormat), ExpiresAt: goldenAt.Add(30 * time.Minute).Format(core.TimeFormat)}
	}},
	{"credentials_revoked", func() any {
		return credentialsRevoked{KeyIDs: []string{"0190f4b2-0000-7000-8000-0000000000k1", "0190f4b2-0000-7000-8000-0000000000k2"},
			By: "0190f4b2-0000-7000-8000-0000000000a1", ReplacementID: "0190f4b2-0000-7000-8000-0000000000k3",
			At: goldenAt.Format(core.TimeFormat)}
	}},
	{"key_registered", func() any { return keyEventOf(goldenKey(registry.StatusActive)) }},
	{"key_revoked", func() any {
		k := goldenKey(registry.StatusRevoked)
		k.RevokedAt = &goldenAt
		return keyEventOf(k)
	}},
}

// TestGoldenLedgerPayloads pins the RFC 8785 bytes of the records whose
// digest the ledger commits to: changing them changes what old entries
// verify against, so it must be a visible change of testdata/golden
// (go test -run Golden -update). A file holds exactly the canonical bytes.
func TestGoldenLedgerPayloads(t *testing.T) {
	for _, tc := range goldenRecords {
		t.Run(tc.name, func(t *testing.T) { golden.Check(t, tc.name, tc.value()) })
	}
}
