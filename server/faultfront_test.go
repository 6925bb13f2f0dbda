package server_test

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// frontMode is what a faultFront does with connections.
type frontMode int

const (
	// frontUp forwards every connection to the dependency.
	frontUp frontMode = iota
	// frontRefused listens no more: a dial is refused.
	frontRefused
	// frontHang accepts connections and never answers: the caller's
	// timeout ends the exchange.
	frontHang
)

func (m frontMode) String() string {
	return [...]string{"up", "refused", "hang"}[m]
}

// faultFront stands on a fixed loopback address between Clearance and one
// dependency (an approval service, a mail server, a callback receiver),
// which is reached only through it. Switching the mode closes every
// connection of the previous one, so that no pooled connection outlives a
// fault.
type faultFront struct {
	t      testing.TB
	addr   string // host:port, the same for the front's life
	target string // the dependency's host:port

	mu    sync.Mutex
	mode  frontMode
	ln    net.Listener // nil while refusing
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// newFaultFront starts a front, up, before target; it stops when t ends.
func newFaultFront(t testing.TB, target string) *faultFront {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &faultFront{t: t, addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.accept(ln)
	t.Cleanup(func() {
		f.mu.Lock()
		if f.ln != nil {
			f.ln.Close()
			f.ln = nil
		}
		f.closeAll()
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f
}

// set switches the front to m.
func (f *faultFront) set(m frontMode) {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closeAll()
	f.mode = m
	switch {
	case m == frontRefused && f.ln != nil:
		f.ln.Close()
		f.ln = nil
	case m != frontRefused && f.ln == nil:
		// The same port again: the front's callers keep its address. A
		// listener closed a moment ago may hold it briefly.
		deadline := time.Now().Add(5 * time.Second)
		for {
			ln, err := net.Listen("tcp", f.addr)
			if err == nil {
				f.ln = ln
				break
			}
			if time.Now().After(deadline) {
				f.t.Fatalf("listen on %s again: %v", f.addr, err)
			}
			time.Sleep(10 * time.Millisecond) // poll: the port is free once the kernel releases it
		}
		f.wg.Add(1)
		go f.accept(f.ln)
	}
}

func (f *faultFront) closeAll() {
	for c := range f.conns {
		c.Close()
		delete(f.conns, c)
	}
}

func (f *faultFront) accept(ln net.Listener) {
	defer f.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				f.t.Errorf("front %s: accept: %v", f.addr, err)
			}
			return
		}
		f.mu.Lock()
		if f.ln != ln {
			f.mu.Unlock()
			c.Close()
			return
		}
		f.conns[c] = struct{}{}
		mode := f.mode
		f.wg.Add(1)
		f.mu.Unlock()
		go func() {
			defer f.wg.Done()
			if mode == frontHang {
				_, _ = io.Copy(io.Discard, c) // until the caller gives up or the mode changes
				f.drop(c)
				return
			}
			f.forward(c)
		}()
	}
}

// forward pipes c to a fresh connection to the target.
func (f *faultFront) forward(c net.Conn) {
	d, err := net.Dial("tcp", f.target)
	if err != nil {
		f.drop(c)
		return
	}
	f.mu.Lock()
	if _, open := f.conns[c]; !open { // switched meanwhile
		f.mu.Unlock()
		d.Close()
		c.Close()
		return
	}
	f.conns[d] = struct{}{}
	f.mu.Unlock()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(d, c)
		d.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	_, _ = io.Copy(c, d)
	c.(*net.TCPConn).CloseWrite()
	<-done
	f.drop(c)
	f.drop(d)
}

func (f *faultFront) drop(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	c.Close()
}
