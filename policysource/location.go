package policysource

import (
	"errors"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/outbound"
)

// location is where a repository is read from: an http(s) URL, or a local
// directory (symlinks resolved) under the configured root it names.
type location struct {
	url  string
	path string
	root string
}

// locate decides whether repo may be read, and from where. It is asked at
// Put and again at every pull: a name may resolve elsewhere by then (DNS,
// a symlink), and the dial guard judges each connection too.
func (s *Service) locate(repo string) (location, error) {
	if strings.HasPrefix(repo, "/") {
		return s.localPath(repo)
	}
	u, err := url.Parse(repo)
	if err != nil || u.Scheme == "" {
		return location{}, invalidRepository("repository must be an https URL, a file:// URL or an absolute path")
	}
	switch strings.ToLower(u.Scheme) {
	case "file":
		if u.Opaque != "" || u.User != nil || (u.Host != "" && u.Host != "localhost") || u.RawQuery != "" || u.Fragment != "" {
			return location{}, invalidRepository("a file URL must be file:///absolute/path")
		}
		return s.localPath(u.Path)
	case "http":
		if !s.cfg.AllowPrivate {
			return location{}, notAllowed("plain http is refused: use https")
		}
	case "https":
	default:
		return location{}, notAllowed("only https repositories (http when private destinations are allowed) and local repositories under a configured root can be linked")
	}
	if _, err := s.cfg.Client.CheckURL(repo); err != nil {
		if errors.Is(err, outbound.ErrBlockedDestination) {
			return location{}, notAllowed("the repository's host is a private, loopback or otherwise internal destination")
		}
		return location{}, invalidRepository("repository is not a valid URL: " + strings.TrimPrefix(err.Error(), outbound.ErrInvalidURL.Error()+": "))
	}
	return location{url: repo}, nil
}

// localPath admits an absolute path only under one of Config.LocalRoots:
// first as written (so nothing outside the roots is even looked at), then
// with every symlink resolved, on path-element boundaries.
func (s *Service) localPath(p string) (location, error) {
	if !filepath.IsAbs(p) {
		return location{}, invalidRepository("a local repository must be named by an absolute path")
	}
	clean := filepath.Clean(p)
	type root struct{ written, resolved string }
	var roots []root
	lexical := false
	for _, r := range s.cfg.LocalRoots {
		if r == "" || !filepath.IsAbs(r) {
			continue
		}
		rc := filepath.Clean(r)
		rr, err := filepath.EvalSymlinks(rc)
		if err != nil {
			continue // a root that does not exist admits nothing
		}
		roots = append(roots, root{rc, rr})
		if within(clean, rc) || within(clean, rr) {
			lexical = true
		}
	}
	if !lexical {
		return location{}, notAllowed("the path is not under a directory local repositories may be linked from")
	}
	resolved, err := filepath.EvalSymlinks(clean)
	if err != nil {
		return location{}, invalidRepository("repository names no directory")
	}
	for _, r := range roots {
		if within(resolved, r.resolved) {
			return location{path: resolved, root: r.resolved}, nil
		}
	}
	return location{}, notAllowed("the path leads outside the directories local repositories may be linked from")
}

// within reports whether p is root or below it.
func within(p, root string) bool {
	if root == string(filepath.Separator) {
		return filepath.IsAbs(p)
	}
	return p == root || strings.HasPrefix(p, root+string(filepath.Separator))
}

func invalidRepository(msg string) error {
	return core.Invalid(CodeInvalidSource, "repository", "%s", msg)
}

func notAllowed(msg string) error {
	return core.Invalid(CodeSourceNotAllowed, "repository", "this repository may not be linked: %s", msg)
}
