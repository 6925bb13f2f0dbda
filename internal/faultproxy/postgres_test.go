package faultproxy_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clearancehq/clearance/internal/faultproxy"
	"github.com/clearancehq/clearance/store/pgstore/pgtest"
)

// pgStream builds a PostgreSQL frontend byte stream and remembers where the
// requests that commit are.
type pgStream struct {
	b     []byte
	spans [][2]int // the committing requests: [first byte, just past the last]
	open  int      // start of a span awaiting its Sync; -1: none
}

func newPGStream() *pgStream { return &pgStream{open: -1} }

func (s *pgStream) raw(p ...byte) *pgStream { s.b = append(s.b, p...); return s }

func (s *pgStream) startup() *pgStream {
	body := binary.BigEndian.AppendUint32(nil, 3<<16)
	body = append(body, "user\x00postgres\x00database\x00test\x00\x00"...)
	s.b = binary.BigEndian.AppendUint32(s.b, uint32(len(body)+4))
	s.b = append(s.b, body...)
	return s
}

func (s *pgStream) sslRequest() *pgStream {
	s.b = binary.BigEndian.AppendUint32(s.b, 8)
	s.b = binary.BigEndian.AppendUint32(s.b, 80877103)
	return s
}

func (s *pgStream) msg(typ byte, body ...string) *pgStream {
	var b []byte
	for _, part := range body {
		b = append(b, part...)
	}
	s.b = append(s.b, typ)
	s.b = binary.BigEndian.AppendUint32(s.b, uint32(len(b)+4))
	s.b = append(s.b, b...)
	return s
}

func (s *pgStream) parse(name, query string) *pgStream {
	return s.msg('P', name, "\x00", query, "\x00", "\x00\x00")
}

// bind binds stmt; commits says whether it is a committing statement.
func (s *pgStream) bind(stmt string, commits bool) *pgStream {
	if commits && s.open < 0 {
		s.open = len(s.b)
	}
	return s.msg('B', "\x00", stmt, "\x00", "\x00\x00\x00\x00\x00\x00")
}

func (s *pgStream) execute() *pgStream { return s.msg('E', "\x00", "\x00\x00\x00\x00") }

func (s *pgStream) sync() *pgStream {
	s.msg('S')
	if s.open >= 0 {
		s.spans = append(s.spans, [2]int{s.open, len(s.b)})
		s.open = -1
	}
	return s
}

func (s *pgStream) query(q string, commits bool) *pgStream {
	at := len(s.b)
	s.msg('Q', q, "\x00")
	if commits {
		s.spans = append(s.spans, [2]int{at, len(s.b)})
	}
	return s
}

// session is a stream with every kind of COMMIT the matcher knows, and
// statements that are not COMMIT.
func session(s *pgStream) *pgStream {
	s.msg('p', "secret\x00")
	s.parse("s_commit", "COMMIT").msg('D', "S", "s_commit\x00").sync() // prepared, not run
	s.parse("s_sel", "SELECT 1").bind("s_sel", false).execute().sync()
	s.query("BEGIN", false)
	s.bind("s_sel", false).execute().bind("s_commit", true).execute().sync() // a pipeline ending in COMMIT
	s.query(" commit ;", true).query("COMMIT; SELECT 1", false).query("END TRANSACTION", true)
	s.query("COMMIT PREPARED 'x'", false).query("commitment", false)
	s.parse("", "end work").bind("", true).execute().sync()             // the unnamed statement
	s.parse("", "SELECT 2").bind("", false).execute().sync()            // redefined: no longer COMMIT
	s.msg('C', "S", "s_commit\x00").bind("s_commit", false).sync()      // closed
	s.parse("s_commit", "Commit Work").bind("s_commit", true).sync()    // prepared again
	s.msg('d', string(make([]byte, 70000))).query("COMMIT", true)       // after a long message
	s.parse("s_big", string(make([]byte, 100000))).bind("s_big", false) // a statement longer than what is kept
	return s.sync()
}

// feed gives stream to a fresh matcher in the chunks cut at splits and
// returns the spans it matched, in stream offsets.
func feed(stream []byte, splits []int) [][2]int {
	m := faultproxy.PostgresCommit()
	var got [][2]int
	prev := 0
	for _, cut := range append(splits, len(stream)) {
		p, off := stream[prev:cut], prev
		for len(p) > 0 {
			start, end, ok := m.Match(p)
			if !ok {
				break
			}
			got = append(got, [2]int{off + start, off + end})
			p, off = p[end:], off+end
		}
		prev = cut
	}
	return got
}

// want is what feed must report: each span's end exactly, its start as far
// as the chunk that ends it reaches back (earlier bytes were passed on).
func want(spans [][2]int, splits []int) [][2]int {
	var out [][2]int
	for _, sp := range spans {
		chunkStart := 0
		for _, c := range splits {
			if c < sp[1] {
				chunkStart = c
			}
		}
		out = append(out, [2]int{max(sp[0], chunkStart), sp[1]})
	}
	return out
}

