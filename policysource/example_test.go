package policysource_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/policysource"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// An org links a directory of a repository; a pull compiles the bundle
// there at the branch's commit, runs its tests and, as they pass,
// publishes it with the commit as its version. Pulling the same commit
// again changes nothing.
func Example() {
	ctx := context.Background()
	root, _ := os.MkdirTemp("", "policy-repos")
	defer os.RemoveAll(root)

	// A repository with a bundle and its tests.
	dir := filepath.Join(root, "payments")
	repo, _ := git.PlainInitWithOptions(dir, &git.PlainInitOptions{InitOptions: git.InitOptions{DefaultBranch: "refs/heads/main"}})
	os.MkdirAll(filepath.Join(dir, "policies", "tests"), 0o755)
	os.WriteFile(filepath.Join(dir, "policies", "bundle.yaml"), []byte(`bundle_id: payments
version: dev
mode: ENFORCEMENT
rules:
  - {id: big, match: [{field: amount, op: ge, value: 10000}], outcome: BLOCK, reason_codes: [TOO_BIG]}
default: {outcome: ALLOW, reason_codes: [OK]}
`), 0o644)
	os.WriteFile(filepath.Join(dir, "policies", "tests", "payments.yaml"), []byte(`cases:
  - name: big payments are blocked
    input: '{"amount": 20000}'
    expect: {outcome: BLOCK, reason_codes: [PROTOCOL_OUTCOME_BLOCK, POLICY_MATCHED, TOO_BIG]}
`), 0o644)
	wt, _ := repo.Worktree()
	wt.Add("policies")
	sig := &object.Signature{Name: "Author", Email: "author@example.com", When: time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)}
	commit, _ := wt.Commit("payments policy", &git.CommitOptions{Author: sig})

	// The engine, and the feature beside it as the engine wires it.
	backend, _ := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem()})
	defer backend.Close()
	engine, _ := clearance.Open(backend, clearance.Options{})
	deps := core.Deps{Store: core.NewStore(backend), Clock: core.Clock(time.Now), IDs: core.IDs{Rand: rand.Reader},
		Logger: slog.New(slog.DiscardHandler), JSON: strictjson.Options{RejectUnknown: true}}
	sources := policysource.New(deps, policysource.Config{Policies: engine.Policies, LocalRoots: []string{root}})

	org, _ := engine.Admin.CreateOrg(ctx, "Acme")
	link := fmt.Sprintf(`{"repository": %q, "directory": "policies", "publish": "activate"}`, dir)
	if _, err := sources.Put(ctx, org.Org.ID, []byte(link)); err != nil {
		fmt.Println(err)
		return
	}
	res, _ := sources.Pull(ctx, org.Org.ID)
	fmt.Println(res.Status, res.Tests.Passed, "passed", res.Version == commit.String())
	res, _ = sources.Pull(ctx, org.Org.ID)
	fmt.Println(res.Status)
	// Output:
	// published 1 passed true
	// unchanged
}
