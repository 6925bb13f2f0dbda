package signals

import (
	"strings"
	"testing"

	"github.com/clearancehq/clearance/internal/golden"
)

func goldenDigest(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }

// goldenRecords is every record of this package whose canonical digest
// enters the ledger (the root's golden test lists them as pinned here).
var goldenRecords = []struct {
	name  string
	value func() any
}{
	{"signal_connector", func() any { // signal_connector.created and .revoked
		return connectorEvent{ConnectorID: "0190f4b2-0000-7000-8000-0000000000c1", Name: "fraud feed", RequireSignature: true,
			Status: StatusRevoked, At: "2026-03-01T12:00:00.123456789Z"}
	}},
	{"signals_received", func() any {
		return delivery{DeliveryID: "0190f4b2-0000-7000-8000-0000000000f1", ConnectorID: "0190f4b2-0000-7000-8000-0000000000c1",
			WebhookID: "msg_1", Signed: true, BodyDigest: goldenDigest('1'), ReceivedAt: "2026-03-01T12:00:00.123456789Z",
			Events: []eventRef{{EventID: "0190f4b2-0000-7000-8000-0000000000f2", Type: "fraud.alert",
				Timestamp: "2026-03-01T11:59:00Z", DataDigest: goldenDigest('2')}}}
	}},
}

// TestGoldenLedgerPayloads pins the RFC 8785 bytes of the records whose
// digest the ledger commits to (go test -run Golden -update).
func TestGoldenLedgerPayloads(t *testing.T) {
	for _, tc := range goldenRecords {
		t.Run(tc.name, func(t *testing.T) { golden.Check(t, tc.name, tc.value()) })
	}
}
