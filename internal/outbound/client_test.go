package outbound_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clearancehq/clearance/internal/outbound"
)

// counting is a test server that counts the requests it received.
type counting struct {
	*httptest.Server
	hits atomic.Int64
}

func serve(t *testing.T, h http.HandlerFunc) *counting {
	t.Helper()
	c := &counting{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(c.Close)
	return c
}

func ok(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }

// port is the port of a test server's URL.
func port(t *testing.T, raw string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(raw, "http://"), "https://"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func get(t *testing.T, c *outbound.Client, url string) (*outbound.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.Do(req)
}

func wantErr(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want %v", err, want)
	}
}

// TestDialGuard: names that pass CheckURL but resolve to a blocked address
// are refused when dialing (DNS rebinding), unless AllowPrivate.
func TestDialGuard(t *testing.T) {
	srv := serve(t, ok)
	p := port(t, srv.URL)
	for _, to := range []string{"127.0.0.1", "localhost", "::ffff:127.0.0.1"} {
		t.Run(to, func(t *testing.T) {
			c := outbound.New(outbound.Options{})
			outbound.SetHosts(c, map[string]string{"rebind.example": to})
			url := "https://rebind.example:" + p + "/"
			if _, err := c.CheckURL(url); err != nil {
				t.Fatalf("CheckURL refused a public-looking name: %v", err)
			}
			before := srv.hits.Load()
			_, err := get(t, c, url)
			wantErr(t, err, outbound.ErrBlockedDestination)
			if errors.Is(err, outbound.ErrUnreachable) || outbound.CodeOf(err) != outbound.CodeBlockedDestination {
				t.Fatalf("a blocked dial is not also unreachable: %v", err)
			}
			if srv.hits.Load() != before {
				t.Fatal("the server was reached")
			}
		})
	}
	t.Run("allowed with AllowPrivate", func(t *testing.T) {
		c := outbound.New(outbound.Options{AllowPrivate: true})
		outbound.SetHosts(c, map[string]string{"rebind.example": "localhost"})
		resp, err := get(t, c, "http://rebind.example:"+p+"/")
		if err != nil || resp.StatusCode != 200 || string(resp.Body) != "ok" {
			t.Fatalf("%+v %v", resp, err)
		}
	})
	t.Run("literal refused before dialing", func(t *testing.T) {
		c := outbound.New(outbound.Options{})
		before := srv.hits.Load()
		_, err := get(t, c, strings.Replace(srv.URL, "http://", "https://", 1))
		wantErr(t, err, outbound.ErrBlockedDestination)
		_, err = get(t, c, srv.URL)
		wantErr(t, err, outbound.ErrInvalidURL) // http without AllowPrivate
		if srv.hits.Load() != before {
			t.Fatal("the server was reached")
		}
	})
}

func TestControl(t *testing.T) {
	strict := outbound.New(outbound.Options{})
	private := outbound.New(outbound.Options{AllowPrivate: true})
	for _, tt := range []struct {
		network, address string
		blocked          bool
	}{
		{"tcp4", "8.8.8.8:443", false},
		{"tcp6", "[2001:4860:4860::8888]:443", false},
		{"tcp4", "127.0.0.1:443", true},
		{"tcp4", "169.254.169.254:80", true},
		{"tcp6", "[::1]:443", true},
		{"tcp6", "[::ffff:10.0.0.1]:443", true},
		{"tcp6", "[64:ff9b::7f00:1]:443", true},
		{"tcp6", "[fe80::1%eth0]:443", true},
		{"udp4", "8.8.8.8:53", true},
		{"tcp4", "example.com:443", true},
		{"tcp4", "garbage", true},
	} {
		err := outbound.Control(strict, tt.network, tt.address)
		if got := errors.Is(err, outbound.ErrBlockedDestination); got != tt.blocked || (!tt.blocked && err != nil) {
			t.Errorf("control(%s, %s) = %v, want blocked %v", tt.network, tt.address, err, tt.blocked)
		}
		if err := outbound.Control(private, tt.network, tt.address); err != nil {
			t.Errorf("AllowPrivate control(%s, %s) = %v", tt.network, tt.address, err)
		}
	}
}

func TestDo(t *testing.T) {
	private := outbound.New(outbound.Options{AllowPrivate: true})
	t.Run("request and answer", func(t *testing.T) {
		var gotUA, gotAuth, gotBody string
		srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			gotUA, gotAuth, gotBody = r.UserAgent(), r.Header.Get("Authorization"), string(b)
			w.Header().Set("X-Answer", "42")
			w.WriteHeader(http.StatusTeapot)
			io.WriteString(w, "short and stout")
		})
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/x", strings.NewReader("in"))
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err := private.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusTeapot || string(resp.Body) != "short and stout" || resp.Header.Get("X-Answer") != "42" {
			t.Fatalf("%+v", resp)
		}
		if gotUA != outbound.DefaultUserAgent || gotAuth != "Bearer s3cret" || gotBody != "in" {
			t.Fatalf("server saw UA %q auth %q body %q", gotUA, gotAuth, gotBody)
		}
		if req.Header.Get("User-Agent") != "" {
			t.Fatal("Do modified the caller's request")
		}
		req, _ = http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
		req.Header.Set("User-Agent", "mine")
		if _, err := private.Do(req); err != nil || gotUA != "mine" {
			t.Fatalf("UA %q %v", gotUA, err)
		}
		c := outbound.New(outbound.Options{AllowPrivate: true, UserAgent: "clearance-test/1"})
		if _, err := get(t, c, srv.URL); err != nil || gotUA != "clearance-test/1" {
			t.Fatalf("UA %q %v", gotUA, err)
		}
	})
	t.Run("TLS", func(t *testing.T) {
		srv := httptest.NewTLSServer(http.HandlerFunc(ok))
		defer srv.Close()
		pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
		c := outbound.New(outbound.Options{AllowPrivate: true, RootCAs: pool})
		if resp, err := get(t, c, srv.URL); err != nil || string(resp.Body) != "ok" {
			t.Fatalf("%v", err)
		}
		// Without the test CA the handshake fails: unreachable.
		_, err := get(t, private, srv.URL)
		wantErr(t, err, outbound.ErrUnreachable)
	})
	t.Run("redirects are not followed", func(t *testing.T) {
		target := serve(t, ok)
		for _, code := range []int{301, 302, 303, 307, 308, 300} {
			srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, target.URL+"/next", code)
			})
			resp, err := get(t, private, srv.URL)
			wantErr(t, err, outbound.ErrRedirect)
			if resp != nil || target.hits.Load() != 0 {
				t.Fatalf("%d: followed (%d hits)", code, target.hits.Load())
			}
		}
	})
	t.Run("body limit", func(t *testing.T) {
		const limit = 1000
		c := outbound.New(outbound.Options{AllowPrivate: true, MaxResponseBytes: limit})
		for _, tt := range []struct {
			name    string
			size    int
			chunked bool
			want    error
		}{
			{"at the limit", limit, false, nil},
			{"at the limit, chunked", limit, true, nil},
			{"one over", limit + 1, false, outbound.ErrResponseTooLarge},
			{"one over, chunked", limit + 1, true, outbound.ErrResponseTooLarge},
			{"far over, chunked", 10 * limit, true, outbound.ErrResponseTooLarge},
			{"empty", 0, false, nil},
		} {
			srv := serve(t, func(w http.ResponseWriter, _ *http.Request) {
				body := bytes.Repeat([]byte("x"), tt.size)
				if tt.chunked {
					w.(http.Flusher).Flush() // headers out before the body: no Content-Length
				}
				w.Write(body)
			})
			resp, err := get(t, c, srv.URL)
			if tt.want == nil {
				if err != nil || len(resp.Body) != tt.size {
					t.Errorf("%s: %v", tt.name, err)
				}
				continue
			}
			if !errors.Is(err, tt.want) || resp != nil {
				t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
			}
		}
	})
	t.Run("default body limit", func(t *testing.T) {
		srv := serve(t, func(w http.ResponseWriter, _ *http.Request) {
			w.Write(make([]byte, outbound.DefaultMaxResponseBytes+1))
		})
		_, err := get(t, private, srv.URL)
		wantErr(t, err, outbound.ErrResponseTooLarge)
	})
	t.Run("invalid requests", func(t *testing.T) {
		if _, err := private.Do(nil); !errors.Is(err, outbound.ErrInvalidURL) {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodGet, "ftp://example.com/", nil)
		if _, err := private.Do(req); !errors.Is(err, outbound.ErrInvalidURL) {
			t.Fatal(err)
		}
	})
}

