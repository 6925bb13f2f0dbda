package policysource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing/fstest"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/sideband"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/memory"
)

// bundleNames are the bundle files a directory may hold, exactly one.
var bundleNames = []string{"bundle.json", "bundle.yaml", "bundle.yml"}

// testsDir is the directory of the test files, inside the bundle's.
const testsDir = "tests"

// snapshot is what a pull read at one commit: the directory's JSON and
// YAML files by their path relative to it, and which one is the bundle.
type snapshot struct {
	commit string
	bundle string
	files  fstest.MapFS
}

// failure is why a pull did not publish.
type failure struct {
	reason   string
	message  string
	problems []Problem
}

func (f *failure) Error() string { return f.reason + ": " + f.message }

func unreadable(format string, args ...any) *failure {
	msg := strings.TrimSuffix(strings.TrimSpace(fmt.Sprintf(format, args...)), ":")
	return &failure{reason: ReasonUnreadable, message: msg}
}

// snapshotOf reads ref of the link's repository: a local one in place, an
// http(s) one fetched (depth 1) into memory.
func (s *Service) snapshotOf(ctx context.Context, r record) (snapshot, *failure) {
	loc, err := s.locate(r.Repository)
	if err != nil {
		return snapshot{}, unreadable("%s", detail(err))
	}
	var st storer.Storer
	var commit plumbing.Hash
	if loc.url != "" {
		st, commit, err = s.fetch(ctx, loc.url, r.Ref)
	} else {
		st, commit, err = openLocal(loc, r.Ref)
	}
	if err != nil {
		var f *failure
		if errors.As(err, &f) {
			return snapshot{}, f
		}
		if ctx.Err() != nil {
			return snapshot{}, unreadable("reading the repository did not finish within %v", s.cfg.FetchTimeout)
		}
		return snapshot{}, unreadable("%v", err)
	}
	return s.readTree(st, commit, r.Directory)
}

// fetch reads ref from an http(s) repository into memory: its advertised
// references, then a pack of the one commit (depth 1 when the server can).
// The bytes received are capped (MaxFetchBytes), and so is what the pack's
// objects inflate to (MaxTreeBytes), before anything is parsed.
func (s *Service) fetch(ctx context.Context, rawURL, ref string) (storer.Storer, plumbing.Hash, error) {
	var none plumbing.Hash
	left := &atomic.Int64{}
	left.Store(s.cfg.MaxFetchBytes)
	hc := s.cfg.Client.HTTPClient()
	hc.Timeout = 0 // ctx bounds the whole pull
	hc.Transport = cappedTransport{next: hc.Transport, left: left}
	tr := githttp.NewClientWithOptions(hc, &githttp.ClientOptions{RedirectPolicy: githttp.NoFollowRedirects})
	ep, err := transport.NewEndpoint(rawURL)
	if err != nil {
		return nil, none, err
	}
	sess, err := tr.NewUploadPackSession(ep, nil)
	if err != nil {
		return nil, none, err
	}
	defer sess.Close()
	adv, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil {
		return nil, none, err
	}
	want, err := advertised(adv, ref)
	if err != nil {
		return nil, none, err
	}
	req := packp.NewUploadPackRequestFromCapabilities(adv.Capabilities)
	req.Capabilities.Delete(capability.ThinPack) // nothing here to complete a thin pack with
	req.Wants = []plumbing.Hash{want}
	if adv.Capabilities.Supports(capability.Shallow) {
		req.Depth = packp.DepthCommits(1)
		if err := req.Capabilities.Set(capability.Shallow); err != nil {
			return nil, none, err
		}
	}
	if adv.Capabilities.Supports(capability.NoProgress) {
		if err := req.Capabilities.Set(capability.NoProgress); err != nil {
			return nil, none, err
		}
	}
	res, err := sess.UploadPack(ctx, req)
	if err != nil {
		return nil, none, err
	}
	defer res.Close()
	var pack io.Reader = res
	switch {
	case req.Capabilities.Supports(capability.Sideband64k):
		pack = sideband.NewDemuxer(sideband.Sideband64k, res)
	case req.Capabilities.Supports(capability.Sideband):
		pack = sideband.NewDemuxer(sideband.Sideband, res)
	}
	data, err := io.ReadAll(io.LimitReader(pack, s.cfg.MaxFetchBytes+1))
	if err != nil {
		return nil, none, err
	}
	if int64(len(data)) > s.cfg.MaxFetchBytes {
		return nil, none, tooLarge(s.cfg.MaxFetchBytes)
	}
	if err := checkInflated(data, s.cfg.MaxTreeBytes); err != nil {
		return nil, none, err
	}
	st := memory.NewStorage()
	if err := packfile.UpdateObjectStorage(st, bytes.NewReader(data)); err != nil {
		return nil, none, fmt.Errorf("reading the pack: %w", err)
	}
	commit, err := peel(st, want)
	return st, commit, err
}

