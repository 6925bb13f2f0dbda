package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"html/template"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/clearancehq/clearance"
)

// Share links: the org's extension routes that create and revoke them, and
// the public verification route. The public route answers JSON, or a small
// HTML page to a client that prefers text/html (a browser); both say only
// what SharedVerification holds.

// shareLinkRequest is the body of creating a share link.
type shareLinkRequest struct {
	// ExpiresInSeconds is the link's lifetime; absent means the default.
	// (A value, not a pointer: its UnmarshalJSON then sees null too.)
	ExpiresInSeconds seconds `json:"expires_in_seconds"`
	// ProofBundle also opens the proof-bundle route, which serves the
	// dossier itself.
	ProofBundle bool `json:"proof_bundle"`
}

// maxSecondsDigits bounds a lifetime literal, far above any accepted value
// and far below what overflows a time.Duration.
const maxSecondsDigits = 9

// seconds is a lifetime on the wire: a JSON integer literal of 1 to 9 digits
// without sign, fraction or exponent. null, strings and the rest are
// refused (INVALID_SHARE_LINK_EXPIRY), so that null never means the default.
type seconds struct {
	n   int64
	set bool
}

func (s *seconds) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || len(b) > maxSecondsDigits || (b[0] == '0' && len(b) > 1) {
		return errSeconds
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return errSeconds
		}
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n == 0 {
		return errSeconds
	}
	s.n, s.set = n, true
	return nil
}

// secondsError is a refused lifetime; strictjson reports its code.
type secondsError struct{}

var errSeconds = secondsError{}

func (secondsError) Error() string {
	return "expires_in_seconds must be a whole number of seconds from 1 to " +
		strconv.FormatInt(int64(clearance.MaxShareLinkTTL/time.Second), 10)
}
func (secondsError) ErrorCode() string { return clearance.CodeShareLinkExpiry }

func (s *Server) createShareLink(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	var req shareLinkRequest
	if err := c.decode(&req); err != nil {
		return err
	}
	opts := clearance.ShareLinkOptions{ProofBundle: req.ProofBundle}
	if req.ExpiresInSeconds.set {
		opts.TTL = time.Duration(req.ExpiresInSeconds.n) * time.Second
	}
	l, err := s.engine.ShareLinks.CreateShareLink(c.r.Context(), org, c.r.PathValue("dossierId"), opts)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusCreated, l)
}

func (s *Server) revokeShareLinks(c *call) error {
	org, err := c.queryOrg()
	if err != nil {
		return err
	}
	rev, err := s.engine.ShareLinks.RevokeShareLinks(c.r.Context(), org)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, rev)
}

// verifySharedDossier is the public verification of a share link. A link is
// checked before anything else is read; the checks of a valid link are
// rate limited per sharing org, like a credential (its key is the org, which
// the link names, never the caller's input).
func (s *Server) verifySharedDossier(c *call) error {
	c.w.Header().Set("Vary", "Accept")
	html := prefersHTML(c.r.Header.Values("Accept"))
	v, err := s.sharedVerification(c)
	switch {
	case err != nil && html:
		p := problemOf(err, c.requestID)
		return c.writeHTML(p.Status, sharePage{Problem: &p})
	case err != nil:
		return err
	case html:
		return c.writeHTML(http.StatusOK, sharePage{V: &v})
	}
	return c.writeJSON(http.StatusOK, v)
}

func (s *Server) sharedVerification(c *call) (clearance.SharedVerification, error) {
	l, err := s.openShareLink(c)
	if err != nil {
		return clearance.SharedVerification{}, err
	}
	return s.engine.ShareLinks.VerifySharedDossier(c.r.Context(), l)
}

// openShareLink opens the link of a public share route and spends one
// token of the sharing org's budget: a link is checked before anything else
// is read, and the checks of a valid link are rate limited per sharing org,
// like a credential (its key is the org, which the link names, never the
// caller's input). The three routes of a link share the one budget.
func (s *Server) openShareLink(c *call) (clearance.ShareLink, error) {
	h := c.w.Header()
	h.Set("Referrer-Policy", "no-referrer") // the URL is the capability
	h.Set("X-Content-Type-Options", "nosniff")
	sig, err := c.query("sig")
	if err != nil {
		return clearance.ShareLink{}, err
	}
	l, err := s.engine.ShareLinks.OpenShareLink(c.r.Context(), c.r.PathValue("dossierId"), sig)
	if err != nil {
		return clearance.ShareLink{}, err
	}
	if err := s.allow(c.w, "share-link-org:"+l.OrgID); err != nil {
		return clearance.ShareLink{}, err
	}
	return l, nil
}

// reproduceSharedDossier is the public reproduction of a share link's
// dossier: outcomes only (clearance.SharedReproduction), JSON only.
func (s *Server) reproduceSharedDossier(c *call) error {
	l, err := s.openShareLink(c)
	if err != nil {
		return err
	}
	r, err := s.engine.ShareLinks.ReproduceSharedDossier(c.r.Context(), l)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, r)
}

// sharedProofBundle is the proof packet of a share link's dossier, for a
// link made with proof_bundle: the packet the org's proof-packet route
// serves, JSON only (it is for `clearance verify packet`, not a browser).
func (s *Server) sharedProofBundle(c *call) error {
	l, err := s.openShareLink(c)
	if err != nil {
		return err
	}
	p, err := s.engine.ShareLinks.SharedProofPacket(c.r.Context(), l)
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, p)
}

