package ledger

import (
	"context"
	"fmt"
)

// Reasons reported by Verify for the first broken entry.
const (
	ReasonSeqGap       = "SEQ_GAP"             // seq is not previous seq + 1 (deleted or reordered)
	ReasonPrevMismatch = "PREV_HASH_MISMATCH"  // prev_entry_hash is not the previous entry's hash
	ReasonHashMismatch = "ENTRY_HASH_MISMATCH" // entry changed after it was written
	ReasonOrgMismatch  = "ORG_MISMATCH"        // entry belongs to another org
	ReasonHeadMismatch = "HEAD_MISMATCH"       // chain does not end at the stored head (tail removed or added)
)

// Report is the result of Verify.
type Report struct {
	OrgID          string `json:"org_id"`
	Valid          bool   `json:"valid"`
	EntriesChecked uint64 `json:"entries_checked"`
	HeadSeq        uint64 `json:"head_seq"`
	HeadHash       string `json:"head_hash,omitempty"`
	FirstBrokenSeq uint64 `json:"first_broken_seq,omitempty"`
	Reason         string `json:"reason,omitempty"`
	Detail         string `json:"detail,omitempty"`
}

// verifyPage is how many entries Verify reads at a time.
const verifyPage = 1000

// Verify recomputes the org's chain from seq 1 and checks it ends at the
// stored head. It returns an error only when the store cannot be read; a
// broken chain is a Report with Valid false.
func Verify(ctx context.Context, r Reader, orgID string) (Report, error) {
	rep := Report{OrgID: orgID}
	head, err := r.LedgerHeadOf(ctx, orgID)
	if err != nil {
		return rep, fmt.Errorf("ledger: read head: %w", err)
	}
	rep.HeadSeq, rep.HeadHash = head.Seq, head.EntryHash
	var prev Entry
	var after uint64
	for {
		page, err := r.LedgerEntries(ctx, orgID, after, verifyPage)
		if err != nil {
			return rep, fmt.Errorf("ledger: read entries: %w", err)
		}
		for _, e := range page {
			if reason, detail := check(prev, e, orgID); reason != "" {
				rep.FirstBrokenSeq = prev.Seq + 1
				if reason == ReasonHashMismatch || reason == ReasonOrgMismatch {
					rep.FirstBrokenSeq = e.Seq
				}
				rep.Reason, rep.Detail = reason, detail
				return rep, nil
			}
			rep.EntriesChecked++
			prev = e
		}
		if len(page) < verifyPage {
			break
		}
		after = page[len(page)-1].Seq
	}
	if prev.Seq != head.Seq || prev.EntryHash != head.EntryHash {
		rep.FirstBrokenSeq = min(prev.Seq, head.Seq) + 1
		rep.Reason = ReasonHeadMismatch
		rep.Detail = fmt.Sprintf("chain ends at seq %d but the stored head is seq %d", prev.Seq, head.Seq)
		return rep, nil
	}
	rep.Valid = true
	return rep, nil
}

// check validates e as the successor of prev (zero prev: e is first).
func check(prev, e Entry, orgID string) (reason, detail string) {
	if e.Seq != prev.Seq+1 {
		return ReasonSeqGap, fmt.Sprintf("expected seq %d, found seq %d", prev.Seq+1, e.Seq)
	}
	wantPrev := prev.EntryHash
	if prev.Seq == 0 {
		wantPrev = Genesis
	}
	if e.OrgID != orgID {
		return ReasonOrgMismatch, fmt.Sprintf("entry names org %q", e.OrgID)
	}
	h, err := e.ComputeHash()
	if err != nil || h != e.EntryHash {
		return ReasonHashMismatch, fmt.Sprintf("stored entry_hash %s, recomputed %s", e.EntryHash, h)
	}
	if e.PrevEntryHash != wantPrev {
		return ReasonPrevMismatch, fmt.Sprintf("prev_entry_hash %s, previous entry hash %s", e.PrevEntryHash, wantPrev)
	}
	return "", ""
}