// advertised finds ref among the references a server advertised: a commit
// id as itself, HEAD, a full refs/… name, else refs/heads/ref then
// refs/tags/ref. An annotated tag is wanted by its commit when the server
// peeled it.
func advertised(adv *packp.AdvRefs, ref string) (plumbing.Hash, error) {
	if isCommitID(ref) {
		return plumbing.NewHash(ref), nil
	}
	if ref == "HEAD" {
		if adv.Head == nil {
			return plumbing.ZeroHash, unreadable("the repository has no HEAD")
		}
		return *adv.Head, nil
	}
	for _, name := range refNames(ref) {
		h, ok := adv.References[name.String()]
		if !ok {
			continue
		}
		if p, ok := adv.Peeled[name.String()]; ok {
			h = p
		}
		return h, nil
	}
	return plumbing.ZeroHash, unreadable("the repository has no branch or tag %q", ref)
}

// refNames are the references ref may name, in the order git tries them.
func refNames(ref string) []plumbing.ReferenceName {
	if strings.HasPrefix(ref, "refs/") {
		return []plumbing.ReferenceName{plumbing.ReferenceName(ref)}
	}
	return []plumbing.ReferenceName{plumbing.NewBranchReferenceName(ref), plumbing.NewTagReferenceName(ref)}
}

// peel follows annotated tags from h to the commit they name.
func peel(st storer.EncodedObjectStorer, h plumbing.Hash) (plumbing.Hash, error) {
	for range 10 {
		obj, err := st.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			return plumbing.ZeroHash, unreadable("object %s is not in the repository", h)
		}
		switch obj.Type() {
		case plumbing.CommitObject:
			return h, nil
		case plumbing.TagObject:
			t, err := object.DecodeTag(st, obj)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			h = t.Target
		default:
			return plumbing.ZeroHash, unreadable("%s names a %s, not a commit", h, obj.Type())
		}
	}
	return plumbing.ZeroHash, unreadable("too many nested tags")
}

// checkInflated reads the pack's object headers and refuses it when its
// objects would inflate to more than limit bytes: base objects by their
// declared size, deltas by the size of the object they make. The scanner
// holds each object to its declared size, so nothing larger is inflated.
func checkInflated(data []byte, limit int64) error {
	sc := packfile.NewScanner(bytes.NewReader(data))
	_, n, err := sc.Header()
	if err != nil {
		return fmt.Errorf("reading the pack: %w", err)
	}
	var total int64
	for range n {
		oh, err := sc.NextObjectHeader()
		if err != nil {
			return fmt.Errorf("reading the pack: %w", err)
		}
		if total += oh.Length; total > limit {
			return tooLarge(limit)
		}
		if !oh.Type.IsDelta() {
			continue
		}
		var head deltaHead
		if _, _, err := sc.NextObject(&head); err != nil {
			return fmt.Errorf("reading the pack: %w", err)
		}
		if total += head.target(); total > limit || head.target() < 0 {
			return tooLarge(limit)
		}
	}
	return nil
}

// deltaHead keeps the first bytes of a delta: its source and target sizes.
type deltaHead struct{ b []byte }

