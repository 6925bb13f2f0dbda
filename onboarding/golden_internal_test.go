package onboarding

import (
	"testing"

	"github.com/clearancehq/clearance/internal/golden"
)

// goldenRecords is every record of this package whose canonical digest
// enters the ledger (the root's golden test lists them as pinned here).
var goldenRecords = []struct {
	name  string
	value func() any
}{
	{"bundle_issued", func() any {
		return bundleEvent{SessionID: "0190f4b2-0000-7000-8000-0000000000b1", KeyID: "0190f4b2-0000-7000-8000-0000000000k1",
			ConnectorID: "0190f4b2-0000-7000-8000-0000000000c1", ProviderKey: "stripe", WorkflowKey: "ap.invoice",
			SourceLabel: "Stripe payouts", GrantsRevoked: []string{"0190f4b2-0000-7000-8000-0000000000k2"},
			At: "2026-03-01T12:00:00.123456789Z"}
	}},
	{"workspace_provisioned", func() any {
		return provisionedEvent{KeyID: "0190f4b2-0000-7000-8000-0000000000k3", Scopes: ProvisionalScopes,
			KeyExpiresAt: "2026-03-04T12:00:00.123456789Z", ClaimExpiresAt: "2026-03-04T12:00:00.123456789Z",
			At: "2026-03-01T12:00:00.123456789Z"}
	}},
	{"workspace_claimed", func() any {
		return claimedEvent{AccountID: "0190f4b2-0000-7000-8000-0000000000a1", KeyID: "0190f4b2-0000-7000-8000-0000000000k4",
			At: "2026-03-02T12:00:00.123456789Z"}
	}},
}

// TestGoldenLedgerPayloads pins the RFC 8785 bytes of the records whose
// digest the ledger commits to (go test -run Golden -update).
func TestGoldenLedgerPayloads(t *testing.T) {
	for _, tc := range goldenRecords {
		t.Run(tc.name, func(t *testing.T) { golden.Check(t, tc.name, tc.value()) })
	}
}
