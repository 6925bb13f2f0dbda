package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/tenant"
)

// The policy lifecycle: drafts, diffs, dry runs, replays, reproductions
// and explanations (docs/decisions.md "Policy lifecycle").

// HeaderDryRun marks the answer of a dry run: nothing was recorded and it
// authorizes nothing.
const HeaderDryRun = "X-Clearance-Dry-Run"

// ifMatchRevision reads an If-Match header holding a draft revision
// (a number, quoted as an entity tag or not); 0 when absent.
func (c *call) ifMatchRevision() (int64, error) {
	vs := c.r.Header.Values("If-Match")
	if len(vs) == 0 {
		return 0, nil
	}
	v := vs[0]
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if len(vs) > 1 || err != nil || n <= 0 || v[0] == '+' || v[0] == '0' {
		return 0, &clearance.Error{Kind: clearance.ErrInvalidRequest, Code: clearance.CodeInvalidRequest,
			Detail: "If-Match must be sent once and hold a draft revision (a positive integer)",
			Fields: []clearance.FieldError{{Field: "If-Match", Message: "a positive integer"}}}
	}
	return n, nil
}

// draftName is the {name} of a draft route; one that cannot name a draft
// answers not found.
func (c *call) draftName() string {
	v, ok := c.pathName("name")
	if !ok {
		return "\x00" // names nothing: the feature answers not found
	}
	return v
}

func (s *Server) putDraft(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	rev, err := c.ifMatchRevision()
	if err != nil {
		return err
	}
	d, created, err := s.engine.Policies.PutDraft(c.r.Context(), clearance.DraftRequest{OrgID: org, Name: c.draftName(),
		Raw: c.body, ExpectedRevision: rev})
	if err != nil {
		return err
	}
	c.w.Header().Set("ETag", fmt.Sprintf("%q", strconv.FormatInt(d.Revision, 10)))
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.writeJSON(status, d)
}

type draftList struct {
	OrgID  string            `json:"org_id"`
	Drafts []clearance.Draft `json:"drafts"`
}

func (s *Server) listDrafts(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	ds, err := s.engine.Policies.Drafts(c.r.Context(), org)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, draftList{OrgID: org, Drafts: ds})
}

func (s *Server) getDraft(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	d, err := s.engine.Policies.Draft(c.r.Context(), org, c.draftName())
	if err != nil {
		return err
	}
	c.w.Header().Set("ETag", fmt.Sprintf("%q", strconv.FormatInt(d.Revision, 10)))
	return c.writeJSON(http.StatusOK, d)
}

func (s *Server) deleteDraft(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	rev, err := c.ifMatchRevision()
	if err != nil {
		return err
	}
	if err := s.engine.Policies.DeleteDraft(c.r.Context(), org, c.draftName(), rev); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	c.status = http.StatusNoContent
	return nil
}

func (s *Server) validateDraft(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	if err := c.noBody(); err != nil {
		return err
	}
	v, err := s.engine.Policies.ValidateDraft(c.r.Context(), org, c.draftName())
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, v)
}

type promoteRequest struct {
	Version               string `json:"version,omitempty"`
	Activate              *bool  `json:"activate,omitempty"`
	ExpectedActiveVersion string `json:"expected_active_version,omitempty"`
	ExpectedRevision      int64  `json:"expected_revision,omitempty"`
}

func (s *Server) promoteDraft(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	var req promoteRequest
	if len(c.body) > 0 {
		if err := c.decode(&req); err != nil {
			return err
		}
	}
	activate := req.Activate == nil || *req.Activate
	p, err := s.engine.Policies.PromoteDraft(c.r.Context(), clearance.PromoteRequest{OrgID: org, Name: c.draftName(),
		Version: req.Version, Activate: activate, ExpectedActiveVersion: req.ExpectedActiveVersion,
		ExpectedRevision: req.ExpectedRevision})
	if err != nil {
		return err
	}
	status := http.StatusOK
	if p.Created {
		status = http.StatusCreated
	}
	return c.writeJSON(status, p)
}

func (s *Server) diffPolicies(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	from, err := c.query("from")
	if err != nil {
		return err
	}
	to, err := c.query("to")
	if err != nil {
		return err
	}
	if from == "" || to == "" {
		return badQuery("from", "from and to are required: a published version or draft:NAME each")
	}
	d, err := s.engine.Policies.Diff(c.r.Context(), org, from, to)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, d)
}

// candidate reads the draft= or version= query parameters; nil when
// neither is given.
func (c *call) candidate() (*clearance.PolicyCandidate, error) {
	draft, err := c.query("draft")
	if err != nil {
		return nil, err
	}
	version, err := c.query("version")
	if err != nil {
		return nil, err
	}
	switch {
	case draft != "" && version != "":
		return nil, badQuery("draft", "name a draft or a version, not both")
	case draft == "" && version == "":
		if c.r.URL.Query().Has("draft") || c.r.URL.Query().Has("version") {
			return nil, badQuery("draft", "draft and version must not be empty")
		}
		return nil, nil
	}
	return &clearance.PolicyCandidate{Draft: draft, Version: version}, nil
}

