package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/internal/keyfile"
)

// keys handles `clearance keys rotate`: a new active grant signing key; the
// previous one stays in the JWKS until the grants it signed have drained.
func keys(args []string, stdout, stderr io.Writer) int {
	if len(args) < 1 || args[0] != "rotate" {
		fmt.Fprint(stderr, "usage: clearance keys rotate [--data DIR] [--drain DURATION]\n")
		return 2
	}
	fs := flag.NewFlagSet("keys rotate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", env("CLEARANCE_DATA", "clearance-data"), "data directory (env CLEARANCE_DATA)")
	drain := fs.Duration("drain", clearance.DefaultGrantTTL+clearance.DefaultClaimLease,
		"how long the previous key stays published: the longest grant lifetime plus the longest claim lease")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	ring, err := keyfile.Rotate(*data, "grant", time.Now(), *drain)
	if err != nil {
		fmt.Fprintf(stderr, "clearance: rotate: %v\n", err)
		return 1
	}
	type prev struct {
		KID       string `json:"kid"`
		KeepUntil string `json:"keep_until"`
	}
	out := struct {
		Active   string `json:"active_kid"`
		Previous []prev `json:"previous"`
		Note     string `json:"note"`
	}{Active: ring.Active().KID(), Previous: []prev{}, Note: "restart the server to sign with the new key"}
	for _, p := range ring.Previous() {
		out.Previous = append(out.Previous, prev{p.Key.KID(), p.KeepUntil.UTC().Format(time.RFC3339)})
	}
	b, _ := json.Marshal(out)
	fmt.Fprintln(stdout, string(b))
	return 0
}