// TestUnreachable: every way of not getting an answer is ErrUnreachable
// with its cause, and names no secret of the URL.
func TestUnreachable(t *testing.T) {
	const secret = "hook-s3cret"
	t.Run("closed listener", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(ok))
		url := srv.URL + "/" + secret + "?token=" + secret
		srv.Close()
		_, err := get(t, outbound.New(outbound.Options{AllowPrivate: true}), url)
		wantErr(t, err, outbound.ErrUnreachable)
		var op *net.OpError
		if !errors.As(err, &op) || op.Op != "dial" {
			t.Fatalf("the cause is lost: %v", err)
		}
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("error shows the path or query: %v", err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		release := make(chan struct{})
		srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		defer close(release)
		c := outbound.New(outbound.Options{AllowPrivate: true, Timeout: 50 * time.Millisecond})
		_, err := get(t, c, srv.URL+"/"+secret)
		wantErr(t, err, outbound.ErrUnreachable)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("not a timeout: %v", err)
		}
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("error shows the path: %v", err)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		entered := make(chan struct{})
		srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			<-r.Context().Done()
		})
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-entered
			cancel()
		}()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		_, err := outbound.New(outbound.Options{AllowPrivate: true}).Do(req)
		wantErr(t, err, outbound.ErrUnreachable)
		wantErr(t, err, context.Canceled)
	})
	t.Run("reset in the body", func(t *testing.T) {
		srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this")
			buf.Flush()
			conn.Close()
		})
		_, err := get(t, outbound.New(outbound.Options{AllowPrivate: true}), srv.URL)
		wantErr(t, err, outbound.ErrUnreachable)
		wantErr(t, err, io.ErrUnexpectedEOF)
	})
	t.Run("garbage instead of HTTP", func(t *testing.T) {
		srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Write([]byte("SSH-2.0-OpenSSH\r\n"))
			conn.Close()
		})
		_, err := get(t, outbound.New(outbound.Options{AllowPrivate: true}), srv.URL)
		wantErr(t, err, outbound.ErrUnreachable)
	})
}

