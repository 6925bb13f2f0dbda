package escalation

import (
	"strings"
	"testing"
	"time"

	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/golden"
)

var goldenAt = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

func goldenDigest(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }

// goldenRecords is every record of this package whose canonical digest
// enters the ledger (the root's golden test lists them as pinned here).
var goldenRecords = []struct {
	name  string
	value func() any
}{
	{"escalation_transition", func() any {
		return transition{EscalationID: "0190f4b2-0000-7000-8000-0000000000e1", State: StateGrantReady, Reason: ReasonApproverDenied,
			At: goldenAt.Format(core.TimeFormat), RequestID: "req_1", IntentHash: goldenDigest('1'),
			DecisionID: "0190f4b2-0000-7000-8000-0000000000d2", Deadline: goldenAt.Add(DefaultTTL).Format(core.TimeFormat),
			Approval: &approvalRef{Issuer: "https://approvals.example", RequestID: "req_1", ReceiptID: "rct_1",
				Approver: "ana@example.com", Presence: "webauthn-uv", DecidedAt: goldenAt.Truncate(time.Second)},
			ResolvedDecisionID: "0190f4b2-0000-7000-8000-0000000000d4", GrantID: "0190f4b2-0000-7000-8000-0000000000a1", LedgerSeq: 45}
	}},
	{"approval_used", func() any {
		return receiptUse{Issuer: "https://approvals.example", ReceiptID: "rct_1", RequestID: "req_1", IntentHash: goldenDigest('1'),
			EscalationID: "0190f4b2-0000-7000-8000-0000000000e1", LedgerSeq: 46}
	}},
}

// TestGoldenLedgerPayloads pins the RFC 8785 bytes of the records whose
// digest the ledger commits to (go test -run Golden -update).
func TestGoldenLedgerPayloads(t *testing.T) {
	for _, tc := range goldenRecords {
		t.Run(tc.name, func(t *testing.T) { golden.Check(t, tc.name, tc.value()) })
	}
}
