package client

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// Policies: bundles (published versions), drafts, diffs, dry runs,
// replays and the Git policy source.

// PublishBundle publishes a bundle version and activates it, unless
// Query("activate", "false") stages it (201; 200 when the same version was
// published with the same digest): POST /v1/protocol/policies/bundles.
func (c *Client) PublishBundle(ctx context.Context, bundle PolicyBundle, opts ...CallOption) (*BundleInfo, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/protocol/policies/bundles", bundle, opts)
	return call[BundleInfo](ctx, c, r, err)
}

// PublishPolicy is PublishBundle on its short alias: POST /v1/policies.
func (c *Client) PublishPolicy(ctx context.Context, bundle PolicyBundle, opts ...CallOption) (*BundleInfo, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/policies", bundle, opts)
	return call[BundleInfo](ctx, c, r, err)
}

// Bundles lists the org's published versions, oldest first:
// GET /v1/protocol/policies/bundles.
func (c *Client) Bundles(ctx context.Context, opts ...CallOption) (*BundleList, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/protocol/policies/bundles", nil, opts)
	return call[BundleList](ctx, c, r, err)
}

// Policies is Bundles on its short alias: GET /v1/policies.
func (c *Client) Policies(ctx context.Context, opts ...CallOption) (*BundleList, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/policies", nil, opts)
	return call[BundleList](ctx, c, r, err)
}

// Bundle reads one published version with its content:
// GET /v1/protocol/policies/bundles/{version}.
func (c *Client) Bundle(ctx context.Context, version string, opts ...CallOption) (*BundleInfo, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/protocol/policies/bundles/"+escape(version), nil, opts)
	return call[BundleInfo](ctx, c, r, err)
}

// Policy is Bundle on its short alias: GET /v1/policies/{version}.
func (c *Client) Policy(ctx context.Context, version string, opts ...CallOption) (*BundleInfo, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/policies/"+escape(version), nil, opts)
	return call[BundleInfo](ctx, c, r, err)
}

// ActivateBundle makes a published version the active one (roll forward
// or back): POST /v1/protocol/policies/bundles/{version}/activate.
// Activating the active version again changes nothing (Changed false).
func (c *Client) ActivateBundle(ctx context.Context, version string, req ActivateRequest, opts ...CallOption) (*PolicyActivation, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/protocol/policies/bundles/"+escape(version)+"/activate", req, opts)
	return call[PolicyActivation](ctx, c, r, err)
}

// ActivatePolicy is ActivateBundle on its short alias:
// POST /v1/policies/{version}/activate.
func (c *Client) ActivatePolicy(ctx context.Context, version string, req ActivateRequest, opts ...CallOption) (*PolicyActivation, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/policies/"+escape(version)+"/activate", req, opts)
	return call[PolicyActivation](ctx, c, r, err)
}

// IfMatch makes a draft's write or delete happen only while the draft is at
// revision (else 409 DRAFT_REVISION_MISMATCH).
func IfMatch(revision int64) CallOption {
	return Header("If-Match", strconv.Quote(strconv.FormatInt(revision, 10)))
}

// Drafts lists the org's drafts without their content:
// GET /v1/policies/drafts.
func (c *Client) Drafts(ctx context.Context, opts ...CallOption) (*DraftList, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/policies/drafts", nil, opts)
	return call[DraftList](ctx, c, r, err)
}

// PutDraft creates (revision 1) or replaces (revision + 1) a draft; it is
// stored as sent, not validated: PUT /v1/policies/drafts/{name}. See IfMatch.
func (c *Client) PutDraft(ctx context.Context, name string, bundle DraftBundle, opts ...CallOption) (*Draft, error) {
	r, err := c.newRequest(http.MethodPut, "/v1/policies/drafts/"+escape(name), bundle, opts)
	return call[Draft](ctx, c, r, err)
}

// Draft reads a draft with its content: GET /v1/policies/drafts/{name}.
func (c *Client) Draft(ctx context.Context, name string, opts ...CallOption) (*Draft, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/policies/drafts/"+escape(name), nil, opts)
	return call[Draft](ctx, c, r, err)
}

// DeleteDraft deletes a draft: DELETE /v1/policies/drafts/{name}. See
// IfMatch.
func (c *Client) DeleteDraft(ctx context.Context, name string, opts ...CallOption) error {
	r, err := c.newRequest(http.MethodDelete, "/v1/policies/drafts/"+escape(name), nil, opts)
	_, err = raw(ctx, c, r, err)
	return err
}

// ValidateDraft compiles a draft as publishing it would; an invalid one is a
// 422 POLICY_INVALID *Error whose Errors list every problem:
// POST /v1/policies/drafts/{name}/validate.
func (c *Client) ValidateDraft(ctx context.Context, name string, opts ...CallOption) (*DraftValidation, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/policies/drafts/"+escape(name)+"/validate", nil, opts)
	return call[DraftValidation](ctx, c, r, err)
}

// PromoteDraft publishes a draft as a version (and activates it unless
// req.Activate is false), deleting the draft:
// POST /v1/policies/drafts/{name}/promote.
func (c *Client) PromoteDraft(ctx context.Context, name string, req PromoteRequest, opts ...CallOption) (*Promotion, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/policies/drafts/"+escape(name)+"/promote", req, opts)
	return call[Promotion](ctx, c, r, err)
}

