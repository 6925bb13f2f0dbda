package sharelink

import (
	"testing"
	"time"

	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/golden"
)

var goldenAt = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

// goldenRecords is every record of this package whose canonical digest
// enters the ledger (the root's golden test lists them as pinned here).
var goldenRecords = []struct {
	name  string
	value func() any
}{
	{"share_links_revoked", func() any { return shareEpoch{Epoch: 2, RevokedAt: goldenAt.Format(core.TimeFormat)} }},
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
