package faultproxy_test

import (
	"bufio"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clearancehq/clearance/internal/faultproxy"
)

// echo is a line server: it answers each line it reads with the same line
// and records what it read, connection by connection.
type echo struct {
	ln net.Listener

	mu    sync.Mutex
	lines [][]string // per connection, in order of acceptance
	ended []error    // per connection: how its reading ended (nil: still open)
	wg    sync.WaitGroup
}

func newEcho(t *testing.T) *echo {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{ln: ln}
	e.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			i := len(e.lines)
			e.lines = append(e.lines, nil)
			e.ended = append(e.ended, nil)
			e.mu.Unlock()
			e.wg.Go(func() { e.serve(c, i) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		e.wg.Wait()
	})
	return e
}

func (e *echo) serve(c net.Conn, i int) {
	defer c.Close()
	r := bufio.NewReaderSize(c, 1<<20)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if err == io.EOF && line == "" {
				err = io.EOF
			}
			e.mu.Lock()
			e.ended[i] = err
			e.mu.Unlock()
			return
		}
		e.mu.Lock()
		e.lines[i] = append(e.lines[i], strings.TrimSuffix(line, "\n"))
		e.mu.Unlock()
		if _, err := c.Write([]byte(line)); err != nil {
			e.mu.Lock()
			e.ended[i] = err
			e.mu.Unlock()
			return
		}
	}
}

// conn returns what connection i read so far and how its reading ended.
func (e *echo) conn(i int) ([]string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if i >= len(e.lines) {
		return nil, nil
	}
	return append([]string(nil), e.lines[i]...), e.ended[i]
}

// commitLines matches each line "COMMIT".
type commitLines struct{ line []byte }

func (m *commitLines) Match(p []byte) (start, end int, ok bool) {
	for i, b := range p {
		if b != '\n' {
			m.line = append(m.line, b)
			continue
		}
		is := string(m.line) == "COMMIT"
		n := len(m.line)
		m.line = m.line[:0]
		if is {
			return max(i-n, 0), i + 1, true
		}
	}
	return 0, 0, false
}

func newProxy(t *testing.T, e *echo, opts faultproxy.Options) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(e.ln.Addr().String(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func dial(t *testing.T, p *faultproxy.Proxy) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c.(*net.TCPConn)
}

// roundTrip writes line and reads its echo.
func roundTrip(c net.Conn, line string) (string, error) {
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	buf := make([]byte, len(line)+1)
	_, err := io.ReadFull(c, buf)
	return strings.TrimSuffix(string(buf), "\n"), err
}

func mustRoundTrip(t *testing.T, c net.Conn, line string) {
	t.Helper()
	got, err := roundTrip(c, line)
	if err != nil || got != line {
		t.Fatalf("round trip of %.20q: got %.20q, %v", line, got, err)
	}
}

// silent reports that nothing arrives on c within d: the way to see that a
// byte was held or dropped (a wrongly forwarded byte arrives well within d).
func silent(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	var b [1]byte
	n, err := c.Read(b[:])
	if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d bytes (%v) while nothing should arrive", n, err)
	}
}

// wantReset reads c until it fails, and requires the failure to be a reset
// with no byte before it.
func wantReset(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	if len(b) > 0 || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read %q then %v; want a reset and no bytes", b, err)
	}
}

