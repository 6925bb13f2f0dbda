package server

import (
	"fmt"
	"net/http"

	"github.com/clearancehq/clearance/console"
)

// The operator console's page (package console): a static page, its script and
// its style. The routes are public because they hold no data: the page
// reads everything from the API with the key the operator signs in with.

// consoleCSP runs the console's own files only: no inline script or style,
// connections to this origin only, in no frame.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// consolePage is GET /console.
func (s *Server) consolePage(c *call) error {
	return writeConsoleFile(c, "text/html; charset=utf-8", console.Page())
}

// consoleAsset is GET /console/assets/{file}: app.js or app.css; any other
// name is 404 ROUTE_NOT_FOUND.
func (s *Server) consoleAsset(c *call) error {
	name, _ := c.pathName("file")
	body, mediaType, ok := console.Asset(name)
	if !ok {
		return fmt.Errorf("%w: no console asset %q", errNoRoute, name)
	}
	return writeConsoleFile(c, mediaType, body)
}

func writeConsoleFile(c *call, mediaType string, body []byte) error {
	h := c.w.Header()
	h.Set("Content-Type", mediaType)
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", consoleCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	c.w.WriteHeader(http.StatusOK)
	c.status = http.StatusOK
	_, err := c.w.Write(body)
	return err
}
