package execution

import (
	"strings"
	"testing"
	"time"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/golden"
)

var (
	goldenAt    = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	goldenGrant = "0190f4b2-0000-7000-8000-0000000000a1"
)

func goldenDigest(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }

func goldenEvidence() (*claim.Evidence, *claim.Receipt) {
	return &claim.Evidence{Kind: "payment", Status: "CONFIRMED", EffectDigest: goldenDigest('e'), Source: "effect_receipt"},
		&claim.Receipt{Profile: "VP-3", Token: "eyJhbGciOiJFZERTQSJ9.e30.c2ln", KID: "psp-1", Issuer: "https://psp.example",
			EffectDigest: goldenDigest('e'), Outcome: "COMMITTED", Verified: false, Reason: "unknown kid"}
}

// goldenRecords is every record of this package whose canonical digest
// enters the ledger (the root's golden test lists them as pinned here).
var goldenRecords = []struct {
	name  string
	value func() any
}{
	{"claimed", func() any {
		return claimEvent{goldenGrant, goldenDigest('6'), goldenAt.Format(core.TimeFormat), goldenAt.Add(30 * time.Second).Format(core.TimeFormat), "corr-1"}
	}},
	{"finalized", func() any {
		ev, rc := goldenEvidence()
		return finalEvent{goldenGrant, claim.StateCommitted, "CLAIM_LEASE_EXPIRED", goldenAt.Format(core.TimeFormat), true, ev, rc}
	}},
	{"finalized_lapsed", func() any {
		return finalEvent{GrantID: goldenGrant, State: claim.StateIndeterminate, Code: "CLAIM_LEASE_EXPIRED", FinalizedAt: goldenAt.Format(core.TimeFormat)}
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
