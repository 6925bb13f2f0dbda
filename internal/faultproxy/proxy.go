package faultproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Mode is what the proxy does with bytes and with new connections.
type Mode int

// Modes; see the package documentation.
const (
	Pass Mode = iota
	Stall
	Blackhole
	Refuse
)

func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Stall:
		return "stall"
	case Blackhole:
		return "blackhole"
	case Refuse:
		return "refuse"
	}
	return "unknown"
}

// Loss is the side of a matched request that Cut loses.
type Loss int

const (
	// LoseReply: the request reaches the target, its reply never reaches
	// the client.
	LoseReply Loss = iota
	// LoseRequest: the request never reaches the target.
	LoseRequest
)

// A Matcher reads one connection's client-to-server bytes, in order, and
// finds requests that Cut may cut. Match is given each chunk in turn (or
// the rest of a chunk after a match); it reports the matched request's span
// in p: start is where it begins in p (0 when it began in an earlier
// chunk), end is just past its last byte. When ok is false, Match consumed
// all of p; when true, only p[:end].
type Matcher interface {
	Match(p []byte) (start, end int, ok bool)
}

// Options configures New. The zero value is a good default.
type Options struct {
	// Match returns a new Matcher for each connection; nil disables Cut.
	Match func() Matcher
	// DialTimeout bounds connecting to the target; 0 means 5 s. A
	// connection whose target cannot be reached is reset.
	DialTimeout time.Duration
}

// Stats counts what the proxy did since New.
type Stats struct {
	Accepted int // connections forwarded to the target
	Refused  int // connections reset on arrival (Refuse, or the target unreachable)
	Reset    int // live connections reset (Reset, or broken by a Blackhole)
	Cut      int // requests cut (Cut)
	Live     int // connections open now
}

// Proxy is a running proxy. Close stops it.
type Proxy struct {
	target string
	ln     net.Listener
	opts   Options

	mu      sync.Mutex
	mode    Mode
	delay   time.Duration
	changed chan struct{} // closed and replaced on every change of mode or delay
	links   map[*link]struct{}
	resets  int // Resets so far: a connection accepted before one is reset too
	armed   int // requests Cut still has to cut
	loss    Loss
	stats   Stats
	closed  bool

	wg sync.WaitGroup
}

// New starts a proxy on 127.0.0.1 (a free port) forwarding to target
// (host:port), in Pass mode.
func New(target string, opts Options) (*Proxy, error) {
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 5 * time.Second
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, ln: ln, opts: opts, changed: make(chan struct{}), links: map[*link]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the address clients connect to, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Set switches every connection, live and new, to mode m. Leaving
// Blackhole resets the connections that lost bytes in it.
func (p *Proxy) Set(m Mode) {
	p.mu.Lock()
	var broken []*link
	if p.mode == Blackhole && m != Blackhole {
		for l := range p.links {
			if l.lost {
				broken = append(broken, l)
			}
		}
		p.stats.Reset += len(broken)
	}
	p.mode = m
	p.notify()
	p.mu.Unlock()
	for _, l := range broken {
		l.reset()
	}
}

// Mode returns the current mode.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// SetDelay adds d of latency to every chunk forwarded in Pass mode, in
// either direction; 0 removes it.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = max(d, 0)
	p.notify()
	p.mu.Unlock()
}

// notify wakes the pumps waiting on a change; p.mu is held.
func (p *Proxy) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// Reset closes every live connection with an RST on both sides and returns
// how many there were.
func (p *Proxy) Reset() int { return p.resetAll(true) }

func (p *Proxy) resetAll(count bool) int {
	p.mu.Lock()
	live := make([]*link, 0, len(p.links))
	for l := range p.links {
		live = append(live, l)
	}
	if count {
		p.stats.Reset += len(live)
	}
	p.resets++
	p.mu.Unlock()
	for _, l := range live {
		l.reset()
	}
	return len(live)
}

// Cut makes the next n requests the connections' Matchers find lose the
// given side (replacing what an earlier Cut left armed). Stats.Cut counts
// the requests cut.
func (p *Proxy) Cut(n int, loss Loss) {
	p.mu.Lock()
	p.armed, p.loss = max(n, 0), loss
	p.mu.Unlock()
}

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Live = len(p.links)
	return s
}

// Close stops accepting, resets every live connection and waits until the
// proxy's goroutines have ended.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.resetAll(false)
	p.wg.Wait()
	return err
}

// take consumes one armed cut, reporting its loss.
func (p *Proxy) take() (Loss, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.armed == 0 {
		return 0, false
	}
	p.armed--
	p.stats.Cut++
	return p.loss, true
}

// state is what a pump needs to forward a chunk.
func (p *Proxy) state() (Mode, time.Duration, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.delay, p.changed
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		client := c.(*net.TCPConn)
		p.mu.Lock()
		refuse := p.mode == Refuse || p.closed
		if refuse {
			p.stats.Refused++
		}
		gen := p.resets
		p.mu.Unlock()
		if refuse {
			abort(client)
			continue
		}
		p.wg.Go(func() { p.serve(client, gen) })
	}
}

