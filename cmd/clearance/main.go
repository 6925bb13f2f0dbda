// Command clearance runs the Clearance server and its admin tools.
//
//	clearance serve                      # embedded store under ./clearance-data, 127.0.0.1:8080
//	clearance serve --config clearance.yaml --check-config  # print the settings it would run with
//	clearance healthcheck                # exit 0 when the server on CLEARANCE_ADDR is healthy
//	clearance admin org create --name N  # create an org with the platform key
//	clearance keys agent new --register  # an agent key, registered with the org
//	clearance cycle --intent i.json -- CMD  # CMD runs only under a claimed grant
//	clearance keys init --grant-key-file F  # the first key file servers share
//	clearance keys rotate                # new grant signing key; the old one drains
//	clearance keys revoke --kid K        # withdraw a leaked grant key at once
//	clearance verify packet --ledger-key K packet.json  # offline verification
//	clearance policy check bundle.yaml   # compile a policy bundle; also test, eval, replay, push
//	clearance version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage:
  clearance serve [flags]                 run the server (see clearance serve -h)
  clearance healthcheck [--url URL]       exit 0 when the server's /v1/health says ok, else 1 (for containers)
  clearance admin org|key|scopes …        orgs, their API keys and scopes, with the platform key (see clearance admin -h)
  clearance keys init|rotate|revoke|agent create, rotate or revoke signing keys; a new agent key (see clearance keys help)
  clearance intent sign [FILE]            sign an agent's intent: prints the JWS enforce-and-bind takes
  clearance cycle --intent FILE -- CMD    a guarded cycle: CMD runs only when its grant's claim says so
  clearance loadtest [flags]              drive a server with evaluate, cycle or mixed load
  clearance migrate --store postgres://…  apply the PostgreSQL schema migrations
  clearance verify packet|capsule|ledger|pack|receipt   verify evidence offline with public keys (see clearance verify -h)
  clearance policy check|test|eval|replay|push   author, test and publish policies (see clearance policy -h)
  clearance version                       print the version and the build it is (also --version)
Every command answers -h with its usage (exit 0).
`

// isHelp reports whether arg asks a command for its usage.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "--help", "-help", "help":
		return true
	}
	return false
}

// flagExit is the exit status after a flag set's Parse failed: 0 when
// the user asked for -h (the flag package printed the usage), else 2.
func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr)
	case "healthcheck":
		return healthcheck(ctx, args[1:], stdout, stderr)
	case "admin":
		return admin(ctx, args[1:], stdout, stderr)
	case "keys":
		return keys(ctx, args[1:], stdout, stderr)
	case "intent":
		return intentCmd(args[1:], stdout, stderr)
	case "cycle":
		return cycle(ctx, args[1:], stdout, stderr)
	case "loadtest":
		return loadtest(ctx, args[1:], stdout, stderr)
	case "migrate":
		return migrate(ctx, args[1:], stdout, stderr)
	case "verify":
		return verify(args[1:], stdout, stderr)
	case "policy":
		return policyCmd(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, versionString())
		return 0
	case "-h", "--help", "-help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "clearance: unknown command %q\n%s", args[0], usage)
	return 2
}
