package ledger

import (
	"strconv"
	"unicode/utf8"
)

// maxExactSeq is 2^53: integers up to it print the same in Go and as an
// RFC 8785 (ECMAScript) number.
const maxExactSeq = 1 << 53

// appendCanonical appends the RFC 8785 canonical JSON of e — with its
// entry_hash member when withHash, without it otherwise — to buf. It is
// the fast path of canon.Marshal for the one fixed shape of an Entry: the
// members in JCS order (by UTF-16 code units, all ASCII here) and strings
// escaped as JCS does. It reports false, having appended nothing, when e
// needs the general encoder: a string that is not valid UTF-8 (which
// encoding/json repairs first) or a seq beyond 2^53. The fuzz test
// FuzzCanonicalEntry holds it to canon.Marshal byte for byte.
func appendCanonical(buf []byte, e *Entry, withHash bool) ([]byte, bool) {
	if e.Seq > maxExactSeq {
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
	return appendString(buf, s)
}

// appendString appends s (valid UTF-8) as an RFC 8785 string: '"' and '\'
// escaped, control characters as \b \t \n \f \r or \u00xx (lower-case
// hex), everything else (non-ASCII included) as is.
func appendString(buf []byte, s string) []byte {
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		buf = append(buf, s[start:i]...)
		switch c {
		case '"', '\\':
			buf = append(buf, '\\', c)
		case '\b':
			buf = append(buf, '\\', 'b')
		case '\t':
			buf = append(buf, '\\', 't')
		case '\n':
			buf = append(buf, '\\', 'n')
		case '\f':
			buf = append(buf, '\\', 'f')
		case '\r':
			buf = append(buf, '\\', 'r')
		default:
			buf = append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}
