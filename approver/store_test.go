package approver

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStateSurvivesRestart: requests, decisions with their receipts, and
// approvers with their passkeys and counters are read back by a new
// service on the same directory.
func TestStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	fs1, err := OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(o *Options) { o.Store = fs1 })
	a := h.enroll(orgA, credA, "alice")
	decided := h.open(orgA, credA, "esc-1")
	h.decide(decided, StatusApproved, a)
	pending := h.open(orgA, credA, "esc-2")
	cancelled := h.open(orgA, credA, "esc-3")
	h.api(http.MethodDelete, "/v1/approval-requests/"+cancelled.RequestID, credA, nil)
	link := h.enrollmentLink(credA, "bob")
	before := h.get(credA, decided.RequestID)

	// A second store on the same directory is refused while the first is open.
	if _, err := OpenFileStore(dir); err == nil {
		t.Fatal("two stores on one directory")
	}
	if err := fs1.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, stateFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %#o", fi.Mode().Perm())
	}

	fs2, err := OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fs2.Close()
	h2 := newHarness(t, func(o *Options) { o.Store = fs2 })
	if got := h2.get(credA, decided.RequestID); got.Status != StatusApproved || got.Receipt != before.Receipt ||
		got.ApprovalURL != before.ApprovalURL || !got.DecidedAt.Equal(*before.DecidedAt) {
		t.Errorf("decided after restart: %+v, want %+v", got, before)
	}
	if got := h2.get(credA, cancelled.RequestID); got.Status != StatusCancelled {
		t.Errorf("cancelled after restart: %+v", got)
	}
	// The replay of an open is still recognized.
	res := h2.api(http.MethodPost, "/v1/approval-requests", credA, h.openBodyAt(orgA, "esc-2", pending))
	if res.Status != http.StatusOK {
		t.Errorf("replay after restart: %d %s", res.Status, res.Body)
	}
	// The passkey is known, and its counter was kept: a stale assertion is a
	// regression, a fresh one decides.
	stale := *a
	stale.counter = 0
	h2.refused(h2.finish(pending, StatusApproved, stale.assert(t, h2.begin(pending, StatusApproved))), http.StatusForbidden, CodeCounterRegression, pending)
	h2.decide(pending, StatusDenied, a)
	// The open enrollment link still works.
	bob := newSoftAuthenticator(t, testRPID, testOrigin)
	opts := h2.pagePost(link+"/begin", map[string]any{})
	if res := h2.pagePost(link+"/finish", map[string]any{"credential": json.RawMessage(bob.register(t, opts.Body))}); res.Status != http.StatusOK {
		t.Errorf("enrollment after restart: %d %s", res.Status, res.Body)
	}
	// The state file holds no enrollment token and no Clearance credential.
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{credA, strings.TrimPrefix(link, "/enroll/")} {
		if strings.Contains(string(data), secret) {
			t.Errorf("the state file holds %q", secret)
		}
	}
}

// openBodyAt is the open body of r as first sent.
func (h *harness) openBodyAt(org, esc string, r ApprovalRequest) map[string]any {
	b := h.openBody(org, esc)
	b["expires_at"] = r.ExpiresAt.Format("2006-01-02T15:04:05Z07:00")
	return b
}

// failingStore fails every Save while fail is set.
type failingStore struct {
	fail bool
	data []byte
}

func (s *failingStore) Load() ([]byte, error) { return s.data, nil }
func (s *failingStore) Save(b []byte) error {
	if s.fail {
		return errors.New("disk full")
	}
	s.data = append([]byte(nil), b...)
	return nil
}

// TestFailedSaveChangesNothing: when the state cannot be saved the change
// is refused (500) and undone in memory.
func TestFailedSaveChangesNothing(t *testing.T) {
	st := &failingStore{}
	h := newHarness(t, func(o *Options) { o.Store = st })
	a := h.enroll(orgA, credA, "alice")
	r := h.open(orgA, credA, "esc-1")
	opts := h.begin(r, StatusApproved)
	st.fail = true
	for _, res := range []response{
		h.api(http.MethodPost, "/v1/approval-requests", credA, h.openBody(orgA, "esc-2")),
		h.api(http.MethodDelete, "/v1/approval-requests/"+r.RequestID, credA, nil),
		h.api(http.MethodPost, "/v1/approvers", credA, map[string]any{"approver_id": "bob"}),
		h.finish(r, StatusApproved, a.assert(t, opts)),
	} {
		if res.Status != http.StatusInternalServerError || res.code(t) != CodeInternal || strings.Contains(string(res.Body), "disk full") {
			t.Errorf("with a failing store: %d %s", res.Status, res.Body)
		}
	}
	st.fail = false
	if got := h.get(credA, r.RequestID); got.Status != StatusPending || got.Receipt != "" {
		t.Fatalf("a failed save left %+v", got)
	}
	if len(h.decided()) != 0 {
		t.Fatal("a failed save reached OnDecision")
	}
	// The counter was put back too: the same counter value decides now.
	a.counter--
	h.decide(r, StatusApproved, a)
	if res := h.api(http.MethodPost, "/v1/approval-requests", credA, h.openBody(orgA, "esc-2")); res.Status != http.StatusCreated {
		t.Fatalf("open after the failure: %d %s", res.Status, res.Body)
	}
	// A new service reads what was saved.
	h2 := newHarness(t, func(o *Options) { o.Store = st })
	if got := h2.get(credA, r.RequestID); got.Status != StatusApproved {
		t.Fatalf("reloaded %+v", got)
	}
}

func TestCorruptStateIsRefused(t *testing.T) {
	for _, data := range []string{"{", `{"version":2}`, `{"version":1,"requests":[{"id":""}]}`} {
		if _, err := New(Options{PublicURL: testPublicURL, SigningKey: testKey(t), Store: &failingStore{data: []byte(data)}}); err == nil {
			t.Errorf("state %s accepted", data)
		}
	}
}

func TestLoadOrCreateKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	k1, created, err := LoadOrCreateKey(dir)
	if err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	path := filepath.Join(dir, keyFileName)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	k2, created, err := LoadOrCreateKey(dir)
	if err != nil || created || !k1.Equal(k2) {
		t.Fatalf("reload: %v %v", created, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateKey(dir); err == nil {
		t.Fatal("a key file others can read was used")
	}
	if err := os.WriteFile(path, []byte(`{"kid":"other","seed":"`+b64.EncodeToString(make([]byte, 32))+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateKey(dir); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("a kid that does not match: %v", err)
	}
}