func (d *deltaHead) Write(p []byte) (int, error) {
	if room := 20 - len(d.b); room > 0 {
		d.b = append(d.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// target is the size of the object the delta makes (the second
// little-endian base-128 number of its header), -1 when unreadable.
func (d *deltaHead) target() int64 {
	b := d.b
	var v int64
	for range 2 { // the source's size, then the target's
		v = 0
		var shift uint
		for i := 0; ; i++ {
			if i >= len(b) || shift > 56 {
				return -1
			}
			v |= int64(b[i]&0x7f) << shift
			shift += 7
			if b[i]&0x80 == 0 {
				b = b[i+1:]
				break
			}
		}
	}
	return v
}

func tooLarge(limit int64) *failure {
	return unreadable("the repository's commit is larger than the %d bytes a pull may read", limit)
}

// cappedTransport counts the bytes of every response body against one
// budget: a server cannot stream without end (the advertisement included).
type cappedTransport struct {
	next http.RoundTripper
	left *atomic.Int64
}

func (c cappedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := c.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	res.Body = &cappedBody{ReadCloser: res.Body, left: c.left}
	return res, nil
}

type cappedBody struct {
	io.ReadCloser
	left *atomic.Int64
}

var errFetchTooLarge = errors.New("the repository sent more than a pull may read")

func (b *cappedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.left.Add(-int64(n)) < 0 {
		return n, errFetchTooLarge
	}
	return n, err
}

// openLocal opens a local repository in place, read only: its git
// directory must be the linked directory's .git or the directory itself
// (bare), and objects of alternates are only looked for under the same
// root. A .git file (linked worktree, submodule) is refused: it could
// point anywhere.
func openLocal(loc location, ref string) (storer.Storer, plumbing.Hash, error) {
	var none plumbing.Hash
	gitDir := loc.path
	if fi, err := os.Lstat(filepath.Join(loc.path, ".git")); err == nil {
		if !fi.IsDir() {
			return nil, none, unreadable("the directory's .git is not a directory (linked worktrees and submodules cannot be linked)")
		}
		gitDir = filepath.Join(loc.path, ".git")
	} else if _, err := os.Stat(filepath.Join(loc.path, "objects")); err != nil {
		return nil, none, unreadable("not a git repository")
	}
	fs := osfs.New(gitDir, osfs.WithBoundOS())
	st := filesystem.NewStorageWithOptions(fs, cache.NewObjectLRUDefault(),
		filesystem.Options{AlternatesFS: osfs.New(loc.root, osfs.WithBoundOS())})
	var h plumbing.Hash
	switch {
	case isCommitID(ref):
		h = plumbing.NewHash(ref)
	default:
		names := refNames(ref)
		if ref == "HEAD" {
			names = []plumbing.ReferenceName{plumbing.HEAD}
		}
		found := false
		for _, name := range names {
			r, err := storer.ResolveReference(st, name)
			if err == nil {
				h, found = r.Hash(), true
				break
			}
		}
		if !found {
			return nil, none, unreadable("the repository has no branch or tag %q", ref)
		}
	}
	commit, err := peel(st, h)
	return st, commit, err
}

// readTree reads the directory at commit: its bundle file and every JSON
// and YAML file below it (what test files may name), within the limits.
func (s *Service) readTree(st storer.EncodedObjectStorer, commit plumbing.Hash, dir string) (snapshot, *failure) {
	out := snapshot{commit: commit.String(), files: fstest.MapFS{}}
	c, err := object.GetCommit(st, commit)
	if err != nil {
		return out, unreadable("commit %s cannot be read: %v", commit, err)
	}
	tree, err := c.Tree()
	if err != nil {
		return out, unreadable("the tree of commit %s cannot be read: %v", commit, err)
	}
	if dir != "" {
		if tree, err = tree.Tree(dir); err != nil {
			return out, &failure{reason: ReasonBundleMissing, message: fmt.Sprintf("directory %q does not exist at commit %s", dir, commit)}
		}
	}
	w := object.NewTreeWalker(tree, true, nil)
	defer w.Close()
	var total int64
	for {
		name, e, err := w.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return out, unreadable("the tree of commit %s cannot be read: %v", commit, err)
		}
		ext := strings.ToLower(path.Ext(name))
		if e.Mode != filemode.Regular && e.Mode != filemode.Executable && e.Mode != filemode.Deprecated ||
			ext != ".json" && ext != ".yaml" && ext != ".yml" {
			continue // directories are walked; links and submodules are not followed
		}
		if len(out.files) >= s.cfg.MaxFiles {
			return out, unreadable("the directory holds more than %d JSON and YAML files", s.cfg.MaxFiles)
		}
		b, err := object.GetBlob(st, e.Hash)
		if err != nil {
			return out, unreadable("%s cannot be read: %v", name, err)
		}
		if b.Size > s.cfg.MaxFileBytes {
			return out, unreadable("%s is larger than %d bytes", name, s.cfg.MaxFileBytes)
		}
		if total += b.Size; total > s.cfg.MaxTreeBytes {
			return out, tooLarge(s.cfg.MaxTreeBytes)
		}
		rd, err := b.Reader()
		if err != nil {
			return out, unreadable("%s cannot be read: %v", name, err)
		}
		data, err := io.ReadAll(io.LimitReader(rd, b.Size))
		rd.Close()
		if err != nil {
			return out, unreadable("%s cannot be read: %v", name, err)
		}
		out.files[name] = &fstest.MapFile{Data: data, Mode: 0o444}
	}
	var found []string
	for _, n := range bundleNames {
		if _, ok := out.files[n]; ok {
			found = append(found, n)
		}
	}
	where := "the repository's root"
	if dir != "" {
		where = fmt.Sprintf("directory %q", dir)
	}
	switch len(found) {
	case 0:
		return out, &failure{reason: ReasonBundleMissing, message: fmt.Sprintf("%s holds no bundle file (%s) at commit %s", where, strings.Join(bundleNames, ", "), commit)}
	case 1:
		out.bundle = found[0]
	default:
		return out, &failure{reason: ReasonBundleMissing, message: fmt.Sprintf("%s holds more than one bundle file (%s): keep one", where, strings.Join(found, ", "))}
	}
	return out, nil
}
