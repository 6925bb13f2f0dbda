package server_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/server"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// ExampleNew serves the HTTP API of an Engine.
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "clearance-server-example-")
	defer os.RemoveAll(dir)
	backend, err := pebblestore.Open(dir, pebblestore.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer backend.Close()
	engine, _ := clearance.Open(backend, clearance.Options{})

	srv := httptest.NewServer(server.New(engine, server.Options{}))
	defer srv.Close()

	res, err := http.Get(srv.URL + "/v1/protocol/reason-codes") // needs a key
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	fmt.Println(res.StatusCode, res.Header.Get("Content-Type"), len(body) > 0)
	// Output: 401 application/problem+json true
}
