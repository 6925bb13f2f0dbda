package faultproxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"

	"github.com/clearancehq/clearance/internal/faultproxy"
)

// A proxy in front of a line-echo server: it passes, then refuses new
// connections, then resets the live ones.
func Example() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()

	p, err := faultproxy.New(ln.Addr().String(), faultproxy.Options{})
	if err != nil {
		panic(err)
	}
	defer p.Close()

	ask := func(c net.Conn, line string) string {
		if _, err := fmt.Fprintln(c, line); err != nil {
			return "no answer: the connection was reset"
		}
		got, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return "no answer: the connection was reset"
		}
		return "echo " + got[:len(got)-1]
	}

	live, err := net.Dial("tcp", p.Addr())
	if err != nil {
		panic(err)
	}
	defer live.Close()
	fmt.Println(ask(live, "hello"))

	p.Set(faultproxy.Refuse)
	late, err := net.Dial("tcp", p.Addr()) // reset at connect, or at the first read
	if err == nil {
		_, err = late.Read(make([]byte, 1))
		late.Close()
	}
	fmt.Println("new connection reset:", err != nil)
	fmt.Println(ask(live, "still here")) // live connections go on

	p.Reset()
	fmt.Println(ask(live, "anyone?"))
	p.Set(faultproxy.Pass)
	s := p.Stats()
	fmt.Println("accepted", s.Accepted, "refused", s.Refused, "reset", s.Reset)
	// Output:
	// echo hello
	// new connection reset: true
	// echo still here
	// no answer: the connection was reset
	// accepted 1 refused 1 reset 1
}
