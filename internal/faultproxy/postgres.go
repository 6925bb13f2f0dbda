package faultproxy

import (
	"bytes"
	"encoding/binary"
	"strings"
)

// PostgresCommit returns a Matcher of a PostgreSQL client's stream
// (frontend protocol 3.0, without TLS) that matches each request that
// commits a transaction: a simple Query whose whole text is COMMIT or END
// (optionally WORK or TRANSACTION, and a semicolon), and, in the extended
// protocol, a Bind of a statement prepared with such a text, through the
// Sync after it (where the server answers). It follows Parse and Close to
// know which prepared statements commit, so it finds a cached statement
// too (pgx prepares each statement once per connection). A stream it cannot
// read (TLS, a protocol it does not know) matches nothing.
func PostgresCommit() Matcher {
	return &pgCommit{commits: map[string]bool{}, pendingAt: -1}
}

// Protocol codes of the untyped startup-phase messages.
const (
	pgProtocol3 = 3 << 16
	pgMaxLen    = 1 << 30 // the server refuses longer messages
	pgMaxStart  = 10000   // and longer startup-phase ones
	pgKeepQuery = 64 << 10
	pgKeepBind  = 512 // a Bind's portal and statement names come first
)

type pgCommit struct {
	opaque bool // stop reading: matches nothing from here on
	typed  bool // past the startup phase: messages start with a type byte

	pos      int64 // stream offset of the next byte given to Match
	msgAt    int64 // stream offset of the current message's first byte
	hdr      [5]byte
	nhdr     int // header bytes gathered; 0 at a message boundary
	typ      byte
	left     int    // body bytes still to come
	keep     int    // how many body bytes to keep
	body     []byte // the kept head of the body
	bodyDone bool   // the header is complete and the body is being read

	commits   map[string]bool // prepared statements whose text commits
	pendingAt int64           // stream offset of a COMMIT's Bind awaiting its Sync; -1: none
}

// Match implements Matcher.
func (m *pgCommit) Match(p []byte) (start, end int, ok bool) {
	base := m.pos
	for i := 0; i < len(p) && !m.opaque; {
		if !m.bodyDone {
			if m.nhdr == 0 {
				m.msgAt = base + int64(i)
			}
			need := 4
			if m.typed {
				need = 5
			}
			n := copy(m.hdr[m.nhdr:need], p[i:])
			m.nhdr += n
			i += n
			if m.nhdr < need {
				continue
			}
			m.header()
			if m.opaque {
				break
			}
		}
		n := min(m.left, len(p)-i)
		if k := min(n, m.keep-len(m.body)); k > 0 {
			m.body = append(m.body, p[i:i+k]...)
		}
		m.left -= n
		i += n
		if m.left > 0 {
			continue
		}
		at, matched := m.message()
		m.nhdr, m.bodyDone, m.body = 0, false, m.body[:0]
		if matched {
			m.pos = base + int64(i)
			return int(max(at-base, 0)), i, true
		}
	}
	m.pos = base + int64(len(p))
	return 0, 0, false
}

// header reads the gathered header: the body's length and what to keep.
func (m *pgCommit) header() {
	var n uint32
	if m.typed {
		m.typ, n = m.hdr[0], binary.BigEndian.Uint32(m.hdr[1:5])
	} else {
		// A startup-phase message: int32 length, int32 code. A TLS
		// handshake (0x16 0x03 …) reads as far too long a one.
		m.typ, n = 0, binary.BigEndian.Uint32(m.hdr[0:4])
	}
	if n < 4 || n > pgMaxLen || (!m.typed && (n < 8 || n > pgMaxStart)) {
		m.opaque = true
		return
	}
	m.left, m.bodyDone = int(n)-4, true
	switch m.typ {
	case 0:
		m.keep = 4 // the code
	case 'P', 'Q', 'C':
		m.keep = pgKeepQuery
	case 'B':
		m.keep = pgKeepBind
	default:
		m.keep = 0
	}
}

// message acts on a complete message. It reports a match and where the
// matched request began in the stream.
func (m *pgCommit) message() (int64, bool) {
	b := m.body
	switch m.typ {
	case 0:
		code := binary.BigEndian.Uint32(b[:4])
		switch {
		case code>>16 == pgProtocol3>>16:
			m.typed = true
		case code == 80877103, code == 80877104:
			// SSLRequest, GSSENCRequest: another startup message follows
			// (or TLS, which the next header refuses).
		default:
			m.opaque = true // CancelRequest, or a protocol not known
		}
	case 'P': // Parse: name, query
		name, rest := cstring(b)
		query, _ := cstring(rest)
		if isCommit(query) {
			m.commits[name] = true
		} else {
			delete(m.commits, name)
		}
	case 'C': // Close: 'S' statement or 'P' portal, name
		if len(b) > 0 && b[0] == 'S' {
			name, _ := cstring(b[1:])
			delete(m.commits, name)
		}
	case 'B': // Bind: portal, statement
		_, rest := cstring(b)
		stmt, _ := cstring(rest)
		if m.commits[stmt] && m.pendingAt < 0 {
			m.pendingAt = m.msgAt
		}
	case 'S': // Sync: the server answers what came before
		if at := m.pendingAt; at >= 0 {
			m.pendingAt = -1
			return at, true
		}
	case 'Q':
		query, _ := cstring(b)
		if isCommit(query) {
			return m.msgAt, true
		}
	}
	return 0, false
}

// cstring splits a NUL-terminated string off b.
func cstring(b []byte) (string, []byte) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return string(b), nil
	}
	return string(b[:i]), b[i+1:]
}

// isCommit reports whether a statement's whole text commits.
func isCommit(q string) bool {
	f := strings.Fields(strings.TrimSuffix(strings.TrimSpace(q), ";"))
	if len(f) == 0 || len(f) > 2 || !(strings.EqualFold(f[0], "COMMIT") || strings.EqualFold(f[0], "END")) {
		return false
	}
	return len(f) == 1 || strings.EqualFold(f[1], "WORK") || strings.EqualFold(f[1], "TRANSACTION")
}