// eventually polls cond until it holds, or fails after 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPassForwardsIntact(t *testing.T) {
	t.Parallel()
	e := newEcho(t)
	p := newProxy(t, e, faultproxy.Options{})
	big := make([]byte, 1<<20)
	_, _ = rand.Read(big)
	line := strings.ReplaceAll(string(big), "\n", "x")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			for _, l := range []string{"hello", line, "bye"} {
				if got, err := roundTrip(c, l); err != nil || got != l {
					errs <- errors.New("echo changed or failed")
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s := p.Stats(); s.Accepted != 8 || s.Reset != 0 || s.Refused != 0 {
		t.Fatalf("stats %+v; want 8 accepted, nothing reset or refused", s)
	}
	eventually(t, "connections closed", func() bool { return p.Stats().Live == 0 })
}

func TestDelayAddsLatency(t *testing.T) {
	t.Parallel()
	p := newProxy(t, newEcho(t), faultproxy.Options{})
	c := dial(t, p)
	mustRoundTrip(t, c, "warm")
	const d = 60 * time.Millisecond
	p.SetDelay(d)
	start := time.Now()
	mustRoundTrip(t, c, "slow")
	if took := time.Since(start); took < 2*d {
		t.Fatalf("round trip took %v; want at least %v (the delay each way)", took, 2*d)
	}
	p.SetDelay(0)
	mustRoundTrip(t, c, "fast")
}

func TestStallHoldsBytesThenDeliversThem(t *testing.T) {
	t.Parallel()
	e := newEcho(t)
	p := newProxy(t, e, faultproxy.Options{})
	c := dial(t, p)
	mustRoundTrip(t, c, "before")
	p.Set(faultproxy.Stall)
	if _, err := c.Write([]byte("held\n")); err != nil {
		t.Fatal(err)
	}
	late := dial(t, p) // a connection made during the stall
	if _, err := late.Write([]byte("late\n")); err != nil {
		t.Fatal(err)
	}
	silent(t, c, 300*time.Millisecond)
	silent(t, late, 50*time.Millisecond)
	if got, _ := e.conn(0); len(got) != 1 {
		t.Fatalf("the server read %q during the stall; want only the line before it", got)
	}
	p.Set(faultproxy.Pass)
	for _, x := range []struct {
		c    net.Conn
		want string
	}{{c, "held"}, {late, "late"}} {
		_ = x.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReader(x.c).ReadString('\n')
		if err != nil || line != x.want+"\n" {
			t.Fatalf("after the stall: %q, %v; want %q", line, err, x.want)
		}
	}
	if s := p.Stats(); s.Reset != 0 {
		t.Fatalf("a stall reset %d connections", s.Reset)
	}
}

func TestBlackholeDropsBytesAndResetsWhenItEnds(t *testing.T) {
	t.Parallel()
	e := newEcho(t)
	p := newProxy(t, e, faultproxy.Options{})
	c := dial(t, p)
	mustRoundTrip(t, c, "before")
	idle := dial(t, p) // loses nothing: it sends nothing
	mustRoundTrip(t, idle, "idle")
	p.Set(faultproxy.Blackhole)
	if _, err := c.Write([]byte("dropped\n")); err != nil {
		t.Fatal(err)
	}
	silent(t, c, 300*time.Millisecond)
	p.Set(faultproxy.Pass)
	wantReset(t, c)
	if got, _ := e.conn(0); len(got) != 1 || got[0] != "before" {
		t.Fatalf("the server read %q; want only the line before the blackhole", got)
	}
	mustRoundTrip(t, idle, "still") // it lost nothing, so it goes on
	mustRoundTrip(t, dial(t, p), "new")
	if s := p.Stats(); s.Reset != 1 {
		t.Fatalf("stats %+v; want the one connection that lost bytes reset", s)
	}
}

func TestResetClosesEveryLiveConnectionWithRST(t *testing.T) {
	t.Parallel()
	e := newEcho(t)
	p := newProxy(t, e, faultproxy.Options{})
	var cs []*net.TCPConn
	for range 3 {
		c := dial(t, p)
		mustRoundTrip(t, c, "x")
		cs = append(cs, c)
	}
	if n := p.Reset(); n != 3 {
		t.Fatalf("Reset = %d; want 3", n)
	}
	for _, c := range cs {
		wantReset(t, c)
	}
	// The server sees its clients vanish too, with a reset.
	eventually(t, "the server saw every connection end", func() bool {
		for i := range 3 {
			if _, err := e.conn(i); err == nil {
				return false
			}
		}
		return true
	})
	for i := range 3 {
		if _, err := e.conn(i); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("server connection %d ended with %v; want a reset", i, err)
		}
	}
	eventually(t, "no live connection", func() bool { return p.Stats().Live == 0 })
	mustRoundTrip(t, dial(t, p), "after")
}