// serve forwards one client connection, accepted when gen Resets had
// happened, until both directions end.
func (p *Proxy) serve(client *net.TCPConn, gen int) {
	s, err := net.DialTimeout("tcp", p.target, p.opts.DialTimeout)
	if err != nil {
		p.mu.Lock()
		p.stats.Refused++
		p.mu.Unlock()
		abort(client)
		return
	}
	l := &link{p: p, client: client, server: s.(*net.TCPConn), done: make(chan struct{})}
	if p.opts.Match != nil {
		l.match = p.opts.Match()
	}
	p.mu.Lock()
	if p.closed || p.resets != gen {
		// A Reset came while it was being set up: it was live, so it goes
		// too (a Reset followed by Refuse leaves nothing that passes).
		if !p.closed {
			p.stats.Reset++
		}
		p.mu.Unlock()
		l.reset()
		return
	}
	p.links[l] = struct{}{}
	p.stats.Accepted++
	p.mu.Unlock()

	var wg sync.WaitGroup
	wg.Go(func() { l.pump(l.client, l.server, true) })
	wg.Go(func() { l.pump(l.server, l.client, false) })
	wg.Wait()
	l.close()
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// abort closes c with an RST.
func abort(c *net.TCPConn) {
	_ = c.SetLinger(0)
	_ = c.Close()
}

// link is one proxied connection: the client's and the target's.
type link struct {
	p              *Proxy
	client, server *net.TCPConn
	match          Matcher

	// Under p.mu: lost is set when a Blackhole dropped bytes of it.
	lost bool

	mu  sync.Mutex
	cut bool // the target's bytes are dropped from here on

	once sync.Once
	done chan struct{} // closed once the link is reset or closed
}

// reset closes both sides with an RST.
func (l *link) reset() {
	l.once.Do(func() {
		close(l.done)
		abort(l.client)
		abort(l.server)
	})
}

// close closes both sides normally, once both directions ended.
func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		_ = l.client.Close()
		_ = l.server.Close()
	})
}

// pump copies src to dst, chunk by chunk, through forward. A clean end of
// src is passed on as a half-close; any other failure resets the link.
func (l *link) pump(src, dst *net.TCPConn, up bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !l.forward(buf[:n], dst, up) {
			return
		}
		switch {
		case err == nil:
		case errors.Is(err, io.EOF) && !up && l.isCut():
			l.reset() // the target is done with the cut request
			return
		case errors.Is(err, io.EOF):
			_ = dst.CloseWrite()
			return
		default:
			l.reset()
			return
		}
	}
}

// forward passes one chunk on as the mode says. It reports whether the
// pump should go on reading.
func (l *link) forward(chunk []byte, dst *net.TCPConn, up bool) bool {
	for {
		mode, delay, changed := l.p.state()
		switch mode {
		case Stall:
			select {
			case <-changed:
				continue
			case <-l.done:
				return false
			}
		case Blackhole:
			l.p.mu.Lock()
			l.lost = true
			l.p.mu.Unlock()
			return true
		}
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-l.done:
				t.Stop()
				return false
			}
		}
		break
	}
	if !up {
		if l.isCut() {
			return true // drained: the reply is lost
		}
		return l.write(dst, chunk)
	}
	for l.match != nil && len(chunk) > 0 {
		start, end, ok := l.match.Match(chunk)
		if !ok {
			break
		}
		if loss, armed := l.p.take(); armed {
			l.cutAt(chunk, start, end, loss)
			return false
		}
		if !l.write(dst, chunk[:end]) {
			return false
		}
		chunk = chunk[end:]
	}
	return l.write(dst, chunk)
}

func (l *link) isCut() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cut
}

func (l *link) write(dst *net.TCPConn, p []byte) bool {
	if _, err := dst.Write(p); err != nil {
		l.reset()
		return false
	}
	return true
}

// cutAt cuts the link at the request chunk[start:end].
func (l *link) cutAt(chunk []byte, start, end int, loss Loss) {
	// From here no byte of the target reaches the client: set before the
	// request is written, so its reply is always read after it.
	l.mu.Lock()
	l.cut = true
	l.mu.Unlock()
	switch loss {
	case LoseReply:
		// The target reads the request whole, then the end of the stream;
		// the other pump drains its answer and resets the client once the
		// target has closed, so the target has acted on the request before
		// the client can know anything (a PostgreSQL client that loses its
		// connection sends a cancel request, which must find nothing left
		// to cancel).
		if _, err := l.server.Write(chunk[:end]); err != nil {
			l.reset()
			return
		}
		_ = l.server.CloseWrite()
	default:
		_, _ = l.server.Write(chunk[:start])
		l.reset()
	}
}
