package pebblestore

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/jobs"
	"github.com/clearancehq/clearance/store"
)

// TestArtifactTagsUnused parses the package's other files and fails when
// another table or sub-table uses the artifact tags (the table tag of
// layout 2's all-orgs artifact index stays reserved).
func TestArtifactTagsUnused(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, file := range files {
		if file == "artifact.go" || file == "upgrade.go" || strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.CHAR {
						continue
					}
					c, _, _, err := strconv.UnquoteChar(lit.Value[1:len(lit.Value)-1], '\'')
					if err != nil {
						t.Fatalf("%s: %s: %v", file, name.Name, err)
					}
					switch {
					case strings.HasPrefix(name.Name, "tag"):
						seen++
						if c == tagLegacyArtifactRef {
							t.Errorf("%s: table tag %s = %q is layout 2's all-orgs artifact index's", file, name.Name, c)
						}
					case strings.HasPrefix(name.Name, "sub"):
						seen++
						if c == subArtifact {
							t.Errorf("%s: sub-table tag %s = %q is the artifacts'", file, name.Name, c)
						}
					}
				}
			}
		}
	}
	if seen < 5 {
		t.Fatalf("found only %d tag constants: is the package directory right?", seen)
	}
}

func TestArtifactKeyLayout(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rec := func(org, kind, id, ref string, ts time.Time) artifact.Record {
		return artifact.Record{OrgID: org, Kind: kind, ID: id, Ref: ref, CreatedAt: ts}
	}
	// A kind, a ref and an id cannot be confused with each other.
	if bytes.Equal(artifactKey("o", "ab", "c"), artifactKey("o", "a", "bc")) {
		t.Fatal("artifact record keys collide")
	}
	p := artifactRefPrefix("o", "k", "ref", 0)
	for _, r := range []artifact.Record{
		rec("o", "k", "x", "re", at), rec("o", "k", "x", "refx", at), rec("o", "kr", "x", "ef", at), rec("o", "k", "fx", "re", at),
	} {
		if bytes.HasPrefix(artifactRefKey(r), p) {
			t.Fatalf("kind %q ref %q is listed under kind k ref \"ref\"", r.Kind, r.Ref)
		}
	}
	// Index entries sort by time (across the Unix epoch, to the years 1 and
	// 9999), then id; the jobs' due index (the same time encoding) by time,
	// then org bytewise, then id.
	ordered := []artifact.Record{
		rec("o", "k", "z", "r", time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC)),
		rec("o", "k", "z", "r", time.Date(1969, 12, 31, 23, 59, 59, 999999000, time.UTC)),
		rec("o", "k", "z", "r", time.Unix(0, 0)),
		rec("o_b", "k", "z", "r", at),
		rec("org", "k", "z", "r", at),
		rec("org_", "k", "a", "r", at),
		rec("orga", "k", "a", "r", at),
		rec("orga", "k", "b", "r", at),
		rec("o", "k", "a", "r", time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)),
		rec("o", "k", "a", "r", time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)),
	}
	for i := 1; i < len(ordered); i++ {
		a, b := ordered[i-1], ordered[i]
		ja := jobs.Job{OrgID: a.OrgID, Kind: a.Kind, ID: a.ID, Due: a.CreatedAt}
		jb := jobs.Job{OrgID: b.OrgID, Kind: b.Kind, ID: b.ID, Due: b.CreatedAt}
		if bytes.Compare(jobDueKey(ja), jobDueKey(jb)) >= 0 {
			t.Fatalf("job due index: %+v does not sort before %+v", a, b)
		}
		if a.OrgID == b.OrgID && bytes.Compare(artifactRefKey(a), artifactRefKey(b)) >= 0 {
			t.Fatalf("org index: %+v does not sort before %+v", a, b)
		}
	}
	// The value round-trips, whatever the body.
	r := rec("o", "k", "id", "ref", time.Date(1900, 5, 6, 7, 8, 9, 123456789, time.FixedZone("x", 3600)))
	r.Body = []byte{0, 0xff, '{'}
	got, err := decodeArtifact("o", "k", "id", encodeArtifact(r))
	if err != nil || got.Ref != "ref" || !got.CreatedAt.Equal(r.CreatedAt.Truncate(time.Microsecond)) || !bytes.Equal(got.Body, r.Body) {
		t.Fatalf("decode(encode) = %+v, %v; want %+v", got, err, r)
	}
	for _, v := range [][]byte{nil, {5, 'a'}, {1, 'a', 0, 0}} {
		if _, err := decodeArtifact("o", "k", "id", v); err == nil {
			t.Fatalf("decodeArtifact(%q) succeeded", v)
		}
	}
}

// TestArtifactIndexWithoutRecord: an index entry whose record is gone is
// reported, not skipped.
func TestArtifactIndexWithoutRecord(t *testing.T) {
	s := openMem(t)
	r := artifact.Record{OrgID: "org_1", Kind: "job", ID: "job_1", Ref: "pending", CreatedAt: at}
	err := s.Update(t.Context(), r.OrgID, func(tx store.Tx) error {
		return tx.(artifact.Tx).PutArtifact(t.Context(), r)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.Delete(artifactKey(r.OrgID, r.Kind, r.ID), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ArtifactsByRef(t.Context(), r.OrgID, r.Kind, r.Ref, 0); err == nil {
		t.Fatalf("ArtifactsByRef over a dangling index entry = %v, want an error", err)
	}
}

// TestArtifactSurvivesCrash: acknowledged artifact writes, indexes
// included, are there after a crash.
func TestArtifactSurvivesCrash(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s, err := Open("db", Options{FS: fs, Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	r := artifact.Record{OrgID: "org_1", Kind: "job", ID: "job_1", Ref: "pending", CreatedAt: at, Body: []byte{1, 2, 3}}
	put := func(r artifact.Record) {
		t.Helper()
		err := s.Update(t.Context(), r.OrgID, func(tx store.Tx) error {
			return tx.(artifact.Tx).PutArtifact(t.Context(), r)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	put(r)
	r.Ref = "done"
	put(r)
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open("db", Options{FS: crashed, Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	got, err := s.Artifact(t.Context(), r.OrgID, r.Kind, r.ID)
	if err != nil || got.Ref != "done" || !bytes.Equal(got.Body, r.Body) {
		t.Fatalf("Artifact after crash = %+v, %v", got, err)
	}
	for ref, n := range map[string]int{"pending": 0, "done": 1} {
		rs, err := s.ArtifactsByRef(t.Context(), r.OrgID, r.Kind, ref, 0)
		if err != nil || len(rs) != n {
			t.Fatalf("ArtifactsByRef(%s) after crash = %d records, %v; want %d", ref, len(rs), err, n)
		}
	}
}
