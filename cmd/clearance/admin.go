package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/clearancehq/clearance/cmd/clearance/internal/keyfile"
)

func admin(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const adminUsage = "usage: clearance admin org create --name NAME [--server URL] [--data DIR]\n"
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, adminUsage)
		return 0
	}
	if len(args) < 2 || args[0] != "org" || args[1] != "create" {
		fmt.Fprint(stderr, adminUsage)
		return 2
	}
	fs := flag.NewFlagSet("admin org create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "", "organization name (required)")
	srv := fs.String("server", env("CLEARANCE_SERVER", "http://127.0.0.1:8080"), "server URL (env CLEARANCE_SERVER)")
	data := fs.String("data", env("CLEARANCE_DATA", "clearance-data"), "data directory holding platform.key (env CLEARANCE_DATA)")
	if err := fs.Parse(args[2:]); err != nil {
		return flagExit(err)
	}
	if strings.TrimSpace(*name) == "" {
		fmt.Fprintln(stderr, "clearance: --name is required")
		return 2
	}
	key := os.Getenv("CLEARANCE_PLATFORM_KEY")
	if key == "" {
		var err error
		key, err = keyfile.ReadSecret(filepath.Join(*data, platformKeyFile))
		if err != nil {
			fmt.Fprintf(stderr, "clearance: no platform key: set CLEARANCE_PLATFORM_KEY or --data (%v)\n", err)
			return 1
		}
	}
	body, _ := json.Marshal(map[string]string{"name": *name})
	out, err := post(ctx, strings.TrimRight(*srv, "/")+"/v1/platform/orgs", key, body)
	if err != nil {
		fmt.Fprintf(stderr, "clearance: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, strings.TrimSpace(string(out)))
	return 0
}

func post(ctx context.Context, url, key string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	out, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusCreated {
		return nil, errors.New(res.Status + ": " + strings.TrimSpace(string(out)))
	}
	return out, nil
}
