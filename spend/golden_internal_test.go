package spend

import (
	"testing"

	"github.com/clearancehq/clearance/internal/golden"
	"github.com/clearancehq/clearance/policy"
)

// goldenRecords is every record of this package whose canonical digest
// enters the ledger (the root's golden test lists them as pinned here).
var goldenRecords = []struct {
	name  string
	value func() any
}{
	{"reservation", func() any { // spend.reserved and spend.settled
		return Reservation{GrantID: "0190f4b2-0000-7000-8000-0000000000g1", State: Held,
			Charges: []Charge{{GateID: "refunds.daily", PartitionRef: "5f1d4c2ab0e1c7a4f6c3b2d1e0f9a8b7", Currency: "EUR", Window: policy.WindowDay,
				WindowStart: "2026-03-01T00:00:00Z", Amount: 1250_500000}},
			ReservedAt: "2026-03-01T12:00:00.123456789Z", SettledAt: "2026-03-01T12:01:00Z"}
	}},
}

// TestGoldenLedgerPayloads pins the RFC 8785 bytes of the records whose
// digest the ledger commits to (go test -run Golden -update).
func TestGoldenLedgerPayloads(t *testing.T) {
	for _, tc := range goldenRecords {
		t.Run(tc.name, func(t *testing.T) { golden.Check(t, tc.name, tc.value()) })
	}
}