// DiffPolicies compares two bundles rule by rule; from and to each name a
// published version or a draft ("draft:NAME"): GET /v1/policies/diff.
func (c *Client) DiffPolicies(ctx context.Context, from, to string, opts ...CallOption) (*PolicyComparison, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/policies/diff", nil, opts)
	if err == nil {
		r.query.Set("from", from)
		r.query.Set("to", to)
	}
	return call[PolicyComparison](ctx, c, r, err)
}

// DryRun evaluates a decision request without recording anything and never
// authorizes: POST /v1/policies/dry-run. Query("draft", …) or
// Query("version", …) names a candidate, Query("explain", "true") asks for
// the explanation. It carries an Idempotency-Key (checked, then ignored by
// the server), so it is retried like the decision it mirrors.
func (c *Client) DryRun(ctx context.Context, req DecisionRequest, opts ...CallOption) (*DryRun, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/policies/dry-run", req, opts)
	if err == nil {
		r.withKey()
	}
	return call[DryRun](ctx, c, r, err)
}

// StartReplay replays a draft, a version or the active policy over the
// org's recorded decisions: done at once (Status done) for a small window,
// else queued (follow it with Replay or ReplayEvents):
// POST /v1/policies/replays.
func (c *Client) StartReplay(ctx context.Context, req ReplayRequest, opts ...CallOption) (*Replay, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/policies/replays", req, opts)
	return call[Replay](ctx, c, r, err)
}

// Replay reads a replay with its progress and, once done, its result:
// GET /v1/policies/replays/{replayId}.
func (c *Client) Replay(ctx context.Context, replayID string, opts ...CallOption) (*Replay, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/policies/replays/"+escape(replayID), nil, opts)
	return call[Replay](ctx, c, r, err)
}

// ReplayEvents opens a replay's server-sent events:
// GET /v1/policies/replays/{replayId}/events. Read them with Next until it
// returns io.EOF, and Close the stream.
func (c *Client) ReplayEvents(ctx context.Context, replayID string, opts ...CallOption) (*EventStream, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/policies/replays/"+escape(replayID)+"/events", nil, opts)
	if err != nil {
		return nil, err
	}
	r.header.Set("Accept", "text/event-stream")
	resp, err := c.open(ctx, r)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventBytes)
	return &EventStream{body: resp.Body, lines: sc}, nil
}

// maxEventBytes bounds one line of an event stream (a whole Replay).
const maxEventBytes = 16 << 20

// Event is one server-sent event.
type Event struct {
	// Name is the event's type: for a replay "progress" (Data is a
	// ReplayProgress), then "done" or "failed" (Data is the Replay), or
	// "error".
	Name string
	Data []byte
}

// EventStream reads server-sent events (text/event-stream).
type EventStream struct {
	body  io.ReadCloser
	lines *bufio.Scanner
}

// Next returns the next event, or io.EOF once the stream ended.
func (s *EventStream) Next() (Event, error) {
	var ev Event
	var data [][]byte
	seen := false
	for s.lines.Scan() {
		line := s.lines.Bytes()
		if len(line) == 0 {
			if seen {
				ev.Data = bytes.Join(data, []byte("\n"))
				return ev, nil
			}
			continue
		}
		if line[0] == ':' { // a comment
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev.Name, seen = string(value), true
		case "data":
			data, seen = append(data, bytes.Clone(value)), true
		}
	}
	if err := s.lines.Err(); err != nil {
		return Event{}, fmt.Errorf("client: read event stream: %w", err)
	}
	if seen { // the last event without its blank line
		ev.Data = bytes.Join(data, []byte("\n"))
		return ev, nil
	}
	return Event{}, io.EOF
}

// Close ends the stream.
func (s *EventStream) Close() error { return s.body.Close() }

// PutPolicySource links the org to a directory of a Git repository,
// replacing its link; nothing is fetched here: PUT /v1/policies/source.
func (c *Client) PutPolicySource(ctx context.Context, req PolicySourceRequest, opts ...CallOption) (*PolicySource, error) {
	r, err := c.newRequest(http.MethodPut, "/v1/policies/source", req, opts)
	return call[PolicySource](ctx, c, r, err)
}

// PolicySource reads the org's policy source with its schedule and last
// pull: GET /v1/policies/source.
func (c *Client) PolicySource(ctx context.Context, opts ...CallOption) (*PolicySource, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/policies/source", nil, opts)
	return call[PolicySource](ctx, c, r, err)
}

// DeletePolicySource unlinks the org's policy source:
// DELETE /v1/policies/source.
func (c *Client) DeletePolicySource(ctx context.Context, opts ...CallOption) error {
	r, err := c.newRequest(http.MethodDelete, "/v1/policies/source", nil, opts)
	_, err = raw(ctx, c, r, err)
	return err
}

// PullPolicySource pulls, tests and publishes the source's bundle now. A
// pull that fails is still an answer, with Status failed and a Reason:
// POST /v1/policies/source/pull.
func (c *Client) PullPolicySource(ctx context.Context, opts ...CallOption) (*PolicySourcePull, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/policies/source/pull", nil, opts)
	return call[PolicySourcePull](ctx, c, r, err)
}
