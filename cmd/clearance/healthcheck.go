package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"strings"
	"time"
)

// defaultHealthTimeout bounds one health check: a container runtime's own
// timeout (Docker's default is 30s) should never be what ends it.
const defaultHealthTimeout = 3 * time.Second

// healthcheck asks a server's GET /v1/health whether it is healthy: exit 0
// when it answers 200 with status "ok", 1 otherwise (unreachable, slow,
// degraded), 2 on a usage error. It exists for a container image that has
// no shell or curl to run a HEALTHCHECK with.
func healthcheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("url", localURLOf(env("CLEARANCE_ADDR", "127.0.0.1:8080")), "base URL of the server to check; the default is the loopback address of serve's --addr as CLEARANCE_ADDR gives it (0.0.0.0:8080 is checked at 127.0.0.1:8080)")
	timeout := fs.Duration("timeout", defaultHealthTimeout, "how long to wait for the answer")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: clearance healthcheck [--url URL] [--timeout D]\nGET URL/v1/health: exit 0 when the server answers 200 with status \"ok\", 1 otherwise.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	u, err := neturl.Parse(*base)
	if fs.NArg() > 0 || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || *timeout <= 0 {
		fs.Usage()
		return 2
	}
	healthURL := strings.TrimSuffix(u.String(), "/") + "/v1/health"
	status, err := health(ctx, healthURL, *timeout)
	if err != nil {
		fmt.Fprintf(stderr, "clearance healthcheck: %s: unhealthy: %v\n", healthURL, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: %s\n", healthURL, status)
	return 0
}

// health fetches healthURL and returns its status, or why the server is
// not healthy.
func health(ctx context.Context, healthURL string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, healthURL, nil)
	if err != nil {
		return "", err
	}
	// Its own transport: no proxy from the environment, no kept connection.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if err != nil {
		return "", err
	}
	var h struct {
		Status string `json:"status"`
	}
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %.300s", res.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, &h); err != nil || h.Status != "ok" {
		return "", fmt.Errorf("200 without status \"ok\": %.300s", strings.TrimSpace(string(body)))
	}
	return h.Status, nil
}

// localURLOf is the URL at which a process on the same host reaches a
// server listening on addr: an unspecified host (0.0.0.0, ::, none) is
// the loopback address of its family.
func localURLOf(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port)
}
