package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/clearancehq/clearance/client"
	"github.com/clearancehq/clearance/cmd/clearance/internal/keyfile"
	"github.com/clearancehq/clearance/tenant"
)

const adminUsage = `usage: clearance admin COMMAND [--server URL] [--data DIR]
  org create --name NAME [--format env]  create an organization; prints its first API key (org:*), shown once;
                                         --format env prints export lines for eval: CLEARANCE_API_KEY, CLEARANCE_ORG_ID
  org list [--after ORG_ID] [--limit N]  list organizations
  key create --org ORG_ID --scopes S,…   issue an API key with scopes; prints it, shown once
  key list --org ORG_ID                  an org's API keys (never their secrets)
  key revoke --org ORG_ID --key-id ID    revoke one API key at once
  scopes                                 the scopes a key may carry
The platform key comes from CLEARANCE_PLATFORM_KEY, else from DIR/platform.key; the server
from --server (env CLEARANCE_SERVER, default http://127.0.0.1:8080). Answers are JSON.
`

// scopeMeanings says what each scope opens, for `clearance admin scopes`.
var scopeMeanings = map[tenant.Scope]string{
	tenant.ScopeDecisionWrite:    "ask for decisions and grants; claim and finalize",
	tenant.ScopeDecisionRead:     "read decisions, dossiers and executions",
	tenant.ScopePolicyWrite:      "publish and activate policies; register agent and provider keys",
	tenant.ScopePolicyRead:       "read policies, drafts, diffs and replays",
	tenant.ScopeAuditRead:        "read the ledger, proofs and exports",
	tenant.ScopeAuditWrite:       "seal checkpoints, overrides, share links, exports",
	tenant.ScopeIntegrationWrite: "webhooks and signal connectors",
	tenant.ScopeEscalationWrite:  "cancel managed escalations (and nothing else decision:write allows)",
	tenant.ScopeAutomation:       "the automation connector's routes",
	tenant.ScopeOrgAll:           "everything the org may do",
}

// admin handles `clearance admin`: the platform operator's orgs and keys.
func admin(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, adminUsage)
		return 0
	}
	if len(args) == 1 && args[0] == "scopes" {
		out := make([]map[string]string, 0, len(tenant.AllScopes))
		for _, s := range tenant.AllScopes {
			out = append(out, map[string]string{"scope": string(s), "opens": scopeMeanings[s]})
		}
		return writeJSONLine(stdout, stderr, map[string]any{"scopes": out})
	}
	if len(args) < 2 {
		fmt.Fprint(stderr, adminUsage)
		return 2
	}
	cmd := args[0] + " " + args[1]
	switch cmd {
	case "org create", "org list", "key create", "key list", "key revoke":
	default:
		fmt.Fprintf(stderr, "clearance admin: unknown command %q\n%s", cmd, adminUsage)
		return 2
	}
	fs := flag.NewFlagSet("admin "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	srv := fs.String("server", env("CLEARANCE_SERVER", "http://127.0.0.1:8080"), "server URL (env CLEARANCE_SERVER)")
	data := fs.String("data", env("CLEARANCE_DATA", "clearance-data"), "data directory holding platform.key (env CLEARANCE_DATA)")
	name := fs.String("name", "", "organization name (org create)")
	org := fs.String("org", "", "organization id (key create, list, revoke)")
	scopes := fs.String("scopes", "", "comma-separated scopes (key create; see clearance admin scopes)")
	keyID := fs.String("key-id", "", "API key id (key revoke)")
	after := fs.String("after", "", "list after this org id (org list)")
	limit := fs.Int("limit", 0, "most orgs to list, 1 to 1000 (org list; default 100)")
	format := fs.String("format", "json", "json, or env: shell export lines (org create)")
	if err := fs.Parse(args[2:]); err != nil {
		return flagExit(err)
	}
	required := map[string][]string{"org create": {"name"}, "key create": {"org", "scopes"}, "key list": {"org"},
		"key revoke": {"org", "key-id"}}
	for _, f := range required[cmd] {
		if strings.TrimSpace(fs.Lookup(f).Value.String()) == "" {
			fmt.Fprintf(stderr, "clearance admin %s: --%s is required\n", cmd, f)
			return 2
		}
	}
	if *format != "json" && (*format != "env" || cmd != "org create") {
		fmt.Fprintf(stderr, "clearance admin %s: --format %q: want json (or env, for org create)\n", cmd, *format)
		return 2
	}
	key := os.Getenv("CLEARANCE_PLATFORM_KEY")
	if key == "" {
		var err error
		if key, err = keyfile.ReadSecret(filepath.Join(*data, platformKeyFile)); err != nil {
			fmt.Fprintf(stderr, "clearance: no platform key: set CLEARANCE_PLATFORM_KEY or --data (%v)\n", err)
			return 1
		}
	}
	c, err := client.New(*srv, key, client.WithUserAgent("clearance-cli/"+client.Version))
	if err != nil {
		fmt.Fprintf(stderr, "clearance: %v\n", err)
		return 2
	}
	var out any
	switch cmd {
	case "org create":
		out, err = c.CreateOrg(ctx, client.CreateOrgRequest{Name: *name})
	case "org list":
		out, err = c.Orgs(ctx, *after, *limit)
	case "key create":
		var sc []client.Scope
		for _, s := range strings.Split(*scopes, ",") {
			sc = append(sc, client.Scope(strings.TrimSpace(s)))
		}
		out, err = c.CreateAPIKey(ctx, *org, client.CreateAPIKeyRequest{Scopes: sc})
	case "key list":
		out, err = c.APIKeys(ctx, *org)
	case "key revoke":
		out, err = c.RevokeAPIKey(ctx, *org, *keyID)
	}
	if err != nil {
		var e *client.Error
		if errors.As(err, &e) {
			fmt.Fprintf(stderr, "clearance: %d %s: %s\n", e.Status, e.Code, strings.TrimSpace(e.Detail))
		} else {
			fmt.Fprintf(stderr, "clearance: %v\n", err)
		}
		return 1
	}
	if created, ok := out.(*client.CreatedOrg); ok && *format == "env" {
		// Keys and ids are visible ASCII without quotes; quoted anyway.
		fmt.Fprintf(stdout, "export CLEARANCE_API_KEY='%s'\nexport CLEARANCE_ORG_ID='%s'\n", created.ApiKey, created.OrgId)
		return 0
	}
	return writeJSONLine(stdout, stderr, out)
}