func TestRefuseResetsNewConnectionsOnly(t *testing.T) {
	t.Parallel()
	p := newProxy(t, newEcho(t), faultproxy.Options{})
	live := dial(t, p)
	mustRoundTrip(t, live, "live")
	p.Set(faultproxy.Refuse)
	// The reset comes at connect or at the first read (no write: a write
	// could take the reset's error first).
	switch c, err := net.Dial("tcp", p.Addr()); {
	case err == nil:
		wantReset(t, c)
		_ = c.Close()
	case !errors.Is(err, syscall.ECONNRESET):
		t.Fatalf("dial during Refuse: %v; want a reset", err)
	}
	mustRoundTrip(t, live, "still")
	p.Set(faultproxy.Pass)
	mustRoundTrip(t, dial(t, p), "again")
	if s := p.Stats(); s.Refused != 1 || s.Accepted != 2 {
		t.Fatalf("stats %+v; want 1 refused, 2 accepted", s)
	}
}

func TestCutLoseReply(t *testing.T) {
	t.Parallel()
	e := newEcho(t)
	p := newProxy(t, e, faultproxy.Options{Match: func() faultproxy.Matcher { return &commitLines{} }})
	c := dial(t, p)
	mustRoundTrip(t, c, "COMMIT") // not armed: passes
	mustRoundTrip(t, c, "a")
	p.Cut(1, faultproxy.LoseReply)
	if _, err := c.Write([]byte("COMMIT\nafter\n")); err != nil {
		t.Fatal(err)
	}
	wantReset(t, c)
	eventually(t, "the server read to the end", func() bool { _, err := e.conn(0); return err != nil })
	got, end := e.conn(0)
	if want := []string{"COMMIT", "a", "COMMIT"}; !slices.Equal(got, want) || end != io.EOF {
		t.Fatalf("server read %q and ended with %v; want %q then the end of the stream", got, end, want)
	}
	c2 := dial(t, p) // the cut is spent
	mustRoundTrip(t, c2, "COMMIT")
	if s := p.Stats(); s.Cut != 1 {
		t.Fatalf("stats %+v; want 1 cut", s)
	}
}

func TestCutLoseRequest(t *testing.T) {
	t.Parallel()
	e := newEcho(t)
	p := newProxy(t, e, faultproxy.Options{Match: func() faultproxy.Matcher { return &commitLines{} }})
	c := dial(t, p)
	mustRoundTrip(t, c, "begin")
	p.Cut(1, faultproxy.LoseRequest)
	// Split, so that the request begins in an earlier chunk than it ends.
	if _, err := c.Write([]byte("a\nCOM")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := io.ReadAll(io.LimitReader(c, 2)); string(b) != "a\n" {
		t.Fatalf("echo of a: %q, %v", b, err)
	}
	if _, err := c.Write([]byte("MIT\n")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the server connection ended", func() bool { _, err := e.conn(0); return err != nil })
	got, end := e.conn(0)
	if want := []string{"begin", "a"}; !slices.Equal(got, want) || end == io.EOF {
		t.Fatalf("server read %q and ended with %v; want %q then a reset", got, end, want)
	}
	wantReset(t, c)
}

func TestCloseResetsAndStops(t *testing.T) {
	t.Parallel()
	p, err := faultproxy.New(newEcho(t).ln.Addr().String(), faultproxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p)
	mustRoundTrip(t, c, "x")
	p.Set(faultproxy.Stall) // a pump waiting on the stall must end too
	_, _ = c.Write([]byte("y\n"))
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	wantReset(t, c)
	if _, err := net.Dial("tcp", p.Addr()); err == nil {
		t.Fatal("the proxy still accepts after Close")
	}
}
