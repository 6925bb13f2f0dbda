package server

import "net/http"

// The reader: a public route where anyone posts evidence (a proof packet,
// a capsule, a consistency proof, a validation pack or its manifest, or a
// share link) and reads whether it verifies, and the page that posts to it.
// Both are public; the route is throttled per client address like the
// other public routes, and a share link's check also spends its sharing
// org's budget, like the share-link route.

// readerBodyOverhead is what the JSON around a file's base64 may take
// within the body limit.
const readerBodyOverhead = 4 << 10

// verifyArtifact is POST /v1/reader/verify: 200 with the report whether or
// not the artifact verifies; 400 for input that cannot be read.
func (s *Server) verifyArtifact(c *call) error {
	c.w.Header().Set("Referrer-Policy", "no-referrer")
	rep, err := s.engine.VerifyArtifact(c.r.Context(), c.body, func(orgID string) error {
		return s.allow(c.w, "share-link-org:"+orgID)
	})
	if err != nil {
		return err
	}
	return c.writeJSON(http.StatusOK, rep)
}

// readerPage is GET /reader: the page an auditor drops a file on.
func (s *Server) readerPage(c *call) error {
	maxFile := (s.opts.MaxBodyBytes - readerBodyOverhead) / 4 * 3 // the file's bytes, base64 in the body
	return writePage(c, http.StatusOK, "reader.html", map[string]any{"MaxBytes": maxFile, "MaxKiB": maxFile >> 10})
}

// throttleReader applies the reader's public budget before the body is
// read: 429 RATE_LIMITED with Retry-After beyond it.
func (s *Server) throttleReader(c *call) error {
	return s.auth.reader.refuse(c, "verifications")
}
