package approver

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// hint is what the fake Clearance received.
type hint struct {
	auth string
	body CompletionHint
	raw  string
}

// fakeClearance records completion hints; it answers with the statuses of
// answers in turn, then 204.
func fakeClearance(t *testing.T, answers ...int) (*httptest.Server, chan hint) {
	t.Helper()
	got := make(chan hint, 16)
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != PresenceCompletionsPath || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("hint sent as %s %s %q", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
		}
		raw, _ := io.ReadAll(r.Body)
		var h CompletionHint
		if err := json.Unmarshal(raw, &h); err != nil {
			t.Errorf("hint body %s: %v", raw, err)
		}
		got <- hint{r.Header.Get("Authorization"), h, string(raw)}
		i := int(n.Add(1)) - 1
		if i < len(answers) {
			w.WriteHeader(answers[i])
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestCompletionHintAfterDecision: a decision made on the page reaches
// Clearance as a hint with the org's key; a refused ceremony sends none.
func TestCompletionHintAfterDecision(t *testing.T) {
	srv, got := fakeClearance(t)
	n, err := NewCompletionNotifier(NotifierOptions{ClearanceURL: srv.URL + "/", Keys: map[string]string{orgA: "clr_org_key_a"}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(o *Options) { o.OnDecision = n.Notify })
	a := h.enroll(orgA, credA, "alice")
	r := h.open(orgA, credA, "esc-1")
	a.noUV = true
	h.finish(r, StatusApproved, a.assert(t, h.begin(r, StatusApproved)))
	a.noUV = false
	h.decide(r, StatusApproved, a)
	n.Close(context.Background()) // waits for the hint in flight
	select {
	case x := <-got:
		want := CompletionHint{EscalationID: "esc-1", RequestID: r.RequestID, OrgID: orgA}
		if x.auth != "Bearer clr_org_key_a" || x.body != want {
			t.Errorf("hint %+v, want %+v", x, want)
		}
		var m map[string]any
		_ = json.Unmarshal([]byte(x.raw), &m)
		if len(m) != 3 {
			t.Errorf("hint members %v", m)
		}
	default:
		t.Fatal("no hint sent")
	}
	select {
	case x := <-got:
		t.Fatalf("a second hint: %+v", x)
	default:
	}
}

func TestCompletionNotifier(t *testing.T) {
	decided := ApprovalRequest{RequestID: "apr_1", OrgID: orgA, EscalationID: "esc-1", Status: StatusDenied}
	t.Run("retried after 5xx", func(t *testing.T) {
		srv, got := fakeClearance(t, http.StatusServiceUnavailable, http.StatusBadGateway)
		n, _ := NewCompletionNotifier(NotifierOptions{ClearanceURL: srv.URL, Keys: map[string]string{orgA: "k"}, Backoff: time.Millisecond, Logger: quietLogger()})
		n.Notify(decided)
		n.Close(context.Background())
		if len(got) != 3 {
			t.Fatalf("%d attempts, want 3", len(got))
		}
	})
	t.Run("not retried after 4xx", func(t *testing.T) {
		srv, got := fakeClearance(t, http.StatusUnauthorized)
		n, _ := NewCompletionNotifier(NotifierOptions{ClearanceURL: srv.URL, Keys: map[string]string{orgA: "k"}, Backoff: time.Millisecond, Logger: quietLogger()})
		n.Notify(decided)
		n.Close(context.Background())
		if len(got) != 1 {
			t.Fatalf("%d attempts, want 1", len(got))
		}
	})
	t.Run("nothing without a key or a decision", func(t *testing.T) {
		srv, got := fakeClearance(t)
		n, _ := NewCompletionNotifier(NotifierOptions{ClearanceURL: srv.URL, Keys: map[string]string{orgB: "k"}, Logger: quietLogger()})
		n.Notify(decided)
		pending := decided
		pending.OrgID, pending.Status = orgB, StatusPending
		n.Notify(pending)
		n.Close(context.Background())
		if len(got) != 0 {
			t.Fatalf("%d hints sent", len(got))
		}
	})
	t.Run("redirects not followed", func(t *testing.T) {
		target, got := fakeClearance(t)
		redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+PresenceCompletionsPath, http.StatusTemporaryRedirect)
		}))
		defer redirect.Close()
		n, _ := NewCompletionNotifier(NotifierOptions{ClearanceURL: redirect.URL, Keys: map[string]string{orgA: "k"}, Logger: quietLogger()})
		n.Notify(decided)
		n.Close(context.Background())
		if len(got) != 0 {
			t.Fatal("the hint followed a redirect, with the key")
		}
	})
	t.Run("close abandons at its deadline", func(t *testing.T) {
		srv, got := fakeClearance(t, http.StatusServiceUnavailable)
		n, _ := NewCompletionNotifier(NotifierOptions{ClearanceURL: srv.URL, Keys: map[string]string{orgA: "k"}, Backoff: time.Hour, Logger: quietLogger()})
		n.Notify(decided)
		<-got // the first attempt was answered 503; the retry waits an hour
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		n.Close(ctx) // returns without waiting for the hour
		n.Notify(decided)
		if len(got) != 0 {
			t.Fatal("a hint after Close")
		}
	})
	t.Run("bad URL", func(t *testing.T) {
		for _, u := range []string{"", "clearance.example", "ftp://x", "https://u:p@x", "https://x/?q"} {
			if _, err := NewCompletionNotifier(NotifierOptions{ClearanceURL: u}); err == nil {
				t.Errorf("%q accepted", u)
			}
		}
	})
}
