package ledger

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Reasons reported by Verify for the first broken entry.
const (
	ReasonSeqGap       = "SEQ_GAP"             // seq is not previous seq + 1 (deleted or reordered)
	ReasonPrevMismatch = "PREV_HASH_MISMATCH"  // prev_entry_hash is not the previous entry's hash
	ReasonHashMismatch = "ENTRY_HASH_MISMATCH" // entry changed after it was written
	ReasonOrgMismatch  = "ORG_MISMATCH"        // entry belongs to another org
	ReasonHeadMismatch = "HEAD_MISMATCH"       // chain does not end at the stored head (tail removed or added)
	ReasonUnreadable   = "ENTRY_UNREADABLE"    // a stored entry (or the head) exists but does not decode (its bytes were changed)
)

// ErrCorrupt marks a stored record that exists but cannot be decoded. A
// Reader wraps it for such an entry, so that Verify reports the entry as
// broken (ReasonUnreadable) instead of failing as if the store were down.
var ErrCorrupt = errors.New("corrupt stored record")

// Reasons reported by VerifyWith when a signed checkpoint disagrees with the
// ledger. They catch what the chain alone cannot: a rewrite whose every
// later entry and the stored head were rewritten to match, and a tail cut
// off together with the head moved back.
const (
	// The ledger does not recompute to the checkpoint's root (an entry up
	// to its size was changed, removed, inserted or reordered and the chain
	// rebuilt), or a stored checkpoint's fields differ from its signed note.
	ReasonCheckpointMismatch = "CHECKPOINT_MISMATCH"
	// The ledger ends before the size a checkpoint was signed for.
	ReasonTruncated = "TRUNCATED_BEFORE_CHECKPOINT"
	// The checkpoint has no valid signature by the ledger key.
	ReasonCheckpointSignature = "CHECKPOINT_SIGNATURE_INVALID"
	// The checkpoint is signed but is not a tlog checkpoint.
	ReasonCheckpointMalformed = "CHECKPOINT_MALFORMED"
	// The checkpoint is another log's (another org's).
	ReasonCheckpointOrigin = "CHECKPOINT_ORIGIN_MISMATCH"
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
	// CheckpointsChecked is how many signed checkpoints VerifyWith checked
	// the ledger against (the latest stored one, the auditor's one), and
	// CheckpointSize the largest of their sizes.
	CheckpointsChecked int    `json:"checkpoints_checked,omitempty"`
	CheckpointSize     uint64 `json:"checkpoint_size,omitempty"`
}

// VerifyOptions says which signed checkpoints VerifyWith checks the
// ledger against.
type VerifyOptions struct {
	// VerifierKey is the ledger key's verifier key (Key.VerifierKey). When
	// set, VerifyWith checks the org's latest stored checkpoint; when empty,
	// VerifyWith is Verify.
	VerifierKey string
	// Origin is the origin line the org's checkpoints carry (see Origin);
	// required with VerifierKey.
	Origin string
	// Checkpoint is a signed checkpoint of this org obtained earlier, for
	// example an auditor's copy or a proof packet's; checked like the
	// stored one. It needs VerifierKey.
	Checkpoint []byte
}

// verifyPage is how many entries Verify reads at a time.
const verifyPage = 1000

// Verify recomputes the org's chain from seq 1 and checks it ends at the
// stored head. It returns an error only when the store cannot be read; a
// broken chain is a Report with Valid false.
//
// The chain alone cannot tell a consistent rewrite from the original:
// whoever can write the store can rebuild every entry after a change and
// move the head, or cut the tail and move the head back. VerifyWith also
// checks signed checkpoints, which catches both.
func Verify(ctx context.Context, r Reader, orgID string) (Report, error) {
	return verify(ctx, r, orgID, nil, nil)
}