// prefersHTML reports whether an Accept header prefers text/html to
// application/json: the most specific media range matching each decides its
// quality (RFC 9110 §12.5.1); HTML wins only with a higher quality, or an
// equal one from a more specific range. No Accept, "*/*" and ties are JSON.
func prefersHTML(accept []string) bool {
	type pref struct {
		q    float64
		spec int // 3 exact, 2 type/*, 1 */*, 0 no match
	}
	var html, js pref
	match := func(p *pref, rng, want string, q float64) {
		typ, _, _ := strings.Cut(want, "/")
		spec := 0
		switch {
		case rng == want:
			spec = 3
		case rng == typ+"/*":
			spec = 2
		case rng == "*/*":
			spec = 1
		}
		if spec > p.spec {
			p.q, p.spec = q, spec
		}
	}
	for _, line := range accept {
		for _, part := range strings.Split(line, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			q := 1.0
			if v, ok := params["q"]; ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil || f < 0 || f > 1 {
					continue
				}
				q = f
			}
			match(&html, mt, "text/html", q)
			match(&js, mt, "application/json", q)
		}
	}
	if html.spec == 0 || html.q == 0 {
		return false
	}
	return html.q > js.q || html.q == js.q && html.spec > js.spec
}

// sharePage is what the verification page shows: a verification or a
// refusal.
type sharePage struct {
	V       *clearance.SharedVerification
	Problem *problem
}

// shareCSS is the page's only style; the Content-Security-Policy admits it
// by hash and nothing else (no scripts, images, fonts or requests).
const shareCSS = `body{font:15px/1.5 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1c2430}` +
	`main{max-width:44rem;margin:2rem auto;padding:1.5rem 2rem;background:#fff;border:1px solid #dde1e6;border-radius:8px}` +
	`h1{font-size:1.3rem;margin:0 0 1rem}.verdict{font-weight:600;padding:.5rem .75rem;border-radius:6px}` +
	`.ok{background:#e6f4ea;color:#14532d}.bad{background:#fdecea;color:#7f1d1d}` +
	`table{border-collapse:collapse;width:100%;margin:1rem 0}th,td{text-align:left;padding:.4rem .5rem;border-bottom:1px solid #eef0f3;vertical-align:top}` +
	`th{font-weight:500;color:#4a5563;width:45%}td{overflow-wrap:anywhere}code{font-size:.85em}.note{color:#4a5563;font-size:.85rem}`

var shareCSP = "default-src 'none'; style-src 'sha256-" + cssHash(shareCSS) +
	"'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func cssHash(css string) string {
	sum := sha256.Sum256([]byte(css))
	return base64.StdEncoding.EncodeToString(sum[:])
}

var sharePageTemplate = template.Must(template.New("share").Funcs(template.FuncMap{
	"yesno": func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	},
}).Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Decision dossier verification</title>
<style>` + shareCSS + `</style>
</head>
<body>
<main>
<h1>Decision dossier verification</h1>
{{- with .V}}
{{- if .Verified}}
<p class="verdict ok">Verified: the dossier is intact and recorded in its ledger.</p>
{{- else}}
<p class="verdict bad">Not verified: at least one check below failed.</p>
{{- end}}
<table>
<tr><th>Dossier</th><td><code>{{.DossierID}}</code></td></tr>
<tr><th>Outcome</th><td>{{.Outcome}}</td></tr>
<tr><th>Mode</th><td>{{.Mode}}</td></tr>
<tr><th>Dossier digest</th><td><code>{{.DossierDigest}}</code></td></tr>
<tr><th>Stored dossier matches the recorded digest</th><td>{{yesno .RecomputedDigestMatches}}</td></tr>
<tr><th>Ledger entry</th><td>seq {{.Ledger.Seq}}</td></tr>
<tr><th>Ledger entry hash valid</th><td>{{yesno .Ledger.EntryHashValid}}</td></tr>
<tr><th>Ledger chain valid up to the entry</th><td>{{yesno .Ledger.ChainValid}}</td></tr>
<tr><th>Included in a signed checkpoint</th><td>{{with .Ledger.AnchoredCheckpointValid}}{{yesno .}}{{else}}not yet (no signed checkpoint covers the entry yet; the ledger chain up to it was checked instead){{end}}</td></tr>
<tr><th>Verified at</th><td>{{.VerifiedAt}}</td></tr>
<tr><th>Link expires at</th><td>{{.LinkExpiresAt}}</td></tr>
</table>
<p class="note">This page shows only what verification needs; the dossier itself is not shared.</p>
{{- end}}
{{- with .Problem}}
<p class="verdict bad">{{.Detail}}</p>
<p class="note">{{.Status}} {{.Code}} · request {{.RequestID}}</p>
{{- end}}
</main>
</body>
</html>
`))

// writeHTML renders the verification page with status.
func (c *call) writeHTML(status int, p sharePage) error {
	var buf bytes.Buffer
	if err := sharePageTemplate.Execute(&buf, p); err != nil {
		return err
	}
	h := c.w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", shareCSP)
	h.Set("X-Frame-Options", "DENY")
	c.w.WriteHeader(status)
	c.status = status
	_, err := c.w.Write(buf.Bytes())
	return err
}
