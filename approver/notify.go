package approver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// PresenceCompletionsPath is Clearance's route for completion hints.
const PresenceCompletionsPath = "/v1/authority/presence-completions"

// NotifierOptions configure a CompletionNotifier.
type NotifierOptions struct {
	// ClearanceURL is Clearance's base URL, e.g. https://clearance.example.com.
	ClearanceURL string
	// Keys are Clearance API keys by org id: the hint for a decision of an
	// org without a key is not sent.
	Keys map[string]string
	// Client sends the hints; default a client with a 10 s timeout. The
	// notifier never follows a redirect.
	Client *http.Client
	// Logger receives delivery failures; default slog.Default(). Keys are
	// never logged.
	Logger *slog.Logger
	// Attempts is how many times a hint is tried (after a network error or
	// a 5xx or 429 answer); default 3.
	Attempts int
	// Backoff is the wait before the second attempt, doubled after each;
	// default 1 s.
	Backoff time.Duration
}

// CompletionNotifier tells Clearance that a human decided, so that it
// verifies the decision now rather than at its next poll. The hint is best
// effort: sent in the background, never blocking or changing a decision,
// its failures logged. Use its Notify as Options.OnDecision.
type CompletionNotifier struct {
	endpoint string
	keys     map[string]string
	client   *http.Client
	log      *slog.Logger
	attempts int
	backoff  time.Duration

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex // guards closed and wg.Add against Close
	closed bool
}

// NewCompletionNotifier checks o and returns a notifier.
func NewCompletionNotifier(o NotifierOptions) (*CompletionNotifier, error) {
	u, err := url.Parse(o.ClearanceURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("approver: the Clearance URL %q must be an absolute http(s) URL without userinfo, query or fragment", o.ClearanceURL)
	}
	n := &CompletionNotifier{
		endpoint: strings.TrimRight(o.ClearanceURL, "/") + PresenceCompletionsPath,
		keys:     make(map[string]string, len(o.Keys)),
		log:      o.Logger, attempts: o.Attempts, backoff: o.Backoff,
	}
	for org, k := range o.Keys {
		n.keys[org] = k
	}
	if n.log == nil {
		n.log = slog.Default()
	}
	if n.attempts <= 0 {
		n.attempts = 3
	}
	if n.backoff <= 0 {
		n.backoff = time.Second
	}
	base := o.Client
	if base == nil {
		base = &http.Client{Timeout: 10 * time.Second}
	}
	c := *base
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	n.client = &c
	n.ctx, n.cancel = context.WithCancel(context.Background())
	return n, nil
}

// Notify sends the completion hint of r in the background and returns at
// once. Hints for requests that are not APPROVED or DENIED, or of orgs
// without a key, are not sent.
func (n *CompletionNotifier) Notify(r ApprovalRequest) {
	if r.Status != StatusApproved && r.Status != StatusDenied {
		return
	}
	key, ok := n.keys[r.OrgID]
	if !ok {
		n.log.Debug("approver: no Clearance key for the org: completion hint not sent", "org", r.OrgID, "request_id", r.RequestID)
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.deliver(CompletionHint{EscalationID: r.EscalationID, RequestID: r.RequestID, OrgID: r.OrgID}, key)
	}()
}

// Close waits for the hints in flight (their retries included) until ctx
// is done, then abandons those still in flight, and returns once none is.
// Notify sends nothing after Close.
func (n *CompletionNotifier) Close(ctx context.Context) {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	done := make(chan struct{})
	go func() { n.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	n.cancel()
	<-done
}

func (n *CompletionNotifier) deliver(h CompletionHint, key string) {
	body, err := json.Marshal(h)
	if err != nil {
		return
	}
	wait := n.backoff
	var last error
	for attempt := 1; attempt <= n.attempts; attempt++ {
		if attempt > 1 {
			t := time.NewTimer(wait)
			select {
			case <-n.ctx.Done():
				t.Stop()
				n.log.Warn("approver: completion hint abandoned at shutdown", "request_id", h.RequestID, "org", h.OrgID, "error", errString(last))
				return
			case <-t.C:
			}
			wait *= 2
		}
		retry, err := n.post(body, key)
		if err == nil {
			return
		}
		last = err
		if !retry {
			break
		}
	}
	n.log.Warn("approver: completion hint not delivered", "request_id", h.RequestID, "org", h.OrgID, "error", errString(last))
}

// post sends one hint; retry reports whether a failure is worth another try.
func (n *CompletionNotifier) post(body []byte, key string) (retry bool, err error) {
	req, err := http.NewRequestWithContext(n.ctx, http.MethodPost, n.endpoint, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := n.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL's key-free but noisy repetition
		}
		return n.ctx.Err() == nil, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	_ = res.Body.Close()
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		return false, nil
	}
	return res.StatusCode >= 500 || res.StatusCode == http.StatusTooManyRequests, fmt.Errorf("Clearance answered %s", res.Status)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