// VerifyWith is Verify plus signed checkpoints: the org's latest stored
// checkpoint and, when given, opts.Checkpoint. Each must carry a valid
// signature by opts.VerifierKey and name opts.Origin; the ledger must be at
// least as long as its size, and its first Size entries must recompute to
// its root (RFC 9162, leaves as Entry.LeafHash). Chain problems are
// reported first, with the reasons of Verify.
//
// A stored checkpoint is only as trustworthy as the store: deleting the
// newest checkpoints rolls VerifyWith back to an older one. A checkpoint
// kept outside the store (opts.Checkpoint) is what pins the history. A
// ledger never sealed has no stored checkpoint and is checked as by Verify.
//
// It returns an error when the store cannot be read or the options are
// unusable (no origin, a malformed verifier key).
func VerifyWith(ctx context.Context, r TreeReader, orgID string, opts VerifyOptions) (Report, error) {
	if opts.VerifierKey == "" {
		if opts.Checkpoint != nil {
			return Report{OrgID: orgID}, errors.New("ledger: VerifyOptions.Checkpoint needs a VerifierKey")
		}
		return verify(ctx, r, orgID, nil, nil)
	}
	if opts.Origin == "" {
		return Report{OrgID: orgID}, errors.New("ledger: VerifyOptions.Origin is required with a VerifierKey")
	}
	v, err := parseVerifier(opts.VerifierKey)
	if err != nil {
		return Report{OrgID: orgID}, err
	}
	var notes []namedNote
	var bad *Report
	stored, err := r.LatestCheckpoint(ctx, orgID)
	switch {
	case errors.Is(err, ErrCorrupt):
		bad = &Report{Reason: ReasonCheckpointMalformed, Detail: "the latest stored checkpoint cannot be decoded: " + err.Error()}
	case err != nil:
		return Report{OrgID: orgID}, fmt.Errorf("ledger: read latest checkpoint: %w", err)
	case !stored.IsZero():
		notes = append(notes, namedNote{"the latest stored checkpoint", stored.Note, &stored})
	}
	if opts.Checkpoint != nil {
		notes = append(notes, namedNote{"the given checkpoint", opts.Checkpoint, nil})
	}
	var cps []Checkpoint
	for _, n := range notes {
		if bad != nil {
			break
		}
		c, reason, detail := trust(v, opts.Origin, n)
		if reason != "" {
			bad = &Report{Reason: reason, Detail: detail}
			break
		}
		cps = append(cps, c)
	}
	if bad != nil {
		rep := Report{OrgID: orgID, Reason: bad.Reason, Detail: bad.Detail}
		head, err := r.LedgerHeadOf(ctx, orgID)
		if err != nil && !errors.Is(err, ErrCorrupt) {
			return rep, fmt.Errorf("ledger: read head: %w", err)
		}
		rep.HeadSeq, rep.HeadHash = head.Seq, head.EntryHash
		return rep, nil
	}
	if len(cps) == 2 && cps[1].Size < cps[0].Size {
		cps[0], cps[1] = cps[1], cps[0]
	}
	return verify(ctx, r, orgID, cps, func(size uint64) uint64 { return locate(ctx, r, orgID, size) })
}

type namedNote struct {
	what   string
	note   []byte
	stored *Checkpoint // the store's fields, to compare with the note's
}

// trust verifies one checkpoint note; a reason says why it is not trusted.
func trust(v note.Verifier, origin string, n namedNote) (Checkpoint, string, string) {
	c, err := openCheckpoint(v, n.note)
	switch {
	case errors.Is(err, ErrCheckpointSignature):
		return c, ReasonCheckpointSignature, n.what + ": " + err.Error()
	case err != nil:
		return c, ReasonCheckpointMalformed, n.what + ": " + err.Error()
	case c.Origin != origin:
		return c, ReasonCheckpointOrigin, fmt.Sprintf("%s names %q, want %q", n.what, c.Origin, origin)
	case n.stored != nil && (n.stored.Size != c.Size || n.stored.Root != c.Root || n.stored.Origin != c.Origin):
		return c, ReasonCheckpointMismatch, fmt.Sprintf("%s is stored as size %d root %v but its signed note says size %d root %v",
			n.what, n.stored.Size, n.stored.Root, c.Size, c.Root)
	}
	return c, "", ""
}

