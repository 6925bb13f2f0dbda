package pack

import "golang.org/x/mod/sumdb/tlog"

// treeHasher computes the RFC 9162 root of a tree whose leaf hashes arrive
// in order, in O(log n) memory: it keeps the roots of the maximal complete
// subtrees (the frontier), merging two of equal size as a binary counter
// carries.
type treeHasher struct {
	n     uint64
	stack []tlog.Hash // frontier roots, largest first
}

// add appends the next leaf hash.
func (t *treeHasher) add(leaf tlog.Hash) {
	t.stack = append(t.stack, leaf)
	// Leaf n (0-based) completes one subtree per trailing 1 bit of n.
	for i := t.n; i&1 == 1; i >>= 1 {
		k := len(t.stack)
		t.stack = append(t.stack[:k-2], tlog.NodeHash(t.stack[k-2], t.stack[k-1]))
	}
	t.n++
}

// root returns the root of the leaves added so far (SHA-256 of "" for none).
func (t *treeHasher) root() tlog.Hash {
	if len(t.stack) == 0 {
		h, _ := tlog.TreeHash(0, nil)
		return h
	}
	h := t.stack[len(t.stack)-1]
	for i := len(t.stack) - 2; i >= 0; i-- {
		h = tlog.NodeHash(t.stack[i], h)
	}
	return h
}
