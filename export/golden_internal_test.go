package export

import (
	"strings"
	"testing"
	"time"

	"github.com/clearancehq/clearance/internal/golden"
	"github.com/clearancehq/clearance/pack"
)

var (
	goldenAt  = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	goldenOrg = "0190f4b2-0000-7000-8000-00000000000a"
)

func goldenDigest(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }

func goldenExport(status Status) stored {
	j := stored{Export: Export{ExportID: "0190f4b2-0000-7000-8000-0000000000e1", OrgID: goldenOrg, Format: pack.FormatCSV,
		Window: pack.Window{From: epoch, To: goldenAt}, IncludeEvents: true, Status: status, Attempts: 1,
		CreatedAt: goldenAt}, Chunks: 2}
	if status == Succeeded {
		j.StartedAt, j.CompletedAt = goldenAt.Add(time.Second), goldenAt.Add(2*time.Second)
		j.ManifestSHA256, j.BundleSHA256, j.BundleSignature = goldenDigest('f'), goldenDigest('b'), strings.Repeat("5", 64)
		j.SizeBytes, j.ContentType, j.LedgerSize = 4096, "application/zip", 42
		j.Counts = &pack.Counts{Decisions: 3, ByOutcome: map[string]int{"ALLOW": 2, "BLOCK": 1}, Events: 9, Grants: 2, Workflows: 1}
	}
	if status == Failed {
		j.Attempts, j.LastError = 3, "build failed"
	}
	return j
}

// TestGoldenLedgerPayloads pins the RFC 8785 bytes of the records whose
// digest the ledger commits to (export.requested, export.completed): the
// record as shown, which is what the ledger entry's digest covers.
func TestGoldenLedgerPayloads(t *testing.T) {
	for name, status := range map[string]Status{"export_requested": Pending, "export_succeeded": Succeeded, "export_failed": Failed} {
		t.Run(name, func(t *testing.T) { golden.Check(t, name, goldenExport(status).view()) })
	}
}
