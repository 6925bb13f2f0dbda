package federation

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/golden"
)

var goldenAt = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

// goldenRecords is every record of this package whose canonical digest
// enters the ledger (the root's golden test lists them as pinned here),
// every optional member set.
var goldenRecords = []struct {
	name  string
	value func() any
}{
	{"issuer_trusted", func() any {
		return TrustedIssuer{Issuer: "https://a.example", Orgs: []string{"0190f4b2-0000-7000-8000-0000000000f1"}, JWKSURL: "https://a.example/.well-known/clearance-execution-grant-jwks.json",
			JWKS:      json.RawMessage(`{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"k1","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`),
			Audiences: []string{"https://b.example/federation/eu"}, MaxAgeSeconds: 3600,
			CreatedAt: goldenAt.Format(core.TimeFormat), UpdatedAt: goldenAt.Add(time.Minute).Format(core.TimeFormat)}
	}},
	{"issuer_removed", func() any {
		return IssuerRemoval{Issuer: "https://a.example", RemovedAt: goldenAt.Format(core.TimeFormat)}
	}},
}

// TestGoldenLedgerPayloads pins the RFC 8785 bytes of the records whose
// digest the ledger commits to (go test -run Golden -update).
func TestGoldenLedgerPayloads(t *testing.T) {
	for _, tc := range goldenRecords {
		t.Run(tc.name, func(t *testing.T) { golden.Check(t, tc.name, tc.value()) })
	}
}
