// Command clearance-approver runs Clearance's reference approval service:
// the service at which Clearance opens approval requests when a policy
// escalates, where humans approve or deny them with a passkey, and which
// seals each decision in a receipt (docs/approver.md).
//
//	clearance-approver serve --credentials-file FILE          # 127.0.0.1:8090, data in ./clearance-approver-data
//	clearance-approver enroll --org ORG --approver ID --credentials-file FILE
package main

import (
	"context"
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage:
  clearance-approver serve [flags]    run the approval service (see clearance-approver serve -h)
  clearance-approver enroll [flags]   open a passkey enrollment link for an approver (see clearance-approver enroll -h)
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr)
	case "enroll":
		return enroll(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "clearance-approver: unknown command %q\n%s", args[0], usage)
	return 2
}

// env returns the environment value of name, or def.
func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}
