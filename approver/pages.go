package approver

import (
	"bytes"
	"embed"
	"html/template"
	"net/http"
	"time"
)

//go:embed web/*.html web/approver.js web/approver.css
var webFS embed.FS

var pages = template.Must(template.ParseFS(webFS, "web/*.html"))

// pageCSP admits the page's own script, style and calls, and nothing else:
// no inline script, no third party, no framing.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// assetsRel is the assets directory relative to a page (/approve/{token},
// /enroll/{token}), so that a proxy may serve the service under a prefix.
const assetsRel = "../assets/"

func (s *Service) renderPage(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, data); err != nil {
		s.log.Error("approver: rendering a page", "page", name, "error", err.Error())
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

type pageBase struct {
	Title  string
	Assets string
}

func (s *Service) invalidPage(w http.ResponseWriter) {
	s.renderPage(w, http.StatusNotFound, "invalid.html", pageBase{"Link not valid", assetsRel})
}

// approvePage is GET /approve/{token}: the request as a human checks it,
// with Approve and Deny while it is PENDING.
func (s *Service) approvePage(w http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	s.mu.Lock()
	now := s.now()
	rec := s.st.byToken[tokenHash(token)]
	var data struct {
		pageBase
		Req     requestRecord
		Token   string
		Expires string
		Status  Status
		Pending bool
		Outcome string
	}
	if rec != nil {
		data.Req = *rec
		data.Status = rec.status(now)
	}
	s.mu.Unlock()
	if rec == nil {
		s.invalidPage(w)
		return
	}
	data.pageBase = pageBase{"Approval request: " + data.Req.Action.Type, assetsRel}
	data.Token = token
	data.Expires = data.Req.ExpiresAt.UTC().Format(time.RFC3339)
	data.Pending = data.Status == StatusPending
	switch data.Status {
	case StatusApproved, StatusDenied, StatusRevoked:
		data.Outcome = "Decided " + string(data.Req.Status) + " by " + data.Req.Approver + " at " + data.Req.DecidedAt.UTC().Format(time.RFC3339) + "."
	case StatusExpired:
		data.Outcome = "This request expired before a decision."
	case StatusCancelled:
		data.Outcome = "This request was cancelled."
	}
	s.renderPage(w, http.StatusOK, "approve.html", data)
}

// enrollPage is GET /enroll/{token}: registers a passkey for the approver
// the link was opened for.
func (s *Service) enrollPage(w http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	s.mu.Lock()
	_, a, p := s.enrollmentLocked(token, s.now())
	var org, id string
	if p == nil {
		org, id = a.Org, a.ID
	}
	s.mu.Unlock()
	if p != nil {
		s.invalidPage(w)
		return
	}
	s.renderPage(w, http.StatusOK, "enroll.html", struct {
		pageBase
		Org, ApproverID, Token string
	}{pageBase{"Register a passkey", assetsRel}, org, id, token})
}

// serveAsset serves the pages' script and style sheet.
func (s *Service) serveAsset(w http.ResponseWriter, r *http.Request) {
	var ctype string
	switch r.PathValue("name") {
	case "approver.js":
		ctype = "text/javascript; charset=utf-8"
	case "approver.css":
		ctype = "text/css; charset=utf-8"
	default:
		writeProblem(w, refuse(http.StatusNotFound, CodeNotFound, "no such asset"))
		return
	}
	data, err := webFS.ReadFile("web/" + r.PathValue("name"))
	if err != nil {
		writeProblem(w, s.internalError("reading an asset", err))
		return
	}
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(data)
}
