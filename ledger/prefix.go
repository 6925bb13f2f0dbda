package ledger

import (
	"context"
	"fmt"
)

// VerifyPrefix recomputes the org's chain from seq 1 through seq n: every
// entry is present in order, names the org, hashes to its entry_hash and
// links to its predecessor (Genesis for seq 1). It answers whether entry n
// sits on an intact chain from genesis, so, unlike Verify, it neither reads
// past n nor compares with the stored head: entries appended while it reads
// cannot make it fail. n = 0 is the empty prefix, which is valid.
//
// The Report's HeadSeq and HeadHash describe entry n; a chain that ends
// before n is reported as ReasonSeqGap at the first missing seq. It returns
// an error only when the store cannot be read.
func VerifyPrefix(ctx context.Context, r Reader, orgID string, n uint64) (Report, error) {
	return VerifyFrom(ctx, r, orgID, Entry{}, n)
}

// VerifyFrom is VerifyPrefix starting after an entry the caller already
// trusts (one a signed checkpoint includes, say): it recomputes entries
// from.Seq+1 through n, the first linking to from, so it reads n-from.Seq
// entries rather than n. The zero Entry is genesis: VerifyFrom(ctx, r,
// orgID, Entry{}, n) is VerifyPrefix. n == from.Seq checks nothing and is
// valid; n below it is reported as ReasonSeqGap.
func VerifyFrom(ctx context.Context, r Reader, orgID string, from Entry, n uint64) (Report, error) {
	rep := Report{OrgID: orgID}
	prev := from
	for prev.Seq < n {
		page, err := r.LedgerEntries(ctx, orgID, prev.Seq, int(min(verifyPage, n-prev.Seq)))
		if err != nil {
			return rep, fmt.Errorf("ledger: read entries: %w", err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			if e.Seq > n {
				break
			}
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
	}
	if prev.Seq != n {
		rep.FirstBrokenSeq = prev.Seq + 1
		rep.Reason = ReasonSeqGap
		rep.Detail = fmt.Sprintf("the chain ends at seq %d, before seq %d", prev.Seq, n)
		return rep, nil
	}
	rep.HeadSeq, rep.HeadHash = prev.Seq, prev.EntryHash
	rep.Valid = true
	return rep, nil
}