// TestNoProxy: the environment's proxy is never used (it would dial the
// destination itself, past the dial guard).
func TestNoProxy(t *testing.T) {
	proxy := serve(t, ok)
	target := serve(t, ok)
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("HTTPS_PROXY", proxy.URL)
	t.Setenv("http_proxy", proxy.URL)
	t.Setenv("https_proxy", proxy.URL)
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	c := outbound.New(outbound.Options{AllowPrivate: true})
	// A name, not a loopback literal: Go never proxies those anyway.
	outbound.SetHosts(c, map[string]string{"target.example": "127.0.0.1"})
	if _, err := get(t, c, "http://target.example:"+port(t, target.URL)+"/"); err != nil {
		t.Fatal(err)
	}
	if proxy.hits.Load() != 0 || target.hits.Load() != 1 {
		t.Fatalf("proxy %d hits, target %d", proxy.hits.Load(), target.hits.Load())
	}
}

func TestConcurrent(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.URL.Path) })
	c := outbound.New(outbound.Options{AllowPrivate: true})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			path := "/" + strings.Repeat("p", i+1)
			req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+path, nil)
			if err != nil {
				errs <- err
				return
			}
			resp, err := c.Do(req)
			if err == nil && string(resp.Body) != path {
				err = errors.New("answer " + string(resp.Body) + " for " + path)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