func (s *Server) dryRun(c *call) error {
	cand, err := c.candidate()
	if err != nil {
		return err
	}
	explain, err := c.boolQuery("explain", false)
	if err != nil {
		return err
	}
	key, err := c.idempotencyKey()
	if err != nil {
		return err
	}
	corr, err := c.correlationID()
	if err != nil {
		return err
	}
	req := clearance.DryRunRequest{EvaluateRequest: clearance.EvaluateRequest{Route: clearance.RouteEvaluateDecision,
		Body: c.body, IdempotencyKey: key, CorrelationID: corr, RequestID: c.requestID, Principal: c.principal},
		Explain: explain}
	d, err := s.engine.DryRun(c.r.Context(), req, cand)
	if err != nil {
		return err
	}
	c.w.Header().Set(HeaderDryRun, "true")
	c.w.Header().Set("Cache-Control", "no-store")
	return c.writeJSON(http.StatusOK, d)
}

func (s *Server) startReplay(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	r, queued, err := s.engine.Policies.StartReplay(c.r.Context(), org, c.body)
	if err != nil {
		return err
	}
	c.w.Header().Set("Location", "/v1/policies/replays/"+r.ReplayID)
	status := http.StatusOK
	if queued {
		status = http.StatusAccepted
	}
	return c.writeJSON(status, r)
}

func (s *Server) getReplay(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	id, _ := c.pathName("replayId")
	r, err := s.engine.Policies.Replay(c.r.Context(), org, id)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, r)
}

// The progress stream reads the replay every replayEventsPoll, sends a
// comment after replayEventsKeepAlive without progress, and gives each
// write replayEventsWriteTimeout.
const (
	replayEventsPoll         = 250 * time.Millisecond
	replayEventsKeepAlive    = 15 * time.Second
	replayEventsWriteTimeout = 30 * time.Second
)

// replayEvents streams a replay's progress as server-sent events: a
// "progress" event whenever the count moves, then one "done" or "failed"
// event carrying the whole replay, and the stream ends. The replay is read
// from the store, so a job run by another server streams the same.
func (s *Server) replayEvents(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	id, _ := c.pathName("replayId")
	ctx := c.r.Context()
	r, err := s.engine.Policies.Replay(ctx, org, id)
	if err != nil {
		return err
	}
	rc := http.NewResponseController(c.w)
	h := c.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	c.w.WriteHeader(http.StatusOK)
	c.status = http.StatusOK
	// write sends one frame, moving the write deadline past it: the stream
	// lasts as long as the replay, beyond the server's WriteTimeout.
	write := func(frame string) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(replayEventsWriteTimeout))
		if _, err := io.WriteString(c.w, frame); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	send := func(event string, v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			return false
		}
		return write("event: " + event + "\ndata: " + string(b) + "\n\n")
	}
	t := time.NewTicker(replayEventsPoll)
	defer t.Stop()
	last, quiet := -1, time.Duration(0)
	for {
		switch r.Status {
		case clearance.ReplayDone, clearance.ReplayFailed:
			send(r.Status, r)
			return nil
		}
		quiet += replayEventsPoll
		switch {
		case r.Processed != last:
			if !send("progress", replayProgress{ReplayID: r.ReplayID, Status: r.Status, Processed: r.Processed, Total: r.Total}) {
				return nil
			}
			last, quiet = r.Processed, 0
		case quiet >= replayEventsKeepAlive:
			// A comment keeps proxies from closing a quiet stream.
			if !write(": keep-alive\n\n") {
				return nil
			}
			quiet = 0
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if r, err = s.engine.Policies.Replay(ctx, org, id); err != nil {
			send("error", map[string]string{"detail": "the replay could not be read"})
			return nil
		}
	}
}

type replayProgress struct {
	ReplayID  string `json:"replay_id"`
	Status    string `json:"status"`
	Processed int    `json:"processed"`
	Total     int    `json:"total"`
}

func (s *Server) reproduceDossier(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	r, err := s.engine.Policies.Reproduce(c.r.Context(), org, c.r.PathValue("dossierId"))
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, r)
}

// explainedDossier is the dossier read with ?explain=true: the stored
// dossier as it is (its digest still in X-Clearance-Dossier-Digest) beside
// its explanation.
type explainedDossier struct {
	Dossier     json.RawMessage              `json:"dossier"`
	Explanation clearance.DossierExplanation `json:"explanation"`
}

// explainDossier answers a dossier read that asked for an explanation. An
// explanation lists the rules of a policy, so it needs a policy-reading
// scope beside the dossier's.
func (s *Server) explainDossier(c *call, d clearance.DossierRecord, org string) error {
	if !c.principal.IsPlatform() && !c.principal.Allows(tenant.ScopePolicyRead, tenant.ScopePolicyWrite) {
		return &clearance.Error{Kind: clearance.ErrForbidden, Code: clearance.CodeInsufficientScope,
			Detail: "an explanation needs a policy scope: one of policy:read, policy:write"}
	}
	cand, err := c.candidate()
	if err != nil {
		return err
	}
	x, err := s.engine.Policies.ExplainDossier(c.r.Context(), org, d.DossierID, cand)
	if err != nil {
		return err
	}
	c.w.Header().Set(HeaderDossierDigest, d.Digest)
	return c.writeJSON(http.StatusOK, explainedDossier{Dossier: d.Body, Explanation: x})
}
