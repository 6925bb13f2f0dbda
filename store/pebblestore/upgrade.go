package pebblestore

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/clearancehq/clearance/jobs"
)

// Layout 2 queued validation-pack builds on their records: artifacts of
// kind "export" whose ref was the status, found through an index of every
// org's artifacts under the table tag 'a':
//
//	a <kind (uvarint-prefixed)> <ref (uvarint-prefixed)> <created_at µs^sign> <org> 0x00 <id> -> empty
//
// Layout 3 keeps that work in jobs and has no such index; no table of it
// may use the tag.
const tagLegacyArtifactRef = 'a'

// legacyExportRefPrefix is the layout 2 prefix of the export records of
// status ref.
func legacyExportRefPrefix(ref string) []byte {
	return appendLP(appendLP([]byte{tagLegacyArtifactRef}, "export"), ref)
}

// upgradeExportJobs takes a layout 2 database to layout 3: each validation
// pack still PENDING or RUNNING gets its job, queued and due at the pack's
// creation (so at once), with the attempts its record counted (a RUNNING
// pack is built again: its worker was a process of the earlier build), and
// the all-orgs artifact index is deleted. One synced batch with the new
// stamp, so the upgrade happens completely or not at all.
func upgradeExportJobs(db *pebble.DB) error {
	b := db.NewIndexedBatch()
	defer b.Close()
	for _, status := range []string{"PENDING", "RUNNING"} {
		p := legacyExportRefPrefix(status)
		err := scan(db, p, upperBound(p), func(k, _ []byte) (bool, error) {
			org, id, ok := bytes.Cut(k[min(len(p)+8, len(k)):], []byte{0})
			if len(k) < len(p)+8 || !ok {
				return false, fmt.Errorf("pebblestore: upgrade: malformed artifact index key %x", k)
			}
			rec, err := readArtifact(db, string(org), "export", string(id))
			if err != nil {
				return false, fmt.Errorf("pebblestore: upgrade: %w", err)
			}
			var body struct {
				Attempts int `json:"attempts"`
			}
			_ = json.Unmarshal(rec.Body, &body) // an unreadable count starts again at 0
			j := jobs.Job{OrgID: rec.OrgID, Kind: "export", ID: rec.ID, State: jobs.Queued, Attempts: max(body.Attempts, 0),
				Due: rec.CreatedAt, CreatedAt: rec.CreatedAt, UpdatedAt: rec.CreatedAt}
			if err := j.Validate(); err != nil {
				return false, fmt.Errorf("pebblestore: upgrade: %w", err)
			}
			return true, putJob(b, j, nil)
		})
		if err != nil {
			return err
		}
	}
	if err := b.DeleteRange([]byte{tagLegacyArtifactRef}, []byte{tagLegacyArtifactRef + 1}, nil); err != nil {
		return fmt.Errorf("pebblestore: upgrade: %w", err)
	}
	if err := b.Set(formatKey, []byte("3"), nil); err != nil {
		return fmt.Errorf("pebblestore: upgrade: %w", err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("pebblestore: upgrade to layout 3: %w", err)
	}
	return nil
}
