package ledger

import (
	"strconv"
	"unicode/utf8"

	"github.com/clearancehq/clearance/internal/canon"
)

// appendCanonical appends the RFC 8785 canonical JSON of e — with its
// entry_hash member when withHash, without it otherwise — to buf. It is
// the fast path of canon.Marshal for the one fixed shape of an Entry: the
// members in JCS order (by UTF-16 code units, all ASCII here) and strings
// escaped as JCS does. It reports false, having appended nothing, when e
// needs the general encoder: a string that is not valid UTF-8 (which
// encoding/json repairs first) or a seq beyond 2^53. The fuzz test
// FuzzCanonicalEntry holds it to canon.Marshal byte for byte.
func appendCanonical(buf []byte, e *Entry, withHash bool) ([]byte, bool) {
	if e.Seq > canon.MaxExactInteger {
		return buf, false
	}
	for _, s := range [...]string{e.OrgID, e.Kind, e.SubjectID, e.PayloadDigest, e.RecordedAt, e.PrevEntryHash, e.EntryHash} {
		if !utf8.ValidString(s) {
			return buf, false
		}
	}
	buf = append(buf, '{')
	if withHash {
		buf = appendMember(buf, `"entry_hash":`, e.EntryHash)
		buf = append(buf, ',')
	}
	buf = appendMember(buf, `"kind":`, e.Kind)
	buf = appendMember(buf, `,"org_id":`, e.OrgID)
	buf = appendMember(buf, `,"payload_digest":`, e.PayloadDigest)
	buf = appendMember(buf, `,"prev_entry_hash":`, e.PrevEntryHash)
	buf = appendMember(buf, `,"recorded_at":`, e.RecordedAt)
	buf = append(buf, `,"seq":`...)
	buf = strconv.AppendUint(buf, e.Seq, 10)
	buf = appendMember(buf, `,"subject_id":`, e.SubjectID)
	return append(buf, '}'), true
}

func appendMember(buf []byte, name, s string) []byte {
	buf = append(buf, name...)
	return canon.AppendString(buf, s)
}
