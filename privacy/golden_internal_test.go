package privacy

import (
	"testing"

	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/golden"
)

// goldenRecords is every record of this package whose canonical digest
// enters the ledger (the root's golden test lists them as pinned here).
var goldenRecords = []struct {
	name  string
	value func() any
}{
	{"data_protection_set", func() any {
		return Setting{OrgID: "0190f4b2-0000-7000-8000-00000000000a", Subject: "/actor/id",
			Personal:  []string{"/context/customer/email", "/context/customer/name"},
			UpdatedAt: "2026-03-01T12:00:00.123456789Z", LedgerSeq: 7}
	}},
	{"subject_erased", func() any {
		return ReceiptPayload{Aud: grant.AudErasureReceipt, Iss: "clearance", Profile: ReceiptProfile,
			ReceiptID: "0190f4b2-0000-7000-8000-0000000000e5", OrgID: "0190f4b2-0000-7000-8000-00000000000a",
			Scope: ScopeSubject, SubjectRef: "5f1b0c4e9d2a7f3b8c6e1d0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c",
			RequestedBy: Requester{CredentialID: "key_1", CredentialKind: "org"}, ErasedAt: "2026-03-01T12:00:00.123456789Z",
			KeysDestroyed: []string{"0190f4b2-0000-7000-8000-0000000000k1"}, DossiersAffected: 2,
			StoresTouched: []string{storeSubjectKeys, storeDossiers}, LedgerSeq: 9,
			LedgerOrigin:      "clearance/ledger/0190f4b2-0000-7000-8000-00000000000a",
			LedgerVerifierKey: "clearance-ledger+223c2015+AZJzCPU9Z2VQPStkwQOrWqRyBqs5UCz+j5hEL9tUMQC3"}
	}},
}

// TestGoldenLedgerPayloads pins the RFC 8785 bytes of the records whose
// digest the ledger commits to (go test -run Golden -update).
func TestGoldenLedgerPayloads(t *testing.T) {
	for _, tc := range goldenRecords {
		t.Run(tc.name, func(t *testing.T) { golden.Check(t, tc.name, tc.value()) })
	}
}
