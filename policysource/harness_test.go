package policysource_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/outbound"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/policysource"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// harness is an engine over Pebble in a temp dir with a clock the test
// moves (the store's clock too), and the policy-source feature beside it,
// as the engine will wire it.
type harness struct {
	t       *testing.T
	backend *pebblestore.Store
	engine  *clearance.Engine
	deps    core.Deps
	src     *policysource.Service
	root    string // the LocalRoot
	mu      sync.Mutex
	now     time.Time
}

type harnessOptions struct {
	allowPrivate  bool
	maxFetchBytes int64
	maxTreeBytes  int64
}

func newHarness(t *testing.T, o harnessOptions) *harness {
	t.Helper()
	h := &harness{t: t, now: time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC), root: filepath.Join(t.TempDir(), "repos")}
	if err := os.MkdirAll(h.root, 0o755); err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { h.mu.Lock(); defer h.mu.Unlock(); return h.now }
	b, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	h.backend = b
	h.engine, err = clearance.Open(b, clearance.Options{Now: clock, AllowPrivateDestinations: o.allowPrivate})
	if err != nil {
		t.Fatal(err)
	}
	h.deps = core.Deps{Store: core.NewStore(b), Clock: core.Clock(clock), IDs: core.IDs{Rand: rand.Reader},
		Logger: slog.New(slog.DiscardHandler), JSON: strictjson.Options{RejectUnknown: true}}
	h.src = h.service(o)
	return h
}

// service is another instance of the feature over the same store: what a
// second server would run.
func (h *harness) service(o harnessOptions) *policysource.Service {
	return policysource.New(h.deps, policysource.Config{Policies: h.engine.Policies, LocalRoots: []string{h.root},
		Client: outbound.New(outbound.Options{AllowPrivate: o.allowPrivate}), MaxFetchBytes: o.maxFetchBytes, MaxTreeBytes: o.maxTreeBytes})
}

func (h *harness) advance(d time.Duration) { h.mu.Lock(); h.now = h.now.Add(d); h.mu.Unlock() }

func (h *harness) clock() time.Time { h.mu.Lock(); defer h.mu.Unlock(); return h.now }

func (h *harness) org(name string) string {
	h.t.Helper()
	o, err := h.engine.Admin.CreateOrg(context.Background(), name)
	if err != nil {
		h.t.Fatal(err)
	}
	return o.Org.ID
}

// put links org with body (a map, JSON-encoded) and fails the test on an
// error.
func (h *harness) put(org string, body map[string]any) policysource.Source {
	h.t.Helper()
	s, err := h.src.Put(context.Background(), org, mustJSON(h.t, body))
	if err != nil {
		h.t.Fatalf("Put %v: %v", body, err)
	}
	return s
}

func (h *harness) pull(org string) policysource.PullResult {
	h.t.Helper()
	res, err := h.src.Pull(context.Background(), org)
	if err != nil {
		h.t.Fatalf("Pull: %v", err)
	}
	return res
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// code is the stable code of an engine error.
func code(err error) string {
	var ce *core.Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return fmt.Sprint(err)
}

// repo is a real Git repository in a temp dir, committed to with a fixed
// signature and a time that moves one minute per commit.
type repo struct {
	t    *testing.T
	dir  string
	r    *git.Repository
	when time.Time
}

func newRepo(t *testing.T, dir string) *repo {
	t.Helper()
	r, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{InitOptions: git.InitOptions{DefaultBranch: "refs/heads/main"}})
	if err != nil {
		t.Fatal(err)
	}
	return &repo{t: t, dir: dir, r: r, when: time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)}
}

// commit writes files (path → content; "" removes the file) and commits
// them, returning the commit id.
func (r *repo) commit(msg string, files map[string]string) string {
	r.t.Helper()
	wt, err := r.r.Worktree()
	if err != nil {
		r.t.Fatal(err)
	}
	for p, content := range files {
		full := filepath.Join(r.dir, filepath.FromSlash(p))
		if content == "" {
			if _, err := wt.Remove(p); err != nil {
				r.t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
		if _, err := wt.Add(p); err != nil {
			r.t.Fatal(err)
		}
	}
	r.when = r.when.Add(time.Minute)
	sig := &object.Signature{Name: "Policy Author", Email: "author@example.com", When: r.when}
	h, err := wt.Commit(msg, &git.CommitOptions{Author: sig, Committer: sig})
	if err != nil {
		r.t.Fatal(err)
	}
	return h.String()
}

// tag makes an annotated tag of the head commit.
func (r *repo) tag(name string) {
	r.t.Helper()
	head, err := r.r.Head()
	if err != nil {
		r.t.Fatal(err)
	}
	sig := &object.Signature{Name: "Policy Author", Email: "author@example.com", When: r.when}
	if _, err := r.r.CreateTag(name, head.Hash(), &git.CreateTagOptions{Tagger: sig, Message: "release " + name}); err != nil {
		r.t.Fatal(err)
	}
}

// A bundle with a limit: amounts at or above it are blocked.
func bundleYAML(limit int) string {
	return fmt.Sprintf(`bundle_id: payments
version: dev
mode: ENFORCEMENT
rules:
  - id: big
    match:
      - {field: amount, op: ge, value: %d}
    outcome: BLOCK
    reason_codes: [TOO_BIG]
default:
  outcome: ALLOW
  reason_codes: [OK]
`, limit)
}

// The tests the bundle must pass: 50 is allowed, 20000 is blocked.
const paymentTests = `cases:
  - name: small payments pass
    input: '{"amount": 50}'
    expect: {outcome: ALLOW, reason_codes: [PROTOCOL_OUTCOME_ALLOW, NO_RULE_MATCHED, OK]}
  - name: big payments are blocked
    input: '{"amount": 20000}'
    expect: {outcome: BLOCK, reason_codes: [PROTOCOL_OUTCOME_BLOCK, POLICY_MATCHED, TOO_BIG]}
`

// goodFiles is a directory "policies" that passes its tests.
func goodFiles(limit int) map[string]string {
	return map[string]string{"policies/bundle.yaml": bundleYAML(limit), "policies/tests/payments.yaml": paymentTests, "README.md": "policies\n"}
}