// verify walks the chain; cps (ascending by size, trusted) are checked
// against the tree recomputed on the way. locate finds the first entry a
// checkpoint mismatch is due to.
func verify(ctx context.Context, r Reader, orgID string, cps []Checkpoint, locate func(size uint64) uint64) (Report, error) {
	rep := Report{OrgID: orgID}
	head, err := r.LedgerHeadOf(ctx, orgID)
	headErr := err // a corrupt head is reported after the walk, where the chain ends
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return rep, fmt.Errorf("ledger: read head: %w", err)
	}
	rep.HeadSeq, rep.HeadHash = head.Seq, head.EntryHash
	var maxSize uint64
	for _, c := range cps {
		maxSize = max(maxSize, c.Size)
	}
	roots := make([]tlog.Hash, len(cps))
	next := 0 // the first checkpoint whose root is not known yet
	var tree compactRange
	for next < len(cps) && cps[next].Size == 0 {
		roots[next] = emptyRoot
		next++
	}
	var prev Entry
	var after uint64
	limit := verifyPage
	for {
		page, err := r.LedgerEntries(ctx, orgID, after, limit)
		switch {
		case errors.Is(err, ErrCorrupt) && limit > 1:
			// Some entry of this page does not decode: read on one entry at
			// a time to name it.
			limit = 1
			continue
		case errors.Is(err, ErrCorrupt):
			rep.FirstBrokenSeq = prev.Seq + 1
			rep.Reason = ReasonUnreadable
			rep.Detail = fmt.Sprintf("the entry after seq %d cannot be decoded: %v", prev.Seq, err)
			return rep, nil
		case err != nil:
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
			if e.Seq <= maxSize {
				leaf, err := e.LeafHash()
				if err != nil {
					return rep, fmt.Errorf("ledger: leaf hash of entry %d: %w", e.Seq, err)
				}
				tree.push(leaf)
				for next < len(cps) && cps[next].Size == e.Seq {
					roots[next] = tree.root()
					next++
				}
			}
		}
		if len(page) < limit {
			break
		}
		after = page[len(page)-1].Seq
	}
	if headErr != nil {
		rep.FirstBrokenSeq = prev.Seq + 1
		rep.Reason = ReasonUnreadable
		rep.Detail = fmt.Sprintf("the chain ends at seq %d but the stored head cannot be decoded: %v", prev.Seq, headErr)
		return rep, nil
	}
	if prev.Seq != head.Seq || prev.EntryHash != head.EntryHash {
		rep.FirstBrokenSeq = min(prev.Seq, head.Seq) + 1
		rep.Reason = ReasonHeadMismatch
		rep.Detail = fmt.Sprintf("chain ends at seq %d but the stored head is seq %d", prev.Seq, head.Seq)
		return rep, nil
	}
	for i, c := range cps {
		rep.CheckpointsChecked++
		rep.CheckpointSize = max(rep.CheckpointSize, c.Size)
		if c.Size > prev.Seq {
			rep.FirstBrokenSeq = prev.Seq + 1
			rep.Reason = ReasonTruncated
			rep.Detail = fmt.Sprintf("the ledger ends at seq %d but a checkpoint of size %d was signed", prev.Seq, c.Size)
			return rep, nil
		}
		if roots[i] != c.Root {
			rep.FirstBrokenSeq = locate(c.Size)
			rep.Reason = ReasonCheckpointMismatch
			rep.Detail = fmt.Sprintf("entries 1..%d hash to %v, the checkpoint says %v", c.Size, roots[i], c.Root)
			return rep, nil
		}
	}
	rep.Valid = true
	return rep, nil
}

// locate returns the first seq up to size whose leaf hash differs from the
// leaf hash stored when it was sealed; 1 when the stored hashes cannot tell
// (they were changed too, or cannot be read).
func locate(ctx context.Context, r TreeReader, orgID string, size uint64) uint64 {
	var after uint64
	for after < size {
		page, err := r.LedgerEntries(ctx, orgID, after, int(min(verifyPage, size-after)))
		if err != nil || len(page) == 0 {
			return 1
		}
		idx := make([]int64, len(page))
		for i, e := range page {
			idx[i] = tlog.StoredHashIndex(0, int64(e.Seq-1))
		}
		stored, err := r.LedgerHashes(ctx, orgID, idx)
		if err != nil || len(stored) != len(page) {
			return 1
		}
		for i, e := range page {
			if leaf, err := e.LeafHash(); err != nil || leaf != stored[i] {
				return e.Seq
			}
		}
		after = page[len(page)-1].Seq
	}
	return 1
}

// compactRange computes the RFC 9162 root of a growing list of leaves in
// O(log n) memory: a stack of the roots of the maximal complete subtrees.
type compactRange struct {
	hashes []tlog.Hash
	levels []int
}

func (c *compactRange) push(leaf tlog.Hash) {
	h, level := leaf, 0
	for n := len(c.hashes); n > 0 && c.levels[n-1] == level; n-- {
		h = tlog.NodeHash(c.hashes[n-1], h)
		level++
		c.hashes, c.levels = c.hashes[:n-1], c.levels[:n-1]
	}
	c.hashes, c.levels = append(c.hashes, h), append(c.levels, level)
}

func (c *compactRange) root() tlog.Hash {
	if len(c.hashes) == 0 {
		return emptyRoot
	}
	h := c.hashes[len(c.hashes)-1]
	for i := len(c.hashes) - 2; i >= 0; i-- {
		h = tlog.NodeHash(c.hashes[i], h)
	}
	return h
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
