package pack

import (
	"crypto/sha256"
	"fmt"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// hashes is a tlog.HashReader over a slice of stored hashes.
type hashes []tlog.Hash

func (h hashes) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = h[x]
	}
	return out, nil
}

// The streaming root equals tlog's RFC 9162 tree hash for every size.
func TestExportTreeHasherMatchesTlog(t *testing.T) {
	var stored hashes
	var th treeHasher
	for n := int64(0); n <= 300; n++ {
		want, err := tlog.TreeHash(n, stored)
		if err != nil {
			t.Fatal(err)
		}
		if got := th.root(); got != want {
			t.Fatalf("size %d: root %x, tlog says %x", n, got, want)
		}
		leaf := tlog.RecordHash([]byte(fmt.Sprint("leaf ", n)))
		more, err := tlog.StoredHashesForRecordHash(n, leaf, stored)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, more...)
		th.add(leaf)
	}
	if len(th.stack) > 9 {
		t.Errorf("frontier of 301 leaves holds %d hashes, want at most 9", len(th.stack))
	}
	if empty := new(treeHasher).root(); empty != sha256.Sum256(nil) {
		t.Errorf("empty root %x", empty)
	}
}