func TestPostgresCommitFindsEveryCommit(t *testing.T) {
	t.Parallel()
	plain := session(newPGStream().startup())
	ssl := session(newPGStream().sslRequest().startup())
	for _, s := range []*pgStream{plain, ssl} {
		if len(s.spans) != 6 {
			t.Fatalf("the test stream has %d commits; want 6", len(s.spans))
		}
		if got := feed(s.b, nil); !slices.Equal(got, s.spans) {
			t.Fatalf("one chunk: matched %v; want %v", got, s.spans)
		}
		// Every cut into two chunks, and a few byte-by-byte stretches.
		for cut := 1; cut < len(s.b); cut++ {
			if cut > 600 && cut < len(s.b)-600 && cut%997 != 0 {
				continue // the long messages' middles: a sample is enough
			}
			splits := []int{cut}
			if got, w := feed(s.b, splits), want(s.spans, splits); !slices.Equal(got, w) {
				t.Fatalf("cut at %d: matched %v; want %v", cut, got, w)
			}
		}
		var bytewise []int
		for i := 1; i < 600; i++ {
			bytewise = append(bytewise, i)
		}
		if got, w := feed(s.b, bytewise), want(s.spans, bytewise); !slices.Equal(got, w) {
			t.Fatalf("byte by byte: matched %v; want %v", got, w)
		}
	}
}

func TestPostgresCommitLeavesUnreadableStreamsAlone(t *testing.T) {
	t.Parallel()
	tls := newPGStream().sslRequest().raw(0x16, 0x03, 0x01, 0x02, 0x00, 0x01)
	tls = session(tls.raw(make([]byte, 600)...).startup())
	if got := feed(tls.b, nil); len(got) != 0 {
		t.Fatalf("a TLS stream matched %v", got)
	}
	cancel := newPGStream()
	cancel.b = binary.BigEndian.AppendUint32(cancel.b, 16)
	cancel.b = binary.BigEndian.AppendUint32(cancel.b, 80877102)
	cancel.raw(make([]byte, 8)...)
	cancel.query("COMMIT", true)
	if got := feed(cancel.b, nil); len(got) != 0 {
		t.Fatalf("a cancel request matched %v", got)
	}
}

// TestPostgresCommitCutsRealCommits runs transactions through the proxy
// against the real PostgreSQL, with pgx's cached statements (a batch) and
// the simple protocol: LoseReply leaves the transaction committed with the
// client told nothing; LoseRequest leaves it not committed.
func TestPostgresCommitCutsRealCommits(t *testing.T) {
	t.Parallel()
	admin := pgtest.Admin(t)
	schema := pgtest.NewSchema(t, "faultproxy_")
	ctx := t.Context()
	table := pgx.Identifier{schema, "t"}.Sanitize()
	if _, err := admin.Exec(ctx, "CREATE TABLE "+table+" (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(pgtest.SchemaURL(t, schema))
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.New(u.Host, faultproxy.Options{Match: faultproxy.PostgresCommit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	u.Host = p.Addr()
	connect := func() *pgx.Conn {
		c, err := pgx.Connect(ctx, u.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	}
	batch := func(c *pgx.Conn, id int) error {
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue("INSERT INTO t (id) VALUES ($1)", id)
		b.Queue("COMMIT")
		return c.SendBatch(ctx, b).Close()
	}
	simple := func(c *pgx.Conn, id int) error {
		if _, err := c.Exec(ctx, "BEGIN"); err != nil {
			return err
		}
		if _, err := c.Exec(ctx, fmt.Sprintf("INSERT INTO t (id) VALUES (%d)", id)); err != nil {
			return err
		}
		_, err := c.Exec(ctx, "COMMIT")
		return err
	}
	// gone waits until the server process of a cut connection has ended, so
	// that its transaction has certainly committed or rolled back.
	gone := func(pid uint32) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; {
			var alive bool
			if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)", pid).Scan(&alive); err != nil {
				t.Fatal(err)
			}
			if !alive {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("server process %d still alive after its connection was cut", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	stored := func(id int) bool {
		var n int
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE id = $1", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}

	cases := []struct {
		name string
		run  func(*pgx.Conn, int) error
		loss faultproxy.Loss
	}{
		{"cached statements, reply lost", batch, faultproxy.LoseReply},
		{"cached statements, request lost", batch, faultproxy.LoseRequest},
		{"simple protocol, reply lost", simple, faultproxy.LoseReply},
		{"simple protocol, request lost", simple, faultproxy.LoseRequest},
	}
	for i, tc := range cases {
		c := connect()
		base := 10 * (i + 1)
		for id := base; id < base+3; id++ { // the first prepares, the rest reuse
			if err := tc.run(c, id); err != nil {
				t.Fatalf("%s: uncut transaction %d: %v", tc.name, id, err)
			}
		}
		pid := c.PgConn().PID()
		before := p.Stats().Cut
		p.Cut(1, tc.loss)
		if err := tc.run(c, base+3); err == nil {
			t.Fatalf("%s: the cut transaction answered success", tc.name)
		}
		if got := p.Stats().Cut - before; got != 1 {
			t.Fatalf("%s: %d cuts; want 1", tc.name, got)
		}
		gone(pid)
		if got, wantStored := stored(base+3), tc.loss == faultproxy.LoseReply; got != wantStored {
			t.Fatalf("%s: transaction stored %v; want %v", tc.name, got, wantStored)
		}
		for id := base; id < base+3; id++ {
			if !stored(id) {
				t.Fatalf("%s: uncut transaction %d lost", tc.name, id)
			}
		}
	}
}
