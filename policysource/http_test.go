package policysource_test

import (
	"context"
	"io"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clearancehq/clearance/policysource"
)

// gitServer serves the repositories under root over Git's smart HTTP
// protocol with git http-backend, as a Git host would.
func gitServer(t *testing.T, root string) *httptest.Server {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed: no smart-HTTP server to test against")
	}
	srv := httptest.NewServer(&cgi.Handler{
		Path: git, Args: []string{"http-backend"}, Dir: root, InheritEnv: []string{"PATH", "HOME"}, Stderr: io.Discard,
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=uploadpack.allowReachableSHA1InWant", "GIT_CONFIG_VALUE_0=true"},
	})
	t.Cleanup(srv.Close)
	return srv
}

func TestPullOverSmartHTTP(t *testing.T) {
	h := newHarness(t, harnessOptions{allowPrivate: true})
	ctx := context.Background()
	r := newRepo(t, filepath.Join(h.root, "payments"))
	v1 := r.commit("v1", goodFiles(10000))
	r.tag("release-1")
	v2 := r.commit("v2", goodFiles(5000))
	srv := gitServer(t, h.root)
	url := srv.URL + "/payments"
	org := h.org("acme")

	h.put(org, map[string]any{"repository": url, "directory": "policies", "publish": "activate"})
	res := h.pull(org)
	if res.Status != policysource.StatusPublished || res.Commit != v2 || res.Tests.Passed != 2 {
		t.Fatalf("pull = %+v", res)
	}
	info, err := h.engine.Policies.Bundle(ctx, org, v2)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Active || info.Bundle.Source.Repository != url || info.Bundle.Source.Commit != v2 {
		t.Fatalf("published %+v source %+v", info, info.Bundle.Source)
	}
	if res := h.pull(org); res.Status != policysource.StatusUnchanged {
		t.Fatalf("second pull = %+v", res)
	}
	for _, ref := range []string{"release-1", v1} {
		h.put(org, map[string]any{"repository": url, "ref": ref, "directory": "policies", "publish": "stage"})
		if res := h.pull(org); res.Status != policysource.StatusPublished && res.Status != policysource.StatusUnchanged || res.Commit != v1 {
			t.Fatalf("ref %s: pull = %+v", ref, res)
		}
	}
	h.put(org, map[string]any{"repository": srv.URL + "/nothing-here", "directory": "policies"})
	if res := h.pull(org); res.Status != policysource.StatusFailed || res.Reason != policysource.ReasonUnreadable {
		t.Fatalf("missing repository: pull = %+v", res)
	}

	// What a pull may receive is capped.
	small := newHarness(t, harnessOptions{allowPrivate: true, maxFetchBytes: 512})
	o := small.org("acme")
	small.put(o, map[string]any{"repository": url, "directory": "policies"})
	if res := small.pull(o); res.Status != policysource.StatusFailed || res.Reason != policysource.ReasonUnreadable {
		t.Fatalf("capped fetch: pull = %+v", res)
	}
	// And so is what it inflates to: a megabyte of zeros is a small pack.
	r.commit("padding", map[string]string{"policies/padding.json": `"` + strings.Repeat("0", 1<<20) + `"`})
	tree := newHarness(t, harnessOptions{allowPrivate: true, maxTreeBytes: 1 << 20})
	o = tree.org("acme")
	tree.put(o, map[string]any{"repository": url, "directory": "policies"})
	if res := tree.pull(o); res.Status != policysource.StatusFailed || res.Reason != policysource.ReasonUnreadable ||
		!strings.Contains(res.Message, "larger than") {
		t.Fatalf("inflated fetch: pull = %+v", res)
	}
}

func TestPrivateDestinationsRefused(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx := context.Background()
	org := h.org("acme")
	for _, u := range []string{
		"http://127.0.0.1:8080/acme/policies.git",
		"https://127.0.0.1/acme/policies.git",
		"https://10.0.0.7/acme/policies.git",
		"https://[::1]/acme/policies.git",
		"https://localhost/acme/policies.git",
		"https://git.internal/acme/policies.git",
		"http://example.com/acme/policies.git", // plain http needs private destinations allowed
	} {
		if _, err := h.src.Put(ctx, org, mustJSON(t, map[string]any{"repository": u})); code(err) != policysource.CodeSourceNotAllowed {
			t.Errorf("%s: %v", u, err)
		}
	}
	for _, u := range []string{"https://user:pw@example.com/acme/policies.git", "https://example.com:0/x", "https://example.com/x#frag"} {
		if _, err := h.src.Put(ctx, org, mustJSON(t, map[string]any{"repository": u})); code(err) != policysource.CodeInvalidSource {
			t.Errorf("%s: %v", u, err)
		}
	}
	if src := h.put(org, map[string]any{"repository": "https://git.example.com/acme/policies.git"}); src.Repository != "https://git.example.com/acme/policies.git" {
		t.Fatalf("link = %+v", src)
	}

	// A link saved while private destinations were allowed is judged again
	// at every pull.
	allowed := newHarness(t, harnessOptions{allowPrivate: true})
	r := newRepo(t, filepath.Join(allowed.root, "payments"))
	r.commit("v1", goodFiles(10000))
	srv := gitServer(t, allowed.root)
	o := allowed.org("acme")
	allowed.put(o, map[string]any{"repository": srv.URL + "/payments", "directory": "policies"})
	strict := allowed.service(harnessOptions{})
	res, err := strict.Pull(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != policysource.StatusFailed || res.Reason != policysource.ReasonUnreadable || !strings.Contains(res.Message, "http") {
		t.Fatalf("pull = %+v", res)
	}
}
