package outbound_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"

	"github.com/clearancehq/clearance/internal/outbound"
)

func ExampleBlocked() {
	for _, s := range []string{"8.8.8.8", "169.254.169.254", "::ffff:10.0.0.1", "64:ff9b::8.8.8.8", "2002:7f00:1::1", "2001::1"} {
		fmt.Println(s, outbound.Blocked(netip.MustParseAddr(s)))
	}
	// Output:
	// 8.8.8.8 false
	// 169.254.169.254 true
	// ::ffff:10.0.0.1 true
	// 64:ff9b::8.8.8.8 false
	// 2002:7f00:1::1 true
	// 2001::1 true
}

func ExampleClient_CheckURL() {
	c := outbound.New(outbound.Options{})
	for _, raw := range []string{
		"https://hooks.example.com/clearance",
		"http://hooks.example.com/clearance",
		"https://user:pass@hooks.example.com/",
		"https://169.254.169.254/latest/meta-data/",
		"https://localhost:8443/",
	} {
		_, err := c.CheckURL(raw)
		fmt.Printf("%s %q\n", raw, outbound.CodeOf(err))
	}
	// Output:
	// https://hooks.example.com/clearance ""
	// http://hooks.example.com/clearance "OUTBOUND_INVALID_URL"
	// https://user:pass@hooks.example.com/ "OUTBOUND_INVALID_URL"
	// https://169.254.169.254/latest/meta-data/ "OUTBOUND_BLOCKED_DESTINATION"
	// https://localhost:8443/ "OUTBOUND_BLOCKED_DESTINATION"
}

func ExampleClient_Do() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, "received "+r.Header.Get("X-Clearance-Event"))
	}))
	defer srv.Close()

	// A loopback receiver needs AllowPrivate; production keeps it off.
	c := outbound.New(outbound.Options{AllowPrivate: true})
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/hook", nil)
	if err != nil {
		panic(err)
	}
	req.Header.Set("X-Clearance-Event", "decision.resolved")
	resp, err := c.Do(req)
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.StatusCode, string(resp.Body))

	// The same receiver without AllowPrivate: refused before any connection
	// (plain http; TLS is required).
	_, err = outbound.New(outbound.Options{}).Do(req)
	fmt.Println(outbound.CodeOf(err))
	// Output:
	// 202 received decision.resolved
	// OUTBOUND_INVALID_URL
}
