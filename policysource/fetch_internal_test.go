package policysource

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-billy/v5/memfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
)

func TestDeltaHeadTarget(t *testing.T) {
	for _, c := range []struct {
		b    []byte
		want int64
	}{
		{[]byte{0xAC, 0x02, 0xE8, 0x07, 0x90}, 1000}, // source 300, target 1000, then instructions
		{[]byte{0x05, 0x80, 0x80, 0x80, 0x80, 0x01}, 1 << 28},
		{[]byte{0x05}, -1},       // no target size
		{[]byte{0x05, 0x80}, -1}, // cut short
		{nil, -1},
	} {
		var d deltaHead
		d.Write(c.b)
		if got := d.target(); got != c.want {
			t.Errorf("%x: %d, want %d", c.b, got, c.want)
		}
	}
}

func TestCleanDirectory(t *testing.T) {
	for in, want := range map[string]string{"": "", ".": "", "./": "", "policies": "policies", "policies/": "policies", "a/b/c": "a/b/c"} {
		if got, err := cleanDirectory(in); err != nil || got != want {
			t.Errorf("%q: %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"/a", "..", "a/..", "a//b", "./a", `a\b`, "a/./b", "\x00"} {
		if _, err := cleanDirectory(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

// A pack with deltas (similar blobs, several commits) passes under a limit
// that holds its objects inflated, and is refused under one that does not.
func TestCheckInflatedWithDeltas(t *testing.T) {
	st := memory.NewStorage()
	r, err := git.Init(st, memfs.New())
	if err != nil {
		t.Fatal(err)
	}
	wt, _ := r.Worktree()
	var total int64
	for i := range 5 {
		content := strings.Repeat("the same long line of policy text\n", 200) + fmt.Sprint(i)
		f, _ := wt.Filesystem.Create("bundle.json")
		f.Write([]byte(content))
		f.Close()
		wt.Add("bundle.json")
		sig := &object.Signature{Name: "a", Email: "a@example.com", When: time.Unix(int64(i), 0)}
		if _, err := wt.Commit("c", &git.CommitOptions{Author: sig}); err != nil {
			t.Fatal(err)
		}
	}
	var hashes []plumbing.Hash
	iter, _ := st.IterEncodedObjects(plumbing.AnyObject)
	iter.ForEach(func(o plumbing.EncodedObject) error {
		hashes = append(hashes, o.Hash())
		total += o.Size()
		return nil
	})
	var buf bytes.Buffer
	if _, err := packfile.NewEncoder(&buf, st, false).Encode(hashes, 10); err != nil {
		t.Fatal(err)
	}
	deltas := 0
	sc := packfile.NewScanner(bytes.NewReader(buf.Bytes()))
	_, n, _ := sc.Header()
	for range n {
		oh, err := sc.NextObjectHeader()
		if err != nil {
			t.Fatal(err)
		}
		if oh.Type.IsDelta() {
			deltas++
		}
	}
	if deltas == 0 {
		t.Fatal("the pack has no deltas: the test proves nothing")
	}
	if err := checkInflated(buf.Bytes(), 2*total); err != nil {
		t.Fatalf("limit %d: %v", 2*total, err)
	}
	if err := checkInflated(buf.Bytes(), total/2); err == nil {
		t.Fatalf("limit %d passed objects of %d bytes", total/2, total)
	}
}
