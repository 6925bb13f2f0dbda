// Package console is the operator console: a static single-page app (one
// HTML page, one script, one style sheet; no framework, no build step)
// embedded in the binary. The server serves Page at GET /console and each
// Asset at GET /console/assets/{name}.
//
// Contract: the page holds no data and no secret. Everything it shows it
// reads from the public HTTP API, in the browser, with the credential the
// operator signs in with (an org API key, kept in the tab's
// sessionStorage). It fetches nothing from another origin, runs no inline
// script or style, and so works under a Content-Security-Policy of
// default-src 'none' with script, style and connections from 'self' only.
// The files are fixed at build time: Page and Asset return the same bytes
// for the life of the process.
package console

import (
	"embed"
	"io/fs"
	"path"
)

//go:embed index.html app.js app.css
var files embed.FS

// assetTypes are the files served beside the page and their media types.
var assetTypes = map[string]string{
	"app.js":  "application/javascript; charset=utf-8",
	"app.css": "text/css; charset=utf-8",
}

// Files is the whole app: index.html, app.js and app.css.
func Files() fs.FS { return files }

// Page is index.html, the console's one page.
func Page() []byte { return mustRead("index.html") }

// Asset returns a file the page loads (app.js or app.css) and its media
// type; ok is false for any other name.
func Asset(name string) (body []byte, mediaType string, ok bool) {
	mediaType, ok = assetTypes[name]
	if !ok {
		return nil, "", false
	}
	return mustRead(name), mediaType, true
}

// mustRead reads an embedded file; the names are fixed at build time, so
// a miss is a build error, not a request's.
func mustRead(name string) []byte {
	b, err := fs.ReadFile(files, path.Clean(name))
	if err != nil {
		panic("console: " + err.Error())
	}
	return b
}
