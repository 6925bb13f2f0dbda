package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/clearancehq/clearance/store/pgstore"
)

// migrate applies the embedded PostgreSQL migrations and exits; serve also
// applies them on start, so this is for deployments that migrate first.
func migrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("store", env("CLEARANCE_STORE", ""), "postgres:// URL (env CLEARANCE_STORE)")
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if !isPostgres(*url) {
		fmt.Fprintln(stderr, "clearance migrate: --store must be a postgres:// URL (the embedded store needs no migrations)")
		return 2
	}
	s, err := pgstore.Open(ctx, *url, pgstore.Options{MaxConns: 2}) // Open applies the migrations
	if err != nil {
		fmt.Fprintf(stderr, "clearance migrate: %v\n", err)
		return 1
	}
	s.Close()
	fmt.Fprintln(stdout, `{"migrated":true}`)
	return 0
}
