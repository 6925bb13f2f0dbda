package server

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/export"
)

// Headers of a validation pack download.
const (
	HeaderBundleSHA256    = "X-Clearance-Bundle-Sha256"
	HeaderManifestSHA256  = "X-Clearance-Manifest-Sha256"
	HeaderBundleSignature = "X-Clearance-Bundle-Signature"
)

// exportRequest is the body of POST /v1/orgs/{orgId}/audit-exports.
type exportRequest struct {
	Format        string `json:"format"`
	From          string `json:"from,omitempty"`
	To            string `json:"to,omitempty"`
	IncludeEvents bool   `json:"include_events,omitempty"`
}

// exportList is the body of GET /v1/orgs/{orgId}/audit-exports.
type exportList struct {
	OrgID   string          `json:"org_id"`
	Exports []export.Export `json:"exports"`
}

func (s *Server) createExport(c *call) error {
	var req exportRequest
	if err := c.decode(&req); err != nil {
		return err
	}
	org, err := c.orgFor(c.r.PathValue("orgId"))
	if err != nil {
		return err
	}
	key, err := c.idempotencyKey()
	if err != nil {
		return err
	}
	x, created, err := s.engine.Exports.Create(c.r.Context(), export.Request{OrgID: org, Format: req.Format,
		From: req.From, To: req.To, IncludeEvents: req.IncludeEvents, IdempotencyKey: key})
	if err != nil {
		return err
	}
	status := http.StatusAccepted
	if !created {
		status = http.StatusOK
		c.w.Header().Set(HeaderReplayed, "true")
	}
	c.w.Header().Set("Location", "/v1/orgs/"+org+"/audit-exports/"+x.ExportID)
	return c.writeJSON(status, x)
}

func (s *Server) listExports(c *call) error {
	org, err := c.orgFor(c.r.PathValue("orgId"))
	if err != nil {
		return err
	}
	limitQ, err := c.query("limit")
	if err != nil {
		return err
	}
	limit := 0
	if limitQ != "" {
		if limit, err = strconv.Atoi(limitQ); err != nil || limit < 1 {
			return badQuery("limit", "limit must be a positive integer")
		}
	}
	list, err := s.engine.Exports.List(c.r.Context(), org, limit)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, exportList{OrgID: org, Exports: list})
}

// exportOf resolves the org and the export id of a call; an id that cannot
// name anything stored is EXPORT_NOT_FOUND without asking the store.
func (c *call) exportOf() (org, id string, err error) {
	if org, err = c.orgFor(c.r.PathValue("orgId")); err != nil {
		return "", "", err
	}
	id, ok := c.pathName("exportId")
	if !ok {
		id = ""
	}
	return org, id, nil
}

func (s *Server) getExport(c *call) error {
	org, id, err := c.exportOf()
	if err != nil {
		return err
	}
	x, err := s.engine.Exports.Get(c.r.Context(), org, id)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, x)
}

// downloadExport streams a SUCCEEDED pack with its hashes in headers. The
// body is the exact bytes bundle_sha256 and the HMAC cover.
func (s *Server) downloadExport(c *call) error {
	org, id, err := c.exportOf()
	if err != nil {
		return err
	}
	x, body, err := s.engine.Exports.Open(c.r.Context(), org, id)
	if err != nil {
		return err
	}
	// Read the first piece before any header goes out, so that a store
	// that cannot answer is a 503, not a 200 with an empty body.
	br := bufio.NewReader(body)
	if _, err := br.Peek(1); err != nil && x.SizeBytes > 0 {
		return &clearance.Error{Kind: clearance.ErrUnavailable, Code: clearance.CodeStoreUnavailable,
			Detail: "the validation pack cannot be read", Err: err}
	}
	h := c.w.Header()
	h.Set("Content-Type", x.ContentType)
	h.Set("Content-Length", strconv.FormatInt(x.SizeBytes, 10))
	h.Set("Content-Disposition", `attachment; filename="clearance-validation-pack-`+x.ExportID+`.`+x.Format.Extension()+`"`)
	h.Set("Cache-Control", "no-store")
	h.Set(HeaderBundleSHA256, x.BundleSHA256)
	h.Set(HeaderManifestSHA256, x.ManifestSHA256)
	if x.BundleSignature != "" {
		h.Set(HeaderBundleSignature, x.BundleSignature)
	}
	c.w.WriteHeader(http.StatusOK)
	c.status = http.StatusOK
	if _, err := io.Copy(deadlineWriter{c.w, http.NewResponseController(c.w)}, br); err != nil {
		// The status is sent: the client sees a short body. Say why here.
		s.log.Error("validation pack download broke off", "org_id", org, "export_id", id, "error", err.Error(), "request_id", c.requestID)
	}
	return nil
}

// downloadWriteWindow is how long a download may take to write each piece:
// a pack may be far larger than what the server's WriteTimeout allows for a
// whole response, so the deadline moves on while bytes flow.
const downloadWriteWindow = time.Minute

type deadlineWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func (d deadlineWriter) Write(p []byte) (int, error) {
	_ = d.rc.SetWriteDeadline(time.Now().Add(downloadWriteWindow)) // not every writer supports deadlines
	return d.w.Write(p)
}
